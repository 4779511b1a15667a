//! [`TurnAudit`]: wraps the model an agent talks to and keeps, for every call, the server's
//! token counts, the time it took and whether a JSON answer was valid as written.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, CompletionRequest, CompletionResponse, FinishReason, ResponseFormat,
};
use serde::{Deserialize, Serialize};

/// What a JSON answer looked like as the model wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnVerdict {
    /// The request did not ask for JSON.
    Text,
    /// Valid JSON (an object or an array) as written.
    Valid,
    /// Not valid as written, but local repair ([`rca_llm::json::repair`]) reads it.
    Repairable,
    /// Neither: the agent had to regenerate it, or lost the turn.
    Invalid,
}

/// One call the audited model answered (or failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the server counted them.
    pub completion_tokens: u64,
    /// `true` when the counts are estimates (the server reported none).
    pub estimated: bool,
    /// The JSON verdict of the first choice.
    pub verdict: TurnVerdict,
    /// The answer stopped at the token limit.
    pub truncated: bool,
    /// The call failed; the error.
    pub error: Option<String>,
    /// Wall time of the call, in seconds.
    pub seconds: f64,
}

/// Counts what a wrapped model did, call by call.
pub struct TurnAudit {
    inner: Arc<dyn ChatModel>,
    calls: Mutex<Vec<CallRecord>>,
}

impl std::fmt::Debug for TurnAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnAudit")
            .field("model", &self.inner.model_id())
            .field("calls", &self.calls().len())
            .finish()
    }
}

impl TurnAudit {
    /// Audits `inner`.
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        TurnAudit {
            inner,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// The calls so far, in the order they ended.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn push(&self, record: CallRecord) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(record);
        }
    }
}

fn verdict(request: &CompletionRequest, text: &str) -> TurnVerdict {
    if request.response_format == ResponseFormat::Text {
        return TurnVerdict::Text;
    }
    match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(v) if v.is_object() || v.is_array() => TurnVerdict::Valid,
        _ if rca_llm::json::repair(text).is_ok() => TurnVerdict::Repairable,
        _ => TurnVerdict::Invalid,
    }
}

#[async_trait]
impl ChatModel for TurnAudit {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let started = Instant::now();
        let result = self.inner.complete(request.clone()).await;
        let seconds = started.elapsed().as_secs_f64();
        match &result {
            Ok(r) => {
                let first = r.choices.first();
                self.push(CallRecord {
                    prompt_tokens: r.usage.prompt_tokens,
                    completion_tokens: r.usage.completion_tokens,
                    estimated: r.usage.estimated,
                    verdict: verdict(&request, r.text()),
                    truncated: first.and_then(|c| c.finish_reason.as_ref())
                        == Some(&FinishReason::Length),
                    error: None,
                    seconds,
                });
            }
            Err(e) => self.push(CallRecord {
                prompt_tokens: 0,
                completion_tokens: 0,
                estimated: false,
                verdict: TurnVerdict::Invalid,
                truncated: false,
                error: Some(e.to_string()),
                seconds,
            }),
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use rca_core::llm::Message;
    use rca_llm::ScriptedModel;

    use super::*;

    #[tokio::test]
    async fn verdicts_and_counts_per_call() {
        let model = ScriptedModel::from_texts(
            "scripted-turn-audit",
            [
                r#"{"a": 1}"#,
                r#"{"a": 1,}"#,
                "no json at all",
                "plain text",
            ],
        );
        let audit = TurnAudit::new(Arc::new(model));
        let json = CompletionRequest::new(vec![Message::user("q")]).json();
        for _ in 0..3 {
            audit.complete(json.clone()).await.unwrap();
        }
        audit
            .complete(CompletionRequest::new(vec![Message::user("q")]))
            .await
            .unwrap();
        let verdicts: Vec<TurnVerdict> = audit.calls().iter().map(|c| c.verdict).collect();
        assert_eq!(
            verdicts,
            [
                TurnVerdict::Valid,
                TurnVerdict::Repairable,
                TurnVerdict::Invalid,
                TurnVerdict::Text
            ]
        );
        // The scripted model is out of turns: the failure is recorded too.
        assert!(audit.complete(json).await.is_err());
        assert!(audit.calls()[4].error.is_some());
    }
}
