//! Answers shared between configurations: at temperature 0 a model answers the same request
//! the same way, so the configurations of one episode reuse its answer to a request they
//! share (their first turns, and every turn until their stabilisers first act differently)
//! instead of asking the server again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, CompletionRequest, CompletionResponse};
use rca_llm::canonical::request_key;

/// Wraps a model and serves a greedy (temperature 0) request it has already answered from the
/// answer it gave; other requests always go to the model.
pub struct SharedAnswers {
    inner: Arc<dyn ChatModel>,
    answers: Mutex<HashMap<String, CompletionResponse>>,
    hits: AtomicU64,
}

impl SharedAnswers {
    /// Shares `inner`'s greedy answers.
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        SharedAnswers {
            inner,
            answers: Mutex::new(HashMap::new()),
            hits: AtomicU64::new(0),
        }
    }

    /// Forgets every answer (between episodes, so memory stays bounded by one episode).
    pub fn clear(&self) {
        if let Ok(mut a) = self.answers.lock() {
            a.clear();
        }
    }

    /// Requests answered from an earlier answer.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl ChatModel for SharedAnswers {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let greedy = request.temperature == Some(0.0) && request.n <= 1;
        if !greedy {
            return self.inner.complete(request).await;
        }
        let key = request_key(&request);
        let known = self.answers.lock().ok().and_then(|a| a.get(&key).cloned());
        if let Some(answer) = known {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(answer);
        }
        let answer = self.inner.complete(request).await?;
        if let Ok(mut a) = self.answers.lock() {
            a.insert(key, answer.clone());
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::llm::Message;
    use rca_llm::ScriptedModel;

    #[tokio::test]
    async fn greedy_repeats_are_served_once_and_sampled_requests_always_go_through() {
        let model = ScriptedModel::from_texts("scripted-shared", ["a", "b", "c"]);
        let shared = SharedAnswers::new(Arc::new(model.clone()));
        let greedy = CompletionRequest::new(vec![Message::user("q")]).with_temperature(0.0);
        assert_eq!(shared.complete(greedy.clone()).await.unwrap().text(), "a");
        assert_eq!(shared.complete(greedy.clone()).await.unwrap().text(), "a");
        assert_eq!(shared.hits(), 1);
        let sampled = greedy.clone().with_temperature(0.7);
        assert_eq!(shared.complete(sampled).await.unwrap().text(), "b");
        shared.clear();
        assert_eq!(shared.complete(greedy).await.unwrap().text(), "c");
        assert_eq!(model.requests().len(), 3);
    }
}
