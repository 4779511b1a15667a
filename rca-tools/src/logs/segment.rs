//! Semantic segmentation of a log (RCAgent Algorithm 1): lines are embedded through their
//! templates (each distinct template once), line pairs within a window are connected with
//! weight `max(0, cos(v_i, v_j)) * exp(-d_ij / tau)`, Louvain finds communities, and a greedy
//! overlap removal turns the communities into contiguous blocks that cover every line once.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::EmbedError;
use rca_core::embed::Embedder;
use rca_core::logs::{LogBlock, LogSegmenter, TemplateMiner};
use rca_llm::vectors::{EmbeddingMatrix, SimilarityMatrix};
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
    /// Lines segmented together (at least `window`). Memory grows with this times `window`,
    /// never with the length of the log: a longer log is segmented chunk by chunk, and a
    /// block that continues across a chunk boundary is joined (see [`SegmentStream`]).
    pub chunk_lines: usize,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            window: 200,
            tau: 1.0,
            resolution: 1.0,
            seed: 0x5eed,
            chunk_lines: 4096,
        }
    }
}

/// Splits `lines` into contiguous blocks of related lines, embedding each distinct template
/// once through `embedder` (a [`SegmentStream`] over the slice).
pub async fn segment_lines(
    lines: &[String],
    embedder: &dyn Embedder,
    config: &SegmentConfig,
) -> Result<Vec<LogBlock>, EmbedError> {
    let mut stream = SegmentStream::new(embedder, config.clone());
    for l in lines {
        stream.push(l).await?;
    }
    stream.finish().await
}

/// Segmentation of a log of any length in bounded memory: lines are pushed one at a time
/// and mined into templates at once; every `chunk_lines` lines the chunk is segmented
/// (RCAgent Algorithm 1: window graph, Louvain, overlap removal). What is kept between
/// chunks is the miner (bounded by the templates), one vector per template, the
/// blocks found so far, and the template ids of the last block's final `window` lines.
///
/// At a chunk boundary, the last block of the earlier chunk and the first block of the next
/// are joined when the lines on either side are at least as similar to each other as the
/// lines of each side are among themselves (mean cosine of their templates): a block that
/// runs across the boundary stays one block, and nothing here is a tuned threshold.
pub struct SegmentStream<'e> {
    embedder: &'e dyn Embedder,
    config: SegmentConfig,
    miner: OnlineMiner,
    vectors: FxHashMap<u64, Vec<f32>>,
    chunk: Vec<u64>,
    offset: usize,
    communities: usize,
    blocks: Vec<LogBlock>,
    tail: Vec<u64>,
}

impl<'e> SegmentStream<'e> {
    /// A stream embedding through `embedder`.
    pub fn new(embedder: &'e dyn Embedder, mut config: SegmentConfig) -> Self {
        config.window = config.window.max(1);
        config.chunk_lines = config.chunk_lines.max(config.window);
        SegmentStream {
            embedder,
            miner: OnlineMiner::new(MinerConfig::default()),
            vectors: FxHashMap::default(),
            chunk: Vec::with_capacity(config.chunk_lines),
            offset: 0,
            communities: 0,
            blocks: Vec::new(),
            tail: Vec::new(),
            config,
        }
    }

    /// Adds the next line; segments the chunk when it is full.
    pub async fn push(&mut self, line: &str) -> Result<(), EmbedError> {
        self.chunk.push(self.miner.ingest(line).template_id);
        if self.chunk.len() >= self.config.chunk_lines {
            self.flush().await?;
        }
        Ok(())
    }

    /// Lines pushed so far.
    pub fn lines(&self) -> usize {
        self.offset + self.chunk.len()
    }

    /// Templates held (the miner's live templates).
    pub fn templates(&self) -> usize {
        self.miner.template_count()
    }

    /// Segments what is left and returns every block, in order, covering every line once.
    pub async fn finish(mut self) -> Result<Vec<LogBlock>, EmbedError> {
        self.flush().await?;
        Ok(self.blocks)
    }

