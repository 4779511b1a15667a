//! Long-term memory of diagnoses: one store of past incidents (offered to the planner) and one
//! store per explorer (past actions, offered to that explorer), on disk in one folder or in
//! memory. `rca diagnose --memory DIR` and `rca eval nezha --memory` use it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rca_core::StoreError;
use rca_core::embed::Embedder;
use rca_core::memory::LongTermMemory;
use rca_llm::HashingEmbedder;

use crate::memory::{DiskLongTermMemory, InMemoryLongTermMemory};

/// The file of the past-incident store inside a memory folder.
pub const INCIDENTS_FILE: &str = "incidents.json";

/// The long-term memory a [`super::DiagnosisPipeline`] reads and writes.
#[derive(Clone)]
pub struct DiagnosisMemory {
    dir: Option<PathBuf>,
    incidents: Arc<dyn LongTermMemory>,
    explorers: BTreeMap<String, Arc<dyn LongTermMemory>>,
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for DiagnosisMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosisMemory")
            .field("dir", &self.dir)
            .field("explorers", &self.explorers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl DiagnosisMemory {
    /// Memory held in this process only, with the hashing embedder.
    pub fn in_memory() -> Self {
        DiagnosisMemory {
            dir: None,
            incidents: Arc::new(InMemoryLongTermMemory::new()),
            explorers: BTreeMap::new(),
            embedder: Arc::new(HashingEmbedder::default()),
        }
    }

    /// Memory in the folder `dir` (created when missing): `incidents.json` and one
    /// `explorer-<name>.json` per explorer, each a versioned [`DiskLongTermMemory`] file rewritten
    /// atomically on every insert. Texts are embedded with the hashing embedder.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::Io {
            message: format!("cannot create the memory folder {}: {e}", dir.display()),
        })?;
        let incidents = Arc::new(DiskLongTermMemory::open(dir.join(INCIDENTS_FILE))?);
        Ok(DiagnosisMemory {
            dir: Some(dir),
            incidents,
            explorers: BTreeMap::new(),
            embedder: Arc::new(HashingEmbedder::default()),
        })
    }

    /// The same memory embedding with `embedder` (its dimension must match the stored
    /// vectors').
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = embedder;
        self
    }

    /// The folder, when the memory is on disk.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The store of past incidents.
    pub fn incidents(&self) -> Arc<dyn LongTermMemory> {
        Arc::clone(&self.incidents)
    }

    /// The embedder.
    pub fn embedder(&self) -> Arc<dyn Embedder> {
        Arc::clone(&self.embedder)
    }

    /// The store of explorer `name` (opened, or created, on first use).
    pub fn explorer(&mut self, name: &str) -> Result<Arc<dyn LongTermMemory>, StoreError> {
        if let Some(m) = self.explorers.get(name) {
            return Ok(Arc::clone(m));
        }
        let memory: Arc<dyn LongTermMemory> = match &self.dir {
            Some(dir) => Arc::new(DiskLongTermMemory::open(dir.join(file_name(name)))?),
            None => Arc::new(InMemoryLongTermMemory::new()),
        };
        self.explorers.insert(name.to_string(), Arc::clone(&memory));
        Ok(memory)
    }
}

/// The file of an explorer's store: its name with every character outside `[A-Za-z0-9_-]`
/// replaced, so a host's explorer name cannot point outside the folder.
fn file_name(explorer: &str) -> String {
    let safe: String = explorer
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("explorer-{safe}.json")
}
