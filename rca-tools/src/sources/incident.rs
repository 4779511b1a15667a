//! The incident directory: a small manifest (`incident.json`) and telemetry files in the
//! formats of this module. See `docs/guides/incident-format.md`.

use std::io::Write;
use std::path::{Path, PathBuf};

use rca_core::source::{LogRecord, MetricSample, Span};
use rca_core::{Incident, SourceError, TimeRange, Timestamp};
use serde::{Deserialize, Serialize};

use super::{
    DEFAULT_MAX_TELEMETRY_BYTES, FileLogSource, FileMetricSource, FileTraceSource, LogOptions,
    MetricOptions, ReadBudget,
};

/// The manifest's file name inside an incident directory.
pub const MANIFEST: &str = "incident.json";

/// The manifest format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A time range written as RFC 3339 text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeText {
    /// First instant included.
    pub start: String,
    /// First instant excluded.
    pub end: String,
}

impl RangeText {
    /// The range as text.
    pub fn from_range(r: TimeRange) -> Self {
        RangeText {
            start: r.start.to_string(),
            end: r.end.to_string(),
        }
    }

    fn parse(&self, what: &str) -> Result<TimeRange, SourceError> {
        let p = |t: &str| {
            Timestamp::parse_rfc3339(t).ok_or_else(|| SourceError::Malformed {
                location: MANIFEST.into(),
                message: format!("{what}: unreadable time {t:?}"),
            })
        };
        Ok(TimeRange::new(p(&self.start)?, p(&self.end)?))
    }
}

/// Which telemetry files the directory holds (paths relative to it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFiles {
    /// Log files (plain or JSON lines, optionally `.gz`).
    #[serde(default)]
    pub logs: Vec<String>,
    /// Metric CSVs (long or wide layout, optionally `.gz`).
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Span files (CSV or OTLP JSON, optionally `.gz`).
    #[serde(default)]
    pub spans: Vec<String>,
}

/// The manifest, `incident.json`. Unknown keys are errors, so a misspelt key is reported
/// rather than silently ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format version (currently 1).
    pub format_version: u32,
    /// A stable id.
    pub id: String,
    /// A one-line title (the alert).
    pub title: String,
    /// What was observed, in prose.
    #[serde(default)]
    pub description: String,
    /// When the problem was detected (RFC 3339); no data at or after it is read.
    pub detected_at: String,
    /// The window to examine (usually ending at the detection time).
    pub window: RangeText,
    /// What normal looks like, when known (usually just before the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<RangeText>,
    /// The system, in prose (architecture, services), for people and models.
    #[serde(default)]
    pub system: String,
    /// Known caller -> callee edges between components.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology: Vec<(String, String)>,
    /// When the problem began, RFC 3339, when the host knows it (absent: the diagnosis
    /// estimates the onset from the telemetry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset: Option<String>,
    /// The telemetry files.
    #[serde(default)]
    pub telemetry: TelemetryFiles,
}

/// An incident directory, opened: the incident, its baseline and its telemetry sources (all
/// cut at the detection time).
#[derive(Debug, Clone)]
pub struct IncidentDir {
    /// The directory.
    pub dir: PathBuf,
    /// The manifest as read.
    pub manifest: Manifest,
    /// The incident.
    pub incident: Incident,
    /// The baseline range, when the manifest names one.
    pub baseline: Option<TimeRange>,
    /// Its logs.
    pub logs: FileLogSource,
    /// Its metrics.
    pub metrics: FileMetricSource,
    /// Its spans.
    pub traces: FileTraceSource,
}

/// How an incident directory is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncidentOptions {
    /// Read telemetry files whose path resolves (through symbolic links) outside the
    /// directory. Off by default: a link such as `app.log -> /somewhere/secret.log` is
    /// refused, so nothing outside the directory the user named reaches a report.
    pub allow_outside: bool,
    /// The bytes all telemetry files may hold together once decompressed (default
    /// [`DEFAULT_MAX_TELEMETRY_BYTES`]): a larger incident is an error that names the limit,
    /// so a small gzip that expands without end cannot fill memory.
    pub max_telemetry_bytes: u64,
}

