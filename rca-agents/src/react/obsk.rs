//! Observation snapshot keys (OBSK, RCAgent 3.1): a long observation is shown as its head plus
//! a stable key; the full text goes to a [`SnapshotStore`], and a key found in later action
//! arguments is replaced by the full text before the tool runs.

use std::sync::Arc;

use rca_core::StoreError;
use rca_core::llm::estimate_tokens;
use rca_core::memory::{SnapshotStore, is_snapshot_key, snapshot_key};
use rca_core::trajectory::Observation;
use serde::{Deserialize, Serialize};

/// Cuts long observations and expands keys. The key of a snapshot is the one its store
/// returned: a host store may choose its own keys, and every key issued here is expanded
/// wherever it appears in later arguments (as are keys of the built-in form, `obs-` and 16 hex
/// digits, that the store holds).
#[derive(Clone)]
pub struct Obsk {
    store: Arc<dyn SnapshotStore>,
    head_chars: usize,
    issued: Arc<std::sync::Mutex<Vec<String>>>,
}

impl std::fmt::Debug for Obsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Obsk")
            .field("head_chars", &self.head_chars)
            .finish()
    }
}

/// The text shown for an observation of `text` with a head of `head_chars` characters, and
/// its key when it was cut. Pure: nothing is stored.
pub fn cut(text: &str, head_chars: usize) -> (String, Option<String>) {
    if text.chars().count() <= head_chars {
        return (text.to_string(), None);
    }
    let key = snapshot_key(text);
    (cut_with_key(text, head_chars, &key), Some(key))
}

/// The head of `text` (at most `head_chars` characters, ended at a line break in its second
/// half) and a note naming `key`.
fn cut_with_key(text: &str, head_chars: usize, key: &str) -> String {
    let total = text.chars().count();
    let byte_end = text
        .char_indices()
        .nth(head_chars)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let mut head = &text[..byte_end];
    // End the head at a line break when one falls in its second half.
    if let Some(nl) = head.rfind('\n')
        && nl >= byte_end / 2
    {
        head = &head[..nl];
    }
    let shown = head.chars().count();
    format!(
        "{head}\n[... {} more characters not shown. Snapshot key: {key}. Pass this key as an \
         argument value to a tool to give it the full text.]",
        total - shown
    )
}

impl Obsk {
    /// Cuts observations longer than `head_chars` characters, storing full texts in `store`.
    pub fn new(store: Arc<dyn SnapshotStore>, head_chars: usize) -> Self {
        Obsk {
            store,
            head_chars,
            issued: Arc::default(),
        }
    }

    /// The observation to record and show for a tool's full output: the whole text when it
    /// fits the head, otherwise the head and the key the store gave the full text.
    pub async fn observe(&self, text: &str) -> Result<Observation, StoreError> {
        let full_chars = text.chars().count();
        if full_chars <= self.head_chars {
            return Ok(Observation {
                text: text.to_string(),
                snapshot_key: None,
                full_chars,
            });
        }
        let key = self.store.put(text).await?;
        if key.trim().is_empty() {
            return Err(StoreError::Corrupt {
                location: "snapshot store".into(),
                message: "it returned an empty key for a snapshot".into(),
            });
        }
        if let Ok(mut issued) = self.issued.lock()
            && !issued.contains(&key)
        {
            issued.push(key.clone());
        }
        Ok(Observation {
            text: cut_with_key(text, self.head_chars, &key),
            snapshot_key: Some(key),
            full_chars,
        })
    }

    /// Replaces every snapshot key in the string values of `args` by its full text; returns
    /// how many keys were expanded. Unknown keys are left as they are.
    pub async fn expand(&self, args: &mut serde_json::Value) -> Result<usize, StoreError> {
        let mut count = 0;
        let mut stack = vec![args];
        while let Some(v) = stack.pop() {
            match v {
                serde_json::Value::String(s) => {
                    let (expanded, n) = self.expand_str(s).await?;
                    if n > 0 {
                        *s = expanded;
                        count += n;
                    }
                }
                serde_json::Value::Array(items) => stack.extend(items.iter_mut()),
                serde_json::Value::Object(map) => stack.extend(map.values_mut()),
                _ => {}
            }
        }
        Ok(count)
    }

    async fn expand_str(&self, s: &str) -> Result<(String, usize), StoreError> {
        let (s, mut count) = self.expand_issued(s).await?;
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        while let Some(at) = rest.find("obs-") {
            let candidate = rest.get(at..at + 20);
            match candidate.filter(|c| is_snapshot_key(c)) {
                Some(key) => match self.store.get(key).await? {
                    Some(full) => {
                        out.push_str(&rest[..at]);
                        out.push_str(&full);
                        rest = &rest[at + 20..];
                        count += 1;
                    }
                    None => {
                        out.push_str(&rest[..at + 4]);
                        rest = &rest[at + 4..];
                    }
                },
                None => {
                    out.push_str(&rest[..at + 4]);
                    rest = &rest[at + 4..];
                }
            }
        }
        out.push_str(rest);
        Ok((out, count))
    }

