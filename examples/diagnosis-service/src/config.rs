//! The service's TOML configuration and the data sources it describes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rca_core::TimeRange;
use rca_core::source::{LogSource, MetricSource, TraceSource};
use rca_tools::incident_dir::IncidentDir;
use rca_tools::sources::{
    FileLogSource, FileMetricSource, FileTraceSource, LogOptions, MetricOptions,
};
use serde::Deserialize;

/// Why the service cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration is wrong: the message names the key and the fix.
    #[error("{path}: {message}")]
    Invalid {
        /// The configuration file (or `-` when built in code).
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A data source could not be opened.
    #[error("cannot open the data source {what}: {message}")]
    Source {
        /// Which source.
        what: String,
        /// What happened.
        message: String,
    },
}

/// The service configuration (`diagnosis-service.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// Where to listen (`127.0.0.1:8080`; port 0 picks a free port).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Where reports are stored, one JSON file per alert.
    pub store_dir: PathBuf,
    /// How far before the alert's `startsAt` the incident window reaches, in minutes.
    #[serde(default = "default_lookback")]
    pub lookback_minutes: i64,
    /// Length of the current window (the rest of the lookback is the baseline), in minutes.
    #[serde(default = "default_current")]
    pub current_minutes: i64,
    /// How many modalities must agree before the controller concludes.
    #[serde(default = "default_min_modalities")]
    pub min_modalities: usize,
    /// The alert label that names the affected component (also the Prometheus label whose
    /// values are components).
    #[serde(default = "default_component_label")]
    pub component_label: String,
    /// Alert labels that limit the metrics a diagnosis reads (e.g. `["job"]`): when every
    /// firing alert of the group gives such a label the same value, series whose samples give
    /// it another value are left out (samples without the label are kept). Empty: no limit.
    #[serde(default)]
    pub scope_labels: Vec<String>,
    /// How many diagnoses run at once (the number of workers).
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: usize,
    /// How many accepted alerts may wait or be diagnosed at once; a notification with new
    /// alerts beyond it gets 429 and `Retry-After`, and nothing of it is accepted.
    #[serde(default = "default_max_queued")]
    pub max_queued: usize,
    /// The longest a `POST /alerts?wait=SECONDS` waits for its reports, in seconds.
    #[serde(default = "default_max_wait")]
    pub max_wait_seconds: u64,
    /// The largest request body accepted, in bytes; larger bodies get 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// The `Retry-After` sent with 429 and 503, in seconds.
    #[serde(default = "default_retry_after")]
    pub retry_after_seconds: u64,
    /// The telemetry to diagnose over.
    #[serde(default)]
    pub data: DataConfig,
}

/// Where the telemetry comes from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// An incident-format directory (`incident.json` and telemetry files, see
    /// `docs/guides/incident-format.md`); its files, baseline and topology are used. Records at
    /// or after its `detected_at` are dropped on load, so set that to the end of the data.
    #[serde(default)]
    pub incident_dir: Option<PathBuf>,
    /// Log files (plain or JSON lines, gzip or not).
    #[serde(default)]
    pub logs: Vec<PathBuf>,
    /// Metric files (long or wide CSV).
    #[serde(default)]
    pub metrics: Vec<PathBuf>,
    /// Span files (CSV or OTLP-JSON).
    #[serde(default)]
    pub traces: Vec<PathBuf>,
    /// Caller -> callee edges, when the host knows them.
    #[serde(default)]
    pub topology: Vec<(String, String)>,
    /// A Prometheus server to read metrics from (needs the `prometheus` feature).
    #[serde(default)]
    pub prometheus_url: Option<String>,
    /// The resolution of the range queries sent to Prometheus, in seconds (60 when unset).
    #[serde(default)]
    pub prometheus_step_seconds: Option<u64>,
    /// Receive OpenTelemetry over OTLP/HTTP on the service's own address (`POST /v1/traces`,
    /// `/v1/logs`, `/v1/metrics`; needs the `otlp` feature) and diagnose over what was
    /// received, for every modality no other setting supplies.
    #[serde(default)]
    pub otlp: bool,
    /// The most records of each kind the OTLP buffer keeps, the oldest received dropped first
    /// (200 000 when unset).
    #[serde(default)]
    pub otlp_max_records: Option<usize>,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_lookback() -> i64 {
    60
}
fn default_current() -> i64 {
    10
}
fn default_min_modalities() -> usize {
    2
}
fn default_component_label() -> String {
    "service".into()
}
fn default_max_concurrent() -> usize {
    4
}
fn default_max_queued() -> usize {
    256
}
fn default_max_wait() -> u64 {
    60
}
fn default_max_body() -> usize {
    1 << 20
}
fn default_retry_after() -> u64 {
    5
}

