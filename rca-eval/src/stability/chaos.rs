//! The chaos wrapper: corrupts each model turn with probability `p`, the corruption split
//! evenly over four kinds (broken JSON, an unknown tool, a repeated call, a premature
//! finalize).
//!
//! Regeneration requests are answered by a copyist: it restates the broken text it was shown,
//! and nothing else. It never sees the turn the policy meant, so what a corruption destroyed
//! stays destroyed (a turn cut inside its `action` key is lost whatever the controller does).
//! This demonstrates the mechanism of each stabiliser; it cannot show what regeneration by a
//! real model recovers (`rca bench stability --model-url` measures that).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{ChatModel, CompletionRequest, CompletionResponse, Role};
use serde_json::json;

use super::policy::respond;
use rca_core::seeded::SeededRng;

/// The kinds of corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    /// Output that local repair can fix (a fence and prose, single quotes, trailing commas,
    /// bare keys).
    RepairableJson,
    /// Output cut inside a key: only regeneration recovers it.
    TruncatedJson,
    /// A tool that does not exist.
    UnknownTool,
    /// The previous successful call again.
    RepeatedCall,
    /// `finalize` before the investigation is complete.
    PrematureFinalize,
}

/// Tool names that no simulated incident has.
const UNKNOWN_TOOLS: [&str; 4] = ["search_logs", "get_traces", "restart_service", "query_db"];

#[derive(Debug)]
struct State {
    seed: u64,
    turns: u64,
    applied: Vec<Corruption>,
}

impl State {
    /// The generator of call `index` of `stream` (0: turns). Each turn has its own generator,
    /// so turn `k` of an episode gets the same corruption in every configuration, however many
    /// regeneration calls came before it.
    fn rng(&self, stream: u64, index: u64) -> SeededRng {
        let mut r =
            SeededRng::new(self.seed ^ (stream << 60) ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next_u64();
        r
    }
}

/// Wraps a model (the investigation policy) and corrupts its turns.
pub struct ChaosModel {
    inner: Arc<dyn ChatModel>,
    p: f64,
    state: Mutex<State>,
}

impl ChaosModel {
    /// Corrupts `inner`'s turns with probability `p`, drawing from `seed`.
    pub fn new(inner: Arc<dyn ChatModel>, p: f64, seed: u64) -> Self {
        ChaosModel {
            inner,
            p,
            state: Mutex::new(State {
                seed,
                turns: 0,
                applied: Vec::new(),
            }),
        }
    }

    /// The corruptions applied so far, in order.
    pub fn applied(&self) -> Vec<Corruption> {
        self.state
            .lock()
            .map(|s| s.applied.clone())
            .unwrap_or_default()
    }

    fn corrupt_turn(&self, request: &CompletionRequest, turn: serde_json::Value) -> String {
        let Ok(mut st) = self.state.lock() else {
            return turn.to_string();
        };
        let mut rng = st.rng(0, st.turns);
        st.turns += 1;
        if !rng.chance(self.p) {
            return turn.to_string();
        }
        let kind = rng.below(4);
        let text = turn.to_string();
        let (out, applied) = match kind {
            0 => {
                if rng.chance(0.5) {
                    (repairable(&text, rng.below(4)), Corruption::RepairableJson)
                } else {
                    (truncate_in_key(&text), Corruption::TruncatedJson)
                }
            }
            1 => {
                let mut t = turn.clone();
                t["action"]["name"] = json!(UNKNOWN_TOOLS[rng.below(UNKNOWN_TOOLS.len())]);
                (t.to_string(), Corruption::UnknownTool)
            }
            2 => match previous_call(request) {
                Some(prev) => {
                    let t = json!({"thought": "Check again.", "action": prev});
                    (t.to_string(), Corruption::RepeatedCall)
                }
                None => return text,
            },
            _ => {
                if turn["action"]["name"] == "finalize" {
                    return text;
                }
                let suspect = turn["action"]["args"]["component"]
                    .as_str()
                    .unwrap_or("the entry component")
                    .to_string();
                let t = json!({"thought": "This is probably enough.", "action": {
                    "name": "finalize", "args": {
                        "root_cause": format!("{suspect} is misbehaving"),
                        "solution": format!("restart {suspect}"),
                        "responsibility": "platform", "confidence": 0.6}}});
                (t.to_string(), Corruption::PrematureFinalize)
            }
        };
        st.applied.push(applied);
        out
    }

