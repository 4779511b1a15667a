//! The OpenAI chat-completions wire format: request bodies, responses, stream chunks and
//! error bodies. Pure functions, no IO, so every mapping is unit-tested.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rca_core::LlmError;
use rca_core::llm::{
    Choice, CompletionRequest, CompletionResponse, FinishReason, Message, ResponseFormat, Role,
    Served, ToolCall, ToolChoice, Usage, estimate_tokens,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::config::OpenAiConfig;

/// The system-prompt hint used when the server cannot enforce JSON output itself.
pub fn json_hint(format: &ResponseFormat) -> Option<String> {
    match format {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => {
            Some("Answer with a single JSON object only: no prose, no Markdown code fences.".into())
        }
        ResponseFormat::JsonSchema { name, schema } => Some(format!(
            "Answer with a single JSON object only (no prose, no Markdown code fences) that \
             follows this JSON schema named `{name}`: {schema}"
        )),
    }
}

/// Appends `hint` to the first system message, or puts a system message first. (Some chat
/// templates accept only one system message, at the start.)
pub fn add_system_hint(messages: &mut Vec<Message>, hint: &str) {
    match messages.iter_mut().find(|m| m.role == Role::System) {
        Some(m) => {
            if !m.content.is_empty() {
                m.content.push_str("\n\n");
            }
            m.content.push_str(hint);
        }
        None => messages.insert(0, Message::system(hint)),
    }
}

/// Rewrites `messages` for a chat format that knows only user and assistant turns. Without
/// `system_role`, the system messages before the first user message go, in order, to the head
/// of that message (a later system message becomes a user message where it stands). Without
/// `tool_role`, an assistant's tool calls are written into its text, one JSON line each, and a
/// tool result becomes a user message that names the call it answers.
pub fn fold_roles(messages: Vec<Message>, system_role: bool, tool_role: bool) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut leading_system: Vec<String> = Vec::new();
    for m in messages {
        match m.role {
            Role::System if !system_role => {
                if out.iter().any(|o| o.role == Role::User) {
                    out.push(Message::user(m.content));
                } else {
                    leading_system.push(m.content);
                }
            }
            Role::Tool if !tool_role => {
                let id = m.tool_call_id.as_deref().unwrap_or("?");
                out.push(Message::user(format!(
                    "Result of tool call {id}:\n{}",
                    m.content
                )));
            }
            Role::Assistant if !tool_role && !m.tool_calls.is_empty() => {
                let mut text = m.content.clone();
                for c in &m.tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    let arguments = serde_json::from_str::<Value>(&c.arguments)
                        .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                    let call = json!({"tool_call": c.id, "name": c.name, "arguments": arguments});
                    text.push_str(&call.to_string());
                }
                out.push(Message::assistant(text));
            }
            _ => out.push(m),
        }
    }
    if !leading_system.is_empty() {
        let head = leading_system.join("\n\n");
        match out.iter_mut().find(|m| m.role == Role::User) {
            Some(first) => first.content = format!("{head}\n\n{}", first.content),
            None => out.insert(0, Message::user(head)),
        }
    }
    out
}

fn wire_message(m: &Message) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    if m.content.is_empty() && !m.tool_calls.is_empty() {
        out.insert("content".into(), Value::Null);
    } else {
        out.insert("content".into(), json!(m.content));
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments }
                })
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(out)
}

