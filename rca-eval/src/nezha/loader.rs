//! Reading the Nezha layout: day folders under `rca_data/`, their fault lists, per-minute log
//! and trace files and per-pod metric files; each fault becomes an incident under one of two
//! protocols.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use rca_core::seeded::{GOLDEN_GAMMA, mix64, stable_hash};
use rca_core::source::{CODE_LINE_ATTRIBUTES, CODE_UNIT_ATTRIBUTES, LogRecord, MetricSample, Span};
use rca_core::{Attributes, TimeRange, Timestamp};
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

/// What the diagnoser is told about when the fault happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Nezha's own protocol: the fault time is known (the incident's onset), and the incident
    /// counts as detected `detect_after_secs` after it.
    FaultTime,
    /// What a deployment sees: an alert fires a lag after the fault (drawn per case from
    /// `alert_lag_secs` with a fixed seed); the window ends at the alert and begins
    /// `history_secs` before it, and the onset is for the diagnosis to find.
    #[default]
    Alert,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::FaultTime => "fault-time",
            Protocol::Alert => "alert",
        })
    }
}

/// How a case becomes an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseOptions {
    /// What the diagnoser is told about the fault time.
    pub protocol: Protocol,
    /// The seed of the alert lags (alert protocol).
    pub seed: u64,
    /// The range `[min, max]` the alert lag is drawn from, in seconds (alert protocol).
    pub alert_lag_secs: (i64, i64),
    /// Seconds after the fault at which the incident counts as detected (fault-time
    /// protocol).
    pub detect_after_secs: i64,
    /// Length of the incident window before the detection time, in seconds: the telemetry
    /// the diagnoser gets (the part before the onset is its baseline).
    pub history_secs: i64,
    /// Splice this many normal minutes (a range `[min, max]`, drawn per case with `seed`)
    /// directly before the case's run of log and trace minutes: copies of the day's normal
    /// minute (`construct_data/`), re-timed and with trace and span ids rewritten. The data
    /// set keeps only about three minutes around each fault, so without it the first
    /// retained event says where the fault is (49-117 s before it); with it, where the
    /// window starts says nothing. `None`: no splice (the day's normal minute is then used
    /// as it is, as baseline, when it lies before the run).
    pub splice_minutes: Option<(i64, i64)>,
}

impl Default for CaseOptions {
    fn default() -> Self {
        CaseOptions {
            protocol: Protocol::Alert,
            seed: 7,
            alert_lag_secs: (60, 300),
            detect_after_secs: 180,
            history_secs: 1800,
            splice_minutes: None,
        }
    }
}

impl CaseOptions {
    /// The detection time of `case`: the fault time plus `detect_after_secs` (fault-time) or
    /// plus the case's alert lag (alert).
    pub fn detected_at(&self, case: &NezhaCase) -> Timestamp {
        let lag = match self.protocol {
            Protocol::FaultTime => self.detect_after_secs,
            Protocol::Alert => self.alert_lag(&case.id),
        };
        case.inject_time.offset_millis(lag * 1000)
    }

    /// The alert lag of the case `id`, in seconds: uniform in `alert_lag_secs`, a function of
    /// the seed and the id only.
    pub fn alert_lag(&self, id: &str) -> i64 {
        let (lo, hi) = (
            self.alert_lag_secs.0.min(self.alert_lag_secs.1),
            self.alert_lag_secs.0.max(self.alert_lag_secs.1),
        );
        // A stable hash of the id, mixed with the seed.
        let z = mix64(stable_hash(id.as_bytes()) ^ self.seed.wrapping_mul(GOLDEN_GAMMA));
        lo + (z % ((hi - lo + 1) as u64)) as i64
    }

    /// How many normal minutes are spliced before the case `id` (0 without a splice): uniform
    /// in `splice_minutes`, a function of the seed and the id only, drawn independently of
    /// the alert lag.
    pub fn spliced_minutes(&self, id: &str) -> i64 {
        let Some((a, b)) = self.splice_minutes else {
            return 0;
        };
        let (lo, hi) = (a.min(b).max(0), a.max(b).max(0));
        let z = mix64(
            stable_hash(id.as_bytes()).rotate_left(17)
                ^ self.seed.wrapping_mul(GOLDEN_GAMMA)
                ^ 0x5bd1_e995,
        );
        lo + (z % ((hi - lo + 1) as u64)) as i64
    }
}