    /// Embeds the templates of the chunk that have no vector yet (one batch).
    async fn embed_missing(&mut self) -> Result<(), EmbedError> {
        let mut missing: Vec<u64> = Vec::new();
        for &id in &self.chunk {
            if !self.vectors.contains_key(&id) && !missing.contains(&id) {
                missing.push(id);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = missing
            .iter()
            .map(|&id| self.miner.template(id).map(|t| t.text).unwrap_or_default())
            .collect();
        let vectors = self.embedder.embed(&texts).await?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Failed {
                message: format!(
                    "embedder returned {} vectors for {} texts",
                    vectors.len(),
                    texts.len()
                ),
            });
        }
        for (id, v) in missing.into_iter().zip(vectors) {
            self.vectors.insert(id, v);
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), EmbedError> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        // Ids merged since they were issued resolve to their survivor.
        let miner = &self.miner;
        self.chunk
            .iter_mut()
            .for_each(|id| *id = miner.resolve(*id).unwrap_or(*id));
        self.tail
            .iter_mut()
            .for_each(|id| *id = miner.resolve(*id).unwrap_or(*id));
        self.embed_missing().await?;
        let sim = ChunkSimilarity::new(&self.vectors, self.tail.iter().chain(&self.chunk))?;
        let n = self.chunk.len();
        let tau = if self.config.tau > 0.0 {
            self.config.tau
        } else {
            1.0
        };
        let window = self.config.window;
        let decay: Vec<f64> = (0..=window).map(|d| (-(d as f64) / tau).exp()).collect();
        let slots: Vec<Option<usize>> = self.chunk.iter().map(|id| sim.slot(*id)).collect();
        let mut adj = Adjacency::with_nodes(n);
        for i in 0..n {
            for j in i + 1..n.min(i + window + 1) {
                let w = sim.get_slots(slots[i], slots[j]).max(0.0) * decay[j - i];
                if w > 0.0 {
                    adj.add_edge(i, j, w);
                }
            }
        }
        let community = louvain(&adj, self.config.resolution, self.config.seed);
        drop(adj);
        let local = remove_overlaps(&community);
        let base = self.communities;
        self.communities += local.iter().map(|b| b.community + 1).max().unwrap_or(0);
        let mut local = local.into_iter().map(|b| LogBlock {
            start: b.start + self.offset,
            end: b.end + self.offset,
            community: b.community + base,
        });
        if let Some(first) = local.next() {
            let join = !self.blocks.is_empty() && {
                let head = &self.chunk[..(first.end - first.start).min(window)];
                continues(&sim, &self.tail, head)
            };
            match self.blocks.last_mut() {
                Some(prev) if join => prev.end = first.end,
                _ => self.blocks.push(first),
            }
        }
        self.blocks.extend(local);
        // The last block's final lines (at most `window`), for the join at the next
        // boundary. Only a full chunk has a next boundary, and a full chunk holds at least
        // `window` lines, so they all come from this chunk.
        if let Some(last) = self.blocks.last() {
            let chunk_end = self.offset + n;
            let from = last
                .start
                .max(self.offset)
                .max(chunk_end.saturating_sub(window));
            self.tail = self.chunk[from - self.offset..].to_vec();
        }
        self.offset += n;
        self.chunk.clear();
        Ok(())
    }
}

/// Whether the lines after a boundary (`head`) continue the block before it (`tail`): their
/// mean cross cosine is at least the lower of the two sides' mean inner cosines (over pairs
/// of distinct lines).
fn continues(sim: &ChunkSimilarity, tail: &[u64], head: &[u64]) -> bool {
    if tail.is_empty() || head.is_empty() {
        return false;
    }
    let (wa, wb) = (sim.weights(tail), sim.weights(head));
    let cross = f64::from(sim.gram.weighted_mean(&wa, &wb));
    let inner = |w: &[f32], n: usize| {
        if n < 2 {
            return 1.0;
        }
        let total: f64 = w.iter().map(|&x| f64::from(x)).sum();
        let all = f64::from(sim.gram.weighted_mean(w, w)) * total * total;
        let selves: f64 = w
            .iter()
            .enumerate()
            .map(|(i, &x)| f64::from(x) * f64::from(sim.gram.get(i, i)))
            .sum();
        (all - selves) / (n * (n - 1)) as f64
    };
    let within = inner(&wa, tail.len()).min(inner(&wb, head.len()));
    cross + 1e-6 >= within
}

