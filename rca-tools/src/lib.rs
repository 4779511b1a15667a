//! # rca-tools
//!
//! Data-source adapters, analyzers, log clustering, information-gathering tools and expert
//! agents built on the traits of [`rca_core`].
//!
//! - [`tables`]: telemetry as SQL tables (the DataFusion engine and its sandbox behind the
//!   `sql` feature; the engine-neutral [`tables::TableEngine`] trait always).
//! - [`lifecycle`]: generated SQL tools with quality scores, a tool graph and selection
//!   (ICWS'26 pattern 3).
#![deny(missing_docs)]

pub mod analyze;
pub mod code;
pub mod experts;
pub mod files;
pub mod incident_dir;
pub mod lifecycle;
pub mod logs;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "prometheus")]
pub mod prometheus;
pub mod records;
pub mod sources;
pub mod stub;
pub mod tables;
pub mod tools;

/// Whether `s` is a lower-case SQL-safe identifier (tool and table names).
pub(crate) fn lifecycle_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
