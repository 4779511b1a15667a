//! The deterministic diagnosis agent: hypotheses from state, ranked (STRATUS section 4).
//!
//! It reads the cluster's objects, health, call graph and change history once, the logs of
//! the deployments closest to the symptoms, and derives candidate causes from the relations
//! of the manifest model ([`super::hypotheses`]). The best one not already tried in this run
//! is the diagnosis; the rest travel with it, so the mitigation agent can try them one
//! transaction at a time. No branch depends on the wording of a log line.

use async_trait::async_trait;

use super::Feedback;
use super::diagnosis::{Diagnoser, Diagnosis, FaultKind};
use super::hypotheses::{hypotheses, worth_reading};
use super::observed::Observed;
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;
use crate::stratus::transaction::DEFAULT_MAX_COMMANDS;

/// Deterministic diagnosis from the cluster's state, its history and the call graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyDiagnoser;

#[async_trait]
impl Diagnoser for PolicyDiagnoser {
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError> {
        let mut o = Observed::read(env).await?;
        let deps = worth_reading(&o);
        o.read_logs(env, &deps).await;
        let spent = Feedback::spent(feedback);
        let ranked: Vec<_> = hypotheses(&o, DEFAULT_MAX_COMMANDS)
            .into_iter()
            .filter(|h| !spent.contains(&h.fix.as_slice()))
            .collect();
        Ok(match ranked.first() {
            Some(top) => Diagnosis {
                component: top.component.clone(),
                fault: top.fault,
                reason: top.evidence.clone(),
                hypotheses: ranked,
            },
            None => Diagnosis::new(
                "",
                FaultKind::Unknown,
                "no relation is broken and no change is left to undo",
            ),
        })
    }
}
