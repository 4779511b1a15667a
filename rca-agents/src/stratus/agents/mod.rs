//! The STRATUS agents. Detection and diagnosis get a [`ReadAccess`] (they cannot write);
//! mitigation plans transactions that only [`crate::stratus::transaction::Tnr`] runs; undo
//! is [`crate::stratus::transaction::UndoAgent`]. Each planning role is a deterministic
//! policy or a [`rca_core::ChatModel`] whose JSON answers are parsed.

pub mod baseline;
pub mod detection;
pub mod diagnosis;
pub mod diagnosis_policy;
pub mod hypotheses;
pub mod mitigation;
pub mod observed;

use std::sync::Arc;

use rca_core::llm::{ChatModel, CompletionRequest, Message};
use serde::{Deserialize, Serialize};

pub use baseline::NewestChangeBaseline;
pub use detection::{Detection, Detector, ModelDetector, PolicyDetector};
pub use diagnosis::{Diagnoser, Diagnosis, FaultKind, ModelDiagnoser};
pub use diagnosis_policy::PolicyDiagnoser;
pub use hypotheses::{Family, Hypothesis};
pub use mitigation::{Mitigator, ModelMitigator, Plan, PlanContext, PolicyMitigator};

use super::environment::ReadAccess;
use super::error::StratusError;
use super::oracle::OracleVerdict;

fn _object_safe(_: &dyn Detector, _: &dyn Diagnoser, _: &dyn Mitigator, _: &dyn ReadAccess) {}

/// What the next attempt is told about an earlier one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// The attempt number (1-based).
    pub attempt: usize,
    /// The commands that were tried.
    pub commands: Vec<String>,
    /// How the transaction ended (`committed`, `aborted: ...`, `rejected: ...`).
    pub outcome: String,
    /// The oracles' verdict on the visible state afterwards.
    pub oracle: Option<OracleVerdictView>,
}

impl Feedback {
    /// Whether the attempt's transaction committed.
    pub fn committed(&self) -> bool {
        self.outcome == "committed"
    }

    /// The fixes spent: every fix that committed (its commands are in effect; running them
    /// again changes nothing), and every fix tried since the last commit. A fix that was
    /// undone or refused is not tried again on the state it failed on; once a later
    /// transaction commits, that state is gone (a fault that masked another, or that the
    /// fix revealed, may be mended since), and it may be tried once more.
    pub fn spent(feedback: &[Feedback]) -> Vec<&[String]> {
        let since = feedback
            .iter()
            .rposition(Feedback::committed)
            .map_or(0, |i| i + 1);
        feedback
            .iter()
            .enumerate()
            .filter(|(i, f)| *i >= since || f.committed())
            .map(|(_, f)| f.commands.as_slice())
            .collect()
    }
}

/// A serialisable copy of an [`OracleVerdict`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleVerdictView {
    /// No alert fires.
    pub alerts_cleared: bool,
    /// Requests succeed.
    pub requests_succeed: bool,
    /// Components are healthy.
    pub components_healthy: bool,
    /// What is still wrong.
    pub remaining: Vec<String>,
}

impl From<&OracleVerdict> for OracleVerdictView {
    fn from(v: &OracleVerdict) -> Self {
        OracleVerdictView {
            alerts_cleared: v.alerts_cleared,
            requests_succeed: v.requests_succeed,
            components_healthy: v.components_healthy,
            remaining: v.remaining.clone(),
        }
    }
}

/// The JSON object in a model's answer, read by the workspace's one JSON reader
/// ([`rca_llm::json::repair`]: fences, prose around the object, trailing commas, truncation).
pub fn extract_json<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, StratusError> {
    let malformed = |message: String| StratusError::MalformedModelOutput {
        message,
        raw: raw.to_string(),
    };
    let value = rca_llm::json::repair(raw)
        .map_err(|e| malformed(e.to_string()))?
        .value;
    serde_json::from_value(value).map_err(|e| malformed(e.to_string()))
}

/// The token limit of one answer of a model-backed STRATUS agent.
pub const AGENT_MAX_TOKENS: u32 = 256;

/// Asks a model once, in JSON mode, and returns its text.
pub(crate) async fn ask(
    model: &Arc<dyn ChatModel>,
    messages: Vec<Message>,
) -> Result<String, StratusError> {
    let out = model
        .complete(
            CompletionRequest::new(messages)
                .json()
                .with_temperature(0.0)
                .with_max_tokens(AGENT_MAX_TOKENS),
        )
        .await?;
    Ok(out.text().to_string())
}

/// A compact text summary of the current health, for prompts.
pub(crate) async fn health_brief(env: &dyn ReadAccess) -> Result<String, StratusError> {
    let h = env.observe().await?;
    serde_json::to_string_pretty(&serde_json::json!({
        "alerts": h.alerts,
        "sla_violations": h.sla_violations,
        "capacity_loss": h.capacity_loss,
        "failed_probes": h.failed_probes,
    }))
    .map_err(|e| StratusError::MalformedModelOutput {
        message: e.to_string(),
        raw: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_json_from_chatty_answers() {
        #[derive(Deserialize)]
        struct X {
            a: u32,
        }
        let x: X = extract_json("sure! ```json\n{\"a\": 3}\n```").unwrap();
        assert_eq!(x.a, 3);
        assert!(extract_json::<X>("no json here").is_err());
        assert!(extract_json::<X>("{\"b\": 1}").is_err());
    }
}
