//! # rca-agents
//!
//! Agent loops and orchestrations over the traits of [`rca_core`]: they depend on
//! `ChatModel`, `Tool`, the data sources and the memory stores, never on one implementation.
//!
//! - [`react`]: the RCAgent controller (ReAct with snapshot keys, JSON stabilisation, error
//!   rules and budgets).
//! - [`consistency`]: text and trajectory-level self-consistency.
//! - [`memory`]: snapshot, working, short-term and long-term memory stores.
//! - [`orchestra`]: controller-explorer orchestration with staged diagnosis (ICWS'26).
//! - [`flash`]: status supervision and hindsight over troubleshooting guides (FLASH).
//! - [`report`]: Markdown, JSON and HTML reports.
//! - [`stratus`]: detection, diagnosis, mitigation and undo agents with Transactional
//!   No-Regression over an `Environment` (STRATUS).
#![deny(missing_docs)]

pub mod consistency;
pub mod flash;
pub mod memory;
pub mod orchestra;
pub mod react;
pub mod report;
pub mod stratus;