    /// The copyist's answer to a regeneration request: the broken text it was shown (in the
    /// first round's request, after the instruction; later, its own restatement).
    fn regen_answer(request: &CompletionRequest) -> String {
        let shown = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| m.content.clone());
        shown.unwrap_or_else(|| {
            request
                .messages
                .iter()
                .find(|m| m.role == Role::User)
                .and_then(|m| m.content.split_once("\n\n").map(|(_, b)| b.to_string()))
                .unwrap_or_default()
        })
    }
}

/// The last action whose observation was not an error.
fn previous_call(request: &CompletionRequest) -> Option<serde_json::Value> {
    request.messages.windows(2).rev().find_map(|pair| {
        if pair[0].role != Role::Assistant || pair[1].content.starts_with("Observation: Error") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&pair[0].content).ok()?;
        let action = v.get("action")?.clone();
        (action["name"] != "finalize").then_some(action)
    })
}

/// Damage that local repair undoes: prose and a fence, single quotes, trailing commas, bare
/// keys.
fn repairable(text: &str, how: usize) -> String {
    match how {
        0 => format!("Here is my next step:\n```json\n{text}\n```\nI will wait for the result."),
        1 => text.replace('"', "'"),
        2 => match text.strip_suffix("}}") {
            Some(body) => format!("{body},}},}}"),
            None => format!("{text},"),
        },
        _ => text
            .replacen("\"thought\":", "thought:", 1)
            .replacen("\"action\":", "action:", 1),
    }
}

/// The text cut inside its second key: no repair can close it without inventing content.
fn truncate_in_key(text: &str) -> String {
    let cut = text
        .match_indices("\"action\"")
        .next()
        .map(|(i, _)| i + 4)
        .unwrap_or(text.len() / 2);
    text.get(..cut).unwrap_or(text).to_string()
}

#[async_trait]
impl ChatModel for ChaosModel {
    fn model_id(&self) -> &str {
        "chaos-wrapped-policy"
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let is_regen = request
            .messages
            .first()
            .is_some_and(|m| m.content.starts_with(rca_llm::json::REGEN_SYSTEM));
        if is_regen {
            let text = Self::regen_answer(&request);
            return Ok(respond(self.model_id(), &request, text));
        }
        let inner = self.inner.complete(request.clone()).await?;
        let turn: serde_json::Value = serde_json::from_str(inner.text()).map_err(|e| {
            LlmError::permanent(format!("the wrapped policy emitted bad JSON: {e}"))
        })?;
        let text = self.corrupt_turn(&request, turn);
        Ok(respond(self.model_id(), &request, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_llm::json::{JsonRegen, repair};

    #[test]
    fn repairable_damage_is_repairable_and_truncation_is_not() {
        let turn = json!({"thought": "look", "action": {"name": "get_logs", "args": {"component": "svc-abc"}}});
        let text = turn.to_string();
        for how in 0..4 {
            let broken = repairable(&text, how);
            assert!(
                serde_json::from_str::<serde_json::Value>(&broken).is_err(),
                "{broken}"
            );
            assert_eq!(repair(&broken).unwrap().value, turn, "{broken}");
        }
        let cut = truncate_in_key(&text);
        assert!(cut.ends_with("\"act"));
        assert!(repair(&cut).is_err());
    }

    #[tokio::test]
    async fn regeneration_is_answered_from_the_broken_text_alone() {
        let broken = "{\"thought\": \"look\", \"act";
        let regen = JsonRegen::default();
        let model = ChaosModel::new(Arc::new(super::super::policy::InvestigationPolicy), 0.0, 1);
        let err = regen.recover(&model, broken, None).await.unwrap_err();
        assert!(
            matches!(err, rca_llm::json::JsonError::RegenExhausted { .. }),
            "{err}"
        );
    }
}
