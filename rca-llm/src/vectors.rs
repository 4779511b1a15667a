//! Embeddings as matrices: one unit row per text, so every cosine is a dot product and a
//! batch of them is one matrix product. This is the one place where the workspace compares
//! embeddings in bulk: log segmentation (the similarity of every template pair in a chunk),
//! long-term memory and the log expert's examples (nearest neighbours), the self-consistency
//! vote (the sample closest to the mean) and tool selection (the best match of a task).
//!
//! Public signatures take and return plain slices and vectors; `ndarray` stays inside.

use ndarray::{Array1, Array2, ArrayView1, Axis};
use rca_core::EmbedError;

/// Embeddings of equal dimension as the rows of one matrix, each scaled to unit length (a
/// zero vector stays zero, and its cosine with anything is 0).
///
/// ```
/// use rca_llm::vectors::EmbeddingMatrix;
///
/// let m = EmbeddingMatrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 2.0], vec![1.0, 1.0]]).unwrap();
/// let hits = m.nearest(&[3.0, 0.1], 2).unwrap();
/// assert_eq!(hits[0].0, 0);
/// assert_eq!(hits[1].0, 2);
/// let gram = m.gram();
/// assert!((gram.get(0, 2) - 0.70710677).abs() < 1e-6);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingMatrix {
    rows: Array2<f32>,
}

impl Default for EmbeddingMatrix {
    fn default() -> Self {
        EmbeddingMatrix::new(0)
    }
}

fn mismatch(expected: usize, found: usize) -> EmbedError {
    EmbedError::Failed {
        message: format!("vector of dimension {found} where {expected} was expected"),
    }
}

/// `v` scaled to unit length (zero stays zero).
fn unit(v: &[f32]) -> Array1<f32> {
    let mut a = Array1::from(v.to_vec());
    let norm = a.dot(&a).sqrt();
    if norm > 0.0 && norm.is_finite() {
        a /= norm;
    } else if !norm.is_finite() {
        a.fill(0.0);
    }
    a
}

impl EmbeddingMatrix {
    /// An empty matrix whose rows will have `dimension` entries.
    pub fn new(dimension: usize) -> Self {
        EmbeddingMatrix {
            rows: Array2::zeros((0, dimension)),
        }
    }

    /// A matrix of `rows` (all of one length; an empty slice gives an empty matrix of
    /// dimension 0).
    pub fn from_rows(rows: &[Vec<f32>]) -> Result<Self, EmbedError> {
        let dimension = rows.first().map_or(0, Vec::len);
        let mut m = EmbeddingMatrix::new(dimension);
        for r in rows {
            m.push(r)?;
        }
        Ok(m)
    }

    /// Appends one row (scaled to unit length).
    pub fn push(&mut self, v: &[f32]) -> Result<(), EmbedError> {
        if self.rows.nrows() == 0 && self.rows.ncols() != v.len() {
            self.rows = Array2::zeros((0, v.len()));
        }
        if v.len() != self.dimension() {
            return Err(mismatch(self.dimension(), v.len()));
        }
        self.rows
            .push_row(unit(v).view())
            .map_err(|e| EmbedError::Failed {
                message: e.to_string(),
            })
    }

    /// Replaces row `i` (scaled to unit length); an index past the end is an error.
    pub fn set(&mut self, i: usize, v: &[f32]) -> Result<(), EmbedError> {
        if v.len() != self.dimension() {
            return Err(mismatch(self.dimension(), v.len()));
        }
        if i >= self.len() {
            return Err(EmbedError::Failed {
                message: format!("row {i} of a matrix of {} rows", self.len()),
            });
        }
        self.rows.row_mut(i).assign(&unit(v));
        Ok(())
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.nrows()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.nrows() == 0
    }

    /// Entries per row.
    pub fn dimension(&self) -> usize {
        self.rows.ncols()
    }

    /// Row `i` (unit length), when it exists.
    pub fn row(&self, i: usize) -> Option<Vec<f32>> {
        (i < self.len()).then(|| self.rows.row(i).to_vec())
    }

    fn check(&self, query: &[f32]) -> Result<(), EmbedError> {
        if !self.is_empty() && query.len() != self.dimension() {
            return Err(mismatch(self.dimension(), query.len()));
        }
        Ok(())
    }

    /// The cosine of `query` with every row (one matrix-vector product).
    pub fn similarities(&self, query: &[f32]) -> Result<Vec<f32>, EmbedError> {
        self.check(query)?;
        if self.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.rows.dot(&unit(query)).to_vec())
    }

    /// The `k` rows most similar to `query`, best first, as `(row, cosine)`; ties keep the
    /// lower row.
    pub fn nearest(&self, query: &[f32], k: usize) -> Result<Vec<(usize, f32)>, EmbedError> {
        let mut scored: Vec<(usize, f32)> =
            self.similarities(query)?.into_iter().enumerate().collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// The highest cosine of `query` with any row (0 when empty).
    pub fn best_similarity(&self, query: &[f32]) -> Result<f32, EmbedError> {
        Ok(self.similarities(query)?.into_iter().fold(0.0f32, f32::max))
    }

    /// The cosine of every pair of rows (`self · selfᵀ`).
    pub fn gram(&self) -> SimilarityMatrix {
        SimilarityMatrix {
            values: self.rows.dot(&self.rows.t()),
        }
    }

    /// The cosine of every row of `self` with every row of `other` (`self · otherᵀ`).
    pub fn cross(&self, other: &EmbeddingMatrix) -> Result<SimilarityMatrix, EmbedError> {
        if !self.is_empty() && !other.is_empty() && self.dimension() != other.dimension() {
            return Err(mismatch(self.dimension(), other.dimension()));
        }
        if self.is_empty() || other.is_empty() {
            return Ok(SimilarityMatrix {
                values: Array2::zeros((self.len(), other.len())),
            });
        }
        Ok(SimilarityMatrix {
            values: self.rows.dot(&other.rows.t()),
        })
    }

    /// The mean of the unit rows (`None` when empty).
    pub fn mean(&self) -> Option<Vec<f32>> {
        self.rows.mean_axis(Axis(0)).map(|m| m.to_vec())
    }

    /// The row closest to the mean of all rows (the medoid of a vote), with its cosine; ties
    /// keep the lower row. `None` when empty.
    pub fn central(&self) -> Option<(usize, f32)> {
        let mean = self.mean()?;
        self.nearest(&mean, 1).ok()?.into_iter().next()
    }
}

