//! Telemetry as tables.
//!
//! The engine-neutral part is always compiled: table schemas ([`TableSchema`]), materialised
//! query results ([`QueryResult`]), the [`TableEngine`] trait the tool lifecycle runs over, an
//! adapter from any [`rca_core::source::SqlSource`] ([`SqlSourceEngine`]), and the recognition
//! of column roles ([`ColumnRole`]) the deterministic tool templates use.
//!
//! With the `sql` feature, [`TelemetryTables`] registers an incident's logs, metrics and spans
//! as DataFusion tables (CSV, gzip CSV, Parquet, in-memory Arrow or `rca-core` records)
//! and runs queries in a read-only sandbox with row, memory and time limits.

mod engine;
mod error;
mod roles;
mod schema;

#[cfg(feature = "sql")]
mod arrow_rows;
#[cfg(feature = "sql")]
mod catalog;
#[cfg(feature = "ballista")]
pub mod cluster;
#[cfg(feature = "sql")]
pub mod export;
#[cfg(feature = "sql")]
mod readonly;
#[cfg(feature = "sql")]
mod records;
#[cfg(feature = "sql")]
mod sandbox;
#[cfg(feature = "sql")]
pub mod templates;

#[cfg(all(test, feature = "sql"))]
pub(crate) mod fixtures;
#[cfg(all(test, feature = "sql"))]
mod tests;

pub use engine::{QueryResult, SqlSourceEngine, TableEngine};
pub use error::TableError;
pub use roles::{ColumnRole, find_column};
pub use schema::{ColumnInfo, ColumnType, TableSchema};

#[cfg(feature = "sql")]
pub use catalog::{CsvOptions, TableFormat, TelemetryTables, session_config};
#[cfg(feature = "sql")]
pub use readonly::check_read_only;
#[cfg(feature = "sql")]
pub use sandbox::SandboxLimits;
