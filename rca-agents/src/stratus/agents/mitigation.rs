//! The mitigation agent: plans a transaction (at most K write commands) from a diagnosis and
//! the verdicts of earlier attempts. It only reads; [`crate::stratus::transaction::Tnr`] runs
//! the plan.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};

use super::diagnosis::Diagnosis;
use super::hypotheses::{Hypothesis, hypotheses, worth_reading};
use super::observed::Observed;
use super::{Feedback, ask, extract_json, health_brief};
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;
use crate::stratus::transaction::DEFAULT_MAX_COMMANDS;

/// A planned transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Write commands, in order.
    pub commands: Vec<String>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
}

/// What the mitigation agent plans from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanContext {
    /// The attempt number (1-based).
    pub attempt: usize,
    /// The current diagnosis.
    pub diagnosis: Diagnosis,
    /// Verdicts of earlier attempts (after an abort: the oracle's verdict on the restored
    /// state and the abort reason).
    pub feedback: Vec<Feedback>,
    /// K: the most commands a plan may hold.
    pub max_commands: usize,
}

/// The mitigation role.
#[async_trait]
pub trait Mitigator: Send + Sync {
    /// Plans the next transaction.
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError>;
}

/// Deterministic mitigation: search under TNR. Each attempt runs the fix of the best
/// hypothesis whose fix is not spent ([`Feedback::spent`]): one that committed is spent for
/// the run, one undone or refused until another transaction commits. The hypotheses are the
/// diagnosis's own (from [`super::PolicyDiagnoser`]); a diagnosis that brings none (a
/// model's names a component and a fault) gets the hypotheses the state supports, those
/// about its component and fault first. Once every hypothesis is spent there is no plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyMitigator;

impl PolicyMitigator {
    async fn ranked(
        &self,
        env: &dyn ReadAccess,
        d: &Diagnosis,
    ) -> Result<Vec<Hypothesis>, StratusError> {
        if !d.hypotheses.is_empty() {
            return Ok(d.hypotheses.clone());
        }
        let mut o = Observed::read(env).await?;
        let deps = worth_reading(&o);
        o.read_logs(env, &deps).await;
        let mut all = hypotheses(&o, DEFAULT_MAX_COMMANDS);
        // Stable: within each tier the state's own ranking stays.
        all.sort_by_key(|h| {
            let same = h.component == d.component;
            (!(same && h.fault == d.fault), !same)
        });
        Ok(all)
    }
}

#[async_trait]
impl Mitigator for PolicyMitigator {
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError> {
        let spent = Feedback::spent(&ctx.feedback);
        let ranked = self.ranked(env, &ctx.diagnosis).await?;
        let chosen = ranked
            .iter()
            .find(|h| !spent.contains(&h.fix.as_slice()) && h.fix.len() <= ctx.max_commands);
        Ok(match chosen {
            Some(h) => Plan {
                rationale: format!("{:?} on {}: {}", h.fault, h.component, h.evidence),
                commands: h.fix.clone(),
            },
            None => Plan {
                rationale: "every hypothesis the state supports has been tried".into(),
                commands: Vec::new(),
            },
        })
    }
}

/// Mitigation by a chat model: it sees the diagnosis, the telemetry and every earlier verdict,
/// and answers `{"commands": ["..."], "rationale": "..."}`.
pub struct ModelMitigator {
    model: Arc<dyn ChatModel>,
}

impl ModelMitigator {
    /// A mitigator backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelMitigator { model }
    }
}

#[async_trait]
impl Mitigator for ModelMitigator {
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError> {
        let brief = health_brief(env).await?;
        let raw = ask(
            &self.model,
            vec![
                Message::system(format!(
                    "You are the mitigation agent of an SRE team. Propose one transaction of at most {} \
                     kubectl write commands (scale, set image, set env, set resources, patch, apply -f \
                     '<inline JSON>', rollout undo, delete pod, cordon, uncordon, drain). The transaction \
                     is undone if severity rises. Answer only with JSON: \
                     {{\"commands\": [\"...\"], \"rationale\": \"...\"}}.",
                    ctx.max_commands
                )),
                Message::user(format!(
                    "Attempt {}. Diagnosis: {}\nTelemetry:\n{brief}\nEarlier attempts and the oracles' verdicts:\n{}",
                    ctx.attempt,
                    serde_json::to_string(&ctx.diagnosis).unwrap_or_default(),
                    serde_json::to_string(&ctx.feedback).unwrap_or_default()
                )),
            ],
        )
        .await?;
        extract_json(&raw)
    }
}
