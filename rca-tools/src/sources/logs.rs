//! Log files: plain text (`<timestamp> [level] message`, continuation lines appended) and JSON
//! lines (one object per line).

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::Path;

use async_trait::async_trait;
use std::sync::Arc;

use rca_core::source::{Level, LogQuery, LogRecord, LogSource, RecordStream, SharedRecords};
use rca_core::{Attributes, SourceError, TimeRange, Timestamp};

use super::io::{ReadBudget, open_text_within, over_budget, parse_time, stem};
use super::{LoadReport, SharedNames, before_cutoff};
use crate::logs::LineReader;

/// How a log file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One record per line starting with a timestamp (`2023-01-29T10:00:00Z` or
    /// `2023-01-29 10:00:00.123`), then optionally a level word, then the message; lines that
    /// do not start with a timestamp continue the previous record (stack traces).
    Plain,
    /// One JSON object per line with a time field (`timestamp`, `time`, `ts`, `@timestamp`),
    /// a message (`message`, `msg`, `log`, `body`), optionally a level (`level`, `severity`)
    /// and a component (`component`, `service`, `pod`, `host`); other fields become attributes.
    JsonLines,
}

impl LogFormat {
    /// Guesses the format from the file name: `.jsonl`, `.ndjson` and `.json` (also `.gz`) are
    /// JSON lines, everything else plain.
    pub fn from_path(path: &Path) -> LogFormat {
        let name = path.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".jsonl") || name.ends_with(".ndjson") || name.ends_with(".json") {
            LogFormat::JsonLines
        } else {
            LogFormat::Plain
        }
    }
}

/// Options for reading log files.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// The format; guessed from each file name when `None`.
    pub format: Option<LogFormat>,
    /// The component of lines that name none; the file stem when `None`.
    pub component: Option<String>,
    /// Drop every line at or after this instant.
    pub cutoff: Option<Timestamp>,
    /// Lines longer than this many bytes are cut and counted as repaired; `None` is the
    /// miner's default ([`crate::logs::DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: Option<usize>,
    /// The decompressed bytes the files may hold together; reading stops with an error once
    /// it is spent. `None`: no limit.
    pub budget: Option<ReadBudget>,
}

const TIME_KEYS: &[&str] = &["timestamp", "time", "ts", "@timestamp", "datetime", "date"];
const MESSAGE_KEYS: &[&str] = &["message", "msg", "log", "body", "text"];
const LEVEL_KEYS: &[&str] = &["level", "severity", "lvl", "loglevel", "severitytext"];
const COMPONENT_KEYS: &[&str] = &[
    "component",
    "service",
    "servicename",
    "pod",
    "podname",
    "host",
    "hostname",
    "source",
];

/// Log lines read from files, answering [`LogSource`] queries from memory.
#[derive(Debug, Clone, Default)]
pub struct FileLogSource {
    records: Arc<Vec<LogRecord>>,
    cutoff: Option<Timestamp>,
    report: LoadReport,
}

impl FileLogSource {
    /// A source over records already in memory (sorted here; the cutoff applies). Their
    /// names are made shared ([`LogRecord::share_names`]), so each distinct component and
    /// attribute key is held once.
    pub fn from_records(records: Vec<LogRecord>, cutoff: Option<Timestamp>) -> Self {
        let mut records = SharedNames::from_records(records).records;
        let before = records.len();
        records.retain(|r| before_cutoff(cutoff, r.timestamp));
        records.sort_by_key(|r| r.timestamp);
        let report = LoadReport {
            records: records.len(),
            after_cutoff: before - records.len(),
            ..LoadReport::default()
        };
        FileLogSource {
            records: Arc::new(records),
            cutoff,
            report,
        }
    }

