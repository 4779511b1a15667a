//! An OpenAI-compatible chat-completions client (feature `http`): vLLM, Ollama, the llama.cpp
//! server, OpenAI and anything else that serves `POST {base_url}/chat/completions`.
//!
//! - every field of [`CompletionRequest`] is sent (`n` only when above 1, `seed` only when
//!   the server honours it); `response_format` `json_object` / `json_schema` when the server
//!   supports it, otherwise a system-prompt hint asks for JSON;
//! - native tool calling: [`rca_core::tool::ToolSpec`]s go out as `tools`, `tool_calls` come
//!   back as [`rca_core::llm::ToolCall`]s;
//! - usage is parsed; when the server reports none, it is estimated and marked so;
//! - connect and request timeouts; retries with exponential backoff and jitter on 429
//!   (honouring `Retry-After` up to a cap), 5xx, timeouts and connection errors; never on
//!   context-length errors ([`LlmError::ContextLength`]) or other 4xx
//!   ([`LlmError::Permanent`]); a body that does not parse is [`LlmError::Malformed`] with the
//!   raw body;
//! - streaming over server-sent events with `stream_options.include_usage`, the usage sent
//!   once at the end of the stream (estimated when the server sends none);
//! - `n > 1` on a server without native `n`: parallel calls seeded `base + i`;
//! - the served models listed (`GET {base_url}/models`, [`OpenAiClient::served_models`]), and
//!   an answer from another model than the configured one reported once through the
//!   client's warning sink ([`OpenAiClient::with_warnings`]; `tracing` without one).
//!
//! No reqwest type appears in the public API.

mod config;
mod sse;
pub mod wire;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, ChatStream, CompletionRequest, CompletionResponse, FinishReason,
    StreamEvent, Usage,
};
use serde_json::Value;

pub use self::config::{OpenAiConfig, Secret, ServerFeatures};
pub use self::sse::SseDecoder;
use crate::backoff::retry_with;
use crate::fanout::fan_out;

/// Where a client's warnings go (one line of text each): e.g. the CLI prints them on stderr
/// as they happen.
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A client's warnings: the sink, and what was already said (each warning once per client and
/// its clones).
#[derive(Default)]
struct Warnings {
    sink: Option<WarningSink>,
    model_mismatch: AtomicBool,
}

impl std::fmt::Debug for Warnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warnings")
            .field("sink", &self.sink.is_some())
            .field("model_mismatch", &self.model_mismatch)
            .finish()
    }
}

/// A [`ChatModel`] speaking the OpenAI chat-completions protocol over HTTP.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    config: OpenAiConfig,
    endpoint: String,
    api_key: Option<String>,
    http: reqwest::Client,
    warnings: Arc<Warnings>,
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

