//! The roles of the orchestration and the values they exchange.

use async_trait::async_trait;
use rca_core::llm::Usage;
use rca_core::memory::Conclusion;
use rca_core::{DiagnosisReport, Evidence, Incident, Modality};
use serde::{Deserialize, Serialize};

/// What went wrong in an orchestrated diagnosis.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OrchestraError {
    /// A role's model failed or answered with something unusable; the run may be retried.
    #[error("{role} failed: {message}")]
    Role {
        /// Which role.
        role: String,
        /// What happened.
        message: String,
    },
    /// A memory store failed.
    #[error("memory failed: {0}")]
    Memory(String),
    /// The configuration cannot work (no explorers, no modalities in the plan).
    #[error("invalid orchestration: {0}")]
    Invalid(String),
    /// The host cancelled the run.
    #[error("cancelled")]
    Cancelled,
    /// The run did not finish within its wall-time budget (model requests included).
    #[error("the diagnosis did not finish within its wall-time budget of {seconds} s")]
    TimedOut {
        /// The budget, in seconds.
        seconds: f64,
    },
}

/// One subgoal of an investigation plan: what to look for in one modality.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subgoal {
    /// Which modality (and so which explorer) handles it.
    pub modality: Modality,
    /// What to find out, in a sentence.
    pub goal: String,
    /// Components to focus on, if any (found by earlier subgoals or named by the incident).
    #[serde(default)]
    pub focus: Vec<String>,
}

/// An ordered investigation plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Subgoals in the order they should run.
    pub subgoals: Vec<Subgoal>,
    /// 0 for the first plan, then 1, 2, ... for each re-plan.
    pub revision: u32,
    /// Why the plan is ordered so.
    pub rationale: String,
}

/// What the planner is told when the controller asks for a new plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplanRequest {
    /// The plan being replaced.
    pub previous: Plan,
    /// Why it is replaced.
    pub reason: String,
    /// Modalities whose explorer kept failing.
    pub failed: Vec<Modality>,
    /// Components the evidence so far points at, best first.
    pub suspects: Vec<String>,
}

/// A completed action an explorer remembers (long-term memory), offered for similar subgoals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PastAction {
    /// The subgoal that was explored.
    pub goal: String,
    /// What the explorer did and concluded.
    pub summary: String,
    /// Cosine similarity to the current subgoal (the alert and the goal).
    pub similarity: f32,
    /// The incident it was taken for.
    #[serde(default)]
    pub incident: String,
    /// The components it found significant (strongest first), which an explorer may look at
    /// harder; they are never evidence of the current incident.
    #[serde(default)]
    pub components: Vec<String>,
}

/// A past incident long-term memory offers the planner for a similar alert: what the run
/// concluded and which modalities settled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PastIncident {
    /// The incident's id.
    pub incident: String,
    /// Its alert (title, and description when it had one).
    pub alert: String,
    /// The component the run named first (`None`: it named none).
    pub root_cause: Option<String>,
    /// The modalities whose significant evidence named that component, in the order they
    /// were explored.
    pub settled_by: Vec<Modality>,
    /// Cosine similarity of its alert to the current one.
    pub similarity: f32,
}

/// How hard an explorer is asked to try after failures (the escalation ladder below re-plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escalation {
    /// First attempt.
    None,
    /// The same subgoal again, unchanged.
    Retry,
    /// The same subgoal with refined analysis (wider window, looser thresholds, another tool).
    Refine,
}

/// What an explorer is given for one subgoal.
#[derive(Debug, Clone)]
pub struct ExploreRequest<'a> {
    /// The incident.
    pub incident: &'a Incident,
    /// The subgoal.
    pub subgoal: &'a Subgoal,
    /// Conclusions other explorers published so far (short-term memory).
    pub conclusions: &'a [Conclusion],
    /// The most similar past actions of this explorer (long-term memory).
    pub past: &'a [PastAction],
    /// Where on the escalation ladder this attempt is.
    pub escalation: Escalation,
}