    /// Reads the given files. A file that cannot be opened is an error; a line that cannot
    /// be parsed is counted in [`FileLogSource::report`] and skipped, and a line with invalid
    /// UTF-8, NUL bytes or more than `max_line_bytes` bytes is repaired, kept and counted.
    /// A spent read budget ([`LogOptions::budget`]) is an error.
    pub fn open<P: AsRef<Path>>(paths: &[P], options: &LogOptions) -> Result<Self, SourceError> {
        let mut report = LoadReport::default();
        let mut records = SharedNames::default();
        let max_line_bytes = options
            .max_line_bytes
            .unwrap_or(crate::logs::DEFAULT_MAX_LINE_BYTES);
        for path in paths {
            let path = path.as_ref();
            let format = options.format.unwrap_or_else(|| LogFormat::from_path(path));
            let component = options.component.clone().unwrap_or_else(|| stem(path));
            let reader = open_text_within(path, options.budget.as_ref())?;
            report.files += 1;
            match format {
                LogFormat::Plain => read_plain(
                    reader,
                    path,
                    &component,
                    max_line_bytes,
                    &mut records,
                    &mut report,
                )?,
                LogFormat::JsonLines => read_json_lines(
                    reader,
                    path,
                    &component,
                    max_line_bytes,
                    &mut records,
                    &mut report,
                )?,
            }
        }
        let mut records = records.records;
        let before = records.len();
        records.retain(|r| before_cutoff(options.cutoff, r.timestamp));
        report.after_cutoff += before - records.len();
        records.sort_by_key(|r| r.timestamp);
        report.records = records.len();
        Ok(FileLogSource {
            records: Arc::new(records),
            cutoff: options.cutoff,
            report,
        })
    }

    /// What loading produced.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Every record, in time order.
    pub fn records(&self) -> &[LogRecord] {
        &self.records
    }

    /// The records that match a query, in time order (the cutoff always applies).
    pub fn query(&self, query: &LogQuery) -> Vec<LogRecord> {
        let hits = super::in_range(&self.records, query.range, self.cutoff, |r| r.timestamp)
            .filter(|r| query.matches(r))
            .cloned();
        match query.limit {
            Some(n) => hits.take(n).collect(),
            None => hits.collect(),
        }
    }
}

#[async_trait]
impl LogSource for FileLogSource {
    async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
        let hits: Vec<_> = self.query(query).into_iter().map(Ok).collect();
        Ok(Box::pin(futures::stream::iter(hits)))
    }

    async fn components(&self) -> Result<Vec<String>, SourceError> {
        Ok(distinct_components(self.records.iter()))
    }

    fn lend_logs(&self, range: TimeRange) -> Option<SharedRecords<LogRecord>> {
        Some(SharedRecords::new(
            Arc::clone(&self.records),
            super::range_of(&self.records, range, self.cutoff, |r| r.timestamp),
        ))
    }
}

/// The components of `records`, each once, in name order.
pub(crate) fn distinct_components<'a>(
    records: impl IntoIterator<Item = &'a LogRecord>,
) -> Vec<String> {
    let set: BTreeSet<&str> = records.into_iter().map(|r| r.component.as_str()).collect();
    set.into_iter().map(str::to_string).collect()
}

/// Splits a plain line into its timestamp and the rest (the timestamp may be one token or a
/// date and a time token).
fn split_timestamp(line: &str) -> Option<(Timestamp, &str)> {
    let line = line.trim_start_matches('[');
    let mut parts = line.splitn(3, char::is_whitespace);
    let first = parts.next()?;
    let first_clean = first.trim_end_matches([']', ',']);
    if first_clean.len() >= 10 && first_clean.as_bytes().get(4) == Some(&b'-') {
        // A date and a time in two words (`2024-05-01 10:15:00`); a level word after a full
        // RFC 3339 time is not a zone.
        if let Some(second) = parts.next()
            && second.starts_with(|c: char| c.is_ascii_digit())
        {
            let joined = format!("{first_clean} {}", second.trim_end_matches([']', ',']));
            if let Some(t) = parse_time(&joined) {
                return Some((t, parts.next().unwrap_or("")));
            }
        }
        let rest = line.get(first.len()..).unwrap_or("");
        return parse_time(first_clean).map(|t| (t, rest));
    }
    None
}

