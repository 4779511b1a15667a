//! Reading the Nezha layout: day folders under `rca_data/`, their fault lists, per-minute log
//! and trace files, per-pod metric files, and the day's `construct_data` baseline.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use rca_core::source::{LogRecord, MetricSample, Span};
use rca_core::{TimeRange, Timestamp};
use rca_tools::analyze::Window;
use rca_tools::analyze::events::{SPAN_ID, TRACE_ID};
use rca_tools::sources::{
    FileMetricSource, FileTraceSource, LoadReport, MetricOptions, level_in, open_text, parse_time,
};
use serde::{Deserialize, Serialize};

use super::NezhaError;

/// One labelled fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NezhaCase {
    /// `<day>/<index>`, e.g. `2023-01-29/07` (index in time order within the day).
    pub id: String,
    /// The day folder.
    pub day: String,
    /// When the fault was injected (from `inject_time`, the telemetry's clock).
    pub inject_time: Timestamp,
    /// Ground truth: the root-cause pod. Only the scorer reads it.
    pub truth_pod: String,
    /// Ground truth: the fault type. Only the scorer reads it.
    pub truth_type: String,
}

/// One day folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NezhaDay {
    /// The folder name (a date).
    pub name: String,
    /// `rca_data/<day>`.
    pub dir: PathBuf,
    /// `construct_data/<day>`, when present.
    pub construct_dir: Option<PathBuf>,
    /// Its faults, in time order.
    pub cases: Vec<NezhaCase>,
}

/// Every day folder under `<root>/rca_data`, sorted by name.
pub fn discover(root: &Path) -> Result<Vec<NezhaDay>, NezhaError> {
    let rca = root.join("rca_data");
    let entries = std::fs::read_dir(&rca).map_err(|e| NezhaError::Layout {
        path: rca.display().to_string(),
        message: format!("cannot list day folders: {e}"),
    })?;
    let mut days = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(list) = fault_list_file(&dir) else {
            continue;
        };
        let cases = read_fault_list(&list, &name)?;
        let construct = root.join("construct_data").join(&name);
        days.push(NezhaDay {
            name,
            dir,
            construct_dir: construct.is_dir().then_some(construct),
            cases,
        });
    }
    days.sort_by(|a, b| a.name.cmp(&b.name));
    if days.is_empty() {
        return Err(NezhaError::Layout {
            path: rca.display().to_string(),
            message: "no day folder with a fault list".into(),
        });
    }
    Ok(days)
}

fn fault_list_file(dir: &Path) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("fault_list.json"))
        })
        .collect();
    files.sort();
    files.into_iter().next()
}

#[derive(Deserialize)]
struct RawFault {
    inject_time: String,
    inject_pod: String,
    inject_type: String,
}

fn read_fault_list(path: &Path, day: &str) -> Result<Vec<NezhaCase>, NezhaError> {
    let bad = |message: String| NezhaError::Layout {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let raw: BTreeMap<String, Vec<RawFault>> =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a fault list: {e}")))?;
    let mut faults = Vec::new();
    for f in raw.into_values().flatten() {
        let t = parse_time(&f.inject_time)
            .ok_or_else(|| bad(format!("unreadable inject_time {:?}", f.inject_time)))?;
        faults.push((t, f));
    }
    faults.sort_by_key(|(t, _)| *t);
    Ok(faults
        .into_iter()
        .enumerate()
        .map(|(i, (t, f))| NezhaCase {
            id: format!("{day}/{i:02}"),
            day: day.to_string(),
            inject_time: t,
            truth_pod: f.inject_pod,
            truth_type: f.inject_type,
        })
        .collect())
}

/// How a case's telemetry is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseOptions {
    /// The current window is the content of the per-minute file this many minutes after the
    /// injection minute (files are named by the minute their content ends in), when it
    /// exists: injected faults take effect with a delay of up to about a minute (the agent
    /// attaches), and the reference (Nezha) evaluates exactly this minute. `None`, or no such
    /// file: the current window is `[inject_time, inject_time + after_secs)`. Nothing after
    /// the detection time is read.
    pub settled_minute: Option<i64>,
    /// Seconds after the fault at which the incident counts as detected: the metric window
    /// (a sample a minute) runs from the fault to here, and so does the log and trace window
    /// when no settled minute is used.
    pub after_secs: i64,
    /// Length of the pre-fault log and trace baseline, in seconds.
    pub before_secs: i64,
    /// Length of the pre-fault metric baseline, in seconds.
    pub metric_baseline_secs: i64,
    /// Also use the day's `construct_data` logs and traces as baseline, when they lie before
    /// the fault.
    pub use_construct: bool,
}