/// Copies of a normal stretch (`logs`, `spans`) laid end to end, `minutes` of them, so that
/// the last ends where `before` begins: each copy is shifted in time by whole periods of 60 s
/// and its trace and span ids get a suffix, so no copy joins another or the real data.
/// Records that would fall at or after `before` are dropped.
pub fn splice_normal_minutes(
    logs: &[LogRecord],
    spans: &[Span],
    before: Timestamp,
    minutes: i64,
) -> (Vec<LogRecord>, Vec<Span>) {
    let first = logs
        .iter()
        .map(|r| r.timestamp)
        .chain(spans.iter().map(|s| s.start))
        .min();
    let Some(first) = first else {
        return (Vec::new(), Vec::new());
    };
    let mut out_logs = Vec::new();
    let mut out_spans = Vec::new();
    for copy in 0..minutes.max(0) {
        let start = before.offset_millis(-(minutes - copy) * 60_000);
        let shift = start.millis() - first.millis();
        let suffix = format!("-s{copy}");
        let keep = |t: Timestamp| t >= start && t < before && t < start.offset_millis(60_000);
        for r in logs {
            let t = r.timestamp.offset_millis(shift);
            if !keep(t) {
                continue;
            }
            let mut r = r.clone();
            r.timestamp = t;
            for key in [TRACE_ID, SPAN_ID] {
                if let Some(v) = r.attributes.get_mut(key) {
                    v.push_str(&suffix);
                }
            }
            out_logs.push(r);
        }
        for s in spans {
            let t = s.start.offset_millis(shift);
            if !keep(t) {
                continue;
            }
            let mut s = s.clone();
            s.start = t;
            s.trace_id = format!("{}{suffix}", s.trace_id).into();
            s.span_id = format!("{}{suffix}", s.span_id).into();
            if let Some(p) = s.parent_id.as_mut() {
                *p = format!("{p}{suffix}").into();
            }
            out_spans.push(s);
        }
    }
    (out_logs, out_spans)
}

