//! A scripted model: canned turns written for a test, served in order.
//!
//! Nothing here is a recording of a real model. Each turn is text the test author wrote; an
//! optional check looks at each request before the turn is served, and running out of turns is
//! an error, never a silent repeat.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, Choice, CompletionRequest, CompletionResponse, FinishReason, Message,
    ToolCall, Usage, estimate_tokens,
};

/// A check run on a request before a turn answers it; `Err` fails the call with that message.
pub type RequestCheck = Arc<dyn Fn(&CompletionRequest) -> Result<(), String> + Send + Sync>;

/// One canned turn.
#[derive(Clone)]
pub enum ScriptedTurn {
    /// Answer with this text (one choice; for `n > 1` the same text is repeated per choice
    /// unless the turn is [`ScriptedTurn::Samples`]).
    Text(String),
    /// Answer with these texts as the `n` choices.
    Samples(Vec<String>),
    /// Answer with an assistant message calling these tools natively (empty text, finish
    /// reason `tool_calls`), once per requested choice.
    ToolCalls(Vec<ToolCall>),
    /// Fail with this error.
    Error(LlmError),
    /// Run a check on the request, then answer with the inner turn.
    Checked(RequestCheck, Box<ScriptedTurn>),
}

impl std::fmt::Debug for ScriptedTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptedTurn::Text(t) => f.debug_tuple("Text").field(t).finish(),
            ScriptedTurn::Samples(s) => f.debug_tuple("Samples").field(s).finish(),
            ScriptedTurn::ToolCalls(c) => f.debug_tuple("ToolCalls").field(c).finish(),
            ScriptedTurn::Error(e) => f.debug_tuple("Error").field(e).finish(),
            ScriptedTurn::Checked(_, inner) => f.debug_tuple("Checked").field(inner).finish(),
        }
    }
}

/// A [`ChatModel`] that serves canned turns in order and records every request it saw.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    name: String,
    turns: Arc<Mutex<VecDeque<ScriptedTurn>>>,
    seen: Arc<Mutex<Vec<CompletionRequest>>>,
    capabilities: Capabilities,
}

impl ScriptedModel {
    /// A scripted model named `name` (shown as its model id; name it after the test).
    pub fn new(name: impl Into<String>, turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        ScriptedModel {
            name: name.into(),
            turns: Arc::new(Mutex::new(turns.into_iter().collect())),
            seen: Arc::new(Mutex::new(Vec::new())),
            capabilities: Capabilities {
                native_n: true,
                seed: true,
                ..Capabilities::default()
            },
        }
    }

    /// Declares what the scripted model claims to support (by default native `n` and `seed`
    /// only); for example native tool calls, to drive a caller's tool-calling path with
    /// [`ScriptedTurn::ToolCalls`].
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// A scripted model whose turns are plain texts.
    pub fn from_texts<S: Into<String>>(
        name: impl Into<String>,
        texts: impl IntoIterator<Item = S>,
    ) -> Self {
        Self::new(
            name,
            texts.into_iter().map(|t| ScriptedTurn::Text(t.into())),
        )
    }

    /// Appends a turn.
    pub fn push(&self, turn: ScriptedTurn) {
        if let Ok(mut turns) = self.turns.lock() {
            turns.push_back(turn);
        }
    }

