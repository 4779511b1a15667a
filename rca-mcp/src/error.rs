//! Why the server cannot start, or why a request was refused.

/// Errors of this crate, by what the caller should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's configuration is wrong (the incident root, the listener, the token):
    /// fix it and restart.
    #[error("{message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A request named something the server will not serve (an incident outside the root, an
    /// unknown resource or snapshot): the client should change its request.
    #[error("{message}")]
    Refused {
        /// What was refused and why.
        message: String,
    },
    /// A request ran past its deadline: the client may retry with a narrower request.
    #[error("{what} did not finish within {seconds} s")]
    TimedOut {
        /// What ran.
        what: String,
        /// The deadline.
        seconds: u64,
    },
    /// Loading, reading or writing failed (telemetry, stored runs, the transport): an
    /// operating-system or data condition.
    #[error("{message}")]
    Failed {
        /// What failed.
        message: String,
    },
}

impl McpError {
    pub(crate) fn config(message: impl Into<String>) -> Self {
        McpError::Config {
            message: message.into(),
        }
    }

    pub(crate) fn refused(message: impl Into<String>) -> Self {
        McpError::Refused {
            message: message.into(),
        }
    }

    pub(crate) fn failed(message: impl Into<String>) -> Self {
        McpError::Failed {
            message: message.into(),
        }
    }
}