    /// Replaces the keys this run issued that are not of the built-in form (a host store's
    /// own keys; built-in keys are found by their pattern).
    async fn expand_issued(&self, s: &str) -> Result<(String, usize), StoreError> {
        let keys: Vec<String> = self
            .issued
            .lock()
            .map(|k| k.iter().filter(|k| !is_snapshot_key(k)).cloned().collect())
            .unwrap_or_default();
        let mut text = s.to_string();
        let mut count = 0;
        for key in keys {
            if !text.contains(&key) {
                continue;
            }
            if let Some(full) = self.store.get(&key).await? {
                count += text.matches(key.as_str()).count();
                text = text.replace(key.as_str(), &full);
            }
        }
        Ok((text, count))
    }
}

/// Prompt tokens of a run with and without snapshot keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObskTokens {
    /// Sum over steps of the prompt tokens when every observation is shown in full.
    pub without_snapshots: u64,
    /// The same with observations cut to their head plus a key.
    pub with_snapshots: u64,
}

/// Measures the prompt tokens of a ReAct run whose step `i` prompt is `base_prompt` plus the
/// observations of steps `0..i`, with every observation in full and with OBSK at
/// `head_chars`. Token counts use [`estimate_tokens`].
pub fn measure_prompt_tokens(
    base_prompt: &str,
    observations: &[String],
    head_chars: usize,
) -> ObskTokens {
    let base = u64::from(estimate_tokens(base_prompt));
    let (mut full_ctx, mut cut_ctx) = (base, base);
    let (mut without, mut with) = (0u64, 0u64);
    for obs in observations {
        without += full_ctx;
        with += cut_ctx;
        full_ctx += u64::from(estimate_tokens(obs));
        cut_ctx += u64::from(estimate_tokens(&cut(obs, head_chars).0));
    }
    // The final turn (the one that finalizes) sees every observation.
    ObskTokens {
        without_snapshots: without + full_ctx,
        with_snapshots: with + cut_ctx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::InMemorySnapshotStore;

    #[tokio::test]
    async fn long_observations_are_cut_and_keys_expand() {
        let store = Arc::new(InMemorySnapshotStore::new());
        let obsk = Obsk::new(store.clone(), 40);
        let short = obsk.observe("short").await.unwrap();
        assert_eq!(short.text, "short");
        assert!(short.snapshot_key.is_none());
        let long: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let obs = obsk.observe(&long).await.unwrap();
        let key = obs.snapshot_key.clone().unwrap();
        assert!(obs.text.contains(&key) && obs.text.starts_with("line 0\n"));
        assert!(!obs.text.contains("line 19"));
        assert_eq!(obs.full_chars, long.chars().count());
        let mut args = serde_json::json!({"text": key, "nested": [format!("see {key}!")], "n": 1});
        assert_eq!(obsk.expand(&mut args).await.unwrap(), 2);
        assert_eq!(args["text"], long.as_str());
        assert_eq!(args["nested"][0], format!("see {long}!"));
        let mut unknown = serde_json::json!({"t": "obs-0123456789abcdef and obs-"});
        assert_eq!(obsk.expand(&mut unknown).await.unwrap(), 0);
        assert_eq!(unknown["t"], "obs-0123456789abcdef and obs-");
    }

    /// A host store that numbers its snapshots.
    #[derive(Default)]
    struct Numbered(std::sync::Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl SnapshotStore for Numbered {
        async fn put(&self, text: &str) -> Result<String, StoreError> {
            let mut v = self.0.lock().unwrap();
            v.push(text.to_string());
            Ok(format!("SNAP#{}", v.len()))
        }
        async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
            let n: usize = key.trim_start_matches("SNAP#").parse().unwrap_or(0);
            Ok(self.0.lock().unwrap().get(n.wrapping_sub(1)).cloned())
        }
    }

    #[tokio::test]
    async fn a_host_store_chooses_its_own_keys() {
        let obsk = Obsk::new(Arc::new(Numbered::default()), 10);
        let long = "0123456789".repeat(5);
        let obs = obsk.observe(&long).await.unwrap();
        assert_eq!(obs.snapshot_key.as_deref(), Some("SNAP#1"));
        assert!(obs.text.contains("Snapshot key: SNAP#1"));
        let mut args = serde_json::json!({"text": "SNAP#1"});
        assert_eq!(obsk.expand(&mut args).await.unwrap(), 1);
        assert_eq!(args["text"], long.as_str());
        // A key this run never issued stays as it is.
        let mut other = serde_json::json!({"text": "SNAP#2"});
        assert_eq!(obsk.expand(&mut other).await.unwrap(), 0);
    }

    #[test]
    fn cut_handles_multibyte_text() {
        let text = "é".repeat(100);
        let (shown, key) = cut(&text, 10);
        assert!(key.is_some() && shown.starts_with(&"é".repeat(10)));
    }

    #[test]
    fn measurement_on_a_synthetic_incident() {
        // A synthetic incident: an alert list, two metric summaries and one long log dump.
        let logs: String = (0..400)
            .map(|i| {
                format!(
                    "2024-01-01T00:00:{:02}Z worker-{} request failed: timeout\n",
                    i % 60,
                    i % 7
                )
            })
            .collect();
        let observations = vec![
            "alerts: checkout latency high".to_string(),
            "cpu 35% memory 40%".to_string(),
            logs,
            "log expert: 400 timeouts from 7 workers".to_string(),
        ];
        let m = measure_prompt_tokens("system prompt", &observations, 500);
        assert!(m.with_snapshots < m.without_snapshots);
        // Without a long observation both are equal.
        let small = measure_prompt_tokens("p", &observations[..2], 500);
        assert_eq!(small.with_snapshots, small.without_snapshots);
    }
}