    /// How many turns are left.
    pub fn remaining(&self) -> usize {
        self.turns.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Every request served so far, in order.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn respond(
        &self,
        turn: ScriptedTurn,
        request: &CompletionRequest,
    ) -> Result<CompletionResponse, LlmError> {
        match turn {
            ScriptedTurn::Checked(check, inner) => {
                check(request).map_err(|m| {
                    LlmError::permanent(format!(
                        "scripted model `{}`: request check failed: {m}",
                        self.name
                    ))
                })?;
                self.respond(*inner, request)
            }
            ScriptedTurn::Error(e) => Err(e),
            ScriptedTurn::Text(text) => {
                let n = request.n.max(1) as usize;
                Ok(self.response(request, vec![text; n]))
            }
            ScriptedTurn::Samples(texts) => Ok(self.response(request, texts)),
            ScriptedTurn::ToolCalls(calls) => {
                let n = request.n.max(1) as usize;
                let mut response = self.response(request, vec![String::new(); n]);
                for choice in &mut response.choices {
                    choice.message.tool_calls = calls.clone();
                    choice.finish_reason = Some(FinishReason::ToolCalls);
                }
                response.usage.completion_tokens = (calls
                    .iter()
                    .map(|c| u64::from(estimate_tokens(&c.name) + estimate_tokens(&c.arguments)))
                    .sum::<u64>())
                    * n as u64;
                Ok(response)
            }
        }
    }

    fn response(&self, request: &CompletionRequest, texts: Vec<String>) -> CompletionResponse {
        let completion_tokens = texts.iter().map(|t| u64::from(estimate_tokens(t))).sum();
        CompletionResponse {
            served: None,
            model: self.name.clone(),
            choices: texts
                .into_iter()
                .enumerate()
                .map(|(i, t)| Choice {
                    index: i as u32,
                    message: Message::assistant(t),
                    finish_reason: Some(FinishReason::Stop),
                })
                .collect(),
            usage: Usage {
                prompt_tokens: u64::from(request.estimated_prompt_tokens()),
                completion_tokens,
                estimated: true,
            },
        }
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn model_id(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let turn = self
            .turns
            .lock()
            .map_err(|_| LlmError::permanent("scripted model state poisoned"))?
            .pop_front();
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(request.clone());
        }
        let turn = turn.ok_or_else(|| {
            LlmError::permanent(format!(
                "scripted model `{}` has no turns left (request {} was one too many)",
                self.name,
                self.requests().len()
            ))
        })?;
        self.respond(turn, &request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(text: &str) -> CompletionRequest {
        CompletionRequest::new(vec![Message::user(text)])
    }

    #[tokio::test]
    async fn serves_turns_in_order_then_errors() {
        let m = ScriptedModel::from_texts("test-order", ["one", "two"]);
        assert_eq!(m.complete(req("a")).await.unwrap().text(), "one");
        assert_eq!(m.complete(req("b")).await.unwrap().text(), "two");
        let err = m.complete(req("c")).await.unwrap_err();
        assert!(matches!(err, LlmError::Permanent { .. }));
        assert!(err.to_string().contains("no turns left"));
        assert_eq!(m.requests().len(), 3);
    }

    #[tokio::test]
    async fn checks_requests() {
        let check: RequestCheck = Arc::new(|r: &CompletionRequest| {
            if r.messages.iter().any(|m| m.content.contains("logs")) {
                Ok(())
            } else {
                Err("prompt must mention logs".into())
            }
        });
        let m = ScriptedModel::new(
            "test-check",
            [
                ScriptedTurn::Checked(check.clone(), Box::new(ScriptedTurn::Text("ok".into()))),
                ScriptedTurn::Checked(check, Box::new(ScriptedTurn::Text("ok".into()))),
            ],
        );
        assert!(m.complete(req("read the logs")).await.is_ok());
        let err = m.complete(req("read the metrics")).await.unwrap_err();
        assert!(err.to_string().contains("prompt must mention logs"));
    }

    #[tokio::test]
    async fn tool_call_turns_answer_with_native_calls() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "search_logs".into(),
            arguments: r#"{"query":"timeout"}"#.into(),
        };
        let m = ScriptedModel::new(
            "test-tool-calls",
            [ScriptedTurn::ToolCalls(vec![call.clone()])],
        )
        .with_capabilities(Capabilities {
            tool_calls: true,
            ..Capabilities::default()
        });
        assert!(m.capabilities().tool_calls);
        let out = m.complete(req("find timeouts")).await.unwrap();
        assert_eq!(out.choices[0].message.tool_calls, vec![call]);
        assert_eq!(out.choices[0].finish_reason, Some(FinishReason::ToolCalls));
        assert!(out.usage.completion_tokens > 0);
    }

    #[tokio::test]
    async fn samples_fill_choices() {
        let m = ScriptedModel::new(
            "test-samples",
            [ScriptedTurn::Samples(vec![
                "a".into(),
                "b".into(),
                "c".into(),
            ])],
        );
        let out = m.complete(req("x").with_n(3)).await.unwrap();
        let texts: Vec<_> = out
            .choices
            .iter()
            .map(|c| c.message.content.as_str())
            .collect();
        assert_eq!(texts, ["a", "b", "c"]);
        assert!(out.usage.estimated);
    }
}