impl Default for IncidentOptions {
    fn default() -> Self {
        IncidentOptions {
            allow_outside: false,
            max_telemetry_bytes: DEFAULT_MAX_TELEMETRY_BYTES,
        }
    }
}

/// Resolves a telemetry path of the manifest: it must stay inside `dir` (textually, and
/// after following symbolic links unless `allow_outside`), and name a regular file (a
/// device, FIFO or directory would never end or is not telemetry).
fn telemetry_path(
    dir: &Path,
    real_dir: &Path,
    name: &str,
    options: IncidentOptions,
) -> Result<PathBuf, SourceError> {
    let p = Path::new(name);
    if p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
        return Err(SourceError::InvalidQuery {
            message: format!("telemetry path {name:?} leaves the incident directory"),
        });
    }
    let joined = dir.join(p);
    let real = std::fs::canonicalize(&joined).map_err(|e| SourceError::Unavailable {
        message: format!("cannot open {}: {e}", joined.display()),
    })?;
    if !options.allow_outside && !real.starts_with(real_dir) {
        return Err(SourceError::InvalidQuery {
            message: format!(
                "telemetry path {name:?} resolves to {}, outside the incident directory \
                 (allow it explicitly to read it)",
                real.display()
            ),
        });
    }
    let meta = std::fs::metadata(&real).map_err(|e| SourceError::Unavailable {
        message: format!("cannot open {}: {e}", joined.display()),
    })?;
    if !meta.is_file() {
        return Err(SourceError::InvalidQuery {
            message: format!("telemetry path {name:?} is not a regular file"),
        });
    }
    Ok(joined)
}

/// The manifest's times must describe something a diagnosis can examine: a window that is not
/// empty and contains the detection time (or ends at it), and a baseline that is not empty and
/// begins before the detection (nothing at or after `detected_at` is read).
fn check_times(
    manifest: &Path,
    window: TimeRange,
    baseline: Option<TimeRange>,
    detected_at: Timestamp,
) -> Result<(), SourceError> {
    let bad = |message: String| SourceError::Malformed {
        location: manifest.display().to_string(),
        message,
    };
    if window.start >= window.end {
        return Err(bad(format!(
            "the window starts at {} but ends at {}: its start must come first",
            window.start, window.end
        )));
    }
    if !(window.start < detected_at && detected_at <= window.end) {
        return Err(bad(format!(
            "detected_at {detected_at} lies outside the window ({} to {}): the window is the \
             telemetry up to the detection, so it must contain detected_at or end at it",
            window.start, window.end
        )));
    }
    if let Some(b) = baseline {
        if b.start >= b.end {
            return Err(bad(format!(
                "the baseline starts at {} but ends at {}: its start must come first",
                b.start, b.end
            )));
        }
        if b.start >= detected_at {
            return Err(bad(format!(
                "the baseline starts at {}, not before detected_at {detected_at}: nothing at or \
                 after the detection is read",
                b.start
            )));
        }
    }
    Ok(())
}

