//! The Nezha TrainTicket benchmark: a loader for its layout, a ranking of root-cause pods per
//! case computed from the analyzers' evidence (never from the ground truth), and the scores
//! (service-level AS@k, fault-type accuracy, time per case).

mod diagnose;
mod eval;
mod export;
mod loader;

pub use diagnose::{CaseDiagnosis, diagnose_case, diagnose_case_with, fault_type_of, ranker};
pub use eval::{
    CaseResult, EvalOptions, NezhaReport, Summary, evaluate, markdown_table, service_of,
};
pub use export::export_case;
pub use loader::{
    CaseData, CaseOptions, DayMetrics, NezhaCase, NezhaDay, discover, load_case, read_log_csv,
};

use rca_core::SourceError;

/// What went wrong reading or evaluating the Nezha data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NezhaError {
    /// The directory does not have the expected layout (the message says what is missing).
    #[error("{path}: {message}")]
    Layout {
        /// The file or folder.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No case matches the requested id.
    #[error("no case `{0}`")]
    NoSuchCase(String),
    /// A telemetry file could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Writing an export failed.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
}