/// The level named among the first words of a message, if any (words of 4 or more letters,
/// or bracketed, so single letters in prose do not count).
pub fn level_in(message: &str) -> Option<Level> {
    message
        .split_whitespace()
        .take(4)
        .filter(|w| {
            let letters = w.chars().filter(|c| c.is_ascii_alphabetic()).count();
            letters >= 4 || (w.starts_with('[') && letters >= 1)
        })
        .find_map(Level::parse)
}

/// Repaired lines of one file: invalid UTF-8 is decoded lossily, NUL bytes become spaces
/// and over-long lines are cut, each counted as a repaired row, so one bad line never ends
/// the file. Only a failing stream (a corrupt gzip member, an I/O error) stops it, counted
/// as a bad row; a spent read budget is an error.
fn each_line(
    reader: Box<dyn BufRead + Send>,
    path: &Path,
    max_line_bytes: usize,
    report: &mut LoadReport,
    mut f: impl FnMut(usize, &str, &mut LoadReport),
) -> Result<(), SourceError> {
    let mut lines = LineReader::new(reader, max_line_bytes.max(1));
    let mut i = 0usize;
    loop {
        match lines.next_line() {
            Ok(Some(line)) => {
                f(i, &line, report);
                i += 1;
            }
            Ok(None) => break,
            Err(e) => {
                if let Some(err) = over_budget(path, &e) {
                    return Err(err);
                }
                report.bad(format!("{}:{}", path.display(), i + 1), e);
                break;
            }
        }
    }
    let notes = lines.into_notes();
    let repaired = notes.invalid_utf8 + notes.nul + notes.truncated;
    if repaired > 0 {
        report.repaired_rows += repaired;
        if report.problems.len() < LoadReport::MAX_PROBLEMS {
            report.problems.push(format!(
                "{}: {} lines repaired ({} invalid UTF-8, {} with NUL bytes, {} cut at {} bytes)",
                path.display(),
                repaired,
                notes.invalid_utf8,
                notes.nul,
                notes.truncated,
                max_line_bytes
            ));
        }
    }
    Ok(())
}

fn read_plain(
    reader: Box<dyn BufRead + Send>,
    path: &Path,
    component: &str,
    max_line_bytes: usize,
    out: &mut SharedNames<LogRecord>,
    report: &mut LoadReport,
) -> Result<(), SourceError> {
    let mut current: Option<LogRecord> = None;
    each_line(reader, path, max_line_bytes, report, |i, line, report| {
        if line.trim().is_empty() {
            return;
        }
        match split_timestamp(line) {
            Some((timestamp, rest)) => {
                if let Some(r) = current.take() {
                    out.push(r);
                }
                let message = rest.trim().to_string();
                current = Some(LogRecord {
                    timestamp,
                    component: component.into(),
                    level: level_in(&message),
                    message,
                    attributes: Default::default(),
                });
            }
            None => match current.as_mut() {
                Some(r) => {
                    r.message.push('\n');
                    r.message.push_str(line);
                }
                None => report.bad(
                    format!("{}:{}", path.display(), i + 1),
                    "line has no timestamp and no record to continue",
                ),
            },
        }
    })?;
    if let Some(r) = current {
        out.push(r);
    }
    Ok(())
}

fn read_json_lines(
    reader: Box<dyn BufRead + Send>,
    path: &Path,
    component: &str,
    max_line_bytes: usize,
    out: &mut SharedNames<LogRecord>,
    report: &mut LoadReport,
) -> Result<(), SourceError> {
    each_line(reader, path, max_line_bytes, report, |i, line, report| {
        let loc = || format!("{}:{}", path.display(), i + 1);
        if line.trim().is_empty() {
            return;
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                report.bad(loc(), format!("not JSON: {e}"));
                return;
            }
        };
        let Some(obj) = value.as_object() else {
            report.bad(loc(), "not a JSON object");
            return;
        };
        match json_record(obj, component) {
            Ok(r) => out.push(r),
            Err(m) => report.bad(loc(), m),
        }
    })
}