/// Listed telemetry that yields nothing to examine is an error, not an empty diagnosis: no
/// records at all (every row bad, or at or after `detected_at`), or none inside the window.
fn check_records(
    dir: &Path,
    window: TimeRange,
    detected_at: Timestamp,
    logs: &FileLogSource,
    metrics: &FileMetricSource,
    traces: &FileTraceSource,
) -> Result<(), SourceError> {
    let reports = [logs.report(), metrics.report(), traces.report()];
    let files: usize = reports.iter().map(|r| r.files).sum();
    if files == 0 {
        return Ok(());
    }
    let bad = |message: String| SourceError::Malformed {
        location: dir.display().to_string(),
        message,
    };
    let records: usize = reports.iter().map(|r| r.records).sum();
    if records == 0 {
        let unreadable: usize = reports.iter().map(|r| r.bad_rows).sum();
        let late: usize = reports.iter().map(|r| r.after_cutoff).sum();
        let first = reports
            .iter()
            .find_map(|r| r.problems.first())
            .map(|p| format!(" (first: {p})"))
            .unwrap_or_default();
        return Err(bad(format!(
            "the {files} telemetry files hold no record to examine: {unreadable} rows could not \
             be read{first}, {late} lie at or after detected_at {detected_at}"
        )));
    }
    let until = TimeRange::new(window.start, window.end.min(detected_at));
    let inside = logs.records().iter().any(|r| until.contains(r.timestamp))
        || metrics
            .samples_all()
            .iter()
            .any(|m| until.contains(m.timestamp))
        || traces.spans_all().iter().any(|sp| until.contains(sp.start));
    if !inside {
        let times = logs
            .records()
            .iter()
            .map(|r| r.timestamp)
            .chain(metrics.samples_all().iter().map(|m| m.timestamp))
            .chain(traces.spans_all().iter().map(|sp| sp.start));
        let (lo, hi) = times.fold((None::<Timestamp>, None::<Timestamp>), |(lo, hi), t| {
            (
                Some(lo.map_or(t, |l| l.min(t))),
                Some(hi.map_or(t, |h| h.max(t))),
            )
        });
        let span = match (lo, hi) {
            (Some(lo), Some(hi)) => format!("the {records} records span {lo} to {hi}"),
            _ => format!("{records} records"),
        };
        return Err(bad(format!(
            "no telemetry record lies in the window ({} to {}); {span}",
            until.start, until.end
        )));
    }
    Ok(())
}

impl IncidentDir {
    /// Reads `dir/incident.json` and the telemetry files it lists, refusing files that lie
    /// outside `dir` or are not regular files ([`IncidentDir::open_with`] to allow outside
    /// links).
    pub fn open(dir: &Path) -> Result<Self, SourceError> {
        IncidentDir::open_with(dir, IncidentOptions::default())
    }

    /// [`IncidentDir::open`] with options.
    pub fn open_with(dir: &Path, options: IncidentOptions) -> Result<Self, SourceError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| SourceError::Unavailable {
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|e| SourceError::Malformed {
                location: path.display().to_string(),
                message: e.to_string(),
            })?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(SourceError::Malformed {
                location: path.display().to_string(),
                message: format!(
                    "format_version {} (this build reads {FORMAT_VERSION})",
                    manifest.format_version
                ),
            });
        }
        let detected_at = Timestamp::parse_rfc3339(&manifest.detected_at).ok_or_else(|| {
            SourceError::Malformed {
                location: path.display().to_string(),
                message: format!("unreadable detected_at {:?}", manifest.detected_at),
            }
        })?;
        let window = manifest.window.parse("window")?;
        let onset = manifest
            .onset
            .as_deref()
            .map(|text| {
                Timestamp::parse_rfc3339(text).ok_or_else(|| SourceError::Malformed {
                    location: path.display().to_string(),
                    message: format!("unreadable onset {text:?}"),
                })
            })
            .transpose()?;
        if let Some(at) = onset
            && !(window.start <= at && at <= detected_at)
        {
            return Err(SourceError::Malformed {
                location: path.display().to_string(),
                message: format!(
                    "onset {at} lies outside [window start {}, detected_at {detected_at}]",
                    window.start
                ),
            });
        }
        let baseline = manifest
            .baseline
            .as_ref()
            .map(|b| b.parse("baseline"))
            .transpose()?;
        check_times(&path, window, baseline, detected_at)?;
        let real_dir = std::fs::canonicalize(dir).map_err(|e| SourceError::Unavailable {
            message: format!("cannot open {}: {e}", dir.display()),
        })?;
        let files = |names: &[String]| -> Result<Vec<PathBuf>, SourceError> {
            names
                .iter()
                .map(|n| telemetry_path(dir, &real_dir, n, options))
                .collect()
        };
        let cutoff = Some(detected_at);
        let budget = ReadBudget::new(options.max_telemetry_bytes);
        let logs = FileLogSource::open(
            &files(&manifest.telemetry.logs)?,
            &LogOptions {
                cutoff,
                budget: Some(budget.clone()),
                ..LogOptions::default()
            },
        )?;
        let metrics = FileMetricSource::open(
            &files(&manifest.telemetry.metrics)?,
            &MetricOptions {
                cutoff,
                budget: Some(budget.clone()),
                ..MetricOptions::default()
            },
        )?;
        let traces = FileTraceSource::open_within(
            &files(&manifest.telemetry.spans)?,
            None,
            cutoff,
            Some(&budget),
        )?;
        check_records(dir, window, detected_at, &logs, &metrics, &traces)?;
        let incident = Incident {
            id: manifest.id.clone(),
            title: manifest.title.clone(),
            description: manifest.description.clone(),
            detected_at,
            window,
            system: manifest.system.clone(),
            topology: manifest.topology.clone(),
            onset,
        };
        Ok(IncidentDir {
            dir: dir.to_path_buf(),
            manifest,
            incident,
            baseline,
            logs,
            metrics,
            traces,
        })
    }
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> SourceError {
    SourceError::Failed {
        message: format!("cannot write {}: {e}", path.display()),
    }
}