impl OpenAiClient {
    /// Builds a client. Fails only when the HTTP client cannot be built (an invalid header
    /// value in the config, for instance).
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let mut builder =
            reqwest::Client::builder().user_agent(concat!("rca-llm/", env!("CARGO_PKG_VERSION")));
        if let Some(t) = config.connect_timeout() {
            builder = builder.connect_timeout(t);
        }
        if let Some(t) = config.request_timeout() {
            // For streams: the longest silence between two chunks.
            builder = builder.read_timeout(t);
        }
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &config.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| LlmError::permanent(format!("invalid header name `{k}`: {e}")))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|e| LlmError::permanent(format!("invalid value for header `{k}`: {e}")))?;
            headers.insert(name, value);
        }
        let http = builder.default_headers(headers).build().map_err(|e| {
            LlmError::permanent(format!("cannot build HTTP client: {}", error_chain(&e)))
        })?;
        Ok(OpenAiClient {
            endpoint: config.endpoint(),
            api_key: config.resolved_api_key(),
            config,
            http,
            warnings: Arc::new(Warnings::default()),
        })
    }

    /// Sends this client's warnings (an answer from another model than the configured one,
    /// said once) to `sink` instead of `tracing`.
    pub fn with_warnings(mut self, sink: WarningSink) -> Self {
        self.warnings = Arc::new(Warnings {
            sink: Some(sink),
            model_mismatch: AtomicBool::new(false),
        });
        self
    }

    /// The model ids the server serves (`GET {base_url}/models`), the whole call bounded by
    /// `timeout`. An unreachable server, an error status or a body that is not a model list
    /// is an error that says which.
    pub async fn served_models(&self, timeout: Duration) -> Result<Vec<String>, LlmError> {
        let url = self.config.models_endpoint();
        let mut req = self.http.get(&url).timeout(timeout);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| {
            let chain = error_chain(&e);
            if e.is_timeout() {
                LlmError::transient(format!(
                    "{url} did not answer within {} ms: {chain}",
                    timeout.as_millis()
                ))
            } else {
                LlmError::transient(format!("cannot ask {url}: {chain}"))
            }
        })?;
        let status = resp.status();
        let raw = resp.text().await.map_err(|e| {
            LlmError::transient(format!(
                "cannot read the answer of {url}: {}",
                error_chain(&e)
            ))
        })?;
        if !status.is_success() {
            return Err(wire::classify_error_body(status.as_u16(), &raw));
        }
        wire::parse_models(&raw)
    }

    /// Says once (through the warning sink) when the server answered with another model than
    /// the configured one: a server that answers any name hides a wrong one.
    fn check_answered_model(&self, answered: &str) {
        if wire::same_model(&self.config.model, answered)
            || self.warnings.model_mismatch.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let message = format!(
            "the server at {} answered with model `{answered}`, not the configured `{}`; \
             check the model name (`rca config check` lists the served models)",
            self.endpoint, self.config.model
        );
        match &self.warnings.sink {
            Some(sink) => sink(&message),
            None => tracing::warn!("{message}"),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn transport_error(&self, e: reqwest::Error) -> LlmError {
        let chain = error_chain(&e);
        if e.is_timeout() {
            LlmError::transient(format!("request to {} timed out: {chain}", self.endpoint))
        } else if e.is_connect() {
            LlmError::transient(format!("cannot connect to {}: {chain}", self.endpoint))
        } else if e.is_builder() {
            LlmError::permanent(format!("invalid request to {}: {chain}", self.endpoint))
        } else {
            LlmError::transient(format!("request to {} failed: {chain}", self.endpoint))
        }
    }

    /// Sends one request; a non-2xx status becomes the matching error.
    async fn post(&self, body: &Value, whole_timeout: bool) -> Result<reqwest::Response, LlmError> {
        let mut req = self.http.post(&self.endpoint).json(body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        if whole_timeout && let Some(t) = self.config.request_timeout() {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry_after = wire::parse_retry_after(
            header("retry-after").as_deref(),
            header("retry-after-ms").as_deref(),
        );
        let body = resp.text().await.unwrap_or_default();
        if status.as_u16() == 429 {
            return Err(wire::classify_rate_limit(&body, retry_after));
        }
        Err(wire::classify_error_body(status.as_u16(), &body))
    }

    async fn complete_once(
        &self,
        request: &CompletionRequest,
        body: &Value,
    ) -> Result<CompletionResponse, LlmError> {
        let resp = self.post(body, true).await?;
        let raw = resp.text().await.map_err(|e| self.transport_error(e))?;
        let response = wire::parse_response(request, &self.config.model, &raw)?;
        self.check_answered_model(&response.model);
        Ok(response)
    }

    fn log_retry(&self, e: &LlmError, delay: Duration) {
        tracing::warn!(
            model = %self.config.model,
            endpoint = %self.endpoint,
            error = %e,
            delay_ms = delay.as_millis() as u64,
            "retrying chat completion"
        );
    }
}

#[async_trait]
impl ChatModel for OpenAiClient {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // n > 1 always works: natively or by fan-out.
            native_n: true,
            ..Capabilities::from(self.config.features)
        }
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        if request.n > 1 && !self.config.features.native_n {
            return fan_out(self, request, self.config.fan_out_concurrency).await;
        }
        let body = wire::request_body(&self.config, &request, false)?;
        retry_with(
            &self.config.retry,
            || self.complete_once(&request, &body),
            |e, d| self.log_retry(e, d),
        )
        .await
    }

    async fn stream(&self, request: CompletionRequest) -> Result<ChatStream, LlmError> {
        if !self.config.features.streaming || (request.n > 1 && !self.config.features.native_n) {
            let response = self.complete(request).await?;
            return Ok(Box::pin(futures::stream::iter(replay_events(response))));
        }
        let body = wire::request_body(&self.config, &request, true)?;
        let resp = retry_with(
            &self.config.retry,
            || self.post(&body, false),
            |e, d| self.log_retry(e, d),
        )
        .await?;
        // A server that ignores `stream` answers with one JSON completion: replay it.
        let is_json = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.contains("json"));
        if is_json {
            let raw = resp.text().await.map_err(|e| self.transport_error(e))?;
            let response = wire::parse_response(&request, &self.config.model, &raw)?;
            self.check_answered_model(&response.model);
            return Ok(Box::pin(futures::stream::iter(replay_events(response))));
        }
        let endpoint = self.endpoint.clone();
        let bytes = resp.bytes_stream().map(move |r| {
            r.map_err(|e| {
                LlmError::transient(format!("stream from {endpoint} broke: {}", error_chain(&e)))
            })
        });
        let client = self.clone();
        let check = move |answered: &str| client.check_answered_model(answered);
        Ok(Box::pin(sse_events(Box::pin(bytes), request, check)))
    }
}

