//! Errors of the log-clustering module, sorted by what the caller should do.

/// What went wrong in log clustering.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LogsError {
    /// The log-format pattern cannot be compiled: fix the pattern.
    #[error("invalid log format `{pattern}`: {message}")]
    InvalidFormat {
        /// The pattern as given.
        pattern: String,
        /// Why it was rejected.
        message: String,
    },
    /// Saved miner state of another format version: mine the log again.
    #[error("miner state has format version {found:?}, this build reads version {expected}")]
    StateVersion {
        /// The version found (`None` when the field is missing).
        found: Option<u64>,
        /// The version this build writes and reads.
        expected: u32,
    },
    /// Saved miner state that does not decode or is inconsistent: it is damaged.
    #[error("miner state is damaged: {message}")]
    State {
        /// What is wrong.
        message: String,
    },
    /// Reading the input failed.
    #[error("cannot read log input: {message}")]
    Io {
        /// What happened.
        message: String,
    },
}
