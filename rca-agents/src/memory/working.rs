//! Working memory held in memory.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::StoreError;
use rca_core::memory::WorkingMemory;

use super::poisoned;

/// Facts shared across the steps of a run, in memory.
#[derive(Debug, Default)]
pub struct InMemoryWorkingMemory {
    facts: Mutex<BTreeMap<String, serde_json::Value>>,
}

impl InMemoryWorkingMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl WorkingMemory for InMemoryWorkingMemory {
    async fn set(&self, key: &str, value: serde_json::Value) -> Result<(), StoreError> {
        self.facts
            .lock()
            .map_err(poisoned)?
            .insert(key.to_string(), value);
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.facts.lock().map_err(poisoned)?.get(key).cloned())
    }

    async fn snapshot(&self) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        Ok(self.facts.lock().map_err(poisoned)?.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn set_get_snapshot() {
        let m = InMemoryWorkingMemory::new();
        m.set("plan", serde_json::json!(["a", "b"])).await.unwrap();
        m.set("plan", serde_json::json!(["c"])).await.unwrap();
        assert_eq!(m.get("plan").await.unwrap(), Some(serde_json::json!(["c"])));
        assert_eq!(m.get("none").await.unwrap(), None);
        assert_eq!(m.snapshot().await.unwrap().len(), 1);
    }
}
