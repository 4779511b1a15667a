//! [`FanOut`]: `n` samples from a backend that returns one choice per call.

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, Choice, CompletionRequest, CompletionResponse, Usage,
};

/// The default number of calls [`FanOut`] keeps in flight.
pub const DEFAULT_FAN_OUT_CONCURRENCY: usize = 4;

/// Wraps a model that cannot return `n > 1` choices natively and gets them by `n` calls with
/// `n = 1`, sample `i` seeded `base + i` (`base` is the request's seed, or 0), at most
/// `concurrency` in flight. The choices come back ordered by index whatever order the calls
/// finish in, and the usage is the sum over the calls. When the inner model has native `n`
/// (per [`Capabilities::native_n`]) the request passes through unchanged.
///
/// If any sample fails, the call fails with the error of the lowest-indexed failing sample.
#[derive(Debug, Clone)]
pub struct FanOut<M> {
    inner: M,
    concurrency: usize,
    force: bool,
}

impl<M: ChatModel> FanOut<M> {
    /// Wraps `inner` with [`DEFAULT_FAN_OUT_CONCURRENCY`].
    pub fn new(inner: M) -> Self {
        FanOut {
            inner,
            concurrency: DEFAULT_FAN_OUT_CONCURRENCY,
            force: false,
        }
    }

    /// Sets how many calls may be in flight at once (at least 1).
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Fans out even when the inner model claims native `n` (for servers that accept `n` but
    /// return a single choice).
    pub fn always(mut self) -> Self {
        self.force = true;
        self
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

/// Samples `request.n` completions by one call per sample on `model`, at most `concurrency`
/// in flight, sample `i` seeded `base + i`; the choices are re-indexed and ordered by sample.
pub async fn fan_out<M: ChatModel + ?Sized>(
    model: &M,
    request: CompletionRequest,
    concurrency: usize,
) -> Result<CompletionResponse, LlmError> {
    let n = request.n.max(1);
    let base = request.seed.unwrap_or(0);
    let calls = (0..n).map(|i| {
        let mut single = request.clone();
        single.n = 1;
        single.seed = Some(base.wrapping_add(u64::from(i)));
        async move { (i, model.complete(single).await) }
    });
    let mut results: Vec<(u32, Result<CompletionResponse, LlmError>)> =
        futures::stream::iter(calls)
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
    results.sort_by_key(|(i, _)| *i);

    let mut choices = Vec::with_capacity(n as usize);
    let mut usage = Usage::default();
    let mut model_name = None;
    for (i, result) in results {
        let response = result?;
        usage.add(&response.usage);
        model_name.get_or_insert(response.model);
        let Some(first) = response.choices.into_iter().next() else {
            return Err(LlmError::Malformed {
                message: format!("sample {i} came back with no choices"),
                raw: String::new(),
            });
        };
        choices.push(Choice { index: i, ..first });
    }
    Ok(CompletionResponse {
        served: None,
        model: model_name.unwrap_or_else(|| model.model_id().to_string()),
        choices,
        usage,
    })
}

#[async_trait]
impl<M: ChatModel> ChatModel for FanOut<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            native_n: true,
            ..self.inner.capabilities()
        }
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        if request.n <= 1 || (self.inner.capabilities().native_n && !self.force) {
            return self.inner.complete(request).await;
        }
        fan_out(&self.inner, request, self.concurrency).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use rca_core::llm::{Message, estimate_tokens};

    use super::*;

    /// Answers with its seed after a delay that makes later samples finish first, and counts
    /// how many calls run at once.
    struct SeedEcho {
        in_flight: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    #[async_trait]
    impl ChatModel for SeedEcho {
        fn model_id(&self) -> &str {
            "seed-echo"
        }
        async fn complete(&self, r: CompletionRequest) -> Result<CompletionResponse, LlmError> {
            assert_eq!(r.n, 1);
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            let seed = r.seed.unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(100 - (seed % 100))).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            if seed == 1013 {
                return Err(LlmError::transient("seed 1013 fails"));
            }
            let text = format!("seed={seed}");
            Ok(CompletionResponse {
                served: None,
                model: "seed-echo".into(),
                usage: Usage {
                    prompt_tokens: 10,
                    completion_tokens: u64::from(estimate_tokens(&text)),
                    estimated: false,
                },
                choices: vec![Choice {
                    index: 0,
                    message: Message::assistant(text),
                    finish_reason: None,
                }],
            })
        }
    }

    fn echo() -> (SeedEcho, Arc<AtomicUsize>) {
        let peak = Arc::new(AtomicUsize::new(0));
        (
            SeedEcho {
                in_flight: Arc::new(AtomicUsize::new(0)),
                peak: peak.clone(),
            },
            peak,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn samples_are_seeded_ordered_and_bounded() {
        let (inner, peak) = echo();
        let m = FanOut::new(inner).with_concurrency(3);
        let req = CompletionRequest::new(vec![Message::user("x")])
            .with_n(8)
            .with_seed(100);
        let out = m.complete(req).await.unwrap();
        let texts: Vec<_> = out
            .choices
            .iter()
            .map(|c| c.message.content.clone())
            .collect();
        let want: Vec<_> = (100..108).map(|s| format!("seed={s}")).collect();
        assert_eq!(texts, want);
        let idx: Vec<u32> = out.choices.iter().map(|c| c.index).collect();
        assert_eq!(idx, (0..8).collect::<Vec<_>>());
        assert_eq!(out.usage.prompt_tokens, 80);
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert!(peak.load(Ordering::SeqCst) >= 2);
        assert!(m.capabilities().native_n);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_sample_fails_the_call() {
        let (inner, _) = echo();
        let m = FanOut::new(inner);
        let req = CompletionRequest::new(vec![Message::user("x")])
            .with_n(5)
            .with_seed(1010);
        let err = m.complete(req).await.unwrap_err();
        assert!(err.to_string().contains("seed 1013"));
    }

    #[tokio::test]
    async fn passes_through_when_native() {
        let inner = crate::ScriptedModel::from_texts("scripted-fanout-native", ["a"]);
        let m = FanOut::new(inner.clone());
        let out = m
            .complete(CompletionRequest::new(vec![Message::user("x")]).with_n(3))
            .await
            .unwrap();
        assert_eq!(out.choices.len(), 3);
        assert_eq!(inner.requests().len(), 1);
        assert_eq!(inner.requests()[0].n, 3);
    }
}
