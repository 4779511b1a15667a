//! The two roles of tool generation: a reasoning role that writes a [`ToolContract`] and a
//! coding role that writes its SQL. Both are traits, so a host can plug a model, a policy or
//! a person in.

use std::fmt;

use async_trait::async_trait;
use rca_core::TimeRange;
use serde::{Deserialize, Serialize};

use super::contract::ToolContract;
use super::error::LifecycleError;
use crate::tables::TableSchema;

/// What a tool is needed for: the sub-task an explorer is working on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolTask {
    /// The sub-task in prose (also what selection compares stored tools with).
    pub description: String,
    /// The incident window, used to try a tool while it is generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<TimeRange>,
    /// Further context for the reasoning role (memory, findings so far).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context: String,
}

impl ToolTask {
    /// A task with a description and a window.
    pub fn new(description: impl Into<String>, window: Option<TimeRange>) -> Self {
        ToolTask {
            description: description.into(),
            window,
            context: String::new(),
        }
    }
}

/// The kind of a piece of feedback on a generation attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackKind {
    /// The query failed to parse, plan or run (runtime feedback).
    Runtime,
    /// The query returned no rows (runtime feedback).
    EmptyOutput,
    /// The output lacks columns the contract promises (runtime feedback).
    MalformedOutput,
    /// A sanity check of the contract failed (heuristic feedback).
    Heuristic,
    /// The role's answer could not be read.
    Unreadable,
    /// The coding role wrote the same query that already failed.
    Repeated,
    /// The contract itself is unusable, or every round on it failed (analysis-level).
    Contract,
}

impl fmt::Display for FeedbackKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FeedbackKind::Runtime => "runtime error",
            FeedbackKind::EmptyOutput => "empty output",
            FeedbackKind::MalformedOutput => "malformed output",
            FeedbackKind::Heuristic => "failed sanity check",
            FeedbackKind::Unreadable => "unreadable answer",
            FeedbackKind::Repeated => "repeated query",
            FeedbackKind::Contract => "contract rejected",
        })
    }
}

/// One piece of feedback handed back to a role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// What kind.
    pub kind: FeedbackKind,
    /// What happened, written for the role to act on.
    pub message: String,
    /// The contract it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// The SQL it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
}

impl fmt::Display for Feedback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The reasoning role: turns a task into a tool contract.
///
/// ```
/// use async_trait::async_trait;
/// use rca_tools::lifecycle::{ContractWriter, Feedback, LifecycleError, ToolContract, ToolTask};
/// use rca_tools::tables::TableSchema;
///
/// /// Always proposes a row count of the first table.
/// struct RowCounter;
///
/// #[async_trait]
/// impl ContractWriter for RowCounter {
///     fn uses_model(&self) -> bool { false }
///     async fn write_contract(&self, _task: &ToolTask, _tables: &[TableSchema],
///                             _previous: &[Feedback]) -> Result<ToolContract, LifecycleError> {
///         Ok(ToolContract {
///             name: "row_count".into(),
///             purpose: "Counts rows.".into(),
///             parameters: vec![],
///             output_columns: vec!["n".into()],
///             sanity_checks: vec![],
///         })
///     }
/// }
/// ```
#[async_trait]
pub trait ContractWriter: Send + Sync {
    /// Whether each call is one language-model call (for accounting).
    fn uses_model(&self) -> bool;
    /// Writes a contract for `task` over `tables`. `previous` holds the analysis-level
    /// feedback of earlier attempts (empty on the first).
    async fn write_contract(
        &self,
        task: &ToolTask,
        tables: &[TableSchema],
        previous: &[Feedback],
    ) -> Result<ToolContract, LifecycleError>;
}

/// The coding role: turns a contract into one parameterised SQL query.
#[async_trait]
pub trait SqlWriter: Send + Sync {
    /// Whether each call is one language-model call (for accounting).
    fn uses_model(&self) -> bool;
    /// Writes the query for `contract` (parameters are `$1`, `$2`, ... in contract order).
    /// `feedback` holds what went wrong with earlier queries for this contract.
    async fn write_sql(
        &self,
        contract: &ToolContract,
        tables: &[TableSchema],
        feedback: &[Feedback],
    ) -> Result<String, LifecycleError>;
}

fn _object_safe(_: &dyn ContractWriter, _: &dyn SqlWriter) {}
