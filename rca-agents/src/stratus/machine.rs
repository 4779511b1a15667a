//! The STRATUS state machine: detect -> diagnose -> mitigate -> (commit -> verify | abort ->
//! undo) -> diagnose again, until the oracles pass or the attempts run out. After an abort
//! the next attempt is given the oracles' verdict and the abort reason.

use std::sync::Arc;

use serde::Serialize;

use super::agents::{
    Detection, Detector, Diagnoser, Diagnosis, FaultKind, Feedback, Mitigator, OracleVerdictView,
    PlanContext, PolicyDetector, PolicyDiagnoser, PolicyMitigator,
};
use super::environment::{Environment, ReadAccess};
use super::error::StratusError;
use super::oracle::oracle;
use super::transaction::{MuPaths, Outcome, Tnr, TransactionRecord};

/// A state of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The detection agent looks for an incident.
    Detect,
    /// The diagnosis agent localises the fault.
    Diagnose,
    /// The mitigation agent plans and TNR runs a transaction.
    Mitigate,
    /// The undo agent restored the checkpoint after an abort.
    Undo,
    /// The oracles check a committed state.
    Verify,
    /// Mitigated (or nothing to do).
    Done,
    /// Out of attempts.
    GaveUp,
}

/// Everything one run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Phases in the order visited.
    pub phases: Vec<Phase>,
    /// The detection.
    pub detection: Option<Detection>,
    /// Each attempt's diagnosis.
    pub diagnoses: Vec<Diagnosis>,
    /// Each attempt's transaction.
    pub transactions: Vec<TransactionRecord>,
    /// What each attempt was told about the earlier ones.
    pub feedback: Vec<Feedback>,
    /// The mu paths.
    pub paths: MuPaths,
    /// Whether the oracles passed at the end.
    pub resolved: bool,
    /// Why the run stopped before its attempts ran out (the wall-time budget), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// The machine and its agents.
pub struct Stratus {
    detector: Arc<dyn Detector>,
    diagnoser: Arc<dyn Diagnoser>,
    mitigator: Arc<dyn Mitigator>,
    max_attempts: usize,
    wall_time: Option<std::time::Duration>,
}

impl Default for Stratus {
    fn default() -> Self {
        Stratus::new(
            Arc::new(PolicyDetector),
            Arc::new(PolicyDiagnoser),
            Arc::new(PolicyMitigator),
        )
    }
}

impl Stratus {
    /// A machine with these agents and 10 attempts.
    pub fn new(
        detector: Arc<dyn Detector>,
        diagnoser: Arc<dyn Diagnoser>,
        mitigator: Arc<dyn Mitigator>,
    ) -> Self {
        Stratus {
            detector,
            diagnoser,
            mitigator,
            max_attempts: 10,
            wall_time: None,
        }
    }

