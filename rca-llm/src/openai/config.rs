//! [`OpenAiConfig`]: everything the OpenAI-compatible client needs, deserialisable from a
//! config file.

use std::collections::BTreeMap;
use std::time::Duration;

use rca_core::llm::Capabilities;
use serde::{Deserialize, Serialize};

use crate::backoff::RetryPolicy;

/// A secret string (an API key): serialised as is, but never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What the server at `base_url` supports. The client fills the gaps: `n` by parallel calls
/// (seeds `base + i`), JSON output by a system-prompt hint, streaming by one complete call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerFeatures {
    /// Returns `n > 1` choices from one call.
    pub native_n: bool,
    /// Honours `seed`.
    pub seed: bool,
    /// Native tool calling (`tools` / `tool_calls`).
    pub tool_calls: bool,
    /// `response_format` `json_object` and `json_schema` (structured output).
    pub json_schema: bool,
    /// Server-sent-event streaming with `stream_options.include_usage`.
    pub streaming: bool,
    /// Honours `tool_choice` naming one function (answers with that call's `tool_calls`), even
    /// when `tool_calls` is false because the server ignores `auto`.
    pub named_tool_choice: bool,
    /// Sends a JSON-schema output format as `{"type": "json_object", "schema": ...}`
    /// (llama-cpp-python's form, which it enforces with a grammar; OpenAI's `json_schema` form
    /// is an HTTP 500 there).
    pub schema_in_json_object: bool,
    /// Keeps `system` messages. Where false (llama-cpp-python's `gemma` chat format drops them
    /// without a word), the client puts the system text at the head of the first user message.
    pub system_role: bool,
    /// Keeps `tool` messages and assistant `tool_calls`. Where false (chat formats that know
    /// only user and model turns drop both), the client writes a call into the assistant's
    /// text and its result as a user message naming the call.
    pub tool_role: bool,
}

impl Default for ServerFeatures {
    fn default() -> Self {
        ServerFeatures {
            native_n: true,
            seed: true,
            tool_calls: true,
            json_schema: true,
            streaming: true,
            named_tool_choice: true,
            schema_in_json_object: false,
            system_role: true,
            tool_role: true,
        }
    }
}

impl From<ServerFeatures> for Capabilities {
    fn from(f: ServerFeatures) -> Self {
        Capabilities {
            native_n: f.native_n,
            seed: f.seed,
            tool_calls: f.tool_calls,
            json_schema: f.json_schema,
            streaming: f.streaming,
            named_tool_choice: f.named_tool_choice || f.tool_calls,
        }
    }
}

/// Configuration of an [`crate::OpenAiClient`].
///
/// ```
/// let toml_like = serde_json::json!({
///     "base_url": "http://localhost:8000/v1",
///     "model": "Qwen/Qwen2.5-7B-Instruct",
///     "request_timeout_ms": 60000,
///     "retry": { "max_retries": 2 },
///     "features": { "native_n": false }
/// });
/// let config: rca_llm::OpenAiConfig = serde_json::from_value(toml_like).unwrap();
/// assert_eq!(config.retry.max_retries, 2);
/// assert!(!config.features.native_n && config.features.tool_calls);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API root, ending in `/v1` (the client appends `/chat/completions`).
    pub base_url: String,
    /// The model name sent in every request.
    pub model: String,
    /// The API key, sent as `Authorization: Bearer ...`. Prefer `api_key_env` in files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// The name of an environment variable holding the API key (read when the client is
    /// built, used when `api_key` is unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Time allowed to open a connection, in milliseconds (`None` or 0: no limit).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: Option<u64>,
    /// Time allowed for a whole non-streaming request, in milliseconds; for a stream, the
    /// longest silence between two chunks (`None` or 0: no limit).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: Option<u64>,
    /// Retries of failed calls (429 honouring `Retry-After`, 5xx, connection errors, timeouts).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// What the server supports natively.
    #[serde(default)]
    pub features: ServerFeatures,
    /// How many calls may run at once when `n` is obtained by fan-out.
    #[serde(default = "default_fan_out")]
    pub fan_out_concurrency: usize,
    /// Send the token limit as `max_completion_tokens` (newer OpenAI models) instead of
    /// `max_tokens` (vLLM, Ollama, llama.cpp, older OpenAI models).
    #[serde(default)]
    pub use_max_completion_tokens: bool,
    /// Mark `json_schema` response formats `strict` (OpenAI's guaranteed structured output;
    /// needs schemas where every property is required and no extra properties are allowed).
    #[serde(default)]
    pub strict_json_schema: bool,
    /// The token limit sent when a request names none (`None`: send none). A base model does
    /// not stop by itself, so an unbounded request can run until the context is full.
    #[serde(default = "default_max_tokens")]
    pub default_max_tokens: Option<u32>,
    /// Extra HTTP headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

fn default_connect_timeout() -> Option<u64> {
    Some(10_000)
}

fn default_request_timeout() -> Option<u64> {
    Some(120_000)
}

fn default_max_tokens() -> Option<u32> {
    Some(DEFAULT_MAX_TOKENS)
}

/// The token limit a request gets when it names none ([`OpenAiConfig::default_max_tokens`]).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

