//! # rca-agents
//!
//! Agent loops and orchestrations over the traits of [`rca_core`]: they depend on
//! `ChatModel`, `Tool`, the data sources and the memory stores, never on one implementation.
#![deny(missing_docs)]

pub mod stratus;