/// A writer that gzips when the path ends in `.gz`.
fn create(path: &Path) -> Result<Box<dyn Write>, SourceError> {
    let f = std::fs::File::create(path).map_err(|e| write_err(path, e))?;
    let f = std::io::BufWriter::new(f);
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(flate2::write::GzEncoder::new(
            f,
            flate2::Compression::best(),
        )))
    } else {
        Ok(Box::new(f))
    }
}

/// One log record as the JSON line [`write_logs_jsonl`] writes (`timestamp`, `component`,
/// `level`, `message`, then the attributes that do not clash with those).
pub fn log_json_line(r: &LogRecord) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("timestamp".into(), r.timestamp.to_string().into());
    obj.insert("component".into(), r.component.to_string().into());
    if let Some(l) = r.level {
        obj.insert("level".into(), l.to_string().into());
    }
    obj.insert("message".into(), r.message.clone().into());
    for (k, v) in &r.attributes {
        obj.entry(k.clone()).or_insert_with(|| v.clone().into());
    }
    serde_json::Value::Object(obj).to_string()
}

/// Writes logs as JSON lines (`timestamp`, `component`, `level`, `message`, attributes).
pub fn write_logs_jsonl(path: &Path, records: &[LogRecord]) -> Result<(), SourceError> {
    let mut w = create(path)?;
    for r in records {
        writeln!(w, "{}", log_json_line(r)).map_err(|e| write_err(path, e))?;
    }
    w.flush().map_err(|e| write_err(path, e))
}

/// The header of the long-layout metric CSV.
pub const METRICS_CSV_HEADER: [&str; 4] = ["timestamp", "component", "metric", "value"];

/// One sample as a row under [`METRICS_CSV_HEADER`].
pub fn metric_csv_fields(s: &MetricSample) -> [String; 4] {
    [
        s.timestamp.to_string(),
        s.component.clone(),
        s.metric.clone(),
        s.value.to_string(),
    ]
}

/// Writes metric samples as a long-layout CSV (`timestamp,component,metric,value`).
pub fn write_metrics_csv(path: &Path, samples: &[MetricSample]) -> Result<(), SourceError> {
    let mut csv = csv::Writer::from_writer(create(path)?);
    let err = |e: csv::Error| write_err(path, e);
    csv.write_record(METRICS_CSV_HEADER).map_err(err)?;
    for s in samples {
        csv.write_record(metric_csv_fields(s)).map_err(err)?;
    }
    csv.flush().map_err(|e| write_err(path, e))
}

/// The header of the span CSV.
pub const SPANS_CSV_HEADER: [&str; 8] = [
    "trace_id",
    "span_id",
    "parent_id",
    "component",
    "operation",
    "start",
    "duration_us",
    "error",
];

/// One span as a row under [`SPANS_CSV_HEADER`].
pub fn span_csv_fields(s: &Span) -> [String; 8] {
    [
        s.trace_id.to_string(),
        s.span_id.to_string(),
        s.parent_id.as_deref().unwrap_or_default().to_string(),
        s.component.to_string(),
        s.operation.to_string(),
        s.start.to_string(),
        s.duration_us.to_string(),
        s.error.to_string(),
    ]
}

