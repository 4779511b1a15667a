//! Data-source traits: logs, metrics, traces, code repositories and SQL tables. Each streams
//! typed records over a time range; adapters for files and servers live in rca-tools.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, Range};
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use serde::{Deserialize, Serialize};

pub use crate::attributes::Attributes;
use crate::error::SourceError;
pub use crate::name::{Name, NameInterner};
use crate::time::{TimeRange, Timestamp};

/// A stream of records, each of which may fail on its own.
pub type RecordStream<T> = Pin<Box<dyn Stream<Item = Result<T, SourceError>> + Send>>;

/// Every record of a query's answer, or its first error: what a caller that needs the whole
/// window in memory (an analyzer) does with `source.logs(&q).await` and the like.
pub async fn collect_records<T>(
    answer: Result<RecordStream<T>, SourceError>,
) -> Result<Vec<T>, SourceError> {
    futures::TryStreamExt::try_collect(answer?).await
}

/// A run of records a source holds in memory, lent without copying them: a range of a
/// shared, time-ordered buffer. It reads as a slice (`&records[..]`). An analyzer that needs a
/// whole window gets one from [`TraceSource::lend_spans`] or [`LogSource::lend_logs`], and the
/// window's records are then held once however many explorers read them.
#[derive(Debug)]
pub struct SharedRecords<T> {
    buffer: Arc<Vec<T>>,
    range: Range<usize>,
}

impl<T> Clone for SharedRecords<T> {
    fn clone(&self) -> Self {
        SharedRecords {
            buffer: Arc::clone(&self.buffer),
            range: self.range.clone(),
        }
    }
}

impl<T> SharedRecords<T> {
    /// The records of `buffer` in `range` (clamped to the buffer; an inverted range is empty).
    pub fn new(buffer: Arc<Vec<T>>, range: Range<usize>) -> Self {
        let end = range.end.min(buffer.len());
        let start = range.start.min(end);
        SharedRecords {
            buffer,
            range: start..end,
        }
    }

    /// Records the caller already owns (a streamed answer, collected).
    pub fn owned(records: Vec<T>) -> Self {
        let n = records.len();
        SharedRecords {
            buffer: Arc::new(records),
            range: 0..n,
        }
    }
}

impl<T> Deref for SharedRecords<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // `new` and `owned` keep the range inside the buffer.
        self.buffer.get(self.range.clone()).unwrap_or(&[])
    }
}

/// Severity of a log line, ordered from least to most severe.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// Finest detail.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation (the default when a line names no level).
    #[default]
    Info,
    /// Something unexpected that the system survived.
    Warning,
    /// An operation failed.
    Error,
    /// The component cannot go on.
    Fatal,
}

impl Level {
    /// Reads a level word as logs spell it (`WARN`, `warning`, `E`, `SEVERE`, ...).
    pub fn parse(word: &str) -> Option<Level> {
        let w = word.trim().trim_matches(|c: char| !c.is_ascii_alphabetic());
        Some(match w.to_ascii_uppercase().as_str() {
            "TRACE" | "FINEST" | "FINER" | "V" | "VERBOSE" => Level::Trace,
            "DEBUG" | "FINE" | "D" => Level::Debug,
            "INFO" | "INFORMATION" | "NOTICE" | "I" => Level::Info,
            "WARN" | "WARNING" | "W" => Level::Warning,
            "ERROR" | "ERR" | "E" | "SEVERE" | "FAILURE" => Level::Error,
            "FATAL" | "CRITICAL" | "CRIT" | "F" | "PANIC" | "EMERG" | "ALERT" => Level::Fatal,
            _ => return None,
        })
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warning => "WARNING",
            Level::Error => "ERROR",
            Level::Fatal => "FATAL",
        })
    }
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// When it was written.
    pub timestamp: Timestamp,
    /// The component (service, pod, host) that wrote it.
    pub component: Name,
    /// Its level, when known.
    pub level: Option<Level>,
    /// The message.
    pub message: String,
    /// Further fields (trace id, thread, file and line).
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub attributes: Attributes,
}

/// The attributes that name the code unit a log line was written in, most specific first
/// (OpenTelemetry's semantic conventions, current and earlier names): a class or module, or
/// the source file.
pub const CODE_UNIT_ATTRIBUTES: [&str; 4] = [
    "code.namespace",
    "code.function.name",
    "code.file.path",
    "code.filepath",
];

