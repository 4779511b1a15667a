//! # rca-eval
//!
//! Metrics and dataset runners: log-parsing accuracy on Loghub, root-cause ranking on Nezha,
//! the OpenRCA scorer, and the simulated benchmarks of the agent papers.
#![deny(missing_docs)]

pub mod docs;
#[cfg(feature = "sql")]
pub mod lifecycle_bench;
pub mod loghub;
pub mod model_runs;
pub mod nezha;
pub mod openrca;
pub mod sc_bench;
pub mod scale;
pub mod snapshot_keys;
pub mod stability;
pub mod text;
