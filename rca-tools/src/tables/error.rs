//! Errors of registering tables and running sandboxed queries.

use rca_core::SourceError;

/// What went wrong with telemetry tables or a sandboxed query, sorted by what the caller
/// should do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The query is not a single read-only `SELECT`/`WITH` query: write a different one.
    #[error("query refused by the read-only sandbox: {reason}")]
    Refused {
        /// Why.
        reason: String,
    },
    /// The query text does not parse or plan (unknown table or column, type error): fix it.
    #[error("invalid query: {message}")]
    InvalidQuery {
        /// The engine's explanation.
        message: String,
    },
    /// The query returned more rows than the sandbox allows: aggregate or add a `LIMIT`.
    #[error("query returned more than {limit} rows; aggregate or add a LIMIT")]
    TooManyRows {
        /// The limit.
        limit: usize,
    },
    /// The query ran past the sandbox's time limit: make it cheaper.
    #[error("query exceeded the time limit of {millis} ms")]
    Timeout {
        /// The limit, in milliseconds.
        millis: u64,
    },
    /// The query needed more memory than the sandbox's pool allows: make it cheaper.
    #[error("query exceeded the memory limit: {message}")]
    MemoryLimit {
        /// The engine's explanation.
        message: String,
    },
    /// A table could not be registered (a missing file, an unknown format, a bad name).
    #[error("cannot register table `{table}`: {message}")]
    Register {
        /// The table.
        table: String,
        /// What went wrong.
        message: String,
    },
    /// The engine failed while executing (an IO error reading a file, a malformed record).
    #[error("query failed: {message}")]
    Execution {
        /// The engine's explanation.
        message: String,
    },
    /// Telemetry could not be written as Parquet (a destination holding other files, a full
    /// disk): choose or fix the destination; nothing outside it was touched.
    #[error("cannot export to {path}: {message}")]
    Export {
        /// The file or directory.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A Ballista cluster could not be reached or refused the session: check its URL and
    /// that its scheduler runs.
    #[error("cluster unavailable: {message}")]
    Cluster {
        /// What went wrong.
        message: String,
    },
}

impl From<TableError> for SourceError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Refused { .. }
            | TableError::InvalidQuery { .. }
            | TableError::TooManyRows { .. }
            | TableError::Timeout { .. }
            | TableError::MemoryLimit { .. } => SourceError::InvalidQuery {
                message: e.to_string(),
            },
            TableError::Register { .. }
            | TableError::Execution { .. }
            | TableError::Export { .. } => SourceError::Failed {
                message: e.to_string(),
            },
            TableError::Cluster { .. } => SourceError::Unavailable {
                message: e.to_string(),
            },
        }
    }
}