impl Default for CaseOptions {
    fn default() -> Self {
        CaseOptions {
            settled_minute: Some(2),
            after_secs: 180,
            before_secs: 180,
            metric_baseline_secs: 1800,
            use_construct: true,
        }
    }
}

/// The telemetry of one case, cut to its windows. It holds no ground truth.
#[derive(Debug, Clone)]
pub struct CaseData {
    /// When the incident counts as detected (the end of the current window).
    pub detected_at: Timestamp,
    /// Log lines (baseline and current).
    pub logs: Vec<LogRecord>,
    /// Spans (baseline and current).
    pub spans: Vec<Span>,
    /// Metric samples (baseline and current).
    pub metrics: Vec<MetricSample>,
    /// The log and trace windows.
    pub event_window: Option<Window>,
    /// The metric windows.
    pub metric_window: Option<Window>,
    /// Problems met while reading.
    pub report: LoadReport,
}

/// The day's metric samples, read once and shared by its cases.
#[derive(Debug, Clone, Default)]
pub struct DayMetrics {
    samples: Vec<MetricSample>,
    report: LoadReport,
}

impl DayMetrics {
    /// Reads every `metric/*.csv[.gz]` file of a day folder (wide layout, one row a minute).
    pub fn load(day: &NezhaDay) -> Result<Self, NezhaError> {
        let files = list_files(&day.dir.join("metric"), "")?;
        let src = FileMetricSource::open(&files, &MetricOptions::default())?;
        Ok(DayMetrics {
            report: src.report().clone(),
            samples: src.samples_all().to_vec(),
        })
    }

    /// The samples in `[start, end)` (they are sorted by time).
    pub fn slice(&self, range: TimeRange) -> &[MetricSample] {
        let lo = self.samples.partition_point(|s| s.timestamp < range.start);
        let hi = self.samples.partition_point(|s| s.timestamp < range.end);
        &self.samples[lo..hi]
    }

    /// What loading produced.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }
}

