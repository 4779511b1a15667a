//! Talking to a language model: messages, requests, responses, usage and the [`ChatModel`]
//! trait every backend implements.

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;
use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::tool::ToolSpec;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the framework or the host.
    System,
    /// The task, or an observation handed back to the model.
    User,
    /// The model's own turn.
    Assistant,
    /// The result of a native tool call.
    Tool,
}

/// A tool call the model asked for through native tool calling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The server's id for the call, echoed back in the tool's result message.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, exactly as the model wrote them (they may not parse).
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Native tool calls made in an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with the given role and text.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// The result of the native tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// How the model should shape its output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text (the default).
    #[default]
    Text,
    /// Any JSON object (the server's JSON mode, where it has one; prompt-based otherwise).
    JsonObject,
    /// JSON that follows `schema` (structured output, where the server supports it).
    JsonSchema {
        /// A name for the schema.
        name: String,
        /// The JSON schema.
        schema: serde_json::Value,
    },
}

/// Whether and how the model may call tools natively.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    #[default]
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool (by name). Servers that ignore `auto` (llama.cpp's
    /// Python server) still honour a named choice, decoding the arguments under a grammar.
    Function(String),
}

/// A request for a chat completion, with every sampling knob the papers need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Sampling temperature; `None` leaves the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// How many independent samples (choices) to return; 1 by default.
    #[serde(default = "one")]
    pub n: u32,
    /// Seed for reproducible sampling, where the server honours it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Output shape hint.
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// Tools offered for native tool calling (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether the model may call the tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
}

fn one() -> u32 {
    1
}

impl CompletionRequest {
    /// A request with these messages and default sampling (n = 1).
    pub fn new(messages: Vec<Message>) -> Self {
        CompletionRequest {
            messages,
            temperature: None,
            top_p: None,
            n: 1,
            seed: None,
            max_tokens: None,
            stop: Vec::new(),
            response_format: ResponseFormat::Text,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
        }
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Sets the number of samples.
    pub fn with_n(mut self, n: u32) -> Self {
        self.n = n.max(1);
        self
    }

    /// Sets the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets the token limit.
    pub fn with_max_tokens(mut self, max: u32) -> Self {
        self.max_tokens = Some(max);
        self
    }

    /// Asks for JSON output.
    pub fn json(mut self) -> Self {
        self.response_format = ResponseFormat::JsonObject;
        self
    }

    /// A rough count of the prompt's tokens (see [`estimate_tokens`]).
    pub fn estimated_prompt_tokens(&self) -> u32 {
        self.messages
            .iter()
            .map(|m| estimate_tokens(&m.content) + 4)
            .sum()
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural stop or a stop sequence.
    Stop,
    /// The token limit was reached: the output may be truncated.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The server filtered the content.
    ContentFilter,
    /// Something the server named that we do not know.
    Other(String),
}

impl FinishReason {
    /// Reads the OpenAI wire name of a finish reason.
    pub fn from_wire(s: &str) -> Self {
        match s {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        }
    }
}

/// One sampled answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Its index among the request's `n` samples.
    pub index: u32,
    /// The assistant message.
    pub message: Message,
    /// Why generation stopped, when the server said.
    pub finish_reason: Option<FinishReason>,
}

/// Token accounting of one or more calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt(s).
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// `true` when the numbers are estimates because the server reported none.
    #[serde(default)]
    pub estimated: bool,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.estimated |= other.estimated;
    }
}

/// A chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionResponse {
    /// The model that answered, as the server named it.
    pub model: String,
    /// The samples, ordered by index.
    pub choices: Vec<Choice>,
    /// Token usage.
    pub usage: Usage,
    /// What the server said about this answer that proves where it came from (its response
    /// id, creation time, system fingerprint), when it said anything; kept in recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<Served>,
}

/// The server's own marks on one answer (OpenAI-compatible `id`, `created`,
/// `system_fingerprint`): a recording that keeps them shows a server produced it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// The response id the server gave (`chatcmpl-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When the server created the answer, in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<i64>,
    /// The server's configuration fingerprint, where it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
}

impl Served {
    /// `None` when the server said nothing at all.
    pub fn nonempty(self) -> Option<Served> {
        (self != Served::default()).then_some(self)
    }
}

impl CompletionResponse {
    /// The text of the first choice (empty when there is none).
    pub fn text(&self) -> &str {
        self.choices
            .first()
            .map(|c| c.message.content.as_str())
            .unwrap_or("")
    }
}

/// A piece of a streamed completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamEvent {
    /// More text for choice `index`.
    Delta {
        /// Which choice.
        index: u32,
        /// The new text.
        text: String,
    },
    /// Choice `index` finished.
    Finish {
        /// Which choice.
        index: u32,
        /// Why.
        reason: FinishReason,
    },
    /// Token usage, sent once at the end of the stream.
    Usage(Usage),
}

/// A stream of completion pieces.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// What a backend can do natively; wrappers fill the gaps (fan-out for `n`, prompt-based JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capabilities {
    /// Returns `n > 1` choices from one call.
    pub native_n: bool,
    /// Honours `seed`.
    pub seed: bool,
    /// Native tool calling (`tools` / `tool_calls`).
    pub tool_calls: bool,
    /// `json_schema` structured output.
    pub json_schema: bool,
    /// Server-sent-event streaming.
    pub streaming: bool,
    /// Honours a [`ToolChoice::Function`] naming one tool, even where `tool_calls` is false
    /// (the model then picks no tool itself, but fills a named tool's arguments).
    #[serde(default)]
    pub named_tool_choice: bool,
}

