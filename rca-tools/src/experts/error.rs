//! The error of the expert agents, sorted by what the caller should do.

use rca_core::{EmbedError, LlmError, SourceError};

/// What went wrong in an expert's run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpertError {
    /// The input is too trivial to analyse (empty question, no symbol, no log lines): give
    /// the expert real content.
    #[error("trivial input: {0}")]
    TrivialInput(String),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The model answered with something that could not be used.
    #[error("unusable model answer: {0}")]
    Unusable(String),
    /// A data source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Embedding log text (segmentation, example retrieval) failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
}
