//! File-based data sources: plain and JSON-lines logs, CSV metrics (long and wide layouts),
//! OTLP-JSON and CSV spans. Every file may be gzip-compressed (`.gz`).
//!
//! Each source reads its files once, keeps the records in time order and answers queries from
//! memory. A source built with a cutoff (the detection time of an incident) drops every record
//! at or after it, so no tool can see the future. Rows that cannot be decoded are counted in a
//! [`LoadReport`] and skipped; loading never panics on bad input.

pub mod incident;
mod io;
mod logs;
mod metrics;
mod traces;

pub use io::{DEFAULT_MAX_TELEMETRY_BYTES, ReadBudget, open_text, open_text_within, parse_time};
#[cfg(feature = "otlp")]
pub(crate) use logs::distinct_components;
pub use logs::{FileLogSource, LogFormat, LogOptions, level_in};
#[cfg(feature = "otlp")]
pub(crate) use metrics::distinct_series;
pub use metrics::{FileMetricSource, MetricLayout, MetricOptions};
pub use traces::{FileTraceSource, SpanFormat};

use rca_core::source::{
    LogQuery, LogRecord, LogSource, MetricQuery, MetricSample, MetricSource, Span, TraceQuery,
    TraceSource, collect_records,
};
use rca_core::{NameInterner, SourceError, TimeRange, Timestamp};

/// What loading files produced: how many records were kept and which rows were bad.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Files read.
    pub files: usize,
    /// Records kept.
    pub records: usize,
    /// Rows that could not be decoded and were skipped.
    pub bad_rows: usize,
    /// Rows kept after a repair: invalid UTF-8 decoded lossily, NUL bytes replaced, or a line
    /// longer than the limit cut (see `LogOptions::max_line_bytes`).
    pub repaired_rows: usize,
    /// Records dropped because they lie at or after the cutoff.
    pub after_cutoff: usize,
    /// The first few problems, as `file:line: message`.
    pub problems: Vec<String>,
}

impl LoadReport {
    /// How many problem messages are kept (the count in `bad_rows` is always complete).
    pub const MAX_PROBLEMS: usize = 20;

    pub(crate) fn bad(
        &mut self,
        location: impl std::fmt::Display,
        message: impl std::fmt::Display,
    ) {
        self.bad_rows += 1;
        if self.problems.len() < Self::MAX_PROBLEMS {
            self.problems.push(format!("{location}: {message}"));
        }
    }

    /// Adds another report's counts to this one.
    pub fn merge(&mut self, other: &LoadReport) {
        self.files += other.files;
        self.records += other.records;
        self.bad_rows += other.bad_rows;
        self.repaired_rows += other.repaired_rows;
        self.after_cutoff += other.after_cutoff;
        for p in &other.problems {
            if self.problems.len() < Self::MAX_PROBLEMS {
                self.problems.push(p.clone());
            }
        }
    }
}

/// Records as a loader reads them, each record's names made shared as it arrives (so memory
/// grows with the records' own text and the distinct names, not with every repetition).
#[derive(Debug)]
pub(crate) struct SharedNames<T> {
    /// The records read so far.
    pub records: Vec<T>,
    names: NameInterner,
}

impl<T> Default for SharedNames<T> {
    fn default() -> Self {
        SharedNames {
            records: Vec::new(),
            names: NameInterner::new(),
        }
    }
}

/// A record whose names an interner can share.
pub(crate) trait ShareNames {
    fn share_names(&mut self, names: &mut NameInterner);
}

impl ShareNames for Span {
    fn share_names(&mut self, names: &mut NameInterner) {
        Span::share_names(self, names);
    }
}

impl ShareNames for LogRecord {
    fn share_names(&mut self, names: &mut NameInterner) {
        LogRecord::share_names(self, names);
        // A continued line grew its message: keep only what it holds.
        self.message.shrink_to_fit();
    }
}

impl<T: ShareNames> SharedNames<T> {
    /// Keeps `record`, its names shared with those read before.
    pub fn push(&mut self, mut record: T) {
        record.share_names(&mut self.names);
        self.records.push(record);
    }

    /// Every record of `records`, their names shared.
    pub fn from_records(records: Vec<T>) -> Self {
        let mut names = NameInterner::new();
        let mut records = records;
        for r in &mut records {
            r.share_names(&mut names);
        }
        SharedNames { records, names }
    }
}

/// The records of a time-sorted slice that lie in `range`, clamped to end at the cutoff;
/// `at` gives a record's time. One binary search, then a scan while records are in range.
pub(crate) fn in_range<T>(
    sorted: &[T],
    range: TimeRange,
    cutoff: Option<Timestamp>,
    at: impl Fn(&T) -> Timestamp,
) -> impl Iterator<Item = &T> {
    let found = range_of(sorted, range, cutoff, at);
    sorted[found].iter()
}

/// The positions of the time-ordered `sorted` whose time lies in `range` (and before
/// `cutoff`).
pub(crate) fn range_of<T>(
    sorted: &[T],
    range: TimeRange,
    cutoff: Option<Timestamp>,
    at: impl Fn(&T) -> Timestamp,
) -> std::ops::Range<usize> {
    let range = match cutoff {
        Some(c) => range.clamp_end(c),
        None => range,
    };
    let lo = sorted.partition_point(|r| at(r) < range.start);
    let hi = lo + sorted[lo..].partition_point(|r| at(r) < range.end);
    lo..hi
}

/// Whether a record at `t` may be kept under an optional cutoff.
pub(crate) fn before_cutoff(cutoff: Option<Timestamp>, t: Timestamp) -> bool {
    cutoff.is_none_or(|c| t < c)
}

/// Collects every log line a source returns for a query.
pub async fn collect_logs(
    source: &dyn LogSource,
    query: &LogQuery,
) -> Result<Vec<LogRecord>, SourceError> {
    collect_records(source.logs(query).await).await
}

/// Collects every metric sample a source returns for a query.
pub async fn collect_samples(
    source: &dyn MetricSource,
    query: &MetricQuery,
) -> Result<Vec<MetricSample>, SourceError> {
    collect_records(source.samples(query).await).await
}

/// Collects every span a source returns for a query.
pub async fn collect_spans(
    source: &dyn TraceSource,
    query: &TraceQuery,
) -> Result<Vec<Span>, SourceError> {
    collect_records(source.spans(query).await).await
}

/// Normalises a column name for matching: lower case, without `_`, `-`, `.`, spaces and
/// bracketed units (`CpuUsage(m)` -> `cpuusage`).
pub(crate) fn norm_col(name: &str) -> String {
    let base = name.split('(').next().unwrap_or(name);
    base.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The index of the first header that matches one of `aliases` (tried in order).
pub(crate) fn find_col(headers: &[String], aliases: &[&str]) -> Option<usize> {
    let normed: Vec<String> = headers.iter().map(|h| norm_col(h)).collect();
    aliases
        .iter()
        .find_map(|a| normed.iter().position(|h| h == a))
}
