//! Errors of the tool lifecycle.

use rca_core::{EmbedError, LlmError, SourceError, StoreError};

/// What went wrong in the tool lifecycle, sorted by what the caller should do. A tool that
/// could not be generated is not an error: it is an
/// [`Escalation`](super::forge::Escalation) the orchestration acts on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleError {
    /// A role's answer could not be read (no JSON object, missing fields): the role may try
    /// again with this feedback.
    #[error("malformed {what} from the {role} role: {message}")]
    Malformed {
        /// Which role answered.
        role: String,
        /// What was expected (a contract, SQL).
        what: String,
        /// Why it did not parse.
        message: String,
        /// The answer as received.
        raw: String,
    },
    /// The deterministic policy has no template for this task or contract.
    #[error("no template fits: {message}")]
    NoTemplate {
        /// Why.
        message: String,
    },
    /// No tool of that name is in the inventory.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        /// The name asked for.
        name: String,
    },
    /// Call arguments did not fit the tool's parameters.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The model behind a role failed.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The embedder failed during selection.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The tables could not be read or a query failed outside a refinement loop.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Loading or saving the inventory failed (including an unsupported format version).
    #[error(transparent)]
    Store(#[from] StoreError),
}
