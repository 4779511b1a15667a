//! The scripted investigation policy: a deterministic [`ChatModel`] that reads the
//! conversation and emits the turn a careful investigator would. It is a policy written for
//! the benchmark, not a model and not a recording of one.
//!
//! It follows alerts to the entry component, walks slow calls down to the component whose own
//! errors have healthy dependencies, reads its logs, hands them to the log expert through the
//! snapshot key, and finalizes with the fault the expert names. It ignores error observations
//! and simply re-derives its next action, so a corrupted turn costs one step.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{
    ChatModel, Choice, CompletionRequest, CompletionResponse, FinishReason, Message, Role, Usage,
    estimate_tokens,
};
use serde_json::json;

/// What the policy has learned from the conversation.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Findings {
    /// The alerting component.
    pub entry: Option<String>,
    /// Per component: its calls and their p99 latency (ms).
    pub calls: BTreeMap<String, Vec<(String, u64)>>,
    /// Per component: the snapshot key (or full text) of its logs.
    pub logs: BTreeMap<String, String>,
    /// The expert's verdict: component and fault label.
    pub fault: Option<(String, String)>,
}

/// A call slower than this is followed.
const SLOW_MS: u64 = 1000;

impl Findings {
    /// Reads the findings from a conversation of the controller.
    pub fn read(messages: &[Message]) -> Self {
        let mut f = Findings::default();
        for pair in messages.windows(2) {
            let (Role::Assistant, Role::User) = (pair[0].role, pair[1].role) else {
                continue;
            };
            let Ok(turn) = serde_json::from_str::<serde_json::Value>(&pair[0].content) else {
                continue;
            };
            let obs = pair[1]
                .content
                .strip_prefix("Observation: ")
                .unwrap_or(&pair[1].content);
            if obs.starts_with("Error") {
                continue;
            }
            let name = turn["action"]["name"].as_str().unwrap_or("");
            let component = turn["action"]["args"]["component"]
                .as_str()
                .unwrap_or("")
                .to_string();
            match name {
                "list_alerts" => {
                    f.entry = obs
                        .lines()
                        .find_map(|l| l.strip_prefix("ALERT "))
                        .and_then(|l| l.split(':').next())
                        .map(str::to_string);
                }
                "get_metrics" => {
                    let calls = obs
                        .lines()
                        .filter_map(|l| {
                            let rest = l.strip_prefix("calls to ")?;
                            let (callee, stats) = rest.split_once(':')?;
                            let p99 = stats
                                .split_whitespace()
                                .skip_while(|w| *w != "p99")
                                .nth(1)?
                                .parse()
                                .ok()?;
                            Some((callee.to_string(), p99))
                        })
                        .collect();
                    f.calls.insert(component, calls);
                }
                "get_logs" => {
                    let key = obs
                        .split("Snapshot key: ")
                        .nth(1)
                        .and_then(|r| r.get(..20))
                        .map(str::to_string)
                        .unwrap_or_else(|| obs.to_string());
                    f.logs.insert(component, key);
                }
                "analyze_logs" => {
                    let comp = obs
                        .strip_prefix("log analysis of ")
                        .and_then(|r| r.split(':').next());
                    let fault = obs.split("fault: ").nth(1).map(str::trim);
                    if let (Some(c), Some(fault)) = (comp, fault) {
                        f.fault = Some((c.to_string(), fault.to_string()));
                    }
                }
                _ => {}
            }
        }
        f
    }

    /// The component under suspicion: the end of the chain of slow calls from the entry.
    pub fn suspect(&self) -> Option<String> {
        let mut current = self.entry.clone()?;
        for _ in 0..64 {
            let Some(calls) = self.calls.get(&current) else {
                return Some(current);
            };
            match calls
                .iter()
                .filter(|(_, p)| *p > SLOW_MS)
                .max_by_key(|(_, p)| *p)
            {
                Some((next, _)) => current = next.clone(),
                None => return Some(current),
            }
        }
        Some(current)
    }

    /// Whether the suspect's own metrics were read and show no slow call.
    fn suspect_confirmed(&self, suspect: &str) -> bool {
        self.calls
            .get(suspect)
            .is_some_and(|c| c.iter().all(|(_, p)| *p <= SLOW_MS))
    }
}

/// The next turn for these findings.
pub fn next_turn(f: &Findings) -> serde_json::Value {
    let call = |thought: &str, name: &str, args: serde_json::Value| json!({"thought": thought, "action": {"name": name, "args": args}});
    let Some(suspect) = f.suspect() else {
        return call("Start from the alerts.", "list_alerts", json!({}));
    };
    if !f.suspect_confirmed(&suspect) {
        return call(
            &format!("Check the metrics of {suspect} and of its calls."),
            "get_metrics",
            json!({"component": suspect}),
        );
    }
    let Some(logs) = f.logs.get(&suspect) else {
        return call(
            &format!("{suspect} fails with healthy dependencies; read its logs."),
            "get_logs",
            json!({"component": suspect}),
        );
    };
    let Some((component, fault)) = &f.fault else {
        return call(
            "Let the log expert analyse the full logs.",
            "analyze_logs",
            json!({"text": logs}),
        );
    };
    call(
        "The evidence is complete.",
        "finalize",
        json!({
            "root_cause": format!("{component}: {fault}"),
            "solution": format!("Remedy the {} on {component} and restart it.", fault.replace('_', " ")),
            "responsibility": "platform",
            "confidence": 0.9,
            "evidence": [format!("{component} errors with healthy dependencies"),
                         format!("log expert: {fault}")],
            "components": [component],
        }),
    )
}

/// The scripted investigation policy as a [`ChatModel`].
#[derive(Debug, Clone, Default)]
pub struct InvestigationPolicy;

/// Wraps text as a one-choice response with estimated usage.
pub fn respond(model: &str, request: &CompletionRequest, text: String) -> CompletionResponse {
    CompletionResponse {
        served: None,
        model: model.to_string(),
        usage: Usage {
            prompt_tokens: u64::from(request.estimated_prompt_tokens()),
            completion_tokens: u64::from(estimate_tokens(&text)),
            estimated: true,
        },
        choices: vec![Choice {
            index: 0,
            message: Message::assistant(text),
            finish_reason: Some(FinishReason::Stop),
        }],
    }
}

#[async_trait]
impl ChatModel for InvestigationPolicy {
    fn model_id(&self) -> &str {
        "policy-scripted-investigation"
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        if request
            .messages
            .first()
            .is_some_and(|m| m.content.starts_with(rca_llm::json::REGEN_SYSTEM))
        {
            return Err(LlmError::permanent(
                "the investigation policy emits valid JSON and is never asked to regenerate",
            ));
        }
        let turn = next_turn(&Findings::read(&request.messages));
        Ok(respond(self.model_id(), &request, turn.to_string()))
    }
}
