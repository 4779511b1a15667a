//! A snapshot store bounded in memory: the full text of cut observations, under their keys.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::StoreError;
use rca_core::memory::{SnapshotStore, snapshot_key};

/// Snapshots in memory, at most `max_chars` characters in all: a long-running server keeps
/// the newest, dropping the oldest first (a key read after its snapshot was dropped is
/// answered as unknown, with the advice to call the tool again).
#[derive(Debug)]
pub struct BoundedSnapshotStore {
    max_chars: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, String>,
    order: VecDeque<String>,
    chars: usize,
}

impl BoundedSnapshotStore {
    /// A store holding at most `max_chars` characters.
    pub fn new(max_chars: usize) -> Self {
        BoundedSnapshotStore {
            max_chars: max_chars.max(1),
            inner: Mutex::default(),
        }
    }

    /// How many snapshots it holds.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|i| i.map.len()).unwrap_or(0)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Io {
        message: "the snapshot store's lock was poisoned".into(),
    }
}

#[async_trait]
impl SnapshotStore for BoundedSnapshotStore {
    async fn put(&self, text: &str) -> Result<String, StoreError> {
        let key = snapshot_key(text);
        let chars = text.chars().count();
        let mut inner = self.inner.lock().map_err(poisoned)?;
        if inner.map.contains_key(&key) {
            return Ok(key);
        }
        while inner.chars + chars > self.max_chars {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(t) = inner.map.remove(&old) {
                inner.chars -= t.chars().count();
            }
        }
        if chars > self.max_chars {
            // Too large to keep at all: the caller's text stays cut, with the key unusable.
            return Ok(key);
        }
        inner.chars += chars;
        inner.order.push_back(key.clone());
        inner.map.insert(key.clone(), text.to_string());
        Ok(key)
    }

    async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.inner.lock().map_err(poisoned)?.map.get(key).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_newest_within_the_bound() {
        let store = BoundedSnapshotStore::new(10);
        let a = store.put("aaaaaa").await.unwrap();
        let b = store.put("bbbbbb").await.unwrap();
        assert_eq!(store.get(&a).await.unwrap(), None);
        assert_eq!(store.get(&b).await.unwrap().as_deref(), Some("bbbbbb"));
        let big = store.put(&"x".repeat(11)).await.unwrap();
        assert_eq!(store.get(&big).await.unwrap(), None);
        assert!(store.len() <= 1);
    }
}