/// The JSON body for `request`, as `config`'s server should receive it: native fields where
/// the server supports them, the prompt-based JSON hint where it does not. `n` must already be
/// 1 unless the server has native `n`.
pub fn request_body(
    config: &OpenAiConfig,
    request: &CompletionRequest,
    stream: bool,
) -> Result<Value, LlmError> {
    let features = config.features;
    let named_ok =
        matches!(request.tool_choice, ToolChoice::Function(_)) && features.named_tool_choice;
    if !request.tools.is_empty() && !features.tool_calls && !named_ok {
        return Err(LlmError::permanent(format!(
            "the server for model `{}` is configured without native tool calling, but the \
             request offers {} tools; describe the tools in the prompt instead",
            config.model,
            request.tools.len()
        )));
    }
    let mut messages = request.messages.clone();
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));

    match &request.response_format {
        ResponseFormat::Text => {}
        format if !features.json_schema => {
            if let Some(hint) = json_hint(format) {
                add_system_hint(&mut messages, &hint);
            }
        }
        ResponseFormat::JsonObject => {
            body.insert("response_format".into(), json!({"type": "json_object"}));
            // OpenAI refuses JSON mode unless the prompt mentions JSON; the hint also helps
            // servers whose JSON mode is only a grammar.
            let mentions_json = messages
                .iter()
                .any(|m| m.content.to_ascii_lowercase().contains("json"));
            if !mentions_json && let Some(hint) = json_hint(&request.response_format) {
                add_system_hint(&mut messages, &hint);
            }
        }
        ResponseFormat::JsonSchema { schema, .. } if features.schema_in_json_object => {
            body.insert(
                "response_format".into(),
                json!({"type": "json_object", "schema": schema}),
            );
        }
        ResponseFormat::JsonSchema { name, schema } => {
            let mut spec = json!({"name": name, "schema": schema});
            if config.strict_json_schema {
                spec["strict"] = json!(true);
            }
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": spec}),
            );
        }
    }

    if !features.system_role || !features.tool_role {
        messages = fold_roles(messages, features.system_role, features.tool_role);
    }
    body.insert(
        "messages".into(),
        Value::Array(messages.iter().map(wire_message).collect()),
    );
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if request.n > 1 {
        body.insert("n".into(), json!(request.n));
    }
    if let Some(seed) = request.seed
        && features.seed
    {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(max) = request.max_tokens.or(config.default_max_tokens) {
        let field = if config.use_max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(field.into(), json!(max));
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    created: Option<i64>,
    #[serde(default)]
    system_fingerprint: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u32>,
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Token usage as servers report it.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct WireUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            estimated: false,
        }
    }
}

/// Text of a `content` field: a string, `null`, or a list of `{type: text, text}` parts.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Arguments as JSON text: servers send a string; a few send an object.
fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The usage to report when a server sends none: estimates of prompt and output tokens.
pub fn estimated_usage(request: &CompletionRequest, outputs: &[&str]) -> Usage {
    Usage {
        prompt_tokens: u64::from(request.estimated_prompt_tokens()),
        completion_tokens: outputs.iter().map(|t| u64::from(estimate_tokens(t))).sum(),
        estimated: true,
    }
}

fn malformed(message: impl Into<String>, raw: &str) -> LlmError {
    LlmError::Malformed {
        message: message.into(),
        raw: raw.to_string(),
    }
}

/// Parses a successful (2xx) chat-completions body. A body that does not parse, or has no
/// choices, is [`LlmError::Malformed`] with the raw body; an `error` object inside a 2xx body
/// is classified like an error status.
pub fn parse_response(
    request: &CompletionRequest,
    fallback_model: &str,
    raw: &str,
) -> Result<CompletionResponse, LlmError> {
    let wire: WireResponse = serde_json::from_str(raw)
        .map_err(|e| malformed(format!("not a chat completion: {e}"), raw))?;
    if let Some(error) = wire.error.filter(|e| !e.is_null()) {
        return Err(classify_error_body(400, &error.to_string()));
    }
    let choices = wire
        .choices
        .filter(|c| !c.is_empty())
        .ok_or_else(|| malformed("the response has no choices", raw))?;
    let mut out: Vec<Choice> = choices
        .into_iter()
        .enumerate()
        .map(|(pos, c)| {
            let tool_calls: Vec<ToolCall> = c
                .message
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(k, t)| ToolCall {
                    id: t.id.unwrap_or_else(|| format!("call_{pos}_{k}")),
                    name: t.function.name.unwrap_or_default(),
                    arguments: arguments_text(t.function.arguments),
                })
                .collect();
            Choice {
                index: c.index.unwrap_or(pos as u32),
                message: Message {
                    role: Role::Assistant,
                    content: content_text(c.message.content),
                    tool_calls,
                    tool_call_id: None,
                },
                finish_reason: c.finish_reason.as_deref().map(FinishReason::from_wire),
            }
        })
        .collect();
    out.sort_by_key(|c| c.index);
    let usage = match wire.usage {
        Some(u) => u.into(),
        None => {
            let texts: Vec<&str> = out
                .iter()
                .flat_map(|c| {
                    std::iter::once(c.message.content.as_str())
                        .chain(c.message.tool_calls.iter().map(|t| t.arguments.as_str()))
                })
                .collect();
            estimated_usage(request, &texts)
        }
    };
    Ok(CompletionResponse {
        model: wire.model.unwrap_or_else(|| fallback_model.to_string()),
        choices: out,
        usage,
        served: Served {
            id: wire.id,
            created: wire.created,
            system_fingerprint: wire.system_fingerprint,
        }
        .nonempty(),
    })
}

