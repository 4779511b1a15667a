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

    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    type Fields = Arc<Mutex<Vec<(String, String)>>>;

    /// A subscriber that keeps every span field recorded, as (name, value) text.
    struct Capture(Fields);

    struct Collect<'a>(&'a Fields);

    impl Visit for Collect<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_string(), format!("{value:?}")));
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, attrs: &Attributes<'_>) -> Id {
            attrs.record(&mut Collect(&self.0));
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, values: &Record<'_>) {
            values.record(&mut Collect(&self.0));
        }
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn spans_carry_model_tokens_latency_and_error_kind() {
        let fields: Fields = Arc::default();
        let inner = ScriptedModel::new(
            "scripted-traced-span",
            [
                ScriptedTurn::Text("four words of output".into()),
                ScriptedTurn::Error(LlmError::ContextLength {
                    message: "too long".into(),
                }),
            ],
        );
        let m = Traced::new(inner);
        let req = CompletionRequest::new(vec![Message::user("hello")]);
        tracing::subscriber::with_default(Capture(fields.clone()), || {
            futures::executor::block_on(async {
                let ok = m.complete(req.clone()).await.unwrap();
                assert!(ok.usage.completion_tokens > 0);
                assert!(m.complete(req).await.is_err());
            })
        });
        let got = fields.lock().unwrap().clone();
        let value = |name: &str| -> Vec<String> {
            got.iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .collect()
        };
        assert_eq!(
            value("model"),
            ["\"scripted-traced-span\"", "\"scripted-traced-span\""]
        );
        assert_eq!(value("completion_tokens").len(), 1);
        assert_ne!(value("completion_tokens")[0], "0");
        assert_eq!(value("prompt_tokens").len(), 1);
        assert_eq!(value("latency_ms").len(), 2);
        assert_eq!(value("error"), ["\"context_length\""]);
    }

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
