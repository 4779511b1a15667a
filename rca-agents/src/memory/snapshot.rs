//! Snapshot stores: the full text of long observations, under their snapshot keys.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::StoreError;
use rca_core::memory::{SnapshotStore, is_snapshot_key, snapshot_key};
use serde::{Deserialize, Serialize};

use super::{poisoned, write_atomic};

/// The on-disk format version of [`DiskSnapshotStore`] files.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;

/// Snapshots held in memory for the life of the store.
#[derive(Debug, Default)]
pub struct InMemorySnapshotStore {
    map: Mutex<HashMap<String, String>>,
}

impl InMemorySnapshotStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many snapshots it holds.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl SnapshotStore for InMemorySnapshotStore {
    async fn put(&self, text: &str) -> Result<String, StoreError> {
        let key = snapshot_key(text);
        self.map
            .lock()
            .map_err(poisoned)?
            .insert(key.clone(), text.to_string());
        Ok(key)
    }

    async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.map.lock().map_err(poisoned)?.get(key).cloned())
    }
}

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    format_version: u32,
    key: String,
    text: String,
}

/// Snapshots as one JSON file per key (`<dir>/<key>.json`), written atomically, so a run can be
/// inspected or resumed later.
#[derive(Debug, Clone)]
pub struct DiskSnapshotStore {
    dir: PathBuf,
}

impl DiskSnapshotStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DiskSnapshotStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }
}

#[async_trait]
impl SnapshotStore for DiskSnapshotStore {
    async fn put(&self, text: &str) -> Result<String, StoreError> {
        let key = snapshot_key(text);
        let path = self.path(&key);
        if path.exists() {
            return Ok(key);
        }
        let file = SnapshotFile {
            format_version: SNAPSHOT_FORMAT_VERSION,
            key: key.clone(),
            text: text.to_string(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| StoreError::Io {
            message: e.to_string(),
        })?;
        write_atomic(&path, &bytes)?;
        Ok(key)
    }

    async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        // Only well-formed keys name files: a model cannot make us read an arbitrary path.
        if !is_snapshot_key(key) {
            return Ok(None);
        }
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StoreError::Io {
                    message: format!("{}: {e}", path.display()),
                });
            }
        };
        let location = path.display().to_string();
        let file: SnapshotFile =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                location: location.clone(),
                message: e.to_string(),
            })?;
        if file.format_version != SNAPSHOT_FORMAT_VERSION {
            return Err(StoreError::UnsupportedVersion {
                location,
                found: file.format_version,
                expected: SNAPSHOT_FORMAT_VERSION,
            });
        }
        if file.key != key || snapshot_key(&file.text) != key {
            return Err(StoreError::Corrupt {
                location,
                message: "the text does not hash to its key".into(),
            });
        }
        Ok(Some(file.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_memory_round_trip() {
        let s = InMemorySnapshotStore::new();
        let k = s.put("full text").await.unwrap();
        assert_eq!(k, snapshot_key("full text"));
        assert_eq!(s.get(&k).await.unwrap().as_deref(), Some("full text"));
        assert_eq!(s.get("obs-0000000000000000").await.unwrap(), None);
        assert_eq!(s.len(), 1);
    }

    #[tokio::test]
    async fn disk_round_trip_version_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskSnapshotStore::new(dir.path().join("snaps"));
        let k = s.put("line 1\nline 2").await.unwrap();
        // A second store on the same directory reads it (persistence).
        let s2 = DiskSnapshotStore::new(s.dir());
        assert_eq!(s2.get(&k).await.unwrap().as_deref(), Some("line 1\nline 2"));
        assert_eq!(s2.get("../../etc/passwd").await.unwrap(), None);
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(s.dir()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let path = s.dir().join(format!("{k}.json"));
        let bumped = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"format_version\":1", "\"format_version\":99");
        std::fs::write(&path, bumped).unwrap();
        assert!(matches!(
            s.get(&k).await,
            Err(StoreError::UnsupportedVersion { found: 99, .. })
        ));
        std::fs::write(&path, "{not json").unwrap();
        assert!(matches!(s.get(&k).await, Err(StoreError::Corrupt { .. })));
    }
}
