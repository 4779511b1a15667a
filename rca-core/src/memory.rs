//! Memory traits: snapshot stores (observation snapshot keys, RCAgent), working memory
//! (FLASH), short-term broadcast and long-term vector memory (reliable orchestration).
//! Implementations live in rca-agents; rca-core does no IO.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::time::Timestamp;

/// The stable key of a text: `obs-` and 16 hex digits of a 128-bit FNV-1a hash of its UTF-8
/// bytes. The same text always gets the same key, on every machine and in every version.
pub fn snapshot_key(text: &str) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for b in text.as_bytes() {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    let folded = (h >> 64) as u64 ^ h as u64;
    format!("obs-{folded:016x}")
}

/// Whether a string has the shape of a snapshot key.
pub fn is_snapshot_key(s: &str) -> bool {
    s.len() == 20
        && s.starts_with("obs-")
        && s[4..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Key -> full observation text. Keys are [`snapshot_key`]s of the text.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use async_trait::async_trait;
/// use rca_core::memory::{snapshot_key, SnapshotStore};
/// use rca_core::StoreError;
///
/// #[derive(Default)]
/// struct Map(Mutex<HashMap<String, String>>);
///
/// #[async_trait]
/// impl SnapshotStore for Map {
///     async fn put(&self, text: &str) -> Result<String, StoreError> {
///         let key = snapshot_key(text);
///         self.0.lock().map_err(|e| StoreError::Io { message: e.to_string() })?
///             .insert(key.clone(), text.to_string());
///         Ok(key)
///     }
///     async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
///         Ok(self.0.lock().map_err(|e| StoreError::Io { message: e.to_string() })?.get(key).cloned())
///     }
/// }
/// ```
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    /// Stores the text and returns its key.
    async fn put(&self, text: &str) -> Result<String, StoreError>;
    /// The text stored under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<String>, StoreError>;
}

/// Facts, the plan and step results shared across the steps of a run (FLASH's global working
/// memory). Values are JSON.
#[async_trait]
pub trait WorkingMemory: Send + Sync {
    /// Sets a fact.
    async fn set(&self, key: &str, value: serde_json::Value) -> Result<(), StoreError>;
    /// Reads a fact.
    async fn get(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError>;
    /// Every fact, by key.
    async fn snapshot(&self) -> Result<BTreeMap<String, serde_json::Value>, StoreError>;
}

/// A conclusion an explorer publishes for the others (short-term memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conclusion {
    /// Who published it (an explorer's name).
    pub author: String,
    /// When.
    pub at: Timestamp,
    /// The conclusion in one or two sentences.
    pub text: String,
    /// Components it is about.
    #[serde(default)]
    pub components: Vec<String>,
}

/// A broadcast queue of conclusions: every reader sees every message, in order.
#[async_trait]
pub trait ShortTermMemory: Send + Sync {
    /// Publishes a conclusion; returns its sequence number.
    async fn publish(&self, conclusion: Conclusion) -> Result<u64, StoreError>;
    /// Conclusions with sequence number `>= from`, in order.
    async fn read_from(&self, from: u64) -> Result<Vec<(u64, Conclusion)>, StoreError>;
}

/// An entry of long-term memory: a text, its embedding and a payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// A unique id.
    pub id: String,
    /// The text that was embedded (an action and its outcome).
    pub text: String,
    /// The embedding of `text`.
    pub vector: Vec<f32>,
    /// Anything else to return with it.
    #[serde(default)]
    pub payload: serde_json::Value,
}

/// A vector index of past actions (long-term memory).
#[async_trait]
pub trait LongTermMemory: Send + Sync {
    /// Adds an entry (replacing one with the same id).
    async fn insert(&self, entry: MemoryEntry) -> Result<(), StoreError>;
    /// The `k` entries nearest to `vector` by cosine similarity, best first, with scores.
    async fn nearest(
        &self,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, StoreError>;
    /// How many entries there are.
    async fn count(&self) -> Result<usize, StoreError>;
}

fn _object_safe(
    _: &dyn SnapshotStore,
    _: &dyn WorkingMemory,
    _: &dyn ShortTermMemory,
    _: &dyn LongTermMemory,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinct() {
        let a = snapshot_key("hello");
        assert_eq!(a, snapshot_key("hello"));
        assert_ne!(a, snapshot_key("hello!"));
        assert!(is_snapshot_key(&a));
        assert!(!is_snapshot_key("obs-XYZ"));
        // Fixed value (the two halves of the FNV-1a 128 offset basis, XORed): keys written to
        // disk by one version must be read by the next.
        assert_eq!(snapshot_key(""), "obs-0eda065b652ec4cf");
    }
}
