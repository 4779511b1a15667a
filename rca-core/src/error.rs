//! Error enums of the core traits, sorted by what the caller should do.
//!
//! Each enum is `#[non_exhaustive]`: match the variants you act on and treat the rest as
//! permanent.

use std::time::Duration;

/// What went wrong talking to a language model, sorted by what the caller should do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The server asked us to slow down; wait `retry_after` (when it said) and try again.
    #[error("rate limited by the model server (retry after {retry_after:?})")]
    RateLimited {
        /// How long the server asked us to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// A passing failure (5xx, dropped connection, timeout): retrying may succeed.
    #[error("transient model error: {message}")]
    Transient {
        /// What happened.
        message: String,
    },
    /// The prompt plus the requested completion does not fit the model's context window:
    /// shorten the prompt, never retry as is.
    #[error("context length exceeded: {message}")]
    ContextLength {
        /// The server's explanation.
        message: String,
    },
    /// The server answered but the answer could not be understood; `raw` keeps the body.
    #[error("malformed model response: {message}")]
    Malformed {
        /// Why it did not parse.
        message: String,
        /// The raw body as received.
        raw: String,
    },
    /// A failure that will not go away by retrying (bad request, authentication, no more
    /// scripted turns, a replay miss, a cancelled run).
    #[error("model error: {message}")]
    Permanent {
        /// What happened.
        message: String,
    },
}

impl LlmError {
    /// Whether the same request may succeed if sent again later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. } | LlmError::Transient { .. }
        )
    }

    /// Shorthand for a [`LlmError::Permanent`] error.
    pub fn permanent(message: impl Into<String>) -> Self {
        LlmError::Permanent {
            message: message.into(),
        }
    }

    /// Shorthand for a [`LlmError::Transient`] error.
    pub fn transient(message: impl Into<String>) -> Self {
        LlmError::Transient {
            message: message.into(),
        }
    }
}

/// What went wrong calling a tool. The message of every variant is written for a language
/// model to read and correct itself.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments did not match the tool's schema: fix them and call again.
    #[error("invalid arguments for tool `{tool}`: {message}. The tool's JSON schema is: {schema}")]
    InvalidArgs {
        /// The tool that was called.
        tool: String,
        /// Why the arguments were rejected.
        message: String,
        /// The tool's parameter schema, as JSON text.
        schema: String,
    },
    /// No tool of that name is registered: pick one of `available`.
    #[error("unknown tool `{name}`; available tools: {}", available.join(", "))]
    NotFound {
        /// The name that was asked for.
        name: String,
        /// The names that exist.
        available: Vec<String>,
    },
    /// The tool will not run this call (a policy, a confinement rule, a budget): do something
    /// else.
    #[error("tool refused the call: {reason}")]
    Refused {
        /// Why.
        reason: String,
    },
    /// The tool ran and failed; the message says how.
    #[error("tool failed: {message}")]
    Failed {
        /// What happened.
        message: String,
    },
}

impl ToolError {
    /// Shorthand for a [`ToolError::Failed`] error.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed {
            message: message.into(),
        }
    }
}

/// What went wrong reading a data source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The query asked for something the source does not have or cannot answer; change it.
    #[error("invalid query: {message}")]
    InvalidQuery {
        /// What is wrong with it.
        message: String,
    },
    /// The underlying store is unreachable or busy: retrying may succeed.
    #[error("data source unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// The data exists but is malformed beyond repair (a record that cannot be decoded).
    #[error("malformed data at {location}: {message}")]
    Malformed {
        /// Where (a file and line, a table and row).
        location: String,
        /// What is wrong.
        message: String,
    },
    /// Anything else that will not go away by retrying.
    #[error("data source failed: {message}")]
    Failed {
        /// What happened.
        message: String,
    },
}

/// What went wrong in a memory store (snapshots, working memory, long-term memory).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The persisted data has a format version this build does not read.
    #[error("unsupported format version {found} in {location} (this build reads {expected})")]
    UnsupportedVersion {
        /// Where the data lives.
        location: String,
        /// The version found.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// A vector of the wrong dimension was given to a vector index.
    #[error("dimension mismatch: index holds {expected}-dimensional vectors, got {found}")]
    DimensionMismatch {
        /// What the index holds.
        expected: usize,
        /// What was given.
        found: usize,
    },
    /// Reading or writing the backing storage failed.
    #[error("storage failed: {message}")]
    Io {
        /// What happened.
        message: String,
    },
    /// The stored data could not be decoded.
    #[error("corrupt store at {location}: {message}")]
    Corrupt {
        /// Where.
        location: String,
        /// What is wrong.
        message: String,
    },
}

/// What went wrong computing embeddings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A model file or runtime library is missing or unusable: fix the set-up.
    #[error("embedding model unavailable: {message}")]
    Unavailable {
        /// What is missing and where it was looked for.
        message: String,
    },
    /// The model ran and failed on this input.
    #[error("embedding failed: {message}")]
    Failed {
        /// What happened.
        message: String,
    },
}
