//! [`Retry`]: retries any [`ChatModel`] on retryable errors, with backoff and jitter.

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, ChatStream, CompletionRequest, CompletionResponse};

use crate::backoff::{RetryPolicy, retry_with};

/// Wraps a model and retries calls that fail with a retryable error
/// ([`LlmError::RateLimited`], [`LlmError::Transient`]), waiting an exponential backoff with
/// jitter, or the server's `retry_after` when it gave one and it is within the policy's cap.
/// Context-length, malformed and permanent errors are returned at once.
///
/// For streams only opening the stream is retried; an error in the middle of a stream is
/// passed on (its first part has already been delivered).
#[derive(Debug, Clone)]
pub struct Retry<M> {
    inner: M,
    policy: RetryPolicy,
}

impl<M: ChatModel> Retry<M> {
    /// Wraps `inner` with `policy`.
    pub fn new(inner: M, policy: RetryPolicy) -> Self {
        Retry { inner, policy }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The policy in force.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

fn log_retry(model: &str, error: &LlmError, delay: std::time::Duration) {
    tracing::warn!(
        model,
        error = %error,
        delay_ms = delay.as_millis() as u64,
        "retrying model call"
    );
}

#[async_trait]
impl<M: ChatModel> ChatModel for Retry<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let model = self.inner.model_id();
        retry_with(
            &self.policy,
            || self.inner.complete(request.clone()),
            |e, d| log_retry(model, e, d),
        )
        .await
    }

    async fn stream(&self, request: CompletionRequest) -> Result<ChatStream, LlmError> {
        let model = self.inner.model_id();
        retry_with(
            &self.policy,
            || self.inner.stream(request.clone()),
            |e, d| log_retry(model, e, d),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rca_core::llm::Message;

    use super::*;
    use crate::scripted::{ScriptedModel, ScriptedTurn};

    fn req() -> CompletionRequest {
        CompletionRequest::new(vec![Message::user("hi")])
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_and_rate_limits_then_succeeds() {
        let inner = ScriptedModel::new(
            "scripted-retry-success",
            [
                ScriptedTurn::Error(LlmError::transient("503")),
                ScriptedTurn::Error(LlmError::RateLimited {
                    retry_after: Some(Duration::from_secs(7)),
                }),
                ScriptedTurn::Text("done".into()),
            ],
        );
        let m = Retry::new(inner.clone(), RetryPolicy::default());
        let start = tokio::time::Instant::now();
        let out = m.complete(req()).await.unwrap();
        assert_eq!(out.text(), "done");
        assert_eq!(inner.requests().len(), 3);
        // The rate limit's own wait was honoured (plus at most the first backoff).
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(7), "{waited:?}");
        assert!(waited <= Duration::from_millis(7_500), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_permanent_or_context_errors() {
        for err in [
            LlmError::permanent("bad request"),
            LlmError::ContextLength {
                message: "too long".into(),
            },
            LlmError::Malformed {
                message: "x".into(),
                raw: "{".into(),
            },
        ] {
            let inner = ScriptedModel::new(
                "scripted-retry-permanent",
                [
                    ScriptedTurn::Error(err.clone()),
                    ScriptedTurn::Text("no".into()),
                ],
            );
            let m = Retry::new(inner.clone(), RetryPolicy::default());
            assert_eq!(m.complete(req()).await.unwrap_err(), err);
            assert_eq!(inner.requests().len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_retries_and_over_long_retry_after() {
        let inner = ScriptedModel::new(
            "scripted-retry-exhausted",
            (0..5).map(|_| ScriptedTurn::Error(LlmError::transient("down"))),
        );
        let policy = RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::default()
        };
        let m = Retry::new(inner.clone(), policy.clone());
        assert!(matches!(
            m.complete(req()).await.unwrap_err(),
            LlmError::Transient { .. }
        ));
        assert_eq!(inner.requests().len(), 3);

        let long = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
        };
        let inner = ScriptedModel::new(
            "scripted-retry-long-wait",
            [
                ScriptedTurn::Error(long.clone()),
                ScriptedTurn::Text("no".into()),
            ],
        );
        let m = Retry::new(inner.clone(), policy);
        assert_eq!(m.complete(req()).await.unwrap_err(), long);
        assert_eq!(inner.requests().len(), 1);
    }
}