/// What an explorer found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exploration {
    /// Evidence in the four-field form.
    pub evidence: Vec<Evidence>,
    /// The conclusion to publish, in one or two sentences.
    pub conclusion: String,
    /// `false` when the explorer could not process its data (no data, a tool that failed):
    /// the controller escalates.
    pub completed: bool,
    /// The tools or analyses used, for the trace and long-term memory.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The score a finding of this modality must exceed to count as the modality agreeing,
    /// as the explorer calibrated it on its baseline (the strongest finding the baseline
    /// produces against itself); `None`: not calibrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<f64>,
}

/// Investigates one modality.
#[async_trait]
pub trait Explorer: Send + Sync {
    /// A name for memory and the trace (e.g. `metrics-explorer`).
    fn name(&self) -> &str;
    /// The modality it handles.
    fn modality(&self) -> Modality;
    /// Runs one subgoal.
    async fn explore(&self, request: &ExploreRequest<'_>) -> Result<Exploration, OrchestraError>;
}

/// Orders the modalities into a plan.
#[async_trait]
pub trait Planner: Send + Sync {
    /// Plans an investigation of `incident` over the `available` modalities; `replan` is set
    /// when the controller escalated to a new plan.
    async fn plan(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
    ) -> Result<Plan, OrchestraError>;

    /// As [`Planner::plan`], with the past incidents long-term memory offers for this alert
    /// (nearest first). The default ignores them.
    async fn plan_with_memory(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
        past: &[PastIncident],
    ) -> Result<Plan, OrchestraError> {
        let _ = past;
        self.plan(incident, available, replan).await
    }

    /// The tokens this planner's model has spent so far, over all its calls (the server's
    /// counts; zero for a policy). The orchestrator records each call's share in its step.
    fn usage(&self) -> Usage {
        Usage::default()
    }
}

/// What the controller sees when it decides.
#[derive(Debug, Clone)]
pub struct InvestigationView<'a> {
    /// The incident.
    pub incident: &'a Incident,
    /// The current plan.
    pub plan: &'a Plan,
    /// How many subgoals of the plan have run.
    pub done: usize,
    /// All evidence gathered so far.
    pub evidence: &'a [Evidence],
    /// Modalities whose explorer failed on its last attempt.
    pub failing: &'a [Modality],
    /// Per modality, the significance level its explorer calibrated (see
    /// [`Exploration::significance`]); a modality without one counts with any score.
    pub significance: &'a std::collections::BTreeMap<Modality, f64>,
}

/// The controller's choice after an exploration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run the next subgoal.
    Continue,
    /// Hand the evidence to the reasoner: it converges on `component`.
    Conclude {
        /// The component the modalities agree on.
        component: String,
        /// The modalities that agree.
        modalities: Vec<Modality>,
    },
    /// Ask the planner for a new plan.
    Escalate {
        /// Why.
        reason: String,
    },
}

/// Chooses continue / conclude / escalate on the evidence set.
#[async_trait]
pub trait Controller: Send + Sync {
    /// Decides after an exploration.
    async fn decide(&self, view: &InvestigationView<'_>) -> Result<Decision, OrchestraError>;

    /// The tokens this controller's model has spent so far (see [`Planner::usage`]).
    fn usage(&self) -> Usage {
        Usage::default()
    }
}

/// Ranks root-cause candidates and writes the report.
#[async_trait]
pub trait Reasoner: Send + Sync {
    /// Writes the report from the evidence.
    async fn reason(
        &self,
        incident: &Incident,
        evidence: &[Evidence],
        concluded: Option<&Decision>,
    ) -> Result<DiagnosisReport, OrchestraError>;

    /// The tokens this reasoner's model has spent so far (see [`Planner::usage`]).
    fn usage(&self) -> Usage {
        Usage::default()
    }
}

fn _object_safe(_: &dyn Explorer, _: &dyn Planner, _: &dyn Controller, _: &dyn Reasoner) {}