/// The attributes that give the line of code a log line was written at (OpenTelemetry's
/// semantic conventions, current and earlier names).
pub const CODE_LINE_ATTRIBUTES: [&str; 2] = ["code.line.number", "code.lineno"];

impl LogRecord {
    /// Makes this line's component and attribute keys the interner's shared names, so
    /// that a million lines hold each name once (what an in-memory source does on load).
    pub fn share_names(&mut self, names: &mut NameInterner) {
        self.component = names.share(&self.component);
        self.attributes.intern_keys(names);
    }

    /// Where the line was written, `unit:line`, when its attributes say both (see
    /// [`CODE_UNIT_ATTRIBUTES`] and [`CODE_LINE_ATTRIBUTES`]): the identity of the statement
    /// that wrote it. Two statements can write the same text; their lines are different
    /// events.
    pub fn code_location(&self) -> Option<String> {
        let line = CODE_LINE_ATTRIBUTES
            .iter()
            .find_map(|k| self.attributes.get(k))?;
        let unit = CODE_UNIT_ATTRIBUTES
            .iter()
            .find_map(|k| self.attributes.get(k))?;
        Some(format!("{unit}:{line}"))
    }
}

/// Which log lines to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogQuery {
    /// The time range.
    pub range: TimeRange,
    /// Only this component (exact name), if set.
    pub component: Option<String>,
    /// Only lines at or above this level, if set (lines without a level count as INFO).
    pub min_level: Option<Level>,
    /// At most this many lines, if set.
    pub limit: Option<usize>,
}

impl LogQuery {
    /// Every line in a range.
    pub fn range(range: TimeRange) -> Self {
        LogQuery {
            range,
            component: None,
            min_level: None,
            limit: None,
        }
    }

    /// Whether a record satisfies the query's filters (range, component, level).
    pub fn matches(&self, r: &LogRecord) -> bool {
        self.range.contains(r.timestamp)
            && self.component.as_ref().is_none_or(|c| *c == r.component)
            && self
                .min_level
                .is_none_or(|min| r.level.unwrap_or_default() >= min)
    }
}

/// A source of log lines.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::source::{LogQuery, LogRecord, LogSource, RecordStream};
/// use rca_core::SourceError;
///
/// struct InMemory(Vec<LogRecord>);
///
/// #[async_trait]
/// impl LogSource for InMemory {
///     async fn logs(&self, q: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
///         let hits: Vec<_> = self.0.iter().filter(|r| q.matches(r)).cloned().map(Ok).collect();
///         Ok(Box::pin(futures::stream::iter(hits)))
///     }
///     async fn components(&self) -> Result<Vec<String>, SourceError> {
///         Ok(self.0.iter().map(|r| r.component.to_string()).collect())
///     }
/// }
/// ```
#[async_trait]
pub trait LogSource: Send + Sync {
    /// Streams the lines that match the query, in time order.
    async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError>;

    /// Every line whose time lies in `range`, in time order, lent without a copy when the
    /// source holds its lines in memory (what `logs(&LogQuery::range(range))` streams).
    /// `None`, the default, when it does not: the caller streams [`logs`](Self::logs).
    fn lend_logs(&self, _range: TimeRange) -> Option<SharedRecords<LogRecord>> {
        None
    }
    /// The components that have logs.
    async fn components(&self) -> Result<Vec<String>, SourceError>;
}

/// One metric sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    /// When it was taken.
    pub timestamp: Timestamp,
    /// The component measured.
    pub component: String,
    /// The KPI (e.g. `cpu_usage`, `latency_p90`).
    pub metric: String,
    /// The value.
    pub value: f64,
    /// Further labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Which metric samples to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricQuery {
    /// The time range.
    pub range: TimeRange,
    /// Only this component, if set.
    pub component: Option<String>,
    /// Only this KPI, if set.
    pub metric: Option<String>,
}

impl MetricQuery {
    /// Every sample in a range.
    pub fn range(range: TimeRange) -> Self {
        MetricQuery {
            range,
            component: None,
            metric: None,
        }
    }

    /// Whether a sample satisfies the query.
    pub fn matches(&self, s: &MetricSample) -> bool {
        self.range.contains(s.timestamp)
            && self.component.as_ref().is_none_or(|c| *c == s.component)
            && self.metric.as_ref().is_none_or(|m| *m == s.metric)
    }
}