/// Cosines between the rows of one or two [`EmbeddingMatrix`]es.
#[derive(Debug, Clone, PartialEq)]
pub struct SimilarityMatrix {
    values: Array2<f32>,
}

impl SimilarityMatrix {
    /// The cosine of row `i` with column `j` (0 outside the matrix).
    pub fn get(&self, i: usize, j: usize) -> f32 {
        self.values.get((i, j)).copied().unwrap_or(0.0)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.values.nrows()
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.values.ncols()
    }

    /// Row `i` of cosines, when it exists.
    pub fn row(&self, i: usize) -> Option<Vec<f32>> {
        (i < self.rows()).then(|| self.values.row(i).to_vec())
    }

    /// The weighted mean of the cosines: `Σ wa_i wb_j s_ij / (Σ wa_i · Σ wb_j)` (0 when
    /// either weight sums to 0 or the lengths do not match the matrix).
    pub fn weighted_mean(&self, wa: &[f32], wb: &[f32]) -> f32 {
        if wa.len() != self.rows() || wb.len() != self.cols() {
            return 0.0;
        }
        let (sa, sb): (f32, f32) = (wa.iter().sum(), wb.iter().sum());
        if sa <= 0.0 || sb <= 0.0 {
            return 0.0;
        }
        let a = ArrayView1::from(wa);
        let b = ArrayView1::from(wb);
        a.dot(&self.values.dot(&b)) / (sa * sb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::embed::cosine;

    #[test]
    fn matrix_products_agree_with_pairwise_cosines() {
        let rows = vec![
            vec![1.0, 2.0, 0.0],
            vec![0.0, -1.0, 3.0],
            vec![0.5, 0.5, 0.5],
            vec![0.0, 0.0, 0.0],
        ];
        let m = EmbeddingMatrix::from_rows(&rows).unwrap();
        let g = m.gram();
        for i in 0..rows.len() {
            for j in 0..rows.len() {
                assert!(
                    (g.get(i, j) - cosine(&rows[i], &rows[j])).abs() < 1e-6,
                    "{i},{j}"
                );
            }
        }
        let q = [2.0, 1.0, 1.0];
        let sims = m.similarities(&q).unwrap();
        for (i, r) in rows.iter().enumerate() {
            assert!((sims[i] - cosine(r, &q)).abs() < 1e-6);
        }
        let other = EmbeddingMatrix::from_rows(&[q.to_vec()]).unwrap();
        let c = m.cross(&other).unwrap();
        assert_eq!((c.rows(), c.cols()), (4, 1));
        assert!((c.get(2, 0) - sims[2]).abs() < 1e-6);
        assert_eq!(g.get(9, 9), 0.0);
    }

    #[test]
    fn nearest_and_central_break_ties_by_row() {
        let m =
            EmbeddingMatrix::from_rows(&[vec![1.0, 0.0], vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let hits = m.nearest(&[1.0, 0.0], 5).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(m.central().unwrap().0, 0);
        assert!(EmbeddingMatrix::default().central().is_none());
        assert!(
            EmbeddingMatrix::default()
                .nearest(&[1.0], 3)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn bad_shapes_are_errors_not_panics() {
        assert!(EmbeddingMatrix::from_rows(&[vec![1.0], vec![1.0, 2.0]]).is_err());
        let mut m = EmbeddingMatrix::from_rows(&[vec![1.0, 2.0]]).unwrap();
        assert!(m.similarities(&[1.0]).is_err());
        assert!(m.set(3, &[1.0, 0.0]).is_err());
        assert!(m.set(0, &[1.0]).is_err());
        m.set(0, &[0.0, 5.0]).unwrap();
        assert_eq!(m.row(0).unwrap(), vec![0.0, 1.0]);
        let other = EmbeddingMatrix::from_rows(&[vec![1.0, 2.0, 3.0]]).unwrap();
        assert!(m.cross(&other).is_err());
        assert!(m.push(&[f32::NAN, 1.0]).is_ok());
        assert_eq!(m.row(1).unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn weighted_mean_counts_multiplicity() {
        let m = EmbeddingMatrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let g = m.gram();
        // Two copies of row 0 against one of each: (2*1 + 2*0) / (2 * 2) = 0.5.
        assert!((g.weighted_mean(&[2.0, 0.0], &[1.0, 1.0]) - 0.5).abs() < 1e-6);
        assert_eq!(g.weighted_mean(&[1.0], &[1.0, 1.0]), 0.0);
    }
}
