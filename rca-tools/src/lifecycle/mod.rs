//! The tool lifecycle (ICWS'26 pattern 3): generated SQL tools with quality scores and a tool
//! graph.
//!
//! - Generation ([`ToolForge`]): a reasoning role ([`ContractWriter`]) writes a
//!   [`ToolContract`]; a coding role ([`SqlWriter`]) writes its parameterised SQL. A trial run
//!   in a [`TableEngine`](crate::tables::TableEngine) yields runtime feedback (errors, empty or
//!   malformed output) and heuristic feedback (the contract's sanity checks as SQL assertions)
//!   that drive up to MG = 3 coding rounds, then up to MA = 2 analysis-level retries, then an
//!   [`Escalation`].
//! - Both roles run on a model ([`ModelContractWriter`], [`ModelSqlWriter`]) or as the
//!   deterministic [`TemplatePolicy`].
//! - The [`ToolInventory`] keeps each tool's successes and failures and its quality
//!   Qual(t) = s² / (s + f) ([`quality`]), and the [`ToolGraph`] of "A then B" pairs from
//!   successful diagnoses; it persists as versioned JSON.
//! - Selection ([`ToolSelector`]): embedding relevance, a threshold, top 5 by quality, plus
//!   graph successors of the last tool. [`ToolLifecycle`] ties it together: a tool is generated
//!   only when nothing fits; [`ToolLifecycle::warm_up`] pre-generates tools.
//!
//! Nothing here depends on the `sql` feature; DataFusion is one [`TableEngine`] among others.
//!
//! [`TableEngine`]: crate::tables::TableEngine

mod contract;
mod error;
mod feedback;
mod forge;
mod graph;
mod inventory;
mod json;
mod manager;
mod model_roles;
mod roles;
mod select;
mod templates;
mod tool;

#[cfg(all(test, feature = "sql"))]
mod tests;

pub use contract::{BindError, ParamKind, ParamSpec, SanityCheck, ToolContract};
pub use error::LifecycleError;
pub use feedback::{assertion_sql, judge};
pub use forge::{
    DEFAULT_MAX_ANALYSIS_RETRIES, DEFAULT_MAX_ROUNDS, Escalation, ForgeLimits, ForgeOutcome,
    ForgedTool, RoleCalls, ToolForge,
};
pub use graph::{ToolEdge, ToolGraph};
pub use inventory::{
    INVENTORY_FORMAT_VERSION, MAX_TASKS_REMEMBERED, StoredTool, ToolInventory, quality,
};
pub use json::fenced_blocks_with_lang;
pub use manager::{Acquisition, ToolLifecycle, WarmUpReport};
pub use model_roles::{ModelContractWriter, ModelSqlWriter, parse_contract, parse_sql};
pub use roles::{ContractWriter, Feedback, FeedbackKind, SqlWriter, ToolTask};
pub use select::{Candidate, SelectionPolicy, SelectionReason, ToolSelector};
pub use templates::{Template, TemplatePolicy};
pub use tool::LifecycleTool;