/// A complete response as stream events: one delta and one finish per choice, then usage.
fn replay_events(response: CompletionResponse) -> Vec<Result<StreamEvent, LlmError>> {
    let mut events = Vec::new();
    for c in response.choices {
        events.push(Ok(StreamEvent::Delta {
            index: c.index,
            text: c.message.content,
        }));
        events.push(Ok(StreamEvent::Finish {
            index: c.index,
            reason: c.finish_reason.unwrap_or(FinishReason::Stop),
        }));
    }
    events.push(Ok(StreamEvent::Usage(response.usage)));
    events
}

struct StreamState<S, F> {
    body: S,
    /// Told the model the first chunk that names one names.
    check_model: Option<F>,
    decoder: SseDecoder,
    pending: VecDeque<Result<StreamEvent, LlmError>>,
    outputs: BTreeMap<u32, String>,
    usage: Option<Usage>,
    done: bool,
    request: CompletionRequest,
}

impl<S, F: Fn(&str)> StreamState<S, F> {
    fn end(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let usage = self.usage.take().unwrap_or_else(|| {
            let texts: Vec<&str> = self.outputs.values().map(String::as_str).collect();
            wire::estimated_usage(&self.request, &texts)
        });
        self.pending.push_back(Ok(StreamEvent::Usage(usage)));
    }

    fn fail(&mut self, e: LlmError) {
        self.pending.push_back(Err(e));
        self.done = true;
    }

    fn data(&mut self, data: &str) {
        if self.done {
            return;
        }
        if data.trim() == "[DONE]" {
            self.end();
            return;
        }
        let chunk: wire::StreamChunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                return self.fail(LlmError::Malformed {
                    message: format!("stream chunk is not JSON: {e}"),
                    raw: data.to_string(),
                });
            }
        };
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            return self.fail(wire::classify_error_body(500, &err.to_string()));
        }
        if let Some(model) = chunk.model.as_deref()
            && let Some(check) = self.check_model.take()
        {
            check(model);
        }
        for c in chunk.choices {
            let out = self.outputs.entry(c.index).or_default();
            for call in c.delta.tool_calls.unwrap_or_default() {
                if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    out.push_str(args);
                }
            }
            if let Some(text) = c.delta.content.filter(|t| !t.is_empty()) {
                out.push_str(&text);
                self.pending.push_back(Ok(StreamEvent::Delta {
                    index: c.index,
                    text,
                }));
            }
            if let Some(reason) = c.finish_reason {
                self.pending.push_back(Ok(StreamEvent::Finish {
                    index: c.index,
                    reason: FinishReason::from_wire(&reason),
                }));
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.into());
        }
    }
}

/// Turns a response body of server-sent events into stream events; `check_model` is told the
/// model the first chunk that names one names.
fn sse_events<S, B, F>(
    body: S,
    request: CompletionRequest,
    check_model: F,
) -> impl Stream<Item = Result<StreamEvent, LlmError>> + Send
where
    S: Stream<Item = Result<B, LlmError>> + Unpin + Send,
    B: AsRef<[u8]>,
    F: Fn(&str) + Send,
{
    let state = StreamState {
        body,
        check_model: Some(check_model),
        decoder: SseDecoder::new(),
        pending: VecDeque::new(),
        outputs: BTreeMap::new(),
        usage: None,
        done: false,
        request,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.pending.pop_front() {
                return Some((ev, st));
            }
            if st.done {
                return None;
            }
            match st.body.next().await {
                Some(Ok(bytes)) => {
                    for data in st.decoder.push(bytes.as_ref()) {
                        st.data(&data);
                    }
                }
                Some(Err(e)) => st.fail(e),
                None => {
                    if let Some(data) = st.decoder.finish() {
                        st.data(&data);
                    }
                    st.end();
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rca_core::llm::Message;

    use super::*;

    async fn run(chunks: Vec<&'static str>) -> Vec<Result<StreamEvent, LlmError>> {
        let body =
            futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, LlmError>(c.as_bytes())));
        let req = CompletionRequest::new(vec![Message::user("count to three")]);
        sse_events(body, req, |_: &str| {}).collect().await
    }

    #[tokio::test]
    async fn stream_without_usage_gets_an_estimate_at_the_end() {
        let events = run(vec![
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one two\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ])
        .await;
        assert_eq!(events.len(), 3);
        let Some(Ok(StreamEvent::Usage(u))) = events.last() else {
            panic!("{events:?}");
        };
        assert!(u.estimated && u.completion_tokens >= 2 && u.prompt_tokens > 0);
    }

    #[tokio::test]
    async fn malformed_chunk_and_mid_stream_error() {
        let events = run(vec!["data: {nope\n\n", "data: [DONE]\n\n"]).await;
        assert_eq!(events.len(), 1);
        assert!(matches!(&events[0], Err(LlmError::Malformed { raw, .. }) if raw == "{nope"));
        let events = run(vec!["data: {\"error\":{\"message\":\"overloaded\"}}\n\n"]).await;
        assert!(matches!(&events[0], Err(LlmError::Transient { .. })));
    }
}