/// A source of metric samples.
#[async_trait]
pub trait MetricSource: Send + Sync {
    /// Streams the samples that match the query, in time order per series.
    async fn samples(&self, query: &MetricQuery)
    -> Result<RecordStream<MetricSample>, SourceError>;
    /// The `(component, metric)` series available.
    async fn series(&self) -> Result<Vec<(String, String)>, SourceError>;
}

/// One span of a distributed trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// The trace it belongs to.
    pub trace_id: Name,
    /// Its own id.
    pub span_id: Name,
    /// Its parent's id (`None` for a root span).
    pub parent_id: Option<Name>,
    /// The component (service, pod) that ran it.
    pub component: Name,
    /// The operation name.
    pub operation: Name,
    /// When it started.
    pub start: Timestamp,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// Whether it ended in error.
    pub error: bool,
    /// Further attributes (status code, peer).
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub attributes: Attributes,
}

impl Span {
    /// Makes this span's ids, component, operation and attribute keys the interner's shared
    /// names: the spans of a trace hold its id once, a parent id is its parent's own, and a
    /// million spans of twenty services hold twenty component names.
    pub fn share_names(&mut self, names: &mut NameInterner) {
        self.trace_id = names.share(&self.trace_id);
        self.span_id = names.share(&self.span_id);
        if let Some(p) = &self.parent_id {
            self.parent_id = Some(names.share(p));
        }
        self.component = names.share(&self.component);
        self.operation = names.share(&self.operation);
        self.attributes.intern_keys(names);
    }
}

/// Which spans to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceQuery {
    /// Spans that start in this range.
    pub range: TimeRange,
    /// Only spans of this component, if set.
    pub component: Option<String>,
    /// Only spans of this operation, if set.
    pub operation: Option<String>,
}

impl TraceQuery {
    /// Every span in a range.
    pub fn range(range: TimeRange) -> Self {
        TraceQuery {
            range,
            component: None,
            operation: None,
        }
    }

    /// Whether a span satisfies the query.
    pub fn matches(&self, s: &Span) -> bool {
        self.range.contains(s.start)
            && self.component.as_ref().is_none_or(|c| *c == s.component)
            && self.operation.as_ref().is_none_or(|o| *o == s.operation)
    }
}

/// A source of spans.
#[async_trait]
pub trait TraceSource: Send + Sync {
    /// Streams the spans that match the query, in start-time order.
    async fn spans(&self, query: &TraceQuery) -> Result<RecordStream<Span>, SourceError>;

    /// Every span whose start lies in `range`, in start-time order, lent without a copy when
    /// the source holds its spans in memory (what `spans(&TraceQuery::range(range))`
    /// streams). `None`, the default, when it does not: the caller streams
    /// [`spans`](Self::spans).
    fn lend_spans(&self, _range: TimeRange) -> Option<SharedRecords<Span>> {
        None
    }
}

/// A file of a code repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeFile {
    /// Path relative to the repository root, with `/` separators.
    pub path: String,
    /// The contents.
    pub text: String,
}

/// Where a symbol is defined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// The symbol.
    pub symbol: String,
    /// The file, relative to the repository root.
    pub path: String,
    /// 1-based line of the definition.
    pub line: usize,
}

/// A source-code repository.
#[async_trait]
pub trait CodeSource: Send + Sync {
    /// Paths of all source files (relative, `/`-separated), honouring ignore rules.
    async fn files(&self) -> Result<Vec<String>, SourceError>;
    /// One file's contents.
    async fn read(&self, path: &str) -> Result<CodeFile, SourceError>;
    /// Where a class, function or type of that name is defined (possibly several places).
    async fn find_definition(&self, symbol: &str) -> Result<Vec<Definition>, SourceError>;
}

/// A value in a table row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// Text.
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

/// A row: column name -> value, in column order.
pub type Row = Vec<(String, Value)>;

/// A source of tables queried with SQL (a database, or telemetry registered as tables).
/// Agents never write SQL against it directly: tools turn condensed arguments (an entity id and
/// a time range) into queries.
#[async_trait]
pub trait SqlSource: Send + Sync {
    /// The tables and their columns.
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError>;
    /// Runs a read-only query with positional text parameters (`$1`, `$2`, ...).
    async fn query(&self, sql: &str, params: &[Value]) -> Result<RecordStream<Row>, SourceError>;
}

