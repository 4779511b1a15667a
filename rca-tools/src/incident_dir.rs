//! The incident directory: a small manifest (`incident.toml`) and telemetry files, the input of
//! `rca diagnose`. The format is documented in `docs/guides/incident-format.md`.
//!
//! ```toml
//! format_version = 1
//! id = "checkout-2024-05-01"
//! title = "checkout latency above SLO"
//! detected_at = "2024-05-01T10:15:00Z"
//! system = "an online shop: web -> orders -> db"     # optional
//! description = "p99 above 3 s on /checkout"         # optional
//! topology = [["web", "orders"], ["orders", "db"]]   # optional caller -> callee edges
//!
//! [window]                                           # the telemetry to examine
//! start = "2024-05-01T09:15:00Z"
//! end = "2024-05-01T10:15:00Z"
//!
//! [baseline]                                         # optional quiet period
//! start = "2024-05-01T09:15:00Z"
//! end = "2024-05-01T10:00:00Z"
//!
//! [[logs]]
//! path = "logs/app.jsonl.gz"                         # plain or JSON lines, gzip or not
//! [[metrics]]
//! path = "metrics.csv.gz"                            # long or wide CSV
//! [[traces]]
//! path = "spans.csv.gz"                              # CSV or OTLP-JSON
//! ```

use std::path::{Path, PathBuf};

use rca_core::{Incident, TimeRange, Timestamp};
use serde::{Deserialize, Serialize};

use crate::sources::{
    FileLogSource, FileMetricSource, FileTraceSource, LoadReport, LogFormat, LogOptions,
    MetricLayout, MetricOptions, SpanFormat,
};

/// The manifest format this build reads and writes.
pub const MANIFEST_FORMAT_VERSION: u32 = 1;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "incident.toml";

/// Why an incident directory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IncidentDirError {
    /// The manifest is missing or unreadable.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
    /// The manifest is not valid: the message names the key and the fix.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A telemetry file could not be read.
    #[error(transparent)]
    Source(#[from] rca_core::SourceError),
}

/// A time range written as two RFC 3339 strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// First instant included.
    pub start: String,
    /// First instant excluded.
    pub end: String,
}

/// A telemetry file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// Path relative to the incident directory.
    pub path: String,
    /// `plain` or `jsonl` for logs, `long` or `wide` for metrics, `csv` or `otlp-json` for
    /// traces; guessed from the file when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The component of records that name none (logs and metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
}

/// The manifest, as written in `incident.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Must be 1.
    pub format_version: u32,
    /// A stable identifier.
    pub id: String,
    /// A one-line title (the alert).
    pub title: String,
    /// What was observed.
    #[serde(default)]
    pub description: String,
    /// The system, for the model's context.
    #[serde(default)]
    pub system: String,
    /// When the problem was detected (RFC 3339); no data at or after it is read.
    pub detected_at: String,
    /// The telemetry window.
    pub window: RangeSpec,
    /// A quiet period to compare with, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<RangeSpec>,
    /// Caller -> callee edges, when known.
    #[serde(default)]
    pub topology: Vec<(String, String)>,
    /// Log files.
    #[serde(default)]
    pub logs: Vec<FileSpec>,
    /// Metric files.
    #[serde(default)]
    pub metrics: Vec<FileSpec>,
    /// Span files.
    #[serde(default)]
    pub traces: Vec<FileSpec>,
}

/// A loaded incident directory: the incident, its baseline, and sources over its files (each
/// cut at the detection time).
#[derive(Debug)]
pub struct IncidentDir {
    /// Where it is.
    pub root: PathBuf,
    /// The manifest as read.
    pub manifest: Manifest,
    /// The incident.
    pub incident: Incident,
    /// The baseline range, when the manifest names one.
    pub baseline: Option<TimeRange>,
    /// Logs, when the manifest lists log files.
    pub logs: Option<FileLogSource>,
    /// Metrics, when it lists metric files.
    pub metrics: Option<FileMetricSource>,
    /// Spans, when it lists span files.
    pub traces: Option<FileTraceSource>,
    /// What loading the files produced (bad rows are counted, never fatal).
    pub report: LoadReport,
}

fn parse_time(path: &Path, key: &str, text: &str) -> Result<Timestamp, IncidentDirError> {
    Timestamp::parse_rfc3339(text).ok_or_else(|| IncidentDirError::Invalid {
        path: path.display().to_string(),
        message: format!(
            "`{key}` = \"{text}\" is not an RFC 3339 time; write it like \"2024-05-01T10:15:00Z\""
        ),
    })
}

