//! The parallel mode: the input is cut into one contiguous chunk per thread, each chunk is
//! mined by its own [`OnlineMiner`], and the per-thread templates are folded into the first
//! miner in chunk order. Deterministic for a fixed thread count (the chunking and the merge
//! order depend only on it); memory stays bounded by the templates of each chunk.

use rca_core::logs::TemplateId;

use super::error::LogsError;
use super::miner::{MinerConfig, OnlineMiner};

/// Mines `lines` with `threads` worker threads (1 runs inline) and returns the merged miner
/// and each line's final template id.
///
/// ```
/// use rca_core::logs::TemplateMiner;
/// use rca_tools::logs::{MinerConfig, mine_parallel};
/// let lines: Vec<String> = (0..100).map(|i| format!("job {i} done in {}ms", i * 3)).collect();
/// let (miner, ids) = mine_parallel(&lines, &MinerConfig::default(), 2).unwrap();
/// assert!(ids.iter().all(|&id| id == ids[0]));
/// assert_eq!(miner.template(ids[0]).unwrap().count, 100);
/// ```
pub fn mine_parallel<S: AsRef<str> + Sync>(
    lines: &[S],
    config: &MinerConfig,
    threads: usize,
) -> Result<(OnlineMiner, Vec<TemplateId>), LogsError> {
    let threads = threads.max(1).min(lines.len().max(1));
    let mine = |chunk: &[S]| {
        let mut m = OnlineMiner::new(config.clone());
        let ids: Vec<TemplateId> = chunk
            .iter()
            .map(|l| m.ingest_line(l.as_ref()).template_id)
            .collect();
        (m, ids)
    };
    if threads == 1 {
        let (m, ids) = mine(lines);
        return Ok(finish(m, vec![ids], Vec::new()));
    }
    let size = lines.len().div_ceil(threads);
    let chunks: Vec<&[S]> = lines.chunks(size.max(1)).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| LogsError::Io {
            message: format!("cannot start {threads} threads: {e}"),
        })?;
    let mut results: Vec<(OnlineMiner, Vec<TemplateId>)> = pool.install(|| {
        use rayon::prelude::*;
        chunks.par_iter().map(|c| mine(c)).collect()
    });
    let mut rest = results.split_off(1);
    let Some((mut first, first_ids)) = results.pop() else {
        return Ok((OnlineMiner::new(config.clone()), Vec::new()));
    };
    let mut all_ids = vec![first_ids];
    let mut maps = Vec::new();
    for (m, ids) in rest.drain(..) {
        maps.push(first.absorb_miner(&m));
        all_ids.push(ids);
    }
    Ok(finish(first, all_ids, maps))
}

fn finish(
    miner: OnlineMiner,
    chunk_ids: Vec<Vec<TemplateId>>,
    maps: Vec<Vec<TemplateId>>,
) -> (OnlineMiner, Vec<TemplateId>) {
    let mut out = Vec::with_capacity(chunk_ids.iter().map(Vec::len).sum());
    for (k, ids) in chunk_ids.into_iter().enumerate() {
        let map = k.checked_sub(1).and_then(|j| maps.get(j));
        out.extend(ids.into_iter().map(|id| {
            let id = map.and_then(|m| m.get(id as usize).copied()).unwrap_or(id);
            miner.resolve(id).unwrap_or(id)
        }));
    }
    (miner, out)
}
