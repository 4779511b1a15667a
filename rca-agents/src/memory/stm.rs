//! The short-term broadcast queue held in memory.

use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::StoreError;
use rca_core::memory::{Conclusion, ShortTermMemory};

use super::poisoned;

/// A broadcast queue of conclusions in memory; sequence numbers start at 0.
#[derive(Debug, Default)]
pub struct InMemoryShortTermMemory {
    log: Mutex<Vec<Conclusion>>,
}

impl InMemoryShortTermMemory {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ShortTermMemory for InMemoryShortTermMemory {
    async fn publish(&self, conclusion: Conclusion) -> Result<u64, StoreError> {
        let mut log = self.log.lock().map_err(poisoned)?;
        log.push(conclusion);
        Ok(log.len() as u64 - 1)
    }

    async fn read_from(&self, from: u64) -> Result<Vec<(u64, Conclusion)>, StoreError> {
        let log = self.log.lock().map_err(poisoned)?;
        Ok(log
            .iter()
            .enumerate()
            .skip(usize::try_from(from).unwrap_or(usize::MAX))
            .map(|(i, c)| (i as u64, c.clone()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::Timestamp;

    #[tokio::test]
    async fn every_reader_sees_every_message_in_order() {
        let q = InMemoryShortTermMemory::new();
        for i in 0..3 {
            let c = Conclusion {
                author: format!("explorer-{i}"),
                at: Timestamp(i),
                text: format!("finding {i}"),
                components: vec![],
            };
            assert_eq!(q.publish(c).await.unwrap(), i as u64);
        }
        let all = q.read_from(0).await.unwrap();
        assert_eq!(all.len(), 3);
        let tail = q.read_from(2).await.unwrap();
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0].1.text, "finding 2");
        assert!(q.read_from(u64::MAX).await.unwrap().is_empty());
    }
}