impl ServiceConfig {
    /// A configuration with the defaults, storing reports in `store_dir`.
    pub fn new(store_dir: impl Into<PathBuf>) -> Self {
        ServiceConfig {
            listen: default_listen(),
            store_dir: store_dir.into(),
            lookback_minutes: default_lookback(),
            current_minutes: default_current(),
            min_modalities: default_min_modalities(),
            component_label: default_component_label(),
            scope_labels: Vec::new(),
            max_concurrent: default_max_concurrent(),
            max_queued: default_max_queued(),
            max_wait_seconds: default_max_wait(),
            max_body_bytes: default_max_body(),
            retry_after_seconds: default_retry_after(),
            data: DataConfig::default(),
        }
    }

    /// Reads and validates a configuration file; relative data paths are resolved against the
    /// file's directory.
    pub fn load(path: &Path) -> Result<ServiceConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
        let mut config: ServiceConfig =
            toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        resolve(&mut config.store_dir);
        if let Some(d) = config.data.incident_dir.as_mut() {
            resolve(d);
        }
        config.data.logs.iter_mut().for_each(resolve);
        config.data.metrics.iter_mut().for_each(resolve);
        config.data.traces.iter_mut().for_each(resolve);
        config.validate().map_err(invalid)?;
        Ok(config)
    }

    /// Checks the values; the message names the key and the fix.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_limits()?;
        self.validate_data()
    }

    /// Checks every value but `[data]` (for a host that opens its own [`Sources`]).
    pub fn validate_limits(&self) -> Result<(), String> {
        if self.lookback_minutes <= 0 {
            return Err("`lookback_minutes` must be positive, e.g. 60".into());
        }
        if self.current_minutes <= 0 || self.current_minutes > self.lookback_minutes {
            return Err(format!(
                "`current_minutes` = {} must be positive and at most `lookback_minutes` ({})",
                self.current_minutes, self.lookback_minutes
            ));
        }
        if self.max_concurrent == 0 {
            return Err("`max_concurrent` must be at least 1".into());
        }
        if self.max_queued < self.max_concurrent {
            return Err(format!(
                "`max_queued` = {} must be at least `max_concurrent` ({})",
                self.max_queued, self.max_concurrent
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err("`max_body_bytes` must be at least 1024".into());
        }
        if self.component_label.trim().is_empty() {
            return Err("`component_label` must name an alert label, e.g. \"service\"".into());
        }
        if self.scope_labels.iter().any(|l| l.trim().is_empty()) {
            return Err("`scope_labels` must name alert labels, e.g. [\"job\"]".into());
        }
        Ok(())
    }

    fn validate_data(&self) -> Result<(), String> {
        let d = &self.data;
        if d.incident_dir.is_none()
            && d.logs.is_empty()
            && d.metrics.is_empty()
            && d.traces.is_empty()
            && d.prometheus_url.is_none()
            && !d.otlp
        {
            return Err("`[data]` names no telemetry: set `incident_dir`, `logs`, `metrics`, `traces`, `prometheus_url` or `otlp`".into());
        }
        if d.otlp && !cfg!(feature = "otlp") {
            return Err("`data.otlp` needs the service built with `--features otlp`".into());
        }
        if d.otlp_max_records == Some(0) {
            return Err("`data.otlp_max_records` must be at least 1".into());
        }
        if d.prometheus_url.is_some() && !d.metrics.is_empty() {
            return Err(
                "`data.metrics` and `data.prometheus_url` both give metrics; keep one".into(),
            );
        }
        if d.prometheus_step_seconds == Some(0) {
            return Err("`data.prometheus_step_seconds` must be at least 1".into());
        }
        if d.prometheus_url.is_some() && !cfg!(feature = "prometheus") {
            return Err(
                "`data.prometheus_url` needs the service built with `--features prometheus`".into(),
            );
        }
        Ok(())
    }
}

/// The opened data sources the diagnoses read.
#[derive(Clone, Default)]
pub struct Sources {
    /// Logs.
    pub logs: Option<Arc<dyn LogSource>>,
    /// Metrics.
    pub metrics: Option<Arc<dyn MetricSource>>,
    /// Spans.
    pub traces: Option<Arc<dyn TraceSource>>,
    /// Caller -> callee edges.
    pub topology: Vec<(String, String)>,
    /// A quiet period, when the incident directory names one.
    pub baseline: Option<TimeRange>,
    /// What OTLP exports to the service fill (with `data.otlp`); its router is served beside
    /// the alert routes.
    #[cfg(feature = "otlp")]
    pub otlp: Option<Arc<rca_tools::otlp::TelemetryBuffer>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("logs", &self.logs.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("traces", &self.traces.is_some())
            .field("topology", &self.topology)
            .finish_non_exhaustive()
    }
}

impl Sources {
    /// Opens what `data` names. File sources keep every record (no cutoff): each diagnosis
    /// only queries its own window, which ends at the alert's start.
    pub fn open(data: &DataConfig, component_label: &str) -> Result<Sources, ConfigError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| ConfigError::Source {
            what: what.to_string(),
            message: e.to_string(),
        };
        let mut sources = Sources {
            topology: data.topology.clone(),
            ..Sources::default()
        };
        if let Some(dir) = &data.incident_dir {
            let loaded = IncidentDir::open(dir).map_err(|e| fail("incident_dir", &e))?;
            if sources.topology.is_empty() {
                sources.topology = loaded.incident.topology.clone();
            }
            sources.baseline = loaded.baseline;
            // A modality with no records gets no explorer.
            if !loaded.logs.records().is_empty() {
                sources.logs = Some(Arc::new(loaded.logs) as Arc<dyn LogSource>);
            }
            if !loaded.metrics.samples_all().is_empty() {
                sources.metrics = Some(Arc::new(loaded.metrics) as Arc<dyn MetricSource>);
            }
            if !loaded.traces.spans_all().is_empty() {
                sources.traces = Some(Arc::new(loaded.traces) as Arc<dyn TraceSource>);
            }
        }
        if !data.logs.is_empty() {
            let s = FileLogSource::open(&data.logs, &LogOptions::default())
                .map_err(|e| fail("data.logs", &e))?;
            sources.logs = Some(Arc::new(s));
        }
        if !data.metrics.is_empty() {
            let s = FileMetricSource::open(&data.metrics, &MetricOptions::default())
                .map_err(|e| fail("data.metrics", &e))?;
            sources.metrics = Some(Arc::new(s));
        }
        if !data.traces.is_empty() {
            let s = FileTraceSource::open(&data.traces, None, None)
                .map_err(|e| fail("data.traces", &e))?;
            sources.traces = Some(Arc::new(s));
        }
        if let Some(url) = &data.prometheus_url {
            sources.metrics = Some(prometheus(
                url,
                data.prometheus_step_seconds,
                component_label,
            )?);
        }
        #[cfg(feature = "otlp")]
        if data.otlp {
            let buffer = Arc::new(rca_tools::otlp::TelemetryBuffer::new(
                data.otlp_max_records.unwrap_or(DEFAULT_OTLP_MAX_RECORDS),
            ));
            // Received telemetry stands in for every modality nothing else supplies.
            if sources.logs.is_none() {
                sources.logs = Some(Arc::clone(&buffer) as Arc<dyn LogSource>);
            }
            if sources.metrics.is_none() {
                sources.metrics = Some(Arc::clone(&buffer) as Arc<dyn MetricSource>);
            }
            if sources.traces.is_none() {
                sources.traces = Some(Arc::clone(&buffer) as Arc<dyn TraceSource>);
            }
            sources.otlp = Some(buffer);
        }
        Ok(sources)
    }
}

/// How many records of each kind the OTLP buffer keeps by default.
pub const DEFAULT_OTLP_MAX_RECORDS: usize = 200_000;

#[cfg(feature = "prometheus")]
fn prometheus(
    url: &str,
    step_seconds: Option<u64>,
    component_label: &str,
) -> Result<Arc<dyn MetricSource>, ConfigError> {
    let mut config = rca_tools::prometheus::PrometheusConfig::new(url);
    config.component_label = component_label.to_string();
    if let Some(step) = step_seconds {
        config.step_seconds = step.max(1);
    }
    let source =
        rca_tools::prometheus::PrometheusSource::new(config).map_err(|e| ConfigError::Source {
            what: "data.prometheus_url".into(),
            message: e.to_string(),
        })?;
    Ok(Arc::new(source))
}

#[cfg(not(feature = "prometheus"))]
fn prometheus(
    _url: &str,
    _step_seconds: Option<u64>,
    _component_label: &str,
) -> Result<Arc<dyn MetricSource>, ConfigError> {
    Err(ConfigError::Invalid {
        path: "-".into(),
        message: "`data.prometheus_url` needs the service built with `--features prometheus`"
            .into(),
    })
}