/// The model ids of a `GET /models` body (`{"object": "list", "data": [{"id": ...}]}`, as
/// OpenAI, vLLM, llama.cpp and Ollama send it); a body of another shape is
/// [`LlmError::Malformed`] with the raw body.
pub fn parse_models(raw: &str) -> Result<Vec<String>, LlmError> {
    let value: Value =
        serde_json::from_str(raw).map_err(|e| malformed(format!("not a model list: {e}"), raw))?;
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("the model list has no `data` array", raw))?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .map(str::to_string)
        .collect())
}

/// Whether the model a server names in an answer (or lists as served) is the one requested:
/// the same name, or a dated snapshot of it (`gpt-4o` answered as `gpt-4o-2024-08-06`).
pub fn same_model(requested: &str, answered: &str) -> bool {
    answered == requested
        || answered
            .strip_prefix(requested)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|date| date.starts_with(|c: char| c.is_ascii_digit()))
}

/// The human-readable message of an error body (OpenAI, vLLM, Ollama and llama.cpp shapes),
/// or the body itself, clipped.
pub fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let e = v.get("error").unwrap_or(&v);
        e.get("message")
            .or_else(|| e.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| e.as_str().map(str::to_string))
    });
    let msg = from_json.unwrap_or_else(|| body.trim().to_string());
    if msg.chars().count() > 500 {
        let head: String = msg.chars().take(500).collect();
        format!("{head}...")
    } else {
        msg
    }
}

/// Whether an error body says the prompt does not fit the context window. Covers OpenAI
/// (`context_length_exceeded`), vLLM ("maximum context length"), llama.cpp
/// (`exceed_context_size_error`, "exceeds the available context size") and Ollama wording.
pub fn is_context_length(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "exceed_context_size",
        "exceeds the available context size",
        "context size",
        "too many tokens",
        "prompt is too long",
        "input is too long",
    ]
    .iter()
    .any(|p| b.contains(p))
}

/// Maps an HTTP error status and body to an error (429 is handled by the caller, which sees
/// the headers): 5xx transient, context-length 4xx typed, every other 4xx permanent.
pub fn classify_error_body(status: u16, body: &str) -> LlmError {
    let message = format!("HTTP {status}: {}", error_message(body));
    if (500..600).contains(&status) {
        return LlmError::Transient { message };
    }
    if is_context_length(body) {
        return LlmError::ContextLength { message };
    }
    if status == 401 || status == 403 {
        return LlmError::permanent(format!("{message} (check the API key)"));
    }
    if status == 404 {
        return LlmError::permanent(format!(
            "{message} (check the base URL, which should end in /v1, and the model name)"
        ));
    }
    LlmError::Permanent { message }
}

/// Maps a 429 response: a quota that is used up is permanent, anything else is a rate limit
/// carrying the server's wait.
pub fn classify_rate_limit(body: &str, retry_after: Option<Duration>) -> LlmError {
    if body.contains("insufficient_quota") {
        return LlmError::permanent(format!("HTTP 429: {}", error_message(body)));
    }
    LlmError::RateLimited { retry_after }
}

