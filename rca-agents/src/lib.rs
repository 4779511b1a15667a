//! # rca-agents
//!
//! Agent loops and orchestrations over the traits of [`rca_core`]: they depend on
//! `ChatModel`, `Tool`, the data sources and the memory stores, never on one implementation.
//!
//! - [`react`]: the RCAgent controller (ReAct with snapshot keys, JSON stabilisation, error
//!   rules and budgets).
//! - [`consistency`]: text and trajectory-level self-consistency.
//! - [`memory`]: snapshot, working, short-term and long-term memory stores.
#![deny(missing_docs)]

pub mod consistency;
pub mod memory;
pub mod react;
