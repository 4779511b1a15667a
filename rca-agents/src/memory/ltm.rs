//! Long-term vector memory: in memory, and persisted to one JSON file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::StoreError;
use rca_core::memory::{LongTermMemory, MemoryEntry};
use rca_llm::vectors::EmbeddingMatrix;
use serde::{Deserialize, Serialize};

use super::{poisoned, write_atomic};

/// The on-disk format version of [`DiskLongTermMemory`].
pub const LTM_FORMAT_VERSION: u32 = 1;

/// Entries and the dimension fixed by the first insert; their vectors are also the rows of
/// one matrix, so a search is one matrix-vector product.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Index {
    dimension: Option<usize>,
    entries: Vec<MemoryEntry>,
    #[serde(skip)]
    matrix: EmbeddingMatrix,
}

fn embed_err(e: rca_core::EmbedError) -> StoreError {
    StoreError::Corrupt {
        location: "long-term memory index".into(),
        message: e.to_string(),
    }
}

impl Index {
    /// Rebuilds the matrix from the entries (after loading them from a file).
    fn rebuild(mut self) -> Result<Self, StoreError> {
        let rows: Vec<Vec<f32>> = self.entries.iter().map(|e| e.vector.clone()).collect();
        self.matrix = EmbeddingMatrix::from_rows(&rows).map_err(embed_err)?;
        if let Some(d) = self.dimension
            && !self.entries.is_empty()
            && d != self.matrix.dimension()
        {
            return Err(StoreError::DimensionMismatch {
                expected: d,
                found: self.matrix.dimension(),
            });
        }
        Ok(self)
    }

    fn insert(&mut self, entry: MemoryEntry) -> Result<(), StoreError> {
        match self.dimension {
            Some(d) if d != entry.vector.len() => {
                return Err(StoreError::DimensionMismatch {
                    expected: d,
                    found: entry.vector.len(),
                });
            }
            _ => self.dimension = Some(entry.vector.len()),
        }
        match self.entries.iter().position(|e| e.id == entry.id) {
            Some(i) => {
                self.matrix.set(i, &entry.vector).map_err(embed_err)?;
                self.entries[i] = entry;
            }
            None => {
                self.matrix.push(&entry.vector).map_err(embed_err)?;
                self.entries.push(entry);
            }
        }
        Ok(())
    }

    fn nearest(&self, vector: &[f32], k: usize) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
        if let Some(d) = self.dimension
            && d != vector.len()
        {
            return Err(StoreError::DimensionMismatch {
                expected: d,
                found: vector.len(),
            });
        }
        // Best first; ties keep insertion order.
        Ok(self
            .matrix
            .nearest(vector, k)
            .map_err(embed_err)?
            .into_iter()
            .filter_map(|(i, s)| self.entries.get(i).map(|e| (e.clone(), s)))
            .collect())
    }
}

/// A vector index of past actions in memory (exact cosine search as a matrix product).
#[derive(Debug, Default)]
pub struct InMemoryLongTermMemory {
    index: Mutex<Index>,
}

impl InMemoryLongTermMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl LongTermMemory for InMemoryLongTermMemory {
    async fn insert(&self, entry: MemoryEntry) -> Result<(), StoreError> {
        self.index.lock().map_err(poisoned)?.insert(entry)
    }

    async fn nearest(
        &self,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
        self.index.lock().map_err(poisoned)?.nearest(vector, k)
    }

    async fn count(&self) -> Result<usize, StoreError> {
        Ok(self.index.lock().map_err(poisoned)?.entries.len())
    }
}

#[derive(Serialize, Deserialize)]
struct LtmFile {
    format_version: u32,
    #[serde(flatten)]
    index: Index,
}

/// Long-term memory persisted to one JSON file (with a format version), rewritten atomically
/// on every insert. Suited to the hundreds of entries of a run, not to millions.
#[derive(Debug)]
pub struct DiskLongTermMemory {
    path: PathBuf,
    index: Mutex<Index>,
}

