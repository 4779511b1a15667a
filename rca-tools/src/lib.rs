//! # rca-tools
//!
//! Data-source adapters, analyzers, log clustering, information-gathering tools and expert
//! agents built on the traits of [`rca_core`].
#![deny(missing_docs)]

pub mod analyze;
pub mod logs;
pub mod sources;