fn list_files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>, NezhaError> {
    let entries = std::fs::read_dir(dir).map_err(|e| NezhaError::Layout {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.to_string_lossy();
            (n.ends_with(".csv") || n.ends_with(".csv.gz"))
                && p.file_name()
                    .is_some_and(|f| f.to_string_lossy().contains(suffix))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The per-minute files (`HH_MM_<kind>.csv[.gz]`) of a folder whose minute lies in
/// `[from, to]` (minutes of the day, UTC).
fn minute_files(dir: &Path, kind: &str, from: Timestamp, to: Timestamp) -> Vec<PathBuf> {
    let Ok(files) = list_files(dir, kind) else {
        return Vec::new();
    };
    let minute_of = |t: Timestamp| {
        let (_, _, _, h, m, _, _) = t.to_civil();
        h * 60 + m
    };
    let (lo, hi) = (minute_of(from), minute_of(to));
    files
        .into_iter()
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut parts = name.split('_');
            let h = parts.next().and_then(|x| x.parse::<u32>().ok());
            let m = parts.next().and_then(|x| x.parse::<u32>().ok());
            match (h, m) {
                (Some(h), Some(m)) => {
                    let t = h * 60 + m;
                    if lo <= hi {
                        (lo..=hi).contains(&t)
                    } else {
                        t >= lo || t <= hi
                    }
                }
                _ => false,
            }
        })
        .collect()
}

/// Reads Nezha log CSVs (`Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log`,
/// `Log` a JSON object whose `log` field is the line), keeping lines in `range`.
pub fn read_log_csv(
    files: &[PathBuf],
    range: TimeRange,
    out: &mut Vec<LogRecord>,
    report: &mut LoadReport,
) -> Result<(), NezhaError> {
    for path in files {
        let reader: Box<dyn BufRead + Send> = open_text(path)?;
        report.files += 1;
        let mut csv = csv::ReaderBuilder::new().flexible(true).from_reader(reader);
        let headers: Vec<String> = csv
            .headers()
            .map_err(|e| NezhaError::Layout {
                path: path.display().to_string(),
                message: format!("no CSV header: {e}"),
            })?
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect();
        let col = |n: &str| headers.iter().position(|h| h == n);
        let (Some(time), Some(pod), Some(log)) = (
            col("timeunixnano").or(col("timestamp")),
            col("podname"),
            col("log"),
        ) else {
            return Err(NezhaError::Layout {
                path: path.display().to_string(),
                message: format!("log CSV lacks time, pod or log columns: {headers:?}"),
            });
        };
        let trace = col("traceid");
        let span = col("spanid");
        // Lines of one file are not in time order within a millisecond (the collector merges
        // streams), and a span's events are ordered by time: sort them by the full-precision
        // time before they become millisecond timestamps, which later sorts keep stable.
        let mut lines: Vec<(i64, LogRecord)> = Vec::new();
        for (i, row) in csv.records().enumerate() {
            let row = match row {
                Ok(r) => r,
                Err(e) => {
                    report.bad_rows += 1;
                    if report.problems.len() < LoadReport::MAX_PROBLEMS {
                        report
                            .problems
                            .push(format!("{}:{}: {e}", path.display(), i + 2));
                    }
                    continue;
                }
            };
            let Some(ts) = row.get(time).and_then(parse_time) else {
                report.bad_rows += 1;
                continue;
            };
            if !range.contains(ts) {
                continue;
            }
            let raw = row.get(log).unwrap_or("");
            let message = serde_json::from_str::<serde_json::Value>(raw)
                .ok()
                .and_then(|v| v.get("log").and_then(|l| l.as_str()).map(str::to_string))
                .unwrap_or_else(|| raw.to_string());
            let message = message.trim_end().to_string();
            let mut attributes = BTreeMap::new();
            if let Some(t) = trace.and_then(|t| row.get(t)).filter(|t| !t.is_empty()) {
                attributes.insert(TRACE_ID.to_string(), t.to_string());
            }
            if let Some(s) = span.and_then(|s| row.get(s)).filter(|s| !s.is_empty()) {
                attributes.insert(SPAN_ID.to_string(), s.to_string());
            }
            let precise = row
                .get(time)
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(ts.0.saturating_mul(1_000_000));
            lines.push((
                precise,
                LogRecord {
                    timestamp: ts,
                    component: row.get(pod).unwrap_or("").to_string(),
                    level: level_in(&message),
                    message,
                    attributes,
                },
            ));
        }
        lines.sort_by_key(|(t, _)| *t);
        out.extend(lines.into_iter().map(|(_, r)| r));
    }
    Ok(())
}

/// Reads the per-minute log and trace files of a day into one case's records.
struct MinuteReader<'a> {
    log_dir: PathBuf,
    trace_dir: PathBuf,
    logs: &'a mut Vec<LogRecord>,
    spans: &'a mut Vec<Span>,
    report: &'a mut LoadReport,
}

impl MinuteReader<'_> {
    /// Keeps the lines and spans in `keep` from the files of the minutes `[from, to]`.
    fn read(&mut self, from: Timestamp, to: Timestamp, keep: TimeRange) -> Result<(), NezhaError> {
        read_log_csv(
            &minute_files(&self.log_dir, "_log", from, to),
            keep,
            self.logs,
            self.report,
        )?;
        let src = FileTraceSource::open(
            &minute_files(&self.trace_dir, "_trace", from, to),
            None,
            None,
        )?;
        self.report.merge(src.report());
        self.spans.extend(
            src.spans_all()
                .iter()
                .filter(|s| keep.contains(s.start))
                .cloned(),
        );
        Ok(())
    }
}