/// The cosine of every pair of templates met in one chunk (and the tail before it): one
/// matrix product over their unit vectors.
struct ChunkSimilarity {
    slot: FxHashMap<u64, usize>,
    gram: SimilarityMatrix,
}

impl ChunkSimilarity {
    fn new<'a>(
        vectors: &FxHashMap<u64, Vec<f32>>,
        ids: impl Iterator<Item = &'a u64>,
    ) -> Result<Self, EmbedError> {
        let mut slot: FxHashMap<u64, usize> = FxHashMap::default();
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for &id in ids {
            if slot.contains_key(&id) {
                continue;
            }
            if let Some(v) = vectors.get(&id) {
                slot.insert(id, rows.len());
                rows.push(v.clone());
            }
        }
        Ok(ChunkSimilarity {
            slot,
            gram: EmbeddingMatrix::from_rows(&rows)?.gram(),
        })
    }

    fn slot(&self, id: u64) -> Option<usize> {
        self.slot.get(&id).copied()
    }

    fn get_slots(&self, a: Option<usize>, b: Option<usize>) -> f64 {
        match (a, b) {
            (Some(i), Some(j)) => f64::from(self.gram.get(i, j)),
            _ => 0.0,
        }
    }

    /// Per-slot multiplicities of `ids` (the weights of [`SimilarityMatrix::weighted_mean`]).
    fn weights(&self, ids: &[u64]) -> Vec<f32> {
        let mut w = vec![0f32; self.gram.rows()];
        for id in ids {
            if let Some(&i) = self.slot.get(id) {
                w[i] += 1.0;
            }
        }
        w
    }
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

    fn covers_in_order(blocks: &[LogBlock], n: usize) {
        let mut pos = 0;
        for b in blocks {
            assert_eq!(b.start, pos, "{blocks:?}");
            assert!(b.end > b.start);
            pos = b.end;
        }
        assert_eq!(pos, n);
    }

    #[tokio::test]
    async fn a_block_running_across_chunk_boundaries_stays_one_block() {
        let config = SegmentConfig {
            window: 20,
            chunk_lines: 100,
            ..SegmentConfig::default()
        };
        let lines: Vec<String> = (0..1000).map(|_| "heartbeat ok from pool".into()).collect();
        let blocks = segment_lines(&lines, &TestWordEmbedder, &config)
            .await
            .unwrap();
        covers_in_order(&blocks, lines.len());
        assert!(
            blocks.iter().all(|b| b.start == 0 || b.start % 100 != 0),
            "a chunk boundary cut a run of one template: {blocks:?}"
        );
    }

    #[tokio::test]
    async fn phases_are_found_inside_chunks_and_boundaries_join_only_alike_lines() {
        let config = SegmentConfig {
            window: 20,
            chunk_lines: 100,
            ..SegmentConfig::default()
        };
        // Phase A runs past the first chunk boundary (100); phase B starts at 150 and runs
        // past the second (200), where it must continue; phase C starts exactly at 300, a
        // boundary, where the blocks must not join.
        let mut lines = Vec::new();
        for i in 0..150 {
            lines.push(format!("disk sda{} read error sector {}", i % 3, i * 7));
        }
        for i in 150..300 {
            lines.push(format!("user login accepted session {i} opened"));
        }
        for i in 300..400 {
            lines.push(format!("cache eviction finished in {i} ms"));
        }
        let blocks = segment_lines(&lines, &TestWordEmbedder, &config)
            .await
            .unwrap();
        covers_in_order(&blocks, lines.len());
        let starts: Vec<usize> = blocks.iter().map(|b| b.start).collect();
        assert!(starts.contains(&150), "{blocks:?}");
        assert!(starts.contains(&300), "{blocks:?}");
        assert!(
            !starts.contains(&100) && !starts.contains(&200),
            "{blocks:?}"
        );
        // The whole log at once (one chunk) finds the same phase starts.
        let whole = segment_lines(
            &lines,
            &TestWordEmbedder,
            &SegmentConfig {
                window: 20,
                ..SegmentConfig::default()
            },
        )
        .await
        .unwrap();
        let whole_starts: Vec<usize> = whole.iter().map(|b| b.start).collect();
        assert!(
            whole_starts.contains(&150) && whole_starts.contains(&300),
            "{whole:?}"
        );
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
