//! Why a listener cannot start or stopped.

/// Errors of this crate, by what the caller should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// The configuration is wrong (a value, a secret or certificate file): fix it and restart.
    #[error("{message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The address is not usable (taken, not ours) or accepting failed: an operating-system
    /// condition.
    #[error("cannot listen on {address}: {source}")]
    Io {
        /// The address.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
