//! Asking the model for a turn: JSON in text (RCAgent's form), native tool calling, or, where a
//! server honours only a named tool choice, a schema-constrained pick of the tool followed by
//! its arguments under that tool's grammar. Also the host's view of a run as it happens.

use futures::StreamExt;
use rca_core::llm::{
    Capabilities, CompletionRequest, Message, ResponseFormat, StreamEvent, ToolCall, ToolChoice,
    without_annotations,
};
use rca_core::tool::ToolSpec;
use rca_core::trajectory::Step;
use rca_core::{LlmError, Usage};
use serde::{Deserialize, Serialize};

/// How the controller asks the model for its action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionMode {
    /// Native tool calling where the model has it ([`Capabilities::tool_calls`]), JSON in
    /// text otherwise.
    #[default]
    Auto,
    /// `{"thought": ..., "action": {...}}` as text, repaired and regenerated when broken.
    JsonText,
    /// Tools sent as `tools`, the model's `tool_calls` read back, results as tool messages.
    /// On a model that honours only a named tool choice ([`Capabilities::named_tool_choice`]),
    /// each turn is two calls: the thought and a tool name under a schema, then that tool's
    /// arguments under its own grammar.
    NativeTools,
}

/// The form a run's turns take, once [`ActionMode`] meets the model's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnForm {
    Text,
    ToolCalls,
    PickThenFill,
}

impl TurnForm {
    pub(crate) fn resolve(mode: ActionMode, caps: &Capabilities) -> Self {
        match mode {
            ActionMode::JsonText => TurnForm::Text,
            ActionMode::Auto if caps.tool_calls => TurnForm::ToolCalls,
            ActionMode::Auto => TurnForm::Text,
            ActionMode::NativeTools if caps.tool_calls => TurnForm::ToolCalls,
            ActionMode::NativeTools if caps.named_tool_choice => TurnForm::PickThenFill,
            ActionMode::NativeTools => TurnForm::Text,
        }
    }

    /// Whether the model's actions arrive as tool calls.
    pub(crate) fn is_native(self) -> bool {
        self != TurnForm::Text
    }
}

/// What a host sees of a run while it goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReactEvent {
    /// More text of the model's turn at `step` (only when the model streams).
    Token {
        /// The step being written.
        step: usize,
        /// The new text.
        text: String,
    },
    /// A step ended: its thought, action, observation, error and tokens.
    Step(Step),
}

/// Receives a run's events as they happen. Called on the run's task: keep it quick (hand the
/// event to a channel, print it).
pub trait RunObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: &ReactEvent);

    /// Whether it wants the model's text as it streams ([`ReactEvent::Token`]). The controller
    /// then reads a streaming model through its stream; some servers report no token usage
    /// on streams (llama-cpp-python), so their counts become estimates. Default: yes.
    fn wants_tokens(&self) -> bool {
        true
    }
}

impl<F: Fn(&ReactEvent) + Send + Sync> RunObserver for F {
    fn on_event(&self, event: &ReactEvent) {
        self(event)
    }
}

impl RunObserver for tokio::sync::mpsc::UnboundedSender<ReactEvent> {
    fn on_event(&self, event: &ReactEvent) {
        // A host that stopped listening does not stop the run.
        let _ = self.send(event.clone());
    }
}

/// A model turn as it came back.
#[derive(Debug, Clone, Default)]
pub(crate) struct ModelTurn {
    /// The text (the whole turn in text form; the thought in the native forms).
    pub text: String,
    /// The tool call, in the native forms.
    pub call: Option<ToolCall>,
    /// Tokens of every call the turn took.
    pub usage: Usage,
}

/// The specs as sent in `tools`: no annotations, so grammar-building servers can use them.
pub(crate) fn wire_specs(specs: &[ToolSpec]) -> Vec<ToolSpec> {
    specs
        .iter()
        .map(|s| ToolSpec {
            parameters: without_annotations(&s.parameters),
            ..s.clone()
        })
        .collect()
}

/// The schema of a pick: a thought and one of the tool names.
pub(crate) fn pick_schema(names: &[String]) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "tool": {"type": "string", "enum": names},
        },
        "required": ["thought", "tool"],
    })
}

/// Collects a streamed completion of choice 0, telling `on_text` of each piece.
pub(crate) async fn collect_stream(
    model: &dyn rca_core::llm::ChatModel,
    request: CompletionRequest,
    mut on_text: impl FnMut(&str),
) -> Result<(String, Usage), LlmError> {
    let mut stream = model.stream(request).await?;
    let mut text = String::new();
    let mut usage = Usage::default();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Delta { index: 0, text: t } => {
                on_text(&t);
                text.push_str(&t);
            }
            StreamEvent::Usage(u) => usage = u,
            _ => {}
        }
    }
    Ok((text, usage))
}

/// The request of a pick (thought and tool name), where the model has structured output.
pub(crate) fn pick_request(
    mut request: CompletionRequest,
    names: &[String],
    caps: &Capabilities,
) -> CompletionRequest {
    request.response_format = if caps.json_schema {
        ResponseFormat::JsonSchema {
            name: "pick".into(),
            schema: pick_schema(names),
        }
    } else {
        ResponseFormat::JsonObject
    };
    request
}

/// The request that fills `spec`'s arguments after the pick `pick_text`.
pub(crate) fn fill_request(
    mut request: CompletionRequest,
    pick_text: &str,
    spec: &ToolSpec,
) -> CompletionRequest {
    request.messages.push(Message::assistant(pick_text));
    request.tools = wire_specs(std::slice::from_ref(spec));
    request.tool_choice = ToolChoice::Function(spec.name.clone());
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_follows_mode_and_capabilities() {
        let none = Capabilities::default();
        let named = Capabilities {
            named_tool_choice: true,
            ..none
        };
        let full = Capabilities {
            tool_calls: true,
            ..named
        };
        assert_eq!(TurnForm::resolve(ActionMode::Auto, &none), TurnForm::Text);
        assert_eq!(TurnForm::resolve(ActionMode::Auto, &named), TurnForm::Text);
        assert_eq!(
            TurnForm::resolve(ActionMode::Auto, &full),
            TurnForm::ToolCalls
        );
        assert_eq!(
            TurnForm::resolve(ActionMode::NativeTools, &named),
            TurnForm::PickThenFill
        );
        assert_eq!(
            TurnForm::resolve(ActionMode::NativeTools, &none),
            TurnForm::Text
        );
        assert_eq!(
            TurnForm::resolve(ActionMode::JsonText, &full),
            TurnForm::Text
        );
    }

    #[test]
    fn specs_on_the_wire_lose_their_annotations() {
        let spec = ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: serde_json::json!({"title": "A", "type": "object",
                "properties": {"description": {"type": "string", "description": "x"}}}),
        };
        let wire = wire_specs(&[spec]);
        assert_eq!(
            wire[0].parameters,
            serde_json::json!({"type": "object",
                "properties": {"description": {"type": "string"}}})
        );
        let schema = pick_schema(&["a".into(), "b".into()]);
        assert_eq!(schema["properties"]["tool"]["enum"][1], "b");
    }
}
