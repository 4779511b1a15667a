//! Helpers the tools need: deduplicating similar lines by template, and keeping only lines at
//! or above a level.

use rca_core::logs::TemplateMiner;
use rca_core::source::Level;
use serde::Serialize;

use super::format::{LogFormat, detect_level};
use super::miner::{MinerConfig, OnlineMiner};

/// Lines that share a template, with how many there were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DedupedLine {
    /// The template.
    pub template: String,
    /// The first line of the group, as written.
    pub example: String,
    /// Lines in the group.
    pub count: usize,
    /// 0-based index of the first line.
    pub first_line: usize,
}

/// Groups `lines` by template, in order of first appearance.
///
/// ```
/// use rca_tools::logs::dedup_lines;
/// let lines = ["took 3 ms", "took 9 ms", "cache miss"];
/// let d = dedup_lines(&lines);
/// assert_eq!(d.len(), 2);
/// assert_eq!((d[0].count, d[0].example.as_str()), (2, "took 3 ms"));
/// ```
pub fn dedup_lines<S: AsRef<str>>(lines: &[S]) -> Vec<DedupedLine> {
    let mut miner = OnlineMiner::new(MinerConfig::default());
    let ids: Vec<u64> = lines
        .iter()
        .map(|l| miner.ingest(l.as_ref()).template_id)
        .collect();
    let mut order: Vec<u64> = Vec::new();
    let mut groups: rustc_hash::FxHashMap<u64, DedupedLine> = Default::default();
    for (i, (&id, line)) in ids.iter().zip(lines).enumerate() {
        let id = miner.resolve(id).unwrap_or(id);
        groups
            .entry(id)
            .and_modify(|g| g.count += 1)
            .or_insert_with(|| {
                order.push(id);
                DedupedLine {
                    template: miner.template(id).map(|t| t.text).unwrap_or_default(),
                    example: line.as_ref().to_string(),
                    count: 1,
                    first_line: i,
                }
            });
    }
    order.iter().filter_map(|id| groups.remove(id)).collect()
}

/// The level of a line: from the format's `<Level>` field when it has one, otherwise detected
/// among the first words.
pub fn line_level(line: &str, format: Option<&LogFormat>) -> Option<Level> {
    format
        .and_then(|f| f.parse_line(line))
        .and_then(|p| p.level)
        .or_else(|| detect_level(line))
}

/// The lines at or above `min` (WARNING is the usual choice); lines without a level count as
/// INFO.
///
/// ```
/// use rca_core::source::Level;
/// use rca_tools::logs::filter_by_level;
/// let lines = ["INFO start", "WARN slow disk", "ERROR disk gone", "no level"];
/// assert_eq!(filter_by_level(&lines, Level::Warning, None), vec![1, 2]);
/// ```
pub fn filter_by_level<S: AsRef<str>>(
    lines: &[S],
    min: Level,
    format: Option<&LogFormat>,
) -> Vec<usize> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| line_level(l.as_ref(), format).unwrap_or_default() >= min)
        .map(|(i, _)| i)
        .collect()
}

/// The default minimum level of [`filter_by_level`] callers.
pub const DEFAULT_MIN_LEVEL: Level = Level::Warning;