    /// Sets the attempt budget.
    pub fn with_max_attempts(mut self, n: usize) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets a wall-time budget: no attempt starts once it is spent (a transaction under
    /// way finishes, so the system is never left inside one).
    pub fn with_wall_time(mut self, budget: std::time::Duration) -> Self {
        self.wall_time = Some(budget);
        self
    }

    /// Runs the machine against the environment behind `tnr`.
    pub async fn run<E: Environment>(&self, tnr: &Tnr<E>) -> Result<RunReport, StratusError> {
        let reader = tnr.reader();
        let env: &dyn ReadAccess = &reader;
        let mut report = RunReport {
            phases: vec![Phase::Detect],
            detection: None,
            diagnoses: Vec::new(),
            transactions: Vec::new(),
            feedback: Vec::new(),
            paths: MuPaths::default(),
            resolved: false,
            stopped: None,
        };
        let detection = self.detector.detect(env).await?;
        let incident = detection.incident;
        report.detection = Some(detection);
        if !incident {
            report.phases.push(Phase::Done);
            report.resolved = oracle(&env.observe().await?).passed();
            report.paths = tnr.paths();
            return Ok(report);
        }
        let started = std::time::Instant::now();
        for attempt in 1..=self.max_attempts {
            if let Some(budget) = self.wall_time
                && started.elapsed() >= budget
            {
                report.stopped = Some(format!(
                    "wall-time budget of {:.1} s spent after {} attempt(s)",
                    budget.as_secs_f64(),
                    attempt - 1
                ));
                break;
            }
            report.phases.push(Phase::Diagnose);
            // A diagnosis that fails (a model that never answers in shape, a model backend
            // that times out) costs this attempt, not the run: the mitigation agent plans
            // from an unknown fault, and the next attempt is told why.
            let diagnosis = match self.diagnoser.diagnose(env, &report.feedback).await {
                Ok(d) => d,
                Err(e @ (StratusError::MalformedModelOutput { .. } | StratusError::Model(_))) => {
                    Diagnosis::new("", FaultKind::Unknown, format!("no diagnosis: {e}"))
                }
                Err(e) => return Err(e),
            };
            tracing::info!(attempt, fault = ?diagnosis.fault, component = %diagnosis.component, "STRATUS diagnosis");
            report.diagnoses.push(diagnosis.clone());
            report.phases.push(Phase::Mitigate);
            let ctx = PlanContext {
                attempt,
                diagnosis,
                feedback: report.feedback.clone(),
                max_commands: tnr.config().max_commands,
            };
            let plan = self.mitigator.plan(env, &ctx).await;
            let (commands, outcome) = match plan {
                Err(e) => (Vec::new(), format!("no plan: {e}")),
                Ok(p) if p.commands.is_empty() => (
                    Vec::new(),
                    "no plan: the mitigation agent proposed no command".into(),
                ),
                Ok(p) => match tnr.run_text(&p.commands).await {
                    Err(e @ StratusError::UnfaithfulUndo { .. }) => return Err(e),
                    Err(e) => (p.commands, format!("rejected before running: {e}")),
                    Ok(rec) => {
                        let text = match &rec.outcome {
                            Outcome::Committed => "committed".to_string(),
                            Outcome::Aborted { reason } if tnr.config().undo => {
                                report.phases.push(Phase::Undo);
                                format!(
                                    "aborted and undone ({})",
                                    serde_json::to_string(reason).unwrap_or_default()
                                )
                            }
                            Outcome::Aborted { reason } => format!(
                                "stopped, its changes kept: no undo ({})",
                                serde_json::to_string(reason).unwrap_or_default()
                            ),
                            Outcome::RejectedByDryRun { predicted_mu } => format!(
                                "rejected by the dry run (predicted mu {})",
                                predicted_mu.map_or("inf".into(), |m| m.to_string())
                            ),
                            Outcome::Declined => "declined by the approver".into(),
                        };
                        let cmds = rec.commands.clone();
                        report.transactions.push(rec);
                        (cmds, text)
                    }
                },
            };
            report.phases.push(Phase::Verify);
            let verdict = oracle(&env.observe().await?);
            if verdict.passed() {
                report.phases.push(Phase::Done);
                report.resolved = true;
                break;
            }
            report.feedback.push(Feedback {
                attempt,
                commands,
                outcome,
                oracle: Some(OracleVerdictView::from(&verdict)),
            });
        }
        if !report.resolved {
            report.phases.push(Phase::GaveUp);
        }
        report.paths = tnr.paths();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stratus::sim::SimEnvironment;
    use crate::stratus::sim::scenarios::builtin;
    use crate::stratus::transaction::TnrConfig;
    use tokio::sync::RwLock;

    #[tokio::test]
    async fn policies_mitigate_every_scenario_without_visible_regression() {
        for s in builtin().unwrap() {
            let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
            let tnr = Tnr::new(env, TnrConfig::default()).await.unwrap();
            let report = Stratus::default().run(&tnr).await.unwrap();
            assert!(
                report.resolved,
                "{}: diagnoses {:#?} feedback {:#?}",
                s.name, report.diagnoses, report.feedback
            );
            let mu0 = report.paths.visible[0].unwrap();
            for v in &report.paths.visible {
                assert!(
                    v.unwrap() <= mu0,
                    "{}: visible {:?}",
                    s.name,
                    report.paths.visible
                );
            }
        }
    }

    #[tokio::test]
    async fn a_spent_wall_time_starts_no_attempt() {
        let s = &builtin().unwrap()[0];
        let env = Arc::new(RwLock::new(SimEnvironment::new(s.build().unwrap())));
        let tnr = Tnr::new(env, TnrConfig::default()).await.unwrap();
        let report = Stratus::default()
            .with_wall_time(std::time::Duration::ZERO)
            .run(&tnr)
            .await
            .unwrap();
        assert!(!report.resolved);
        assert!(report.transactions.is_empty());
        assert!(report.stopped.unwrap().contains("wall-time"));
    }
}
