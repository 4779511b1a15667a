//! FLASH: a workflow agent for recurring incidents with status supervision and hindsight.
//!
//! - [`tsg`]: troubleshooting guides in Markdown become ordered diagnosis plans.
//! - [`state`]: the statuses (Diagnosis Planning, Step Initialization, Step Execution, Step
//!   Completion, Finished); each status sees only its own instructions and tools.
//! - [`supervision`]: the rules over a model-driven run: the statuses the guide allows next
//!   (a model's status reading outside them is overruled), and the checks of a model's plan
//!   and step refinement against the parsed guide.
//! - [`guide_view`]: what each status's prompt carries of the guide (the guide, the current
//!   step in full, the chosen actions, the branch conditions).
//! - [`triage`]: picking the guide when the alert names only a symptom: a triage guide finds
//!   the component, then the guide whose triggers match the alert and its observations runs.
//! - [`memory`]: the global working memory shared across steps (facts, plan, step results).
//! - [`hindsight`]: a persisted knowledge base of trigger -> hint lessons, injected when a
//!   trigger matches, collected automatically from failed runs.
//! - [`review`]: reviewers that write a lesson from a failed run and the host's verdict (a
//!   model, or rules over the failing step and the known guides).
//! - [`agent`]: the loop (status reasoning, context generation, decision, action, reflection)
//!   with a model-backed or a deterministic policy.
//!
//! ToolStub (record and replay tool calls) lives in `rca_tools::stub`.

pub mod agent;
pub mod guide_view;
pub mod hindsight;
pub mod memory;
pub mod review;
pub mod state;
pub mod supervision;
pub mod triage;
pub mod tsg;

pub use agent::{
    FlashAgent, FlashConfig, FlashPolicy, FlashRun, HumanChannel, ModelPolicy, RulePolicy,
    StatusReading, StepObserver,
};
pub use hindsight::{HindsightBase, Hint, Lesson, Trigger};
pub use memory::GlobalMemory;
pub use review::{ModelReviewer, Reviewer, RuleReviewer, Verdict, learn};
pub use state::FlashState;
pub use supervision::StatusDecision;
pub use triage::{GuideCatalog, GuideMatch, TriagedRun, run_triaged};
pub use tsg::{Branch, DiagnosisPlan, FactCapture, PlanStep, PlannedAction, parse_tsg};

/// What went wrong in a FLASH run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FlashError {
    /// The troubleshooting guide has no steps that could be read.
    #[error("troubleshooting guide: {0}")]
    Guide(String),
    /// The model failed or answered with something unusable.
    #[error("model: {0}")]
    Model(String),
    /// The hindsight knowledge base could not be read or written.
    #[error("hindsight store: {0}")]
    Store(String),
    /// The human channel failed.
    #[error("human query: {0}")]
    Human(String),
}
