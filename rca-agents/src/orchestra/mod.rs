//! Controller-explorer orchestration with staged diagnosis (reliable orchestration, ICWS'26,
//! patterns 1, 2 and 4).
//!
//! - **Planning**: a [`Planner`] orders the modalities into subgoals.
//! - **Investigation**: one [`Explorer`] per modality runs subgoals; explorers publish only
//!   their conclusions to short-term memory (a broadcast queue) and keep their completed actions
//!   in their own long-term memory (a vector index), which offers the nearest past actions for
//!   a new subgoal. After every exploration a [`Controller`] chooses to continue, to conclude
//!   (only once evidence from at least two modalities converges on a component) or to
//!   escalate; failures climb the ladder retry -> refine -> re-plan.
//! - **Reasoning**: a [`Reasoner`] ranks root-cause candidates and writes the report with its
//!   evidence chain.
//!
//! With the `sql` feature, [`generated::GeneratedToolExplorer`] explores a modality with
//! generated SQL tools from a shared tool lifecycle (pattern 3).
//!
//! Every role is a trait with a deterministic policy in [`policy`]; a host (or the model-backed
//! roles) can replace any of them, and the same [`Orchestrator`] runs both.

pub mod deadline;
mod diagnosis_memory;
pub mod explorers;
#[cfg(feature = "sql")]
pub mod generated;
pub mod model;
mod orchestrator;
pub mod pipeline;
pub mod policy;
pub mod ranking_tool;
mod roles;

pub use diagnosis_memory::{DiagnosisMemory, ExplorerStores, INCIDENTS_FILE, explorer_file_name};
pub use orchestrator::{Fallbacks, Onset, Orchestrator, OrchestratorConfig, RunEvent, RunRecord};
pub use pipeline::{DiagnosisPipeline, IncidentTelemetry, PipelineConfig, RoleModels};
pub use ranking_tool::RankComponents;
pub use roles::{
    Controller, Decision, Escalation, Exploration, ExploreRequest, Explorer, InvestigationView,
    OrchestraError, PastAction, PastIncident, Plan, Planner, Reasoner, ReplanRequest, Subgoal,
};
