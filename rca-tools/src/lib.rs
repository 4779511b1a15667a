//! # rca-tools
//!
//! Data-source adapters, analyzers, log clustering, information-gathering tools and expert
//! agents built on the traits of [`rca_core`].
#![deny(missing_docs)]

pub mod analyze;
pub mod code;
pub mod experts;
pub mod incident_dir;
pub mod logs;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "prometheus")]
pub mod prometheus;
pub mod records;
pub mod sources;
pub mod stub;
pub mod tools;