/// A chat model: anything that turns a [`CompletionRequest`] into a [`CompletionResponse`].
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::llm::{ChatModel, Choice, CompletionRequest, CompletionResponse, Message, Usage};
/// use rca_core::LlmError;
///
/// /// Answers every request with the last user message, shouted.
/// struct Shout;
///
/// #[async_trait]
/// impl ChatModel for Shout {
///     fn model_id(&self) -> &str { "shout" }
///     async fn complete(&self, req: CompletionRequest) -> Result<CompletionResponse, LlmError> {
///         let last = req.messages.last().map(|m| m.content.to_uppercase()).unwrap_or_default();
///         Ok(CompletionResponse {
///             served: None,
///             model: "shout".into(),
///             choices: vec![Choice { index: 0, message: Message::assistant(last), finish_reason: None }],
///             usage: Usage::default(),
///         })
///     }
/// }
/// # let out = futures::executor::block_on(Shout.complete(CompletionRequest::new(vec![Message::user("hi")]))).unwrap();
/// # assert_eq!(out.text(), "HI");
/// ```
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A name for logs and traces (the model name, or a backend label).
    fn model_id(&self) -> &str;

    /// What the backend supports natively.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Completes the request.
    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError>;

    /// Streams the completion. The default completes the request and replays it as one delta
    /// per choice followed by the usage.
    async fn stream(&self, request: CompletionRequest) -> Result<ChatStream, LlmError> {
        let response = self.complete(request).await?;
        let mut events = Vec::new();
        for choice in response.choices {
            events.push(Ok(StreamEvent::Delta {
                index: choice.index,
                text: choice.message.content,
            }));
            events.push(Ok(StreamEvent::Finish {
                index: choice.index,
                reason: choice.finish_reason.unwrap_or(FinishReason::Stop),
            }));
        }
        events.push(Ok(StreamEvent::Usage(response.usage)));
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

/// The JSON schema of `T` as a structured-output schema: every subschema inlined (servers that
/// turn schemas into grammars, such as llama.cpp, follow no `$ref`), and no annotations
/// (`$schema`, `title`, `description`, `default`): llama-cpp-python's grammar converter gives up
/// on multi-line descriptions and then constrains nothing.
pub fn output_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft07()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = serde_json::Value::from(schema);
    if let Some(map) = value.as_object_mut() {
        map.remove("definitions");
    }
    strip_annotations(&mut value);
    value
}

/// A copy of `schema` without annotation keywords (`$schema`, `title`, `description`,
/// `default`, `examples`), in it or its subschemas: the form to send where a server turns
/// schemas into grammars (tool parameters under a named `tool_choice`, structured output).
pub fn without_annotations(schema: &serde_json::Value) -> serde_json::Value {
    let mut out = schema.clone();
    strip_annotations(&mut out);
    out
}

/// Removes annotation keywords from a schema and its subschemas (not from the names in a
/// `properties` map, where `description` may be a property).
fn strip_annotations(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(map) => {
            for key in ["$schema", "title", "description", "default", "examples"] {
                map.remove(key);
            }
            for (key, sub) in map.iter_mut() {
                match (key.as_str(), sub) {
                    ("properties" | "patternProperties", serde_json::Value::Object(props)) => {
                        props.values_mut().for_each(strip_annotations);
                    }
                    (_, sub) => strip_annotations(sub),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_annotations),
        _ => {}
    }
}

/// A rough token count for text when a server reports none: about one token per four bytes,
/// and at least one per word or punctuation run.
pub fn estimate_tokens(text: &str) -> u32 {
    let by_bytes = text.len().div_ceil(4);
    let mut words = 0usize;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if !in_word {
                words += 1;
                in_word = true;
            }
        } else {
            in_word = false;
            if !c.is_whitespace() {
                words += 1;
            }
        }
    }
    u32::try_from(by_bytes.max(words)).unwrap_or(u32::MAX)
}

fn _object_safe(_: &dyn ChatModel) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_is_monotone_and_nonzero() {
        assert_eq!(estimate_tokens(""), 0);
        assert!(estimate_tokens("hello") >= 1);
        assert!(estimate_tokens("a b c d e f") >= 6);
        assert!(estimate_tokens(&"word ".repeat(100)) >= 100);
    }

    #[test]
    fn output_schemas_inline_their_parts() {
        /// A part,
        /// described on two lines.
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Part {
            /// Its name.
            name: String,
            /// A property called `description` stays.
            description: String,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Whole {
            parts: Vec<Part>,
        }
        let schema = output_schema::<Whole>();
        let text = schema.to_string();
        assert!(
            !text.contains("$ref") && !text.contains("$schema"),
            "{text}"
        );
        assert_eq!(
            schema["properties"]["parts"]["items"]["properties"]["name"]["type"],
            "string"
        );
    }

    #[test]
    fn request_serde_round_trip() {
        let req = CompletionRequest::new(vec![Message::system("s"), Message::user("u")])
            .with_n(3)
            .with_seed(7)
            .json();
        let text = serde_json::to_string(&req).unwrap();
        let back: CompletionRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(req, back);
    }
}