impl DiskLongTermMemory {
    /// Opens the file at `path`, or starts empty when it does not exist.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let path = path.into();
        let index = match std::fs::read(&path) {
            Ok(bytes) => {
                let location = path.display().to_string();
                let raw: serde_json::Value =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                        location: location.clone(),
                        message: e.to_string(),
                    })?;
                let found = raw
                    .get("format_version")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0);
                if found != u64::from(LTM_FORMAT_VERSION) {
                    return Err(StoreError::UnsupportedVersion {
                        location,
                        found: u32::try_from(found).unwrap_or(u32::MAX),
                        expected: LTM_FORMAT_VERSION,
                    });
                }
                let file: LtmFile =
                    serde_json::from_value(raw).map_err(|e| StoreError::Corrupt {
                        location,
                        message: e.to_string(),
                    })?;
                file.index.rebuild()?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Index::default(),
            Err(e) => {
                return Err(StoreError::Io {
                    message: format!("{}: {e}", path.display()),
                });
            }
        };
        Ok(DiskLongTermMemory {
            path,
            index: Mutex::new(index),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[async_trait]
impl LongTermMemory for DiskLongTermMemory {
    async fn insert(&self, entry: MemoryEntry) -> Result<(), StoreError> {
        let mut index = self.index.lock().map_err(poisoned)?;
        let mut next = index.clone();
        next.insert(entry)?;
        let file = LtmFile {
            format_version: LTM_FORMAT_VERSION,
            index: next,
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| StoreError::Io {
            message: e.to_string(),
        })?;
        write_atomic(&self.path, &bytes)?;
        *index = file.index;
        Ok(())
    }

    async fn nearest(
        &self,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
        self.index.lock().map_err(poisoned)?.nearest(vector, k)
    }

    async fn count(&self) -> Result<usize, StoreError> {
        Ok(self.index.lock().map_err(poisoned)?.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, v: Vec<f32>) -> MemoryEntry {
        MemoryEntry {
            id: id.into(),
            text: format!("action {id}"),
            vector: v,
            payload: serde_json::json!({"id": id}),
        }
    }

    async fn exercise(m: &dyn LongTermMemory) {
        m.insert(entry("a", vec![1.0, 0.0])).await.unwrap();
        m.insert(entry("b", vec![0.0, 1.0])).await.unwrap();
        m.insert(entry("c", vec![0.7, 0.7])).await.unwrap();
        m.insert(entry("a", vec![1.0, 0.1])).await.unwrap();
        assert_eq!(m.count().await.unwrap(), 3);
        let near = m.nearest(&[1.0, 0.0], 2).await.unwrap();
        assert_eq!(near[0].0.id, "a");
        assert_eq!(near[1].0.id, "c");
        assert!(near[0].1 > near[1].1);
        assert!(matches!(
            m.insert(entry("d", vec![1.0])).await,
            Err(StoreError::DimensionMismatch {
                expected: 2,
                found: 1
            })
        ));
        assert!(m.nearest(&[1.0, 2.0, 3.0], 1).await.is_err());
    }

    #[tokio::test]
    async fn in_memory_index() {
        exercise(&InMemoryLongTermMemory::new()).await;
    }

    #[tokio::test]
    async fn disk_index_persists_and_checks_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ltm.json");
        exercise(&DiskLongTermMemory::open(&path).unwrap()).await;
        let reopened = DiskLongTermMemory::open(&path).unwrap();
        assert_eq!(reopened.count().await.unwrap(), 3);
        assert_eq!(reopened.nearest(&[0.0, 1.0], 1).await.unwrap()[0].0.id, "b");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"format_version\":1", "\"format_version\":2");
        std::fs::write(&path, text).unwrap();
        assert!(matches!(
            DiskLongTermMemory::open(&path),
            Err(StoreError::UnsupportedVersion { found: 2, .. })
        ));
        std::fs::write(&path, "[").unwrap();
        assert!(matches!(
            DiskLongTermMemory::open(&path),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
