//! [`Traced`]: a `tracing` span around every call of any [`ChatModel`].

use std::time::Instant;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, ChatStream, CompletionRequest, CompletionResponse};
use tracing::Instrument;

/// Wraps a model so every call runs in an `llm.complete` (or `llm.stream`) span carrying the
/// model id, `n`, the message count, and, once the call returns, the prompt and completion
/// token counts, whether they are estimates, the latency in milliseconds and the error kind.
#[derive(Debug, Clone)]
pub struct Traced<M> {
    inner: M,
}

impl<M: ChatModel> Traced<M> {
    /// Wraps `inner`.
    pub fn new(inner: M) -> Self {
        Traced { inner }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

/// A short, stable name for an error's kind (for span fields and metrics).
pub fn error_kind(error: &LlmError) -> &'static str {
    match error {
        LlmError::RateLimited { .. } => "rate_limited",
        LlmError::Transient { .. } => "transient",
        LlmError::ContextLength { .. } => "context_length",
        LlmError::Malformed { .. } => "malformed",
        LlmError::Permanent { .. } => "permanent",
        _ => "other",
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Traced<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let span = tracing::info_span!(
            "llm.complete",
            model = self.inner.model_id(),
            n = request.n,
            messages = request.messages.len(),
            prompt_tokens = tracing::field::Empty,
            completion_tokens = tracing::field::Empty,
            usage_estimated = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let start = Instant::now();
        let result = self.inner.complete(request).instrument(span.clone()).await;
        span.record("latency_ms", start.elapsed().as_millis() as u64);
        match &result {
            Ok(r) => {
                span.record("prompt_tokens", r.usage.prompt_tokens);
                span.record("completion_tokens", r.usage.completion_tokens);
                span.record("usage_estimated", r.usage.estimated);
                span.in_scope(|| tracing::debug!("model call finished"));
            }
            Err(e) => {
                span.record("error", error_kind(e));
                span.in_scope(|| tracing::warn!(error = %e, "model call failed"));
            }
        }
        result
    }

    async fn stream(&self, request: CompletionRequest) -> Result<ChatStream, LlmError> {
        let span = tracing::info_span!(
            "llm.stream",
            model = self.inner.model_id(),
            n = request.n,
            messages = request.messages.len(),
            latency_ms = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let start = Instant::now();
        let result = self.inner.stream(request).instrument(span.clone()).await;
        span.record("latency_ms", start.elapsed().as_millis() as u64);
        if let Err(e) = &result {
            span.record("error", error_kind(e));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use rca_core::llm::Message;

    use super::*;
    use crate::scripted::{ScriptedModel, ScriptedTurn};

    #[tokio::test]
    async fn passes_results_and_errors_through() {
        let inner = ScriptedModel::new(
            "scripted-traced",
            [
                ScriptedTurn::Text("ok".into()),
                ScriptedTurn::Error(LlmError::transient("down")),
            ],
        );
        let m = Traced::new(inner);
        assert_eq!(m.model_id(), "scripted-traced");
        let req = CompletionRequest::new(vec![Message::user("x")]);
        assert_eq!(m.complete(req.clone()).await.unwrap().text(), "ok");
        let err = m.complete(req).await.unwrap_err();
        assert_eq!(error_kind(&err), "transient");
    }
}
