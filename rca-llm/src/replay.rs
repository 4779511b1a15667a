//! [`ReplayModel`]: serves a cassette offline; a miss names the closest recorded request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, CompletionRequest, CompletionResponse};

use crate::canonical::{canonical_json, json_diff, request_key, text_similarity};
use crate::cassette::{Cassette, CassetteError};

/// Serves the responses of a cassette written by [`crate::RecordingModel`], without any model.
///
/// A request is looked up by its key (the hash of its canonical form). When the same request
/// was recorded several times, the recorded responses are served in order, and the last one
/// again once they are used up (as a deterministic model would answer). A request that was
/// never recorded fails with [`LlmError::Permanent`] naming the closest recorded request (by
/// text similarity of the canonical forms) and the fields where the two differ.
///
/// Its model id is `replay:` followed by the recorded model's id, so replayed output is never
/// mistaken for a live model's.
#[derive(Debug)]
pub struct ReplayModel {
    path: PathBuf,
    model_id: String,
    cassette: Cassette,
    by_key: HashMap<String, Vec<usize>>,
    served: Mutex<HashMap<String, usize>>,
}

impl ReplayModel {
    /// Loads the cassette at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CassetteError> {
        let path = path.as_ref();
        Ok(Self::from_cassette(Cassette::load(path)?, path))
    }

    /// Serves an already loaded cassette; `path` is only shown in messages.
    pub fn from_cassette(cassette: Cassette, path: impl Into<PathBuf>) -> Self {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in cassette.entries.iter().enumerate() {
            by_key.entry(e.key.clone()).or_default().push(i);
        }
        let mut ids: Vec<&str> = cassette
            .entries
            .iter()
            .map(|e| e.model_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let model_id = if ids.is_empty() {
            "replay:empty".to_string()
        } else {
            format!("replay:{}", ids.join("+"))
        };
        ReplayModel {
            path: path.into(),
            model_id,
            cassette,
            by_key,
            served: Mutex::new(HashMap::new()),
        }
    }

    /// The loaded cassette.
    pub fn cassette(&self) -> &Cassette {
        &self.cassette
    }

    fn miss(&self, request: &CompletionRequest, key: &str) -> LlmError {
        let wanted = canonical_json(request);
        let closest = self
            .cassette
            .entries
            .iter()
            .map(|e| (text_similarity(&canonical_json(&e.request), &wanted), e))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((similarity, entry)) = closest else {
            return LlmError::permanent(format!(
                "replay miss: cassette {} is empty (request {key})",
                self.path.display()
            ));
        };
        let diffs = match (
            serde_json::to_value(&entry.request),
            serde_json::to_value(request),
        ) {
            (Ok(a), Ok(b)) => json_diff(&a, &b, 5),
            _ => Vec::new(),
        };
        let listed: Vec<String> = diffs.iter().map(|d| format!("  - {d}")).collect();
        LlmError::permanent(format!(
            "replay miss: no recorded response for request {key} in cassette {}. \
             Closest recorded request: {} (similarity {similarity:.3}); it differs at:\n{}",
            self.path.display(),
            entry.key,
            listed.join("\n")
        ))
    }
}

#[async_trait]
impl ChatModel for ReplayModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_n: true,
            seed: true,
            ..Capabilities::default()
        }
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let key = request_key(&request);
        let Some(indices) = self.by_key.get(&key) else {
            return Err(self.miss(&request, &key));
        };
        let mut served = self
            .served
            .lock()
            .map_err(|_| LlmError::permanent("replay model state poisoned"))?;
        let count = served.entry(key.clone()).or_insert(0);
        let slot = (*count).min(indices.len().saturating_sub(1));
        *count += 1;
        indices
            .get(slot)
            .and_then(|i| self.cassette.entries.get(*i))
            .map(|e| e.response.clone())
            .ok_or_else(|| LlmError::permanent(format!("replay: no entry for key {key}")))
    }
}

#[cfg(test)]
mod tests {
    use rca_core::llm::Message;

    use super::*;
    use crate::record::RecordingModel;
    use crate::scripted::ScriptedModel;

    fn ask(text: &str) -> CompletionRequest {
        CompletionRequest::new(vec![
            Message::system("You diagnose incidents."),
            Message::user(text),
        ])
        .with_temperature(0.2)
    }

    #[tokio::test]
    async fn record_a_scripted_run_then_replay_it_identically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let scripted = ScriptedModel::from_texts(
            "scripted-record-replay",
            ["first answer", "second answer", "again"],
        );
        let questions = [
            "why is checkout slow",
            "show the error logs",
            "why is checkout slow",
        ];
        let recorder = RecordingModel::create(scripted, &path);
        let mut live = Vec::new();
        for q in questions {
            live.push(recorder.complete(ask(q)).await.unwrap());
        }
        assert_eq!(recorder.len(), 3);

        let replay = ReplayModel::open(&path).unwrap();
        assert_eq!(replay.model_id(), "replay:scripted-record-replay");
        for (q, want) in questions.iter().zip(&live) {
            assert_eq!(&replay.complete(ask(q)).await.unwrap(), want);
        }
        // A repeated request beyond the recording gets the last recorded answer again.
        assert_eq!(
            replay.complete(ask(questions[0])).await.unwrap().text(),
            "again"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_fan_out_samples_record_and_replay_by_seed() {
        use crate::fanout::FanOut;
        use crate::scripted::ScriptedTurn;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fan.json");
        let scripted = ScriptedModel::new(
            "scripted-fan-out-record",
            (0..8).map(|i| ScriptedTurn::Text(format!("sample text {i}"))),
        );
        let live = FanOut::new(RecordingModel::create(scripted, &path))
            .always()
            .with_concurrency(8)
            .complete(ask("vote on the root cause").with_n(8).with_seed(500))
            .await
            .unwrap();
        let cassette = Cassette::load(&path).unwrap();
        assert_eq!(cassette.entries.len(), 8);
        let replayed = FanOut::new(ReplayModel::open(&path).unwrap())
            .always()
            .with_concurrency(3)
            .complete(ask("vote on the root cause").with_n(8).with_seed(500))
            .await
            .unwrap();
        // Each sample is keyed by its own seed, so the replay returns the same text per index
        // whatever order the live calls happened to finish in.
        assert_eq!(replayed.choices, live.choices);
    }

    #[tokio::test]
    async fn a_miss_names_the_closest_request_and_the_difference() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let recorder = RecordingModel::create(
            ScriptedModel::from_texts("scripted-replay-miss", ["a", "b"]),
            &path,
        );
        recorder
            .complete(ask("why is the payment service returning errors"))
            .await
            .unwrap();
        recorder
            .complete(ask("list the slowest database queries"))
            .await
            .unwrap();
        let closest_key = request_key(&ask("why is the payment service returning errors"));

        let replay = ReplayModel::open(&path).unwrap();
        let err = replay
            .complete(ask("why is the payment service returning timeouts"))
            .await
            .unwrap_err();
        let LlmError::Permanent { message } = err else {
            panic!("a miss is a permanent error");
        };
        assert!(message.contains("replay miss"), "{message}");
        assert!(message.contains(&closest_key), "{message}");
        assert!(message.contains("messages[1].content"), "{message}");
        assert!(message.contains("returning timeouts"), "{message}");

        // A change in a sampling knob shows up as that field.
        let err = replay
            .complete(ask("list the slowest database queries").with_seed(9))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("seed: recorded (absent) / requested 9"),
            "{err}"
        );
    }
}
