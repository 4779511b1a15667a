//! The run's wall-time budget reaches every model call: a role model wrapped in
//! [`DeadlineModel`] answers within what remains of the budget of the run it serves, or fails
//! (so the role's deterministic policy answers instead), whatever its own request timeout
//! says. A server that accepts a request and never answers then costs the rest of the budget
//! once, not the run.
//!
//! The deadline is task-local ([`within`]): concurrent runs that share models keep their own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, ChatStream, CompletionRequest, CompletionResponse, StreamEvent,
};
use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `fut` with `deadline` as the deadline of every [`DeadlineModel`] call inside it.
pub async fn within<F: Future>(deadline: Instant, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of the current run, if [`within`] set one.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// A model whose calls end by the current run's deadline (none outside [`within`]). A call
/// that would outlive it fails with [`LlmError::Permanent`], which a role with a fallback
/// answers with its policy; a stream is cut at the deadline with the same error.
pub struct DeadlineModel {
    inner: Arc<dyn ChatModel>,
}

impl DeadlineModel {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        DeadlineModel { inner }
    }
}

fn spent(left: Duration) -> LlmError {
    LlmError::permanent(format!(
        "no answer within the run's remaining wall time ({:.1} s)",
        left.as_secs_f64()
    ))
}

#[async_trait]
impl ChatModel for DeadlineModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let Some(deadline) = current() else {
            return self.inner.complete(request).await;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout_at(deadline, self.inner.complete(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(spent(left)),
        }
    }

    async fn stream(&self, request: CompletionRequest) -> Result<ChatStream, LlmError> {
        let Some(deadline) = current() else {
            return self.inner.stream(request).await;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let stream = match tokio::time::timeout_at(deadline, self.inner.stream(request)).await {
            Ok(stream) => stream?,
            Err(_) => return Err(spent(left)),
        };
        // Each chunk must arrive by the deadline; the first late one ends the stream.
        let bounded = futures::stream::unfold(Some(stream), move |state| async move {
            let mut stream = state?;
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(item)) => Some((item, Some(stream))),
                Ok(None) => None,
                Err(_) => Some((Err::<StreamEvent, _>(spent(left)), None)),
            }
        });
        Ok(Box::pin(bounded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::llm::Message;

    /// A server that accepts the request and never answers.
    struct Silent;

    #[async_trait]
    impl ChatModel for Silent {
        fn model_id(&self) -> &str {
            "silent"
        }
        async fn complete(&self, _: CompletionRequest) -> Result<CompletionResponse, LlmError> {
            futures::future::pending().await
        }
    }

    fn request() -> CompletionRequest {
        CompletionRequest::new(vec![Message::user("hello")])
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_model_fails_at_the_deadline_and_only_inside_a_run() {
        let model = DeadlineModel::new(Arc::new(Silent));
        let start = Instant::now();
        let err = within(start + Duration::from_secs(5), model.complete(request()))
            .await
            .unwrap_err();
        assert!(
            !err.is_retryable() && err.to_string().contains("5.0 s"),
            "{err}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // The default stream goes through `complete`: cut the same way.
        let err = within(start + Duration::from_secs(7), model.stream(request()))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("wall time"), "{err}");
        // Outside a run there is no deadline: the call waits (here, until the test gives up).
        let outside =
            tokio::time::timeout(Duration::from_secs(3600), model.complete(request())).await;
        assert!(outside.is_err());
        assert_eq!(current(), None);
    }
}