/// The telemetry of one case, cut to its incident window. It holds no ground truth.
#[derive(Debug, Clone)]
pub struct CaseData {
    /// The incident: its window ends at the detection time; its onset is the fault time under
    /// the fault-time protocol and unknown under the alert protocol.
    pub incident: rca_core::Incident,
    /// When the incident counts as detected (the end of the window).
    pub detected_at: Timestamp,
    /// Log lines in the window.
    pub logs: Vec<LogRecord>,
    /// Spans in the window.
    pub spans: Vec<Span>,
    /// Metric samples in the window.
    pub metrics: Vec<MetricSample>,
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

/// The minutes `[from, to]` of the latest unbroken run of per-minute files (`HH_MM<kind>`) in
/// `dir` that began by `at`'s minute, cut at one minute after it (a file is named by the
/// minute its content ends in). A run that only begins after `at`'s minute (the next fault's
/// files, whose first lines may precede `at` by seconds) is not this incident's data.
fn latest_run(dir: &Path, kind: &str, at: Timestamp) -> Option<(Timestamp, Timestamp)> {
    let present: std::collections::BTreeSet<i64> = list_files(dir, kind)
        .ok()?
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let mut parts = name.split('_');
            let h = parts.next()?.parse::<i64>().ok()?;
            let m = parts.next()?.parse::<i64>().ok()?;
            Some(h * 60 + m)
        })
        .collect();
    let (_, _, _, h, m, _, _) = at.to_civil();
    let at_minute = i64::from(h) * 60 + i64::from(m);
    // The data set keeps about three minutes around each fault, so the run may end before
    // a late alert.
    let mut last = *present.range(..=at_minute + 1).next_back()?;
    let (first, last) = loop {
        let mut first = last;
        while present.contains(&(first - 1)) {
            first -= 1;
        }
        if first <= at_minute {
            break (first, last);
        }
        last = *present.range(..first).next_back()?;
    };
    // Timestamps of those minutes on `at`'s day.
    let day_start = at.offset_millis(-(at_minute * 60_000) - at.millis().rem_euclid(60_000));
    Some((
        day_start.offset_millis(first * 60_000),
        day_start.offset_millis(last * 60_000),
    ))
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
            let mut attributes = Attributes::new();
            if let Some(t) = trace.and_then(|t| row.get(t)).filter(|t| !t.is_empty()) {
                attributes.insert(TRACE_ID.to_string(), t.to_string());
            }
            if let Some(s) = span.and_then(|s| row.get(s)).filter(|s| !s.is_empty()) {
                attributes.insert(SPAN_ID.to_string(), s.to_string());
            }
            if let Some((unit, line)) = code_location_in(&message) {
                attributes.insert(CODE_UNIT_ATTRIBUTES[0].to_string(), unit.to_string());
                attributes.insert(CODE_LINE_ATTRIBUTES[0].to_string(), line.to_string());
            }
            let precise = row
                .get(time)
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(ts.0.saturating_mul(1_000_000));
            lines.push((
                precise,
                LogRecord {
                    timestamp: ts,
                    component: row.get(pod).unwrap_or("").into(),
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

/// The logger and line a line of this data names, written by its logging pattern as
/// `logger#line` among the line's first words (after the time and the level): the code
/// location OpenTelemetry's `code.*` attributes carry in other sources.
pub fn code_location_in(message: &str) -> Option<(&str, &str)> {
    message.split_whitespace().take(4).find_map(|w| {
        let (unit, line) = w.rsplit_once('#')?;
        let named = unit.starts_with(|c: char| c.is_ascii_alphabetic())
            && unit
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '$'));
        let numbered = !line.is_empty() && line.chars().all(|c| c.is_ascii_digit());
        (named && numbered).then_some((unit, line))
    })
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

/// Reads one case as an incident: the day's per-minute logs and traces and its metrics inside
/// `[detected - history, detected)`. Nothing at or after the detection time is kept; the
/// fault's pod and type stay out.
pub fn load_case(
    day: &NezhaDay,
    metrics: &DayMetrics,
    case: &NezhaCase,
    options: &CaseOptions,
) -> Result<CaseData, NezhaError> {
    let detected_at = options.detected_at(case);
    let window = TimeRange::new(
        detected_at.offset_millis(-options.history_secs.max(60) * 1000),
        detected_at,
    );
    let mut report = LoadReport::default();
    let mut logs = Vec::new();
    let mut spans = Vec::new();
    let mut minutes = MinuteReader {
        log_dir: day.dir.join("log"),
        trace_dir: day.dir.join("trace"),
        logs: &mut logs,
        spans: &mut spans,
        report: &mut report,
    };
    // Logs and spans: the latest unbroken run of per-minute files up to the detection time,
    // as a collector that keeps recent data would have them (files are named by the minute
    // their content ends in, so the run may end a minute after detection), and nothing of an
    // earlier run: the data set keeps only some minutes, and another stretch hours or minutes
    // away is not this incident's recent past.
    if let Some((from, to)) = latest_run(&day.dir.join("trace"), "_trace", detected_at) {
        minutes.read(from, to, window)?;
    }
    // The day's construct minute: the known normal period the data set provides, used as
    // baseline when it lies before the run, or spliced (re-timed copies) directly before it.
    let mut start = window.start;
    if let Some(cdir) = &day.construct_dir {
        let first_event = minutes
            .spans
            .iter()
            .map(|s| s.start)
            .chain(minutes.logs.iter().map(|r| r.timestamp))
            .min()
            .unwrap_or(detected_at);
        let spliced = options.spliced_minutes(&case.id);
        let before = if spliced > 0 {
            TimeRange::new(Timestamp(i64::MIN), Timestamp(i64::MAX))
        } else {
            TimeRange::new(Timestamp(i64::MIN), first_event.min(detected_at))
        };
        let mut clogs = Vec::new();
        read_log_csv(
            &list_files(&cdir.join("log"), "")?,
            before,
            &mut clogs,
            minutes.report,
        )?;
        let tsrc = FileTraceSource::open(&list_files(&cdir.join("trace"), "")?, None, None)?;
        minutes.report.merge(tsrc.report());
        let mut cspans: Vec<Span> = tsrc
            .spans_all()
            .iter()
            .filter(|s| before.contains(s.start))
            .cloned()
            .collect();
        if spliced > 0 {
            // The run's first minute begins at the minute boundary before its first event.
            let run_start = first_event.offset_millis(-first_event.millis().rem_euclid(60_000));
            clogs.sort_by_key(|r| r.timestamp);
            cspans.sort_by_key(|s| s.start);
            (clogs, cspans) = splice_normal_minutes(&clogs, &cspans, run_start, spliced);
        }
        if let Some(first) = clogs
            .iter()
            .map(|r| r.timestamp)
            .chain(cspans.iter().map(|s| s.start))
            .min()
        {
            start = start.min(first);
        }
        minutes.logs.extend(clogs);
        minutes.spans.extend(cspans);
    }
    let window = TimeRange::new(start, detected_at);
    logs.sort_by_key(|r| r.timestamp);
    spans.sort_by_key(|s| s.start);
    // Metrics: the last `history_secs` (a sample a minute).
    let metric_samples = metrics
        .slice(TimeRange::new(
            detected_at.offset_millis(-options.history_secs.max(60) * 1000),
            detected_at,
        ))
        .to_vec();
    report.records = logs.len() + spans.len() + metric_samples.len();
    let onset = match options.protocol {
        Protocol::FaultTime => Some(case.inject_time),
        Protocol::Alert => None,
    };
    let incident = rca_core::Incident {
        id: format!("nezha-{}", case.id.replace('/', "-")),
        title: match options.protocol {
            Protocol::FaultTime => format!("TrainTicket: fault at {}", case.inject_time),
            Protocol::Alert => format!("TrainTicket: alert at {detected_at}"),
        },
        description: String::new(),
        detected_at,
        window,
        system: String::new(),
        topology: Vec::new(),
        onset,
    };
    Ok(CaseData {
        incident,
        detected_at,
        logs,
        spans,
        metrics: metric_samples,
        report,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_logger_and_line_of_a_line_become_its_code_location() {
        let line = "18:26:03.274 INFO  t.s.DistanceImpl#372 TraceID: 90ac SpanID: a9a0 [x]";
        assert_eq!(code_location_in(line), Some(("t.s.DistanceImpl", "372")));
        // A number after `#` that is no logger, or a logger without a line, is not one.
        assert_eq!(code_location_in("12:00:00.000 INFO order #42 paid"), None);
        assert_eq!(code_location_in("12:00:00.000 INFO a.B#x ok"), None);
        assert_eq!(code_location_in("12:00:00.000 INFO a.B# ok"), None);
    }

    use super::*;

    #[test]
    fn the_latest_run_is_the_one_that_began_by_the_alert() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["09_25", "09_26", "09_27", "09_30", "09_31"] {
            std::fs::write(dir.path().join(format!("{name}_trace.csv")), "").unwrap();
        }
        let at = |t: &str| Timestamp::parse_rfc3339(&format!("2023-01-29T{t}Z")).unwrap();
        let run = |t: &str| {
            latest_run(dir.path(), "_trace", at(t)).map(|(a, b)| (a.to_string(), b.to_string()))
        };
        let minutes = |a: &str, b: &str| {
            Some((
                format!("2023-01-29T{a}:00.000Z"),
                format!("2023-01-29T{b}:00.000Z"),
            ))
        };
        // The next run's first file ends a minute after the alert and holds a few seconds
        // before it: still the earlier run.
        assert_eq!(run("09:29:36"), minutes("09:25", "09:27"));
        assert_eq!(run("09:26:10"), minutes("09:25", "09:27"));
        assert_eq!(run("09:30:40"), minutes("09:30", "09:31"));
        assert_eq!(run("09:24:10"), None);
    }

    #[test]
    fn spliced_minutes_are_re_timed_renamed_and_end_where_the_run_begins() {
        let at = |s: i64| Timestamp::from_secs(1_000_000 + s);
        let span = |id: &str, parent: Option<&str>, t: i64| Span {
            trace_id: "t1".into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
            component: "svc".into(),
            operation: "op".into(),
            start: at(t),
            duration_us: 1000,
            error: false,
            attributes: Default::default(),
        };
        let spans = vec![span("a", None, 0), span("b", Some("a"), 30)];
        let logs = vec![LogRecord {
            timestamp: at(31),
            component: "svc".into(),
            level: None,
            message: "m".into(),
            attributes: [
                (TRACE_ID.to_string(), "t1".to_string()),
                (SPAN_ID.to_string(), "b".to_string()),
            ]
            .into(),
        }];
        let before = Timestamp::from_secs(2_000_000);
        let (l, s) = splice_normal_minutes(&logs, &spans, before, 3);
        assert_eq!((l.len(), s.len()), (3, 6));
        // Three copies, a minute apart, the last ending where the run begins.
        let starts: Vec<i64> = s
            .iter()
            .filter(|x| x.parent_id.is_none())
            .map(|x| x.start.millis())
            .collect();
        assert_eq!(
            starts,
            [-180_000, -120_000, -60_000].map(|d| before.millis() + d)
        );
        assert!(s.iter().all(|x| x.start < before));
        // Ids carry the copy: no copy joins another.
        let ids: std::collections::BTreeSet<(&str, &str)> = s
            .iter()
            .map(|x| (x.trace_id.as_str(), x.span_id.as_str()))
            .collect();
        assert_eq!(ids.len(), 6);
        assert!(
            s.iter()
                .any(|x| x.parent_id.as_deref() == Some("a-s1") && x.trace_id == "t1-s1")
        );
        assert!(l.iter().all(|r| {
            r.attributes
                .get(SPAN_ID)
                .is_some_and(|s| s.starts_with("b-s"))
        }));
        // The draw is a function of the seed and the id, within its range.
        let o = CaseOptions {
            splice_minutes: Some((2, 6)),
            ..CaseOptions::default()
        };
        let drawn: std::collections::BTreeSet<i64> = (0..40)
            .map(|i| o.spliced_minutes(&format!("d/{i:02}")))
            .collect();
        assert!(drawn.iter().all(|m| (2..=6).contains(m)) && drawn.len() > 2);
        assert_eq!(CaseOptions::default().spliced_minutes("d/00"), 0);
    }
}