/// Reads a wait from `Retry-After` (seconds, possibly fractional, or an HTTP date) or from
/// `retry-after-ms` (milliseconds), preferring the latter.
pub fn parse_retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let v = retry_after?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = parse_http_date(v)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to seconds since the Unix epoch.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: i64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + sec).ok()
}

/// One chunk of a streamed completion.
#[derive(Debug, Deserialize)]
pub struct StreamChunk {
    /// The model the server names as answering, when it names one.
    #[serde(default)]
    pub model: Option<String>,
    /// The choices' deltas.
    #[serde(default)]
    pub choices: Vec<StreamChoice>,
    /// Usage, present (non-null) only on the final chunk with `include_usage`.
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An error reported in the middle of a stream.
    #[serde(default)]
    pub error: Option<Value>,
}

/// A choice's delta in a stream chunk.
#[derive(Debug, Deserialize)]
pub struct StreamChoice {
    /// Which choice.
    #[serde(default)]
    pub index: u32,
    /// The new content.
    #[serde(default)]
    pub delta: StreamDelta,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// New content in a stream chunk.
#[derive(Debug, Default, Deserialize)]
pub struct StreamDelta {
    /// Text.
    #[serde(default)]
    pub content: Option<String>,
    /// Pieces of tool calls (their argument text counts toward estimated usage).
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
}

#[cfg(test)]
mod tests {
    use rca_core::tool::ToolSpec;

    use super::*;

    fn config() -> OpenAiConfig {
        OpenAiConfig::new("http://x/v1", "m")
    }

    #[test]
    fn body_carries_every_field() {
        let mut req = CompletionRequest::new(vec![Message::system("sys"), Message::user("u")])
            .with_temperature(0.5)
            .with_n(3)
            .with_seed(11)
            .with_max_tokens(100);
        req.top_p = Some(0.9);
        req.stop = vec!["Observation:".into()];
        req.tools = vec![ToolSpec {
            name: "logs".into(),
            description: "search logs".into(),
            parameters: json!({"type": "object"}),
        }];
        req.tool_choice = ToolChoice::Required;
        req.response_format = ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object"}),
        };
        let b = request_body(&config(), &req, true).unwrap();
        assert_eq!(b["model"], "m");
        assert_eq!(b["temperature"], 0.5);
        assert!((b["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6);
        assert_eq!(b["n"], 3);
        assert_eq!(b["seed"], 11);
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["stop"], json!(["Observation:"]));
        assert_eq!(b["tools"][0]["function"]["name"], "logs");
        assert_eq!(b["tool_choice"], "required");
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(b["response_format"]["json_schema"]["name"], "answer");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["messages"][0]["content"], "sys");
    }

    #[test]
    fn llama_cpp_python_forms_and_the_default_token_limit() {
        let c = OpenAiConfig::llama_cpp_python("http://x/v1", "m");
        let mut req = CompletionRequest::new(vec![Message::user("u")]);
        req.response_format = ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object", "required": ["a"]}),
        };
        let b = request_body(&c, &req, false).unwrap();
        assert_eq!(b["response_format"]["type"], "json_object");
        assert_eq!(b["response_format"]["schema"]["required"], json!(["a"]));
        // A request that names no limit gets the configured default; one that names a limit
        // keeps it; a config without a default sends none.
        assert_eq!(b["max_tokens"], crate::openai::config::DEFAULT_MAX_TOKENS);
        let b = request_body(&c, &req.clone().with_max_tokens(7), false).unwrap();
        assert_eq!(b["max_tokens"], 7);
        let mut unbounded = c.clone();
        unbounded.default_max_tokens = None;
        assert!(
            request_body(&unbounded, &req, false)
                .unwrap()
                .get("max_tokens")
                .is_none()
        );

        // Tools with `auto` are refused (the server would ignore them); a named choice goes out.
        req.response_format = ResponseFormat::Text;
        req.tools = vec![ToolSpec {
            name: "logs".into(),
            description: "search logs".into(),
            parameters: json!({"type": "object"}),
        }];
        assert!(request_body(&c, &req, false).is_err());
        req.tool_choice = ToolChoice::Function("logs".into());
        let b = request_body(&c, &req, false).unwrap();
        assert_eq!(b["tool_choice"]["function"]["name"], "logs");
        assert!(b.get("n").is_none());
    }

