//! Semantic segmentation of a log (RCAgent Algorithm 1): lines are embedded through their
//! templates (each distinct template once), line pairs within a window are connected with
//! weight `max(0, cos(v_i, v_j)) * exp(-d_ij / tau)`, Louvain finds communities, and a greedy
//! overlap removal turns the communities into contiguous blocks that cover every line once.

use std::sync::Arc;

use async_trait::async_trait;
use petgraph::graph::UnGraph;
use rca_core::EmbedError;
use rca_core::embed::{Embedder, normalize};
use rca_core::logs::{LogBlock, LogSegmenter, TemplateMiner};
use rustc_hash::FxHashMap;

use super::louvain::{Adjacency, louvain};
use super::miner::{MinerConfig, OnlineMiner};

/// Settings of the segmentation.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentConfig {
    /// Lines further apart than this are not connected (the paper: 200).
    pub window: usize,
    /// Distance decay: weight `exp(-d / tau)` (the paper: 1).
    pub tau: f64,
    /// Louvain resolution (1 is plain modularity).
    pub resolution: f64,
    /// Seed of the Louvain visiting order.
    pub seed: u64,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            window: 200,
            tau: 1.0,
            resolution: 1.0,
            seed: 0x5eed,
        }
    }
}

/// Splits `lines` into contiguous blocks of related lines, embedding each distinct template
/// once through `embedder`.
pub async fn segment_lines(
    lines: &[String],
    embedder: &dyn Embedder,
    config: &SegmentConfig,
) -> Result<Vec<LogBlock>, EmbedError> {
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let mut miner = OnlineMiner::new(MinerConfig::default());
    let ids: Vec<u64> = lines.iter().map(|l| miner.ingest(l).template_id).collect();
    let ids: Vec<u64> = ids
        .iter()
        .map(|&id| miner.resolve(id).unwrap_or(id))
        .collect();
    let mut slot: FxHashMap<u64, usize> = FxHashMap::default();
    let mut texts = Vec::new();
    let line_slot: Vec<usize> = ids
        .iter()
        .map(|&id| {
            *slot.entry(id).or_insert_with(|| {
                texts.push(miner.template(id).map(|t| t.text).unwrap_or_default());
                texts.len() - 1
            })
        })
        .collect();
    let mut vectors = embedder.embed(&texts).await?;
    if vectors.len() != texts.len() {
        return Err(EmbedError::Failed {
            message: format!(
                "embedder returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            ),
        });
    }
    vectors.iter_mut().for_each(|v| normalize(v));
    // Cosine of every pair of distinct templates that meet inside the window, memoised.
    let mut cos_cache: FxHashMap<(usize, usize), f64> = FxHashMap::default();
    let mut cos = |a: usize, b: usize| -> f64 {
        let key = (a.min(b), a.max(b));
        *cos_cache.entry(key).or_insert_with(|| {
            let (x, y) = (&vectors[key.0], &vectors[key.1]);
            if x.len() != y.len() {
                return 0.0;
            }
            f64::from(x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>())
        })
    };
    let n = lines.len();
    let tau = if config.tau > 0.0 { config.tau } else { 1.0 };
    let decay: Vec<f64> = (0..=config.window)
        .map(|d| (-(d as f64) / tau).exp())
        .collect();
    let mut graph: UnGraph<(), f64> = UnGraph::with_capacity(n, n * config.window.min(n));
    let nodes: Vec<_> = (0..n).map(|_| graph.add_node(())).collect();
    for i in 0..n {
        for j in i + 1..n.min(i + config.window + 1) {
            let w = cos(line_slot[i], line_slot[j]).max(0.0) * decay[j - i];
            if w > 0.0 {
                graph.add_edge(nodes[i], nodes[j], w);
            }
        }
    }
    let mut adj = Adjacency::with_nodes(n);
    for e in graph.raw_edges() {
        adj.add_edge(e.source().index(), e.target().index(), e.weight);
    }
    let community = louvain(&adj, config.resolution, config.seed);
    Ok(remove_overlaps(&community))
}

/// Greedy overlap removal: communities, largest first (ties: earliest first), claim the
/// unclaimed lines of their span `[first, last]`; each claimed run is a block. Adjacent
/// blocks of one community are joined. Every line ends in exactly one block.
pub(crate) fn remove_overlaps(community: &[usize]) -> Vec<LogBlock> {
    let n = community.len();
    let count = community.iter().copied().max().map_or(0, |m| m + 1);
    let mut span = vec![(usize::MAX, 0usize, 0usize); count];
    for (i, &c) in community.iter().enumerate() {
        let s = &mut span[c];
        s.0 = s.0.min(i);
        s.1 = s.1.max(i);
        s.2 += 1;
    }
    let mut order: Vec<usize> = (0..count).filter(|&c| span[c].2 > 0).collect();
    order.sort_by_key(|&c| (std::cmp::Reverse(span[c].2), span[c].0));
    let mut owner = vec![usize::MAX; n];
    for &c in &order {
        let (lo, hi, _) = span[c];
        for o in &mut owner[lo..=hi] {
            if *o == usize::MAX {
                *o = c;
            }
        }
    }
    let mut blocks: Vec<LogBlock> = Vec::new();
    for (i, &c) in owner.iter().enumerate() {
        match blocks.last_mut() {
            Some(b) if b.community == c && b.end == i => b.end = i + 1,
            _ => blocks.push(LogBlock {
                start: i,
                end: i + 1,
                community: c,
            }),
        }
    }
    blocks
}

/// The [`LogSegmenter`] of RCAgent Algorithm 1 over any [`Embedder`].
#[derive(Clone)]
pub struct SemanticSegmenter {
    embedder: Arc<dyn Embedder>,
    config: SegmentConfig,
}

impl SemanticSegmenter {
    /// A segmenter embedding through `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>, config: SegmentConfig) -> Self {
        SemanticSegmenter { embedder, config }
    }
}