fn as_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn json_record(
    obj: &serde_json::Map<String, serde_json::Value>,
    default_component: &str,
) -> Result<LogRecord, String> {
    let mut timestamp = None;
    let mut message = None;
    let mut level = None;
    let mut component = None;
    let mut attributes = Attributes::new();
    for (k, v) in obj {
        let key = super::norm_col(k);
        if timestamp.is_none() && TIME_KEYS.iter().any(|a| super::norm_col(a) == key) {
            timestamp = Some(parse_time(&as_text(v)).ok_or_else(|| format!("bad time {v}"))?);
        } else if message.is_none() && MESSAGE_KEYS.contains(&key.as_str()) {
            message = Some(as_text(v).trim_end().to_string());
        } else if level.is_none() && LEVEL_KEYS.contains(&key.as_str()) {
            level = Level::parse(&as_text(v));
        } else if component.is_none() && COMPONENT_KEYS.contains(&key.as_str()) {
            component = Some(as_text(v));
        } else {
            attributes.insert(k.clone(), as_text(v));
        }
    }
    let timestamp = timestamp.ok_or("no time field")?;
    let message = message.ok_or("no message field")?;
    Ok(LogRecord {
        timestamp,
        component: component
            .unwrap_or_else(|| default_component.to_string())
            .into(),
        level: level.or_else(|| level_in(&message)),
        message,
        attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_loaded_source_holds_each_component_and_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!(
                "{{\"time\":\"2024-01-01T00:00:{:02}Z\",\"service\":\"cart\",\"msg\":\"line {i}\",\"trace_id\":\"t{i}\"}}\n",
                i % 60
            ));
        }
        let p = write(dir.path(), "app.jsonl", &text);
        let files = FileLogSource::open(&[&p], &LogOptions::default()).unwrap();
        let memory = FileLogSource::from_records(
            files
                .records()
                .iter()
                .map(|r| LogRecord {
                    component: r.component.as_str().into(),
                    attributes: r
                        .attributes
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.clone()))
                        .collect(),
                    ..r.clone()
                })
                .collect(),
            None,
        );
        for source in [&files, &memory] {
            let r = source.records();
            assert_eq!(r.len(), 40);
            assert!(r.iter().all(|x| x.component.shares_with(&r[0].component)));
            let key = |x: &LogRecord| x.attributes.keys().next().unwrap().clone();
            assert!(r.iter().all(|x| key(x).shares_with(&key(&r[0]))));
        }
    }

    #[test]
    fn lent_lines_are_the_streamed_answer() {
        let line = |t: i64| LogRecord {
            timestamp: Timestamp(t),
            component: "c".into(),
            level: Some(Level::Info),
            message: format!("line {t}"),
            attributes: Default::default(),
        };
        let source =
            FileLogSource::from_records((0..10).rev().map(line).collect(), Some(Timestamp(8)));
        for (a, b) in [(0, 10), (3, 6), (5, 5), (7, 20)] {
            let range = TimeRange::new(Timestamp(a), Timestamp(b));
            let streamed = source.query(&LogQuery::range(range));
            assert_eq!(
                &source.lend_logs(range).unwrap()[..],
                &streamed[..],
                "{a}..{b}"
            );
        }
    }

    #[test]
    fn one_bad_line_never_ends_the_file() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        // Plain text: an invalid UTF-8 line in the middle, then more lines.
        let mut plain = Vec::new();
        for i in 0..5 {
            writeln!(plain, "2024-01-01T00:00:0{i}Z INFO line {i}").unwrap();
        }
        plain.extend_from_slice(b"2024-01-01T00:00:05Z ERROR bad \xff\xfe bytes\n");
        for i in 6..9 {
            writeln!(plain, "2024-01-01T00:00:0{i}Z INFO line {i}").unwrap();
        }
        let p = dir.path().join("app.log");
        std::fs::write(&p, &plain).unwrap();
        // Gzipped JSON lines with the same defect.
        let mut json = Vec::new();
        for i in 0..9 {
            if i == 4 {
                json.extend_from_slice(
                    b"{\"time\": \"2024-01-01T00:00:04Z\", \"message\": \"bad \xff\"}\n",
                );
            } else {
                writeln!(
                    json,
                    r#"{{"time": "2024-01-01T00:00:0{i}Z", "message": "m {i}"}}"#
                )
                .unwrap();
            }
        }
        let gz = dir.path().join("svc.jsonl.gz");
        let mut enc =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
        enc.write_all(&json).unwrap();
        enc.finish().unwrap();
        let src = FileLogSource::open(&[&p, &gz], &LogOptions::default()).unwrap();
        let report = src.report();
        assert_eq!(report.records, 18, "{report:?}");
        assert_eq!(report.bad_rows, 0, "{report:?}");
        assert_eq!(report.repaired_rows, 2, "{report:?}");
        assert!(report.problems.iter().any(|p| p.contains("invalid UTF-8")));
        // A line longer than the limit is cut, kept and counted.
        let long = dir.path().join("long.log");
        std::fs::write(
            &long,
            format!(
                "2024-01-01T00:00:00Z INFO {}\n2024-01-01T00:00:01Z INFO after\n",
                "x".repeat(5000)
            ),
        )
        .unwrap();
        let opts = LogOptions {
            max_line_bytes: Some(1000),
            ..LogOptions::default()
        };
        let src = FileLogSource::open(&[&long], &opts).unwrap();
        assert_eq!(src.report().records, 2);
        assert_eq!(src.report().repaired_rows, 1);
    }

    #[test]
    fn plain_lines_levels_and_continuations() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "api.log",
            "2024-05-01T10:00:00Z INFO started\n\
             2024-05-01 10:00:01.500 ERROR failed to connect\n\
             \tat Foo.bar(Foo.java:1)\n\
             2024-05-01T10:00:02Z plain message\n",
        );
        let s = FileLogSource::open(&[&p], &LogOptions::default()).unwrap();
        let r = s.records();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].component, "api");
        assert_eq!(r[1].level, Some(Level::Error));
        assert!(r[1].message.contains("Foo.java"));
        assert_eq!(r[2].level, None);
        assert_eq!(s.report().bad_rows, 0);
    }

    #[test]
    fn json_lines_with_bad_rows_and_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "x.jsonl",
            "{\"ts\":\"2024-05-01T10:00:00Z\",\"level\":\"warn\",\"service\":\"cart\",\"msg\":\"slow\",\"trace\":\"t1\"}\n\
             not json\n\
             {\"msg\":\"no time\"}\n\
             {\"time\":1714557605,\"message\":\"ERROR boom\"}\n\
             {\"time\":1714557700,\"message\":\"after\"}\n",
        );
        let cutoff = Timestamp::parse_rfc3339("2024-05-01T10:01:00Z");
        let s = FileLogSource::open(
            &[&p],
            &LogOptions {
                cutoff,
                ..LogOptions::default()
            },
        )
        .unwrap();
        assert_eq!(s.records().len(), 2);
        assert_eq!(s.report().bad_rows, 2);
        assert_eq!(s.report().after_cutoff, 1);
        assert_eq!(s.records()[0].component, "cart");
        assert_eq!(s.records()[0].attributes.get("trace").unwrap(), "t1");
        assert_eq!(s.records()[1].level, Some(Level::Error));
        assert_eq!(s.records()[1].component, "x");
        let all = LogQuery::range(TimeRange::new(Timestamp(0), Timestamp(i64::MAX)));
        assert_eq!(s.query(&all).len(), 2);
    }

    #[tokio::test]
    async fn serves_the_trait() {
        let s = FileLogSource::from_records(
            vec![LogRecord {
                timestamp: Timestamp(5),
                component: "a".into(),
                level: Some(Level::Error),
                message: "m".into(),
                attributes: Default::default(),
            }],
            Some(Timestamp(10)),
        );
        let q = LogQuery::range(TimeRange::new(Timestamp(0), Timestamp(100)));
        let got = super::super::collect_logs(&s, &q).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(s.components().await.unwrap(), ["a"]);
    }
}
