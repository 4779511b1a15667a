//! Text embeddings: the [`Embedder`] trait and the vector arithmetic built on it.

use async_trait::async_trait;

use crate::error::EmbedError;

/// Turns texts into fixed-length vectors.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::embed::Embedder;
/// use rca_core::EmbedError;
///
/// /// Counts vowels and consonants: a toy, but a valid embedder.
/// struct Letters;
///
/// #[async_trait]
/// impl Embedder for Letters {
///     fn dimension(&self) -> usize { 2 }
///     async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
///         Ok(texts.iter().map(|t| {
///             let v = t.chars().filter(|c| "aeiou".contains(*c)).count() as f32;
///             let c = t.chars().filter(|c| c.is_alphabetic()).count() as f32 - v;
///             vec![v, c]
///         }).collect())
///     }
/// }
/// ```
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Length of every vector.
    fn dimension(&self) -> usize;
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

fn _object_safe(_: &dyn Embedder) {}

/// Cosine similarity of two vectors (0 when either is zero or lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Scales a vector to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The element-wise mean of vectors of equal length (`None` when empty or ragged).
pub fn mean_vector(vectors: &[Vec<f32>]) -> Option<Vec<f32>> {
    let first = vectors.first()?;
    let mut mean = vec![0f32; first.len()];
    for v in vectors {
        if v.len() != mean.len() {
            return None;
        }
        mean.iter_mut().zip(v).for_each(|(m, x)| *m += x);
    }
    let n = vectors.len() as f32;
    mean.iter_mut().for_each(|m| *m /= n);
    Some(mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_basics() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6);
        assert_eq!(
            mean_vector(&[vec![1.0, 2.0], vec![3.0, 4.0]]),
            Some(vec![2.0, 3.0])
        );
        assert_eq!(mean_vector(&[]), None);
    }
}