    #[test]
    fn system_and_tool_turns_fold_into_user_text_where_the_format_lacks_them() {
        let c = OpenAiConfig::llama_cpp_python("http://x/v1", "m");
        let mut call = Message::assistant("");
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "logs".into(),
            arguments: "{\"q\": \"err\"}".into(),
        }];
        let req = CompletionRequest::new(vec![
            Message::system("rules"),
            Message::user("task"),
            call,
            Message::tool_result("c1", "3 lines"),
            Message::system("late"),
        ]);
        let b = request_body(&c, &req, false).unwrap();
        let msgs = b["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "user"]);
        assert_eq!(msgs[0]["content"], "rules\n\ntask");
        let written: Value = serde_json::from_str(msgs[1]["content"].as_str().unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"tool_call": "c1", "name": "logs", "arguments": {"q": "err"}})
        );
        assert!(msgs[1].get("tool_calls").is_none());
        assert_eq!(msgs[2]["content"], "Result of tool call c1:\n3 lines");
        assert_eq!(msgs[3]["content"], "late");
        // Only a system message: it becomes the user message.
        let only = CompletionRequest::new(vec![Message::system("s")]);
        let b = request_body(&c, &only, false).unwrap();
        assert_eq!(b["messages"][0]["role"], "user");
        // Servers with both roles get the messages as they are.
        let b = request_body(&config(), &req, false).unwrap();
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn json_falls_back_to_a_prompt_hint() {
        let mut c = config();
        c.features.json_schema = false;
        let req = CompletionRequest::new(vec![Message::system("sys"), Message::user("u")]).json();
        let b = request_body(&c, &req, false).unwrap();
        assert!(b.get("response_format").is_none());
        let sys = b["messages"][0]["content"].as_str().unwrap();
        assert!(sys.starts_with("sys\n\n") && sys.contains("JSON object"));
        assert_eq!(b["messages"].as_array().unwrap().len(), 2);

        // Native JSON mode still mentions JSON when the prompt does not.
        let b = request_body(&config(), &req, false).unwrap();
        assert_eq!(b["response_format"]["type"], "json_object");
        assert!(
            b["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("JSON")
        );

        // Without a system message the hint becomes the first message.
        let req = CompletionRequest::new(vec![Message::user("u")]).json();
        let b = request_body(&c, &req, false).unwrap();
        assert_eq!(b["messages"][0]["role"], "system");
    }

    #[test]
    fn tools_need_native_support_and_tool_messages_round_trip() {
        let mut c = config();
        c.features.tool_calls = false;
        let mut req = CompletionRequest::new(vec![Message::user("u")]);
        req.tools = vec![ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({}),
        }];
        assert!(matches!(
            request_body(&c, &req, false),
            Err(LlmError::Permanent { .. })
        ));
        let mut call = Message::assistant("");
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: "{}".into(),
        }];
        let req = CompletionRequest::new(vec![call, Message::tool_result("c1", "out")]);
        let b = request_body(&config(), &req, false).unwrap();
        assert_eq!(b["messages"][0]["content"], Value::Null);
        assert_eq!(
            b["messages"][0]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(b["messages"][1]["tool_call_id"], "c1");
        assert_eq!(b["messages"][1]["role"], "tool");
    }

    #[test]
    fn parses_choices_usage_tool_calls_and_estimates() {
        let req = CompletionRequest::new(vec![Message::user("hello there")]);
        let raw = r#"{"model":"m1","choices":[
            {"index":1,"message":{"role":"assistant","content":"b"},"finish_reason":"length"},
            {"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
                {"id":"call_9","type":"function","function":{"name":"logs","arguments":"{\"q\":1}"}}]},
             "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;
        let r = parse_response(&req, "fallback", raw).unwrap();
        assert_eq!(r.model, "m1");
        assert_eq!(r.choices[0].index, 0);
        assert_eq!(r.choices[0].message.tool_calls[0].name, "logs");
        assert_eq!(r.choices[0].message.tool_calls[0].arguments, r#"{"q":1}"#);
        assert_eq!(r.choices[0].finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(r.choices[1].finish_reason, Some(FinishReason::Length));
        assert_eq!(r.usage.total(), 17);
        assert!(!r.usage.estimated);

        // What proves the server answered is kept: its id, creation time and fingerprint.
        let raw = r#"{"id":"chatcmpl-7","created":1765000000,"system_fingerprint":"b1-x",
            "choices":[{"message":{"content":"ok"}}]}"#;
        let served = parse_response(&req, "fallback", raw)
            .unwrap()
            .served
            .unwrap();
        assert_eq!(served.id.as_deref(), Some("chatcmpl-7"));
        assert_eq!(served.created, Some(1_765_000_000));
        assert_eq!(served.system_fingerprint.as_deref(), Some("b1-x"));

        let raw = r#"{"choices":[{"message":{"content":"some words here"}}]}"#;
        let r = parse_response(&req, "fallback", raw).unwrap();
        assert_eq!(r.served, None);
        assert_eq!(r.model, "fallback");
        assert!(r.usage.estimated);
        assert!(r.usage.prompt_tokens > 0 && r.usage.completion_tokens >= 3);

        for bad in ["<html>oops</html>", r#"{"choices":[]}"#, r#"{"id":"x"}"#] {
            match parse_response(&req, "f", bad) {
                Err(LlmError::Malformed { raw, .. }) => assert_eq!(raw, bad),
                other => panic!("{other:?}"),
            }
        }
        let ctx = r#"{"error":{"message":"This model's maximum context length is 4096 tokens"}}"#;
        assert!(matches!(
            parse_response(&req, "f", ctx),
            Err(LlmError::ContextLength { .. })
        ));
    }

    #[test]
    fn model_lists_and_model_names() {
        let raw = r#"{"object":"list","data":[{"id":"a","object":"model"},{"id":"b:7b"},{"x":1}]}"#;
        assert_eq!(parse_models(raw).unwrap(), vec!["a", "b:7b"]);
        assert!(matches!(
            parse_models(r#"{"models":[]}"#),
            Err(LlmError::Malformed { .. })
        ));
        assert!(matches!(
            parse_models("<html>"),
            Err(LlmError::Malformed { .. })
        ));
        assert!(same_model("gpt-4o", "gpt-4o") && same_model("gpt-4o", "gpt-4o-2024-08-06"));
        assert!(!same_model("gpt-4o", "gpt-4o-mini"));
        assert!(!same_model("gemma", "qwen") && !same_model("gpt-4o", "gpt-4oo"));
    }

    #[test]
    fn classifies_errors() {
        assert!(matches!(
            classify_error_body(503, "busy"),
            LlmError::Transient { .. }
        ));
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        match classify_error_body(400, llama) {
            LlmError::ContextLength { message } => assert!(message.contains("exceeds")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify_error_body(400, r#"{"error":"model 'x' not found"}"#),
            LlmError::Permanent { .. }
        ));
        assert!(
            classify_error_body(401, "{}")
                .to_string()
                .contains("API key")
        );
        assert!(matches!(
            classify_rate_limit(r#"{"error":{"code":"insufficient_quota"}}"#, None),
            LlmError::Permanent { .. }
        ));
        assert_eq!(error_message(r#"{"detail":"bad field"}"#), "bad field");
    }

    #[test]
    fn reads_retry_after_forms() {
        assert_eq!(
            parse_retry_after(Some("3"), None),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(Some("3"), Some("1500")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(Some("0.5"), None),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(None, None), None);
        assert_eq!(parse_retry_after(Some("1e300"), None), None);
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("yesterday"), None);
        // A date in the past means "now".
        assert_eq!(
            parse_retry_after(Some("Sun, 06 Nov 1994 08:49:37 GMT"), None),
            Some(Duration::ZERO)
        );
    }
}