/// Reads one case: the per-minute logs and traces around the fault, the construct baseline
/// (when it lies before the fault), and the day's metrics around the fault. Nothing at or
/// after the detection time is kept.
pub fn load_case(
    day: &NezhaDay,
    metrics: &DayMetrics,
    case: &NezhaCase,
    options: &CaseOptions,
) -> Result<CaseData, NezhaError> {
    let t0 = case.inject_time;
    let before = TimeRange::new(t0.offset_millis(-options.before_secs * 1000), t0);
    let mut report = LoadReport::default();
    // The current window: the settled minute's file, or a fixed span after the fault.
    let mut logs = Vec::new();
    let mut spans = Vec::new();
    let mut minutes = MinuteReader {
        log_dir: day.dir.join("log"),
        trace_dir: day.dir.join("trace"),
        logs: &mut logs,
        spans: &mut spans,
        report: &mut report,
    };
    if let Some(k) = options.settled_minute {
        let minute = t0.offset_millis(k * 60_000);
        minutes.read(minute, minute, TimeRange::new(t0, Timestamp(i64::MAX)))?;
    }
    let times = minutes
        .logs
        .iter()
        .map(|r| r.timestamp)
        .chain(minutes.spans.iter().map(|s| s.start));
    let current = match (times.clone().min(), times.max()) {
        (Some(lo), Some(hi)) => TimeRange::new(lo, hi.offset_millis(1)),
        _ => TimeRange::new(t0, t0.offset_millis(options.after_secs * 1000)),
    };
    // The incident counts as detected `after_secs` after the fault (or at the end of the
    // settled minute, if later): the metric window runs up to it.
    let detected_at = current.end.max(t0.offset_millis(options.after_secs * 1000));
    // Per-minute files are named by the minute their content ends in; read one more.
    if minutes.logs.is_empty() && minutes.spans.is_empty() {
        minutes.read(before.start, detected_at.offset_millis(60_000), current)?;
    }
    // The pre-fault baseline.
    minutes.read(before.start, t0.offset_millis(60_000), before)?;
    let mut baseline_start = before.start;
    if options.use_construct
        && let Some(cdir) = &day.construct_dir
    {
        let mut clogs = Vec::new();
        let all = TimeRange::new(Timestamp(i64::MIN), before.start);
        let log_files = list_files(&cdir.join("log"), "")?;
        read_log_csv(&log_files, all, &mut clogs, &mut report)?;
        let tsrc = FileTraceSource::open(&list_files(&cdir.join("trace"), "")?, None, None)?;
        report.merge(tsrc.report());
        let cspans: Vec<Span> = tsrc
            .spans_all()
            .iter()
            .filter(|s| all.contains(s.start))
            .cloned()
            .collect();
        if let Some(first) = clogs
            .iter()
            .map(|r| r.timestamp)
            .chain(cspans.iter().map(|s| s.start))
            .min()
        {
            baseline_start = first;
        }
        logs.extend(clogs);
        spans.extend(cspans);
    }
    logs.sort_by_key(|r| r.timestamp);
    spans.sort_by_key(|s| s.start);
    // Between the construct minute and the pre-fault window nothing was loaded, so one range
    // covers both baselines.
    let event_window = Window::new(TimeRange::new(baseline_start, t0), current);
    // Metrics come a sample a minute: their current window starts at the fault.
    let metric_window = Window::new(
        TimeRange::new(t0.offset_millis(-options.metric_baseline_secs * 1000), t0),
        TimeRange::new(t0, detected_at),
    );
    let metric_samples = metrics
        .slice(TimeRange::new(metric_window.baseline.start, detected_at))
        .to_vec();
    report.records = logs.len() + spans.len() + metric_samples.len();
    Ok(CaseData {
        detected_at,
        logs,
        spans,
        metrics: metric_samples,
        event_window: Some(event_window),
        metric_window: Some(metric_window),
        report,
    })
}
