//! Text metrics comparing a generated root cause or solution with a reference: embedding
//! score (cosine), METEOR (exact and stem matches) and an LLM judge (0 to 10 for correctness
//! and helpfulness).

mod judge;
mod meteor;
mod porter;

pub use judge::{JudgeError, JudgeScores, judge, judge_prompt, parse_scores};
pub use meteor::{MeteorParams, meteor, meteor_multi, meteor_tokens, tokenize};
pub use porter::stem;

use rca_core::EmbedError;
use rca_core::embed::{Embedder, cosine};

/// Cosine similarity of the embeddings of `generated` and `reference` (RCAgent's EmbScore).
pub async fn embedding_score(
    embedder: &dyn Embedder,
    generated: &str,
    reference: &str,
) -> Result<f32, EmbedError> {
    let v = embedder
        .embed(&[generated.to_string(), reference.to_string()])
        .await?;
    match v.as_slice() {
        [a, b] => Ok(cosine(a, b)),
        _ => Err(EmbedError::Failed {
            message: format!("the embedder returned {} vectors for 2 texts", v.len()),
        }),
    }
}

#[cfg(test)]
mod tests;
