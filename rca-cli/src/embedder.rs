//! The embedder the CLI uses for log segmentation.
//!
//! A deterministic feature-hashing embedder (word unigrams and character trigrams into 256
//! signed buckets). It exists so that `rca logs segment` runs with no model; it is meant to be
//! replaced by rca-llm's `HashingEmbedder` once that lands, behind the same `Embedder` trait.

use async_trait::async_trait;
use rca_core::EmbedError;
use rca_core::embed::Embedder;

const DIM: usize = 256;

struct FeatureHashEmbedder;

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[async_trait]
impl Embedder for FeatureHashEmbedder {
    fn dimension(&self) -> usize {
        DIM
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; DIM];
                let mut add = |feature: &[u8]| {
                    let h = fnv(feature);
                    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
                    v[(h % DIM as u64) as usize] += sign;
                };
                for w in t.split_whitespace() {
                    let w = w.to_lowercase();
                    add(w.as_bytes());
                    let chars: Vec<char> = format!(" {w} ").chars().collect();
                    for tri in chars.windows(3) {
                        add(tri.iter().collect::<String>().as_bytes());
                    }
                }
                v
            })
            .collect())
    }
}

/// The embedder for `rca logs segment`.
pub fn cli_embedder() -> Box<dyn Embedder> {
    Box::new(FeatureHashEmbedder)
}