fn parse_range(path: &Path, key: &str, r: &RangeSpec) -> Result<TimeRange, IncidentDirError> {
    let range = TimeRange::new(
        parse_time(path, &format!("{key}.start"), &r.start)?,
        parse_time(path, &format!("{key}.end"), &r.end)?,
    );
    if range.is_empty() {
        return Err(IncidentDirError::Invalid {
            path: path.display().to_string(),
            message: format!("`{key}` is empty: its start must come before its end"),
        });
    }
    Ok(range)
}

impl Manifest {
    /// Reads and validates a manifest file.
    pub fn read(path: &Path) -> Result<Manifest, IncidentDirError> {
        let text = std::fs::read_to_string(path).map_err(|e| IncidentDirError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| IncidentDirError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if manifest.format_version != MANIFEST_FORMAT_VERSION {
            return Err(IncidentDirError::Invalid {
                path: path.display().to_string(),
                message: format!(
                    "`format_version` = {} is not supported; this build reads {MANIFEST_FORMAT_VERSION}",
                    manifest.format_version
                ),
            });
        }
        Ok(manifest)
    }

    /// Writes the manifest as `incident.toml` in `dir` (atomically).
    pub fn write(&self, dir: &Path) -> Result<(), IncidentDirError> {
        let path = dir.join(MANIFEST_FILE);
        let io = |e: std::io::Error| IncidentDirError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let text = toml::to_string_pretty(self).map_err(|e| IncidentDirError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

fn files(root: &Path, specs: &[FileSpec], what: &str) -> Result<Vec<PathBuf>, IncidentDirError> {
    specs
        .iter()
        .map(|f| {
            let p = root.join(&f.path);
            if p.is_file() {
                Ok(p)
            } else {
                Err(IncidentDirError::Invalid {
                    path: root.join(MANIFEST_FILE).display().to_string(),
                    message: format!(
                        "{what} file `{}` does not exist in {}",
                        f.path,
                        root.display()
                    ),
                })
            }
        })
        .collect()
}

fn bad_format(root: &Path, kind: &str, value: &str, allowed: &str) -> IncidentDirError {
    IncidentDirError::Invalid {
        path: root.join(MANIFEST_FILE).display().to_string(),
        message: format!("{kind} format `{value}` is unknown; use one of {allowed}"),
    }
}

impl IncidentDir {
    /// Loads the directory: validates the manifest and reads every telemetry file, dropping
    /// records at or after the detection time.
    pub fn load(root: &Path) -> Result<IncidentDir, IncidentDirError> {
        let path = root.join(MANIFEST_FILE);
        let manifest = Manifest::read(&path)?;
        let detected_at = parse_time(&path, "detected_at", &manifest.detected_at)?;
        let window = parse_range(&path, "window", &manifest.window)?;
        let baseline = manifest
            .baseline
            .as_ref()
            .map(|b| parse_range(&path, "baseline", b))
            .transpose()?;
        let incident = Incident {
            id: manifest.id.clone(),
            title: manifest.title.clone(),
            description: manifest.description.clone(),
            detected_at,
            window,
            system: manifest.system.clone(),
            topology: manifest.topology.clone(),
        };
        let cutoff = Some(detected_at);
        let mut report = LoadReport::default();
        let mut logs = None;
        for spec in &manifest.logs {
            let format = match spec.format.as_deref() {
                None => None,
                Some("plain") => Some(LogFormat::Plain),
                Some("jsonl") | Some("json-lines") => Some(LogFormat::JsonLines),
                Some(other) => return Err(bad_format(root, "log", other, "`plain`, `jsonl`")),
            };
            let source = FileLogSource::open(
                &files(root, std::slice::from_ref(spec), "log")?,
                &LogOptions {
                    format,
                    component: spec.component.clone(),
                    cutoff,
                },
            )?;
            report.merge(source.report());
            logs = Some(match logs.take() {
                None => source,
                Some(prev) => {
                    let mut all: Vec<_> = FileLogSource::records(&prev).to_vec();
                    all.extend_from_slice(source.records());
                    FileLogSource::from_records(all, cutoff)
                }
            });
        }
        let mut metrics = None;
        if !manifest.metrics.is_empty() {
            let mut all = Vec::new();
            for spec in &manifest.metrics {
                let layout = match spec.format.as_deref() {
                    None => None,
                    Some("long") => Some(MetricLayout::Long),
                    Some("wide") => Some(MetricLayout::Wide),
                    Some(other) => return Err(bad_format(root, "metric", other, "`long`, `wide`")),
                };
                let source = FileMetricSource::open(
                    &files(root, std::slice::from_ref(spec), "metric")?,
                    &MetricOptions {
                        layout,
                        component: spec.component.clone(),
                        cutoff,
                    },
                )?;
                report.merge(source.report());
                all.extend_from_slice(source.samples_all());
            }
            metrics = Some(FileMetricSource::from_samples(all, cutoff));
        }
        let mut traces = None;
        if !manifest.traces.is_empty() {
            let mut all = Vec::new();
            for spec in &manifest.traces {
                let format = match spec.format.as_deref() {
                    None => None,
                    Some("csv") => Some(SpanFormat::Csv),
                    Some("otlp-json") | Some("otlp") => Some(SpanFormat::OtlpJson),
                    Some(other) => {
                        return Err(bad_format(root, "trace", other, "`csv`, `otlp-json`"));
                    }
                };
                let source = FileTraceSource::open(
                    &files(root, std::slice::from_ref(spec), "trace")?,
                    format,
                    cutoff,
                )?;
                report.merge(source.report());
                all.extend_from_slice(source.spans_all());
            }
            traces = Some(FileTraceSource::from_spans(all, cutoff));
        }
        Ok(IncidentDir {
            root: root.to_path_buf(),
            manifest,
            incident,
            baseline,
            logs,
            metrics,
            traces,
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const MANIFEST: &str = r#"format_version = 1
id = "demo"
title = "checkout latency"
detected_at = "2024-05-01T10:15:00Z"
topology = [["web", "db"]]
[window]
start = "2024-05-01T10:00:00Z"
end = "2024-05-01T10:15:00Z"
[[logs]]
path = "logs/app.log"
component = "web"
[[metrics]]
path = "metrics.csv"
[[traces]]
path = "spans.csv"
"#;

    #[test]
    fn loads_and_cuts_at_detection() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, MANIFEST_FILE, MANIFEST);
        write(
            d,
            "logs/app.log",
            "2024-05-01T10:01:00Z ERROR boom\n2024-05-01T10:20:00Z ERROR after detection\n",
        );
        write(
            d,
            "metrics.csv",
            "timestamp,component,metric,value\n2024-05-01T10:01:00Z,db,cpu,0.5\n2024-05-01T10:16:00Z,db,cpu,0.9\n",
        );
        write(
            d,
            "spans.csv",
            "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\nt,s,root,web,GET,1714557660000000000,1714557660100000000,100000\n",
        );
        let inc = IncidentDir::load(d).unwrap();
        assert_eq!(inc.incident.id, "demo");
        assert_eq!(
            inc.incident.topology,
            vec![("web".to_string(), "db".to_string())]
        );
        assert_eq!(inc.logs.as_ref().unwrap().records().len(), 1);
        assert_eq!(inc.metrics.as_ref().unwrap().samples_all().len(), 1);
        assert_eq!(inc.traces.as_ref().unwrap().spans_all().len(), 1);
        assert!(inc.report.after_cutoff >= 2);

        let copy = tempfile::tempdir().unwrap();
        inc.manifest.write(copy.path()).unwrap();
        assert_eq!(
            Manifest::read(&copy.path().join(MANIFEST_FILE)).unwrap(),
            inc.manifest
        );
    }

    #[test]
    fn clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(matches!(
            IncidentDir::load(d),
            Err(IncidentDirError::Io { .. })
        ));
        write(
            d,
            MANIFEST_FILE,
            &MANIFEST.replace("format_version = 1", "format_version = 9"),
        );
        assert!(
            IncidentDir::load(d)
                .unwrap_err()
                .to_string()
                .contains("format_version")
        );
        write(
            d,
            MANIFEST_FILE,
            &MANIFEST.replace("2024-05-01T10:15:00Z\"\ntopology", "yesterday\"\ntopology"),
        );
        assert!(
            IncidentDir::load(d)
                .unwrap_err()
                .to_string()
                .contains("detected_at")
        );
        write(d, MANIFEST_FILE, MANIFEST);
        let err = IncidentDir::load(d).unwrap_err().to_string();
        assert!(
            err.contains("logs/app.log") && err.contains("does not exist"),
            "{err}"
        );
        write(d, MANIFEST_FILE, &format!("{MANIFEST}\nsurprise = 1\n"));
        assert!(
            IncidentDir::load(d)
                .unwrap_err()
                .to_string()
                .contains("surprise")
        );
    }
}
