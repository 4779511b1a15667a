//! Information-gathering tools (RCAgent 3.2.1) and the experts as tools.
//!
//! Every tool takes semantically condensed arguments — an entity (a component, a job, a host)
//! and an optional time range — never SQL or a query language: RCAgent measured a large drop
//! in pass rate when models had to write queries. Every tool enforces the detection-time
//! cutoff of [`rca_core::ToolContext::cutoff`]: it asks its source only for data before the cutoff and
//! drops anything at or after it that the source returns anyway. Tools that find anomalies
//! report them as [`rca_core::Evidence`] in [`rca_core::ToolOutput::evidence`].
//!
//! - [`GetLogs`] (`get_logs`): lines deduplicated by template with counts, below WARNING
//!   dropped unless asked, bounded output.
//! - [`GetMetrics`] (`get_metrics`): per series baseline vs recent level, min/max and the
//!   metric analyzer's anomaly flags.
//! - [`GetTraces`] (`get_traces`): per operation latency and errors, the slowest traces.
//! - [`GetDbRecords`] (`get_db_records`): table rows that mention an entity.
//! - [`AnalyzeLogs`] (`analyze_logs`) and [`AnalyzeCode`] (`analyze_code`): the log and code
//!   experts.
//! - [`IncidentTools`]: a [`rca_core::ToolRegistry`] over an incident directory.

mod args;
mod db;
mod experts;
mod incident;
mod logs;
mod metrics;
mod traces;

pub use args::{EntityArgs, bounded, effective_range, recent_split};
pub use db::{DbRecordsArgs, GetDbRecords};
pub use experts::{AnalyzeCode, AnalyzeCodeArgs, AnalyzeLogs, AnalyzeLogsArgs};
pub use incident::{CODE_DIR, DEFAULT_OUTPUT_CHARS, FULL_OUTPUT_CHARS, IncidentTools, TABLES_DIR};
pub use logs::{GetLogs, LogsArgs};
pub use metrics::GetMetrics;
pub use traces::GetTraces;

#[cfg(test)]
mod tests;