fn default_fan_out() -> usize {
    crate::fanout::DEFAULT_FAN_OUT_CONCURRENCY
}

impl OpenAiConfig {
    /// A config for `model` at `base_url` with default timeouts, retries and features.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            api_key_env: None,
            connect_timeout_ms: default_connect_timeout(),
            request_timeout_ms: default_request_timeout(),
            retry: RetryPolicy::default(),
            features: ServerFeatures::default(),
            fan_out_concurrency: default_fan_out(),
            use_max_completion_tokens: false,
            strict_json_schema: false,
            default_max_tokens: default_max_tokens(),
            headers: BTreeMap::new(),
        }
    }

    /// A vLLM server (`vllm serve <model>`), by default at `http://localhost:8000/v1`.
    pub fn vllm(model: impl Into<String>) -> Self {
        Self::new("http://localhost:8000/v1", model)
    }

    /// Ollama's OpenAI-compatible endpoint at `http://localhost:11434/v1`. Ollama returns one
    /// choice per call, so `n` is obtained by fan-out.
    pub fn ollama(model: impl Into<String>) -> Self {
        let mut c = Self::new("http://localhost:11434/v1", model);
        c.features.native_n = false;
        c
    }

    /// The llama.cpp server (`llama-server`, started with `--jinja` for tool calling) at
    /// `http://localhost:8080/v1`. It returns one choice per call, so `n` is obtained by
    /// fan-out.
    pub fn llama_cpp(model: impl Into<String>) -> Self {
        let mut c = Self::new("http://localhost:8080/v1", model);
        c.features.native_n = false;
        c
    }

    /// llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) at
    /// `base_url`, with what it was measured to do: `n` is ignored (fan-out instead), `tools`
    /// with `auto` is ignored (agents describe tools in the prompt) but a named `tool_choice`
    /// is honoured, a JSON schema goes inside the `json_object` format, and (as its `gemma`
    /// chat format has only user and model turns) system and tool messages become user text.
    pub fn llama_cpp_python(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let mut c = Self::new(base_url, model);
        c.features = ServerFeatures {
            native_n: false,
            seed: true,
            tool_calls: false,
            json_schema: true,
            streaming: true,
            named_tool_choice: true,
            schema_in_json_object: true,
            system_role: false,
            tool_role: false,
        };
        c
    }

    /// OpenAI's API at `https://api.openai.com/v1`, with the key read from `OPENAI_API_KEY`.
    pub fn openai(model: impl Into<String>) -> Self {
        let mut c = Self::new("https://api.openai.com/v1", model);
        c.api_key_env = Some("OPENAI_API_KEY".into());
        c
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Secret(key.into()));
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets both timeouts (`None`: no limit).
    pub fn with_timeouts(mut self, connect: Option<Duration>, request: Option<Duration>) -> Self {
        self.connect_timeout_ms = connect.map(|d| d.as_millis() as u64);
        self.request_timeout_ms = request.map(|d| d.as_millis() as u64);
        self
    }

    /// Sets the server features.
    pub fn with_features(mut self, features: ServerFeatures) -> Self {
        self.features = features;
        self
    }

    /// The connect timeout, if any.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout_ms
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
    }

    /// The request timeout (for streams: the longest silence between chunks), if any.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout_ms
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
    }

    /// The chat-completions URL.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// The URL that lists the served models: `{base_url}/models` (`GET`, OpenAI-compatible).
    pub fn models_endpoint(&self) -> String {
        format!("{}/models", self.base_url.trim_end_matches('/'))
    }

    /// The API key to send: `api_key`, else the variable named by `api_key_env` when set.
    pub fn resolved_api_key(&self) -> Option<String> {
        if let Some(Secret(k)) = &self.api_key {
            return Some(k.clone());
        }
        self.api_key_env
            .as_deref()
            .and_then(|var| std::env::var(var).ok())
            .filter(|k| !k.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_a_minimal_config_and_keys_stay_hidden() {
        let c: OpenAiConfig = serde_json::from_value(serde_json::json!({
            "base_url": "http://localhost:11434/v1/",
            "model": "llama3.1",
            "api_key": "sk-very-secret"
        }))
        .unwrap();
        assert_eq!(c.endpoint(), "http://localhost:11434/v1/chat/completions");
        assert_eq!(c.connect_timeout(), Some(Duration::from_secs(10)));
        let no_limit = c.clone().with_timeouts(Some(Duration::ZERO), None);
        assert_eq!(
            (no_limit.connect_timeout(), no_limit.request_timeout()),
            (None, None)
        );
        assert_eq!(c.retry, RetryPolicy::default());
        assert!(!format!("{c:?}").contains("very-secret"));
        assert_eq!(c.resolved_api_key().as_deref(), Some("sk-very-secret"));
        let bad = serde_json::from_value::<OpenAiConfig>(serde_json::json!({
            "base_url": "x", "model": "y", "tmeperature": 1
        }));
        assert!(bad.is_err());
        assert!(!OpenAiConfig::ollama("m").features.native_n);
        assert_eq!(
            OpenAiConfig::openai("m").api_key_env.as_deref(),
            Some("OPENAI_API_KEY")
        );
    }
}
