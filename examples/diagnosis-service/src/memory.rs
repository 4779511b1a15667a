//! Long-term memory of the service's diagnoses (setting `memory`, on by default): the
//! library's [`DiagnosisMemory`] (a store of past incidents, offered to the planner of the
//! next diagnosis of a similar alert, and one store of past actions per explorer), kept in
//! `store_dir/memory/` ([`open_files`]) or, with `[postgres]`, in the shared table
//! `diagnosis_memory` (`crate::pg_memory`).
//!
//! One [`SharedMemory`] per process: its workers share it, so that each store is opened once
//! (two workers never hold the same file twice). Every store is wrapped in a
//! [`RedactedMemory`]: what is remembered is redacted as the reports are.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_agents::memory::DiskLongTermMemory;
use rca_agents::orchestra::{DiagnosisMemory, ExplorerStores, INCIDENTS_FILE, explorer_file_name};
use rca_core::StoreError;
use rca_core::embed::Embedder;
use rca_core::memory::{LongTermMemory, MemoryEntry};
use rca_llm::HashingEmbedder;
use rca_llm::redact::Redactor;

/// The folder of the long-term memory inside `store_dir` (without `[postgres]`).
pub const MEMORY_DIR: &str = "memory";

/// The long-term memory the workers of one process share.
pub type SharedMemory = Arc<Mutex<DiagnosisMemory>>;

/// A long-term memory store that redacts each entry's text and payload before storing it
/// (and embeds the redacted text again when redaction changed it, so that the stored vector
/// says nothing the text does not).
pub struct RedactedMemory {
    inner: Arc<dyn LongTermMemory>,
    redactor: Redactor,
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for RedactedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactedMemory").finish_non_exhaustive()
    }
}

impl RedactedMemory {
    /// `inner`, its entries redacted by `redactor`; `embedder` embeds a redacted text (the
    /// memory's own embedder).
    pub fn new(
        inner: Arc<dyn LongTermMemory>,
        redactor: Redactor,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        RedactedMemory {
            inner,
            redactor,
            embedder,
        }
    }
}

#[async_trait]
impl LongTermMemory for RedactedMemory {
    async fn insert(&self, mut entry: MemoryEntry) -> Result<(), StoreError> {
        if let std::borrow::Cow::Owned(text) = self.redactor.redact(&entry.text) {
            let vector = self
                .embedder
                .embed(std::slice::from_ref(&text))
                .await
                .ok()
                .and_then(|mut v| v.pop());
            // The vector of the text as it was would leak nothing readable, but it is only
            // kept when the redacted text cannot be embedded.
            if let Some(vector) = vector.filter(|v| v.len() == entry.vector.len()) {
                entry.vector = vector;
            }
            entry.text = text;
        }
        self.redactor.redact_json(&mut entry.payload);
        self.inner.insert(entry).await
    }

    async fn nearest(
        &self,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
        self.inner.nearest(vector, k).await
    }

    async fn count(&self) -> Result<usize, StoreError> {
        self.inner.count().await
    }
}

/// A [`DiagnosisMemory`] over `incidents` and the explorer stores `open` opens, each wrapped
/// in a [`RedactedMemory`], embedding with the hashing embedder.
pub fn redacted(
    incidents: Arc<dyn LongTermMemory>,
    open: ExplorerStores,
    redactor: &Redactor,
) -> SharedMemory {
    let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::default());
    let wrap = {
        let (redactor, embedder) = (redactor.clone(), Arc::clone(&embedder));
        move |inner: Arc<dyn LongTermMemory>| -> Arc<dyn LongTermMemory> {
            Arc::new(RedactedMemory::new(
                inner,
                redactor.clone(),
                Arc::clone(&embedder),
            ))
        }
    };
    let incidents = wrap(incidents);
    let explorers: ExplorerStores = Arc::new(move |name: &str| open(name).map(&wrap));
    Arc::new(Mutex::new(
        DiagnosisMemory::with_stores(incidents, explorers).with_embedder(embedder),
    ))
}

/// The memory in the folder `dir` (created when missing): `incidents.json` and one
/// `explorer-<name>.json` per explorer, as `rca diagnose --memory DIR` keeps them, redacted
/// by `redactor`.
pub fn open_files(dir: &Path, redactor: &Redactor) -> Result<SharedMemory, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
        message: format!("cannot create the memory folder {}: {e}", dir.display()),
    })?;
    let incidents = Arc::new(DiskLongTermMemory::open(dir.join(INCIDENTS_FILE))?);
    let dir = dir.to_path_buf();
    let open: ExplorerStores = Arc::new(move |name: &str| {
        let store = DiskLongTermMemory::open(dir.join(explorer_file_name(name)))?;
        Ok(Arc::new(store) as Arc<dyn LongTermMemory>)
    });
    Ok(redacted(incidents, open, redactor))
}

#[cfg(test)]
mod tests {
    use rca_agents::memory::InMemoryLongTermMemory;

    use super::*;

    #[tokio::test]
    async fn entries_are_redacted_before_they_are_stored() {
        let inner: Arc<dyn LongTermMemory> = Arc::new(InMemoryLongTermMemory::new());
        let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::default());
        let memory = RedactedMemory::new(
            Arc::clone(&inner),
            Redactor::builtin(),
            Arc::clone(&embedder),
        );
        let secret = "dashboard http://admin:s3cr3tpw@grafana.internal/d/1";
        let vector = embedder
            .embed(&[secret.to_string()])
            .await
            .unwrap()
            .remove(0);
        memory
            .insert(MemoryEntry {
                id: "a".into(),
                text: secret.into(),
                vector: vector.clone(),
                payload: serde_json::json!({"note": secret, "n": 1}),
            })
            .await
            .unwrap();
        let (stored, _) = inner.nearest(&vector, 1).await.unwrap().remove(0);
        assert!(!stored.text.contains("s3cr3tpw"), "{}", stored.text);
        assert!(!stored.payload.to_string().contains("s3cr3tpw"));
        assert_eq!(stored.payload["n"], 1);
        let redacted_vector = embedder
            .embed(std::slice::from_ref(&stored.text))
            .await
            .unwrap()
            .remove(0);
        assert_eq!(stored.vector, redacted_vector, "the redacted text's vector");
        assert_eq!(memory.count().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn file_memory_is_opened_once_and_shared() {
        let dir = tempfile::tempdir().unwrap();
        let memory = open_files(&dir.path().join(MEMORY_DIR), &Redactor::builtin()).unwrap();
        let logs = memory.lock().unwrap().explorer("logs").unwrap();
        let again = memory.lock().unwrap().explorer("logs").unwrap();
        assert!(Arc::ptr_eq(&logs, &again));
        logs.insert(MemoryEntry {
            id: "x".into(),
            text: "an action".into(),
            vector: vec![1.0, 0.0],
            payload: serde_json::Value::Null,
        })
        .await
        .unwrap();
        let file = dir.path().join(MEMORY_DIR).join("explorer-logs.json");
        assert!(file.is_file());
        let incidents = memory.lock().unwrap().incidents();
        assert_eq!(incidents.count().await.unwrap(), 0);
    }
}