/// Which records of a table to read: condensed arguments (an entity and a time range), never a
/// query language.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordQuery {
    /// Only rows that mention this entity (a job, a host, a user id) in any key column.
    pub entity: Option<String>,
    /// Only rows whose time column falls in this range, if set.
    pub range: Option<TimeRange>,
    /// At most this many rows, if set.
    pub limit: Option<usize>,
}

/// A source of table rows (job lifecycle events, configuration changes, database records),
/// read with condensed arguments. Adapters: CSV files, PostgreSQL.
#[async_trait]
pub trait TableSource: Send + Sync {
    /// The tables and their columns.
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError>;
    /// Rows of `table` that match the query, in time order when the table has a time column.
    async fn records(
        &self,
        table: &str,
        query: &RecordQuery,
    ) -> Result<RecordStream<Row>, SourceError>;
}

fn _object_safe(
    _: &dyn LogSource,
    _: &dyn MetricSource,
    _: &dyn TraceSource,
    _: &dyn CodeSource,
    _: &dyn SqlSource,
    _: &dyn TableSource,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_location_needs_a_unit_and_a_line_under_either_convention() {
        let record = |attrs: &[(&str, &str)]| LogRecord {
            timestamp: crate::Timestamp(0),
            component: "c".into(),
            level: None,
            message: "m".into(),
            attributes: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let old = record(&[("code.namespace", "a.B"), ("code.lineno", "12")]);
        assert_eq!(old.code_location().as_deref(), Some("a.B:12"));
        let new = record(&[("code.file.path", "src/b.rs"), ("code.line.number", "7")]);
        assert_eq!(new.code_location().as_deref(), Some("src/b.rs:7"));
        assert_eq!(record(&[("code.lineno", "12")]).code_location(), None);
        assert_eq!(record(&[("code.namespace", "a.B")]).code_location(), None);
    }

    #[test]
    fn collect_records_gathers_all_or_the_first_error() {
        let ok: RecordStream<i32> = Box::pin(futures::stream::iter(vec![Ok(1), Ok(2)]));
        let got = futures::executor::block_on(collect_records(Ok(ok))).unwrap();
        assert_eq!(got, vec![1, 2]);
        let bad: RecordStream<i32> = Box::pin(futures::stream::iter(vec![
            Ok(1),
            Err(SourceError::Unavailable {
                message: "gone".into(),
            }),
        ]));
        assert!(futures::executor::block_on(collect_records(Ok(bad))).is_err());
        let refused: Result<RecordStream<i32>, SourceError> = Err(SourceError::Unavailable {
            message: "down".into(),
        });
        assert!(futures::executor::block_on(collect_records(refused)).is_err());
    }

    #[test]
    fn shared_records_read_as_their_range_and_clamp_it() {
        let buffer = Arc::new(vec![1, 2, 3, 4, 5]);
        let middle = SharedRecords::new(Arc::clone(&buffer), 1..4);
        assert_eq!(&middle[..], &[2, 3, 4]);
        let lent = middle.clone();
        assert_eq!(Arc::strong_count(&buffer), 3);
        assert_eq!(lent.len(), 3);
        assert_eq!(&SharedRecords::new(Arc::clone(&buffer), 3..99)[..], &[4, 5]);
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = SharedRecords::new(Arc::clone(&buffer), 4..2);
        assert!(inverted.is_empty());
        assert_eq!(&SharedRecords::owned(vec![7, 8])[..], &[7, 8]);
    }

    #[test]
    fn level_words() {
        assert_eq!(Level::parse("WARN"), Some(Level::Warning));
        assert_eq!(Level::parse("[error]"), Some(Level::Error));
        assert_eq!(Level::parse("SEVERE"), Some(Level::Error));
        assert_eq!(Level::parse("blah"), None);
        assert!(Level::Error > Level::Warning);
    }

    #[test]
    fn log_query_filters() {
        let r = LogRecord {
            timestamp: Timestamp(5),
            component: "a".into(),
            level: None,
            message: "m".into(),
            attributes: Default::default(),
        };
        let mut q = LogQuery::range(TimeRange::new(Timestamp(0), Timestamp(10)));
        assert!(q.matches(&r));
        q.min_level = Some(Level::Warning);
        assert!(!q.matches(&r));
        q.min_level = Some(Level::Info);
        q.component = Some("b".into());
        assert!(!q.matches(&r));
    }
}
