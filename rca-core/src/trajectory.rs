//! What an agent run produces: observations, steps, the trajectory and the diagnosis report.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::incident::Evidence;
use crate::llm::Usage;

/// What the agent saw after an action. Long observations carry only their head here; the full
/// text sits in a snapshot store under `snapshot_key`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The text placed in the prompt.
    pub text: String,
    /// The key of the full text, when it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_key: Option<String>,
    /// Length of the full text in characters.
    pub full_chars: usize,
}

impl Observation {
    /// An observation shown in full.
    pub fn full(text: impl Into<String>) -> Self {
        let text = text.into();
        let full_chars = text.chars().count();
        Observation {
            text,
            snapshot_key: None,
            full_chars,
        }
    }
}

/// A tool call the agent decided on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The tool.
    pub name: String,
    /// The arguments.
    pub args: serde_json::Value,
}

/// One thought-action-observation cycle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 0-based position in the run.
    pub index: usize,
    /// The agent's reasoning.
    pub thought: String,
    /// The tool call, if the turn produced a valid one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// What came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    /// What went wrong in this step (an invalid action, a rule that fired, a tool error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many times the model output was repaired locally.
    #[serde(default)]
    pub repairs: u32,
    /// How many regeneration rounds the model was asked for.
    #[serde(default)]
    pub regenerations: u32,
    /// Tokens spent in this step.
    #[serde(default)]
    pub usage: Usage,
    /// Wall time of the step in milliseconds.
    #[serde(default)]
    pub elapsed_ms: u64,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent finalized a report.
    Finalized,
    /// The step budget ran out.
    StepBudgetExhausted,
    /// The token budget ran out.
    TokenBudgetExhausted,
    /// The wall-time budget ran out.
    TimedOut,
    /// The host cancelled the run.
    Cancelled,
    /// The model failed beyond recovery; the message says how.
    Failed(String),
    /// A self-consistency sample stopped before it spent a tool call, because it would not
    /// finalize where the greedy run did (step-wise filtering); the message says what it
    /// would have called.
    Discarded(String),
}

/// The record of a whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Every step, in order.
    pub steps: Vec<Step>,
    /// How the run ended.
    pub outcome: Outcome,
    /// Tokens spent in all.
    pub usage: Usage,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

impl Trajectory {
    /// An empty trajectory that has not ended yet (its outcome is a failure until set).
    pub fn new() -> Self {
        Trajectory {
            steps: Vec::new(),
            outcome: Outcome::Failed("not finished".into()),
            usage: Usage::default(),
            elapsed_ms: 0,
        }
    }

    /// Total repairs over all steps.
    pub fn repairs(&self) -> u32 {
        self.steps.iter().map(|s| s.repairs).sum()
    }

    /// Total regeneration rounds over all steps.
    pub fn regenerations(&self) -> u32 {
        self.steps.iter().map(|s| s.regenerations).sum()
    }
}

impl Default for Trajectory {
    fn default() -> Self {
        Self::new()
    }
}

/// Who must act on a diagnosis. Hosts may use their own labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(from = "String", into = "String")]
pub enum Responsibility {
    /// The platform team (the service operator).
    Platform,
    /// The user or tenant (their job, code or configuration).
    User,
    /// The infrastructure below the platform (hosts, network, cloud provider).
    Infrastructure,
    /// A host-defined label.
    Other(String),
}

impl From<String> for Responsibility {
    fn from(s: String) -> Self {
        match s.trim().to_ascii_lowercase().as_str() {
            "platform" => Responsibility::Platform,
            "user" => Responsibility::User,
            "infrastructure" | "infra" => Responsibility::Infrastructure,
            _ => Responsibility::Other(s),
        }
    }
}

impl From<Responsibility> for String {
    fn from(r: Responsibility) -> Self {
        r.to_string()
    }
}

impl fmt::Display for Responsibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Responsibility::Platform => f.write_str("platform"),
            Responsibility::User => f.write_str("user"),
            Responsibility::Infrastructure => f.write_str("infrastructure"),
            Responsibility::Other(s) => f.write_str(s),
        }
    }
}

/// A ranked root-cause candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RootCauseCandidate {
    /// The component blamed.
    pub component: String,
    /// The kind of fault, when known (a label of the fault-type vocabulary in use, e.g.
    /// `cpu_saturation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_type: Option<String>,
    /// When the fault is thought to have started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<crate::time::Timestamp>,
    /// Ranking score (higher is more likely).
    pub score: f64,
}

/// The result of a diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiagnosisReport {
    /// What went wrong, in a sentence or two.
    pub root_cause: String,
    /// What to do about it.
    pub solution: String,
    /// The evidence chain that supports the root cause.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// Who must act.
    pub responsibility: Responsibility,
    /// Confidence in `[0, 1]`.
    pub confidence: f64,
    /// Ranked candidates, most likely first (may be empty for free-text diagnoses).
    #[serde(default)]
    pub candidates: Vec<RootCauseCandidate>,
    /// Tokens spent producing it.
    #[serde(default)]
    #[schemars(skip)]
    pub usage: Usage,
    /// Wall time in milliseconds.
    #[serde(default)]
    pub elapsed_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responsibility_round_trips_labels() {
        for label in ["platform", "user", "infrastructure", "storage-team"] {
            let r = Responsibility::from(label.to_string());
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{label}\""));
            assert_eq!(serde_json::from_str::<Responsibility>(&json).unwrap(), r);
        }
    }

    #[test]
    fn trajectory_serialises() {
        let mut t = Trajectory::new();
        t.steps.push(Step {
            thought: "look at logs".into(),
            repairs: 2,
            ..Default::default()
        });
        t.outcome = Outcome::Finalized;
        let json = serde_json::to_string(&t).unwrap();
        let back: Trajectory = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.repairs(), 2);
    }
}
