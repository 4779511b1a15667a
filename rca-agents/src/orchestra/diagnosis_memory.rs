//! Long-term memory of diagnoses: one store of past incidents (offered to the planner) and one
//! store per explorer (past actions, offered to that explorer), on disk in one folder, in
//! memory, or in stores the caller supplies ([`DiagnosisMemory::with_stores`], e.g. a
//! database shared by several processes). `rca diagnose --memory DIR` and
//! `rca eval nezha --memory` use it.

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

/// Opens the store of an explorer, by the explorer's name, for
/// [`DiagnosisMemory::with_stores`]: called once per explorer, on its first use.
pub type ExplorerStores =
    Arc<dyn Fn(&str) -> Result<Arc<dyn LongTermMemory>, StoreError> + Send + Sync>;

/// The long-term memory a [`super::DiagnosisPipeline`] reads and writes.
#[derive(Clone)]
pub struct DiagnosisMemory {
    dir: Option<PathBuf>,
    /// Opens explorer stores when the caller supplies them (else: `dir`, or in memory).
    open_explorer: Option<ExplorerStores>,
    incidents: Arc<dyn LongTermMemory>,
    explorers: BTreeMap<String, Arc<dyn LongTermMemory>>,
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for DiagnosisMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosisMemory")
            .field("dir", &self.dir)
            .field("caller_stores", &self.open_explorer.is_some())
            .field("explorers", &self.explorers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl DiagnosisMemory {
    /// Memory held in this process only, with the hashing embedder.
    pub fn in_memory() -> Self {
        DiagnosisMemory {
            dir: None,
            open_explorer: None,
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
            open_explorer: None,
            incidents,
            explorers: BTreeMap::new(),
            embedder: Arc::new(HashingEmbedder::default()),
        })
    }

    /// Memory in stores the caller supplies (a database shared by several processes, a store
    /// wrapped to redact what it keeps): `incidents` holds past incidents, and `explorers`
    /// opens the store of an explorer, by name, the first time [`DiagnosisMemory::explorer`]
    /// asks for it (it is not called again for that name by this memory or its clones made
    /// after). Texts are embedded with the hashing embedder unless
    /// [`DiagnosisMemory::with_embedder`] says otherwise.
    pub fn with_stores(incidents: Arc<dyn LongTermMemory>, explorers: ExplorerStores) -> Self {
        DiagnosisMemory {
            dir: None,
            open_explorer: Some(explorers),
            incidents,
            explorers: BTreeMap::new(),
            embedder: Arc::new(HashingEmbedder::default()),
        }
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
        let memory: Arc<dyn LongTermMemory> = match (&self.open_explorer, &self.dir) {
            (Some(open), _) => open(name)?,
            (None, Some(dir)) => Arc::new(DiskLongTermMemory::open(dir.join(file_name(name)))?),
            (None, None) => Arc::new(InMemoryLongTermMemory::new()),
        };
        self.explorers.insert(name.to_string(), Arc::clone(&memory));
        Ok(memory)
    }
}

/// The file of an explorer's store inside a memory folder (`explorer-<name>.json`): its name
/// with every character outside `[A-Za-z0-9_-]` replaced, so a host's explorer name cannot
/// point outside the folder.
pub fn explorer_file_name(explorer: &str) -> String {
    file_name(explorer)
}

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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rca_core::memory::MemoryEntry;

    use super::*;

    fn entry(id: &str) -> MemoryEntry {
        MemoryEntry {
            id: id.into(),
            text: format!("text {id}"),
            vector: vec![1.0, 0.0],
            payload: serde_json::Value::Null,
        }
    }

    #[tokio::test]
    async fn caller_stores_are_used_and_opened_once_per_explorer() {
        let incidents: Arc<dyn LongTermMemory> = Arc::new(InMemoryLongTermMemory::new());
        let opened: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = Arc::clone(&opened);
        let open: ExplorerStores = Arc::new(move |name: &str| {
            seen.lock().unwrap().push(name.to_string());
            if name == "broken" {
                return Err(StoreError::Io {
                    message: "unavailable".into(),
                });
            }
            Ok(Arc::new(InMemoryLongTermMemory::new()) as Arc<dyn LongTermMemory>)
        });
        let mut memory = DiagnosisMemory::with_stores(Arc::clone(&incidents), open);
        assert!(memory.dir().is_none());
        memory.incidents().insert(entry("i")).await.unwrap();
        assert_eq!(
            incidents.count().await.unwrap(),
            1,
            "the caller's incident store"
        );

        let logs = memory.explorer("logs").unwrap();
        logs.insert(entry("a")).await.unwrap();
        // The same store again, not a second one.
        assert_eq!(memory.explorer("logs").unwrap().count().await.unwrap(), 1);
        assert_eq!(
            memory.explorer("metrics").unwrap().count().await.unwrap(),
            0
        );
        assert!(matches!(
            memory.explorer("broken"),
            Err(StoreError::Io { .. })
        ));
        assert_eq!(
            *opened.lock().unwrap(),
            vec!["logs".to_string(), "metrics".into(), "broken".into()]
        );
        assert!(format!("{memory:?}").contains("caller_stores: true"));
        assert_eq!(explorer_file_name("a/b"), "explorer-a_b.json");
    }
}
