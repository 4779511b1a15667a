//! Self-consistency: the [`Aggregator`] that turns several sampled answers into one
//! (RCAgent 3.4). Implementations: embedding voting and model merging, in rca-agents.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{EmbedError, LlmError};

/// The result of aggregating candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregated {
    /// The chosen or merged answer.
    pub text: String,
    /// The index of the chosen candidate, when one was picked as is (voting); `None` when the
    /// answer was merged.
    pub chosen: Option<usize>,
}

/// Why aggregation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AggregateError {
    /// There was nothing to aggregate.
    #[error("no candidates to aggregate")]
    Empty,
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The model failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
}

/// Picks or merges one answer from several candidates.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::consistency::{Aggregated, AggregateError, Aggregator};
///
/// /// Picks the shortest candidate.
/// struct Shortest;
///
/// #[async_trait]
/// impl Aggregator for Shortest {
///     async fn aggregate(&self, candidates: &[String]) -> Result<Aggregated, AggregateError> {
///         let (i, text) = candidates.iter().enumerate().min_by_key(|(_, c)| c.len())
///             .ok_or(AggregateError::Empty)?;
///         Ok(Aggregated { text: text.clone(), chosen: Some(i) })
///     }
/// }
/// ```
#[async_trait]
pub trait Aggregator: Send + Sync {
    /// Aggregates the candidates (in sample order).
    async fn aggregate(&self, candidates: &[String]) -> Result<Aggregated, AggregateError>;
}

fn _object_safe(_: &dyn Aggregator) {}