/// Writes spans as CSV (`trace_id,span_id,parent_id,component,operation,start,duration_us,
/// error`).
pub fn write_spans_csv(path: &Path, spans: &[Span]) -> Result<(), SourceError> {
    let mut csv = csv::Writer::from_writer(create(path)?);
    let err = |e: csv::Error| write_err(path, e);
    csv.write_record(SPANS_CSV_HEADER).map_err(err)?;
    for s in spans {
        csv.write_record(span_csv_fields(s)).map_err(err)?;
    }
    csv.flush().map_err(|e| write_err(path, e))
}

/// Writes the manifest into `dir/incident.json`.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), SourceError> {
    let path = dir.join(MANIFEST);
    let text = serde_json::to_string_pretty(manifest).map_err(|e| write_err(&path, e))?;
    // Atomic: a temporary file renamed over the manifest, so a crash never leaves half of one.
    crate::files::write_atomic(&path, (text + "\n").as_bytes()).map_err(|e| write_err(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::source::Level;

    #[test]
    fn round_trip_through_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let t = |s: i64| Timestamp::from_secs(1_700_000_000 + s);
        let logs = vec![
            LogRecord {
                timestamp: t(1),
                component: "api".into(),
                level: Some(Level::Error),
                message: "boom \"quoted\"".into(),
                attributes: [("trace_id".to_string(), "t1".to_string())].into(),
            },
            LogRecord {
                timestamp: t(100),
                component: "api".into(),
                level: None,
                message: "after detection".into(),
                attributes: Default::default(),
            },
        ];
        let metrics = vec![MetricSample {
            timestamp: t(0),
            component: "db".into(),
            metric: "cpu".into(),
            value: 0.25,
            labels: Default::default(),
        }];
        let spans = vec![Span {
            trace_id: "t1".into(),
            span_id: "s1".into(),
            parent_id: None,
            component: "api".into(),
            operation: "GET /".into(),
            start: t(2),
            duration_us: 1500,
            error: true,
            attributes: Default::default(),
        }];
        write_logs_jsonl(&dir.path().join("logs.jsonl.gz"), &logs).unwrap();
        write_metrics_csv(&dir.path().join("metrics.csv.gz"), &metrics).unwrap();
        write_spans_csv(&dir.path().join("spans.csv"), &spans).unwrap();
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            id: "x".into(),
            title: "errors on api".into(),
            description: String::new(),
            detected_at: t(60).to_string(),
            window: RangeText::from_range(TimeRange::new(t(0), t(60))),
            baseline: None,
            system: "two services".into(),
            topology: vec![("api".into(), "db".into())],
            telemetry: TelemetryFiles {
                logs: vec!["logs.jsonl.gz".into()],
                metrics: vec!["metrics.csv.gz".into()],
                spans: vec!["spans.csv".into()],
            },
            onset: None,
        };
        write_manifest(dir.path(), &manifest).unwrap();
        let d = IncidentDir::open(dir.path()).unwrap();
        assert_eq!(d.incident.detected_at, t(60));
        assert_eq!(d.logs.records().len(), 1, "the cutoff drops the late line");
        assert_eq!(d.logs.records()[0], logs[0]);
        assert_eq!(d.metrics.samples_all(), metrics.as_slice());
        assert_eq!(d.traces.spans_all(), spans.as_slice());
        assert_eq!(d.incident.topology.len(), 1);
        assert_eq!(d.incident.onset, None);

        // A stated onset is read; one outside the window is refused.
        let mut known = manifest.clone();
        known.onset = Some(t(30).to_string());
        write_manifest(dir.path(), &known).unwrap();
        assert_eq!(
            IncidentDir::open(dir.path()).unwrap().incident.onset,
            Some(t(30))
        );
        known.onset = Some(t(90).to_string());
        write_manifest(dir.path(), &known).unwrap();
        let err = IncidentDir::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("onset"), "{err}");

        // The decompressed size has a limit, shared by every file and checked in each
        // modality's reader: just below the directory's size it is an error naming the limit.
        write_manifest(dir.path(), &manifest).unwrap();
        let total: u64 = ["logs.jsonl.gz", "metrics.csv.gz", "spans.csv"]
            .iter()
            .map(|f| {
                let mut text = Vec::new();
                std::io::Read::read_to_end(
                    &mut crate::sources::open_text(&dir.path().join(f)).unwrap(),
                    &mut text,
                )
                .unwrap();
                text.len() as u64
            })
            .sum();
        let with_limit = |limit: u64| {
            IncidentDir::open_with(
                dir.path(),
                IncidentOptions {
                    max_telemetry_bytes: limit,
                    ..IncidentOptions::default()
                },
            )
        };
        assert!(with_limit(total).is_ok());
        for limit in [total - 1, 1] {
            let err = with_limit(limit).unwrap_err();
            assert!(matches!(err, SourceError::InvalidQuery { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("exceeds {limit} bytes once decompressed"))
                    && msg.contains("--max-telemetry-bytes"),
                "{msg}"
            );
        }

        // Times that leave nothing to examine are errors that say what is wrong, not an empty
        // diagnosis: a reversed window, a detection outside it, a reversed or late baseline,
        // a window with no record in it, files with no record before the detection.
        let refused = |m: &Manifest, words: &str| {
            write_manifest(dir.path(), m).unwrap();
            let err = IncidentDir::open(dir.path()).unwrap_err().to_string();
            assert!(err.contains(words), "{words}: {err}");
        };
        let mut m = manifest.clone();
        m.window = RangeText::from_range(TimeRange::new(t(60), t(0)));
        refused(&m, "its start must come first");
        let mut m = manifest.clone();
        m.detected_at = "9999-01-01T00:00:00Z".into();
        refused(&m, "lies outside the window");
        let mut m = manifest.clone();
        m.baseline = Some(RangeText::from_range(TimeRange::new(t(-10), t(-20))));
        refused(&m, "the baseline starts at");
        let mut m = manifest.clone();
        m.baseline = Some(RangeText::from_range(TimeRange::new(t(60), t(90))));
        refused(&m, "not before detected_at");
        let mut m = manifest.clone();
        m.window = RangeText::from_range(TimeRange::new(t(30), t(60)));
        m.telemetry.metrics.clear();
        m.telemetry.spans.clear();
        refused(&m, "no telemetry record lies in the window");
        let mut m = manifest.clone();
        m.detected_at = t(1).to_string();
        m.window = RangeText::from_range(TimeRange::new(t(0), t(1)));
        m.telemetry.metrics.clear();
        m.telemetry.spans.clear();
        refused(
            &m,
            "hold no record to examine: 0 rows could not be read, 2 lie at or after",
        );
        write_manifest(dir.path(), &manifest).unwrap();

        let mut bad = manifest.clone();
        bad.telemetry.logs = vec!["../etc/passwd".into()];
        write_manifest(dir.path(), &bad).unwrap();
        assert!(IncidentDir::open(dir.path()).is_err());

        // A symlink that leaves the directory is refused unless allowed; so is a device.
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            let secret = outside.path().join("secret.log");
            std::fs::write(&secret, "2024-01-01T00:00:00Z INFO the secret\n").unwrap();
            std::os::unix::fs::symlink(&secret, dir.path().join("app.log")).unwrap();
            let mut linked = manifest.clone();
            linked.telemetry.logs = vec!["app.log".into()];
            write_manifest(dir.path(), &linked).unwrap();
            let err = IncidentDir::open(dir.path()).unwrap_err().to_string();
            assert!(err.contains("outside the incident directory"), "{err}");
            let allowed = IncidentDir::open_with(
                dir.path(),
                IncidentOptions {
                    allow_outside: true,
                    ..IncidentOptions::default()
                },
            )
            .unwrap();
            assert!(allowed.logs.report().files >= 1);
            std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.log")).unwrap();
            linked.telemetry.logs = vec!["zero.log".into()];
            write_manifest(dir.path(), &linked).unwrap();
            let err = IncidentDir::open_with(
                dir.path(),
                IncidentOptions {
                    allow_outside: true,
                    ..IncidentOptions::default()
                },
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
        bad.format_version = 99;
        write_manifest(dir.path(), &bad).unwrap();
        assert!(IncidentDir::open(dir.path()).is_err());
    }
}
