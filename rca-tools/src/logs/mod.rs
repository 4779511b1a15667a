//! Log clustering (RCAgent Algorithm 1 and friends): generic variable masking, log-format
//! header parsing, the online [`OnlineMiner`] and its parallel mode, semantic segmentation
//! with Louvain communities, deduplication and level filtering, and the Levenshtein evidence
//! filter. See `docs/guides/log-clustering.md`.

mod error;
mod evidence;
mod filter;
mod format;
mod input;
mod louvain;
mod mask;
mod miner;
mod parallel;
mod segment;
mod skeleton;
mod state_file;

pub use error::LogsError;
pub use evidence::{DEFAULT_MIN_EVIDENCE_CHARS, evidence_supported, filter_evidence};
pub use filter::{DEFAULT_MIN_LEVEL, DedupedLine, dedup_lines, filter_by_level, line_level};
pub use format::{CONTENT_FIELD, LogFormat, ParsedLine, detect_level};
pub use input::{DEFAULT_MAX_LINE_BYTES, InputNotes, LineReader, read_lines};
pub use mask::{WILDCARD, mask_line};
pub use miner::{MinerConfig, OnlineMiner, STATE_VERSION};
pub use parallel::{MineOptions, MineTimings, MinedLog, mine_bytes, mine_file, mine_parallel};
pub use segment::{SegmentConfig, SegmentStream, SemanticSegmenter, segment_lines};

#[cfg(test)]
mod tests;
