//! The trivial baseline of the scenario benchmarks: undo the newest change. It reads only the
//! change history (no relation, no measurement) and puts back, newest first, each object
//! someone other than the agents changed. What it mitigates is what the history alone
//! explains; the deterministic diagnosis must beat it to show that its relations matter.

use async_trait::async_trait;

use super::Feedback;
use super::diagnosis::{Diagnoser, Diagnosis, FaultKind};
use super::hypotheses::{Family, candidates};
use super::mitigation::{Mitigator, Plan, PlanContext};
use super::observed::Observed;
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;
use crate::stratus::transaction::DEFAULT_MAX_COMMANDS;

/// Diagnosis that blames the newest change made by others, and mitigation that puts it back
/// (the next one once it is spent); with no change left, no plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewestChangeBaseline;

#[async_trait]
impl Mitigator for NewestChangeBaseline {
    async fn plan(&self, _env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError> {
        let spent = Feedback::spent(&ctx.feedback);
        let commands = ctx
            .diagnosis
            .hypotheses
            .iter()
            .find(|h| !spent.contains(&h.fix.as_slice()) && h.fix.len() <= ctx.max_commands)
            .map(|h| h.fix.clone())
            .unwrap_or_default();
        Ok(Plan {
            rationale: "put back the newest change made by others".into(),
            commands,
        })
    }
}

#[async_trait]
impl Diagnoser for NewestChangeBaseline {
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError> {
        let o = Observed::read(env).await?;
        let spent = Feedback::spent(feedback);
        let mut changes: Vec<_> = candidates(&o, DEFAULT_MAX_COMMANDS)
            .into_iter()
            .filter(|h| h.family == Family::Changed && !spent.contains(&h.fix.as_slice()))
            .collect();
        changes.sort_by_key(|h| h.age_s);
        changes.truncate(super::hypotheses::MAX_HYPOTHESES);
        Ok(match changes.first() {
            Some(top) => Diagnosis {
                component: top.component.clone(),
                fault: top.fault,
                reason: top.evidence.clone(),
                hypotheses: changes,
            },
            None => Diagnosis::new("", FaultKind::Unknown, "no change left to put back"),
        })
    }
}