#[async_trait]
impl LogSegmenter for SemanticSegmenter {
    async fn segment(&self, lines: &[String]) -> Result<Vec<LogBlock>, EmbedError> {
        segment_lines(lines, self.embedder.as_ref(), &self.config).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic bag-of-words test embedder (word hashes into 64 buckets), written for
    /// these tests only.
    pub(crate) struct TestWordEmbedder;

    #[async_trait]
    impl Embedder for TestWordEmbedder {
        fn dimension(&self) -> usize {
            64
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; 64];
                    for w in t.split_whitespace() {
                        let h = w.bytes().fold(1469598103934665603u64, |h, b| {
                            (h ^ u64::from(b)).wrapping_mul(1099511628211)
                        });
                        v[(h % 64) as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    #[test]
    fn overlaps_become_contiguous_blocks() {
        // Community 0 spans 0..=5 and is largest; community 1 sits inside it.
        let blocks = remove_overlaps(&[0, 0, 1, 1, 0, 0, 2, 2]);
        let covered: usize = blocks.iter().map(|b| b.len()).sum();
        assert_eq!(covered, 8);
        assert_eq!(
            blocks[0],
            LogBlock {
                start: 0,
                end: 6,
                community: 0
            }
        );
        assert_eq!(
            blocks[1],
            LogBlock {
                start: 6,
                end: 8,
                community: 2
            }
        );
        assert!(remove_overlaps(&[]).is_empty());
    }

    #[tokio::test]
    async fn separates_unrelated_phases() {
        let mut lines = Vec::new();
        for i in 0..60 {
            lines.push(format!("disk sda{} read error sector {}", i % 3, i * 7));
        }
        for i in 0..60 {
            lines.push(format!("user login accepted session {i} opened"));
        }
        let blocks = segment_lines(&lines, &TestWordEmbedder, &SegmentConfig::default())
            .await
            .unwrap();
        let mut pos = 0;
        for b in &blocks {
            assert_eq!(b.start, pos);
            pos = b.end;
        }
        assert_eq!(pos, lines.len());
        assert!(
            blocks.iter().any(|b| b.end == 60 || b.start == 60),
            "{blocks:?}"
        );
        let again = segment_lines(&lines, &TestWordEmbedder, &SegmentConfig::default())
            .await
            .unwrap();
        assert_eq!(blocks, again);
    }

    #[tokio::test]
    async fn bad_embedder_output_is_an_error() {
        struct Short;
        #[async_trait]
        impl Embedder for Short {
            fn dimension(&self) -> usize {
                1
            }
            async fn embed(&self, _: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
                Ok(Vec::new())
            }
        }
        let r = segment_lines(&["a b c".to_string()], &Short, &SegmentConfig::default()).await;
        assert!(matches!(r, Err(EmbedError::Failed { .. })));
        assert!(
            segment_lines(&[], &Short, &SegmentConfig::default())
                .await
                .unwrap()
                .is_empty()
        );
    }
}
