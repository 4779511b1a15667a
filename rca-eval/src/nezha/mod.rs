//! The Nezha TrainTicket benchmark: a loader for its layout that turns each labelled fault into
//! an incident under one of two protocols (the fault time known, or only an alert a lag
//! later), the library's diagnosis pipeline run over it (never reading the ground truth), and
//! the scores (service-level AS@k, fault-type accuracy, onset error, time per case), also
//! cross-validated over folds of cases.

mod crossval;
mod delay;
mod diagnose;
mod eval;
mod explain;
mod export;
mod loader;

pub use crossval::{Fold, GridPoint, NezhaCrossValidation, cross_validate, default_grid};
pub use delay::{DelayRow, delay_benchmark, delay_table, inject_delay};
pub use diagnose::{
    CaseDiagnosis, Withheld, case_telemetry, diagnose_case, diagnose_case_with_memory,
};
pub use eval::{
    CaseResult, DropRows, EvalOptions, MEASURES_IN_SAMPLE, MemoryRow, NezhaReport, Summary,
    TrivialOutcome, drop_table, evaluate, loudest_pods, markdown_table, memory_effect,
    memory_table, modality_drop, service_of, trivial_onset,
};
pub use explain::{MissCause, MissExplanation, MissReport, explain_misses};
pub use export::export_case;
pub use loader::{
    CaseData, CaseOptions, DayMetrics, NezhaCase, NezhaDay, Protocol, discover, load_case,
    read_log_csv, splice_normal_minutes,
};

use rca_core::SourceError;
use rca_tools::analyze::classify::FaultTaxonomy;

/// The benchmark's fault-type vocabulary (`rca-eval/data/nezha-taxonomy.json`: the default
/// rules under the data set's labels), which its evaluation hands the pipeline.
pub fn taxonomy() -> Result<FaultTaxonomy, NezhaError> {
    serde_json::from_str(include_str!("../../data/nezha-taxonomy.json")).map_err(|e| {
        NezhaError::Layout {
            path: "rca-eval/data/nezha-taxonomy.json".into(),
            message: e.to_string(),
        }
    })
}

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
    /// The diagnosis pipeline could not be built or run (the message says why).
    #[error("diagnosis failed: {0}")]
    Diagnosis(String),
    /// Writing an export failed.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
}
