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

/// The longest look-back window a configuration may ask for, minutes (a week).
pub const MAX_LOOKBACK_MINUTES: i64 = 7 * 24 * 60;

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
    /// Where reports are stored, one JSON file per alert, and where the inbox is kept.
    /// Required unless `[postgres]` is set (then nothing is written there).
    #[serde(default)]
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
    /// Queue alerts and keep reports, resolutions and episodes in PostgreSQL instead of
    /// `store_dir`, so that several processes share them (needs the `postgres` feature).
    #[serde(default)]
    pub postgres: Option<PostgresConfig>,
    /// Whether diagnoses use long-term memory: each diagnosis is offered the past incidents
    /// with the most similar alerts (and each explorer its nearest past actions), and is
    /// remembered when it ends. With `[postgres]`, in the table `diagnosis_memory`, shared by
    /// every process; on by default there. Without it, in `store_dir/memory/` (one file per
    /// store, shared by this process's workers); off by default there, because the file
    /// store rewrites (and syncs) its whole file on every insert, which slows a busy service
    /// down as the memory grows. Everything remembered is redacted as the reports are. See
    /// [`ServiceConfig::uses_memory`].
    #[serde(default)]
    pub memory: Option<bool>,
    /// The listener: TLS, the clients allowed in (per route group: `alerts`, `telemetry`,
    /// `reports`, `operations`), deadlines, connection caps and rates (`[listener]`, see
    /// `rca_listen::ListenerConfig`). Without clients the service serves loopback only,
    /// unless `listener.allow_unauthenticated` says otherwise on purpose.
    #[serde(default)]
    pub listener: rca_listen::ListenerConfig,
    /// How long reports are kept and how many bytes they may take (`[retention]`): older
    /// ones, and the oldest beyond the bytes, are deleted with their resolutions.
    #[serde(default)]
    pub retention: crate::retention::RetentionConfig,
    /// Testing only: each worker waits this long, holding its claim, between a finished
    /// diagnosis and storing its report, in milliseconds (so that a test can stop a process
    /// mid-diagnosis). Leave it at 0, the default, anywhere else.
    #[serde(default)]
    pub test_delay_ms: u64,
}

/// The `[postgres]` table: the database several processes of the service share.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// The connection string, as libpq takes it: `host=127.0.0.1 port=5432 user=rca
    /// dbname=rca sslmode=require` or `postgresql://rca@127.0.0.1/rca?sslmode=require`. Its
    /// `sslmode` decides on TLS: `disable` never, `prefer` (the default) when the server
    /// offers it and `ca_file` is set, `require` always (and needs `ca_file`).
    pub url: String,
    /// The PEM file of the authority that signed the server's certificate: TLS is available
    /// only with it (no system roots are trusted). The certificate must also name the host
    /// of `url`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A PEM client certificate (chain) to present when the server asks for one (with
    /// `client_key_file`; needs `ca_file`).
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    /// The PEM private key of `client_cert_file`.
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
    /// The schema holding the service's tables (created when missing); unset: `public`.
    /// Services that must not share alerts use different schemas.
    #[serde(default)]
    pub schema: Option<String>,
    /// How long a worker's claim on an alert group lasts without renewal, in seconds; the
    /// worker renews it four times per lease while it diagnoses. A group whose worker died is
    /// claimed again by another once the lease has run out.
    #[serde(default = "default_lease")]
    pub lease_seconds: u64,
    /// How often an idle worker looks for a group to claim, in milliseconds.
    #[serde(default = "default_poll")]
    pub poll_millis: u64,
    /// The longest the service waits to connect and for any one statement, in seconds.
    #[serde(default = "default_pg_timeout")]
    pub timeout_seconds: u64,
    /// This process's name in the claims it records (default: `diagnosis-service-<pid>`).
    #[serde(default)]
    pub worker_name: Option<String>,
    /// How many entries of a long-term memory store (the past incidents, or one explorer's
    /// past actions) a search reads at most: the most recently added ones. Bounds the time and
    /// memory of a search; older entries are kept but no longer found.
    #[serde(default = "default_memory_search_limit")]
    pub memory_search_limit: usize,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection string may carry a password.
        f.debug_struct("PostgresConfig")
            .field("ca_file", &self.ca_file)
            .field("client_cert_file", &self.client_cert_file)
            .field("client_key_file", &self.client_key_file)
            .field("schema", &self.schema)
            .field("lease_seconds", &self.lease_seconds)
            .field("poll_millis", &self.poll_millis)
            .field("timeout_seconds", &self.timeout_seconds)
            .field("worker_name", &self.worker_name)
            .field("memory_search_limit", &self.memory_search_limit)
            .finish_non_exhaustive()
    }
}

impl PostgresConfig {
    /// Defaults over the connection string `url`.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            schema: None,
            lease_seconds: default_lease(),
            poll_millis: default_poll(),
            timeout_seconds: default_pg_timeout(),
            worker_name: None,
            memory_search_limit: default_memory_search_limit(),
        }
    }

    /// The name this process records in its claims and memory entries: `worker_name`, else
    /// `diagnosis-service-<pid>`.
    pub fn worker(&self) -> String {
        self.worker_name
            .clone()
            .unwrap_or_else(|| format!("diagnosis-service-{}", std::process::id()))
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        self.schema.as_deref().unwrap_or("public")
    }

    /// Resolves the relative paths among `ca_file`, `client_cert_file` and `client_key_file`
    /// against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for path in [
            &mut self.ca_file,
            &mut self.client_cert_file,
            &mut self.client_key_file,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }

    /// Checks the values; the message names the key and the fix. With the `postgres`
    /// feature, also reads the TLS files (`ca_file`, the client certificate and key) and
    /// checks the URL's `sslmode` against them.
    pub fn validate(&self) -> Result<(), String> {
        if self.url.trim().is_empty() {
            return Err(
                "`postgres.url` must be a connection string, e.g. \"host=127.0.0.1 user=rca dbname=rca\""
                    .into(),
            );
        }
        let schema = self.schema();
        let valid = schema.len() <= 63
            && schema
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(format!(
                "`postgres.schema` = {schema:?} must be a lower-case SQL name of at most 63 \
                 characters (letters, digits, `_`), e.g. \"diagnosis\""
            ));
        }
        if self.lease_seconds == 0 {
            return Err("`postgres.lease_seconds` must be at least 1, e.g. 30".into());
        }
        if self.poll_millis < 10 {
            return Err("`postgres.poll_millis` must be at least 10, e.g. 500".into());
        }
        if self.timeout_seconds == 0 {
            return Err("`postgres.timeout_seconds` must be at least 1, e.g. 10".into());
        }
        if self
            .worker_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty())
        {
            return Err("`postgres.worker_name` must not be empty".into());
        }
        if self.memory_search_limit == 0 {
            return Err("`postgres.memory_search_limit` must be at least 1, e.g. 10000".into());
        }
        #[cfg(feature = "postgres")]
        crate::pg::tls::PgTls::from_config(self)?;
        Ok(())
    }
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
fn default_lease() -> u64 {
    30
}
fn default_poll() -> u64 {
    500
}
fn default_pg_timeout() -> u64 {
    10
}
fn default_memory_search_limit() -> usize {
    10_000
}

impl ServiceConfig {
    /// A configuration with the defaults, storing reports in `store_dir`.
    pub fn new(store_dir: impl Into<PathBuf>) -> Self {
        ServiceConfig {
            listen: default_listen(),
            listener: rca_listen::ListenerConfig::default(),
            retention: crate::retention::RetentionConfig::default(),
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
            postgres: None,
            memory: None,
            test_delay_ms: 0,
        }
    }

    /// Whether diagnoses use long-term memory: `memory` when set, else on with `[postgres]`
    /// and off with the file store.
    pub fn uses_memory(&self) -> bool {
        self.memory.unwrap_or(self.postgres.is_some())
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
        if config.store_dir.as_os_str().is_empty() && config.postgres.is_none() {
            return Err(invalid(
                "`store_dir` is missing: name the folder for reports and the inbox, e.g. \
                 store_dir = \"reports\" (or set `[postgres]`)"
                    .into(),
            ));
        }
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
        config.listener.resolve_paths(base);
        if let Some(pg) = config.postgres.as_mut() {
            pg.resolve_paths(base);
        }
        config.validate().map_err(invalid)?;
        Ok(config)
    }

    /// Checks the values; the message names the key and the fix.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_limits()?;
        self.validate_data()
    }

    /// Checks every value but `[data]` (for a host that opens its own [`Sources`]).
    /// `lookback_minutes` is at most [`MAX_LOOKBACK_MINUTES`], so its milliseconds never
    /// overflow into a window that ends before it starts.
    pub fn validate_limits(&self) -> Result<(), String> {
        if self.lookback_minutes <= 0 || self.lookback_minutes > MAX_LOOKBACK_MINUTES {
            return Err(format!(
                "`lookback_minutes` = {} must be positive and at most {MAX_LOOKBACK_MINUTES} (a week), e.g. 60",
                self.lookback_minutes
            ));
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
        self.listener.validate()?;
        self.retention.validate()?;
        if let Some(pg) = &self.postgres {
            if !cfg!(feature = "postgres") {
                return Err(
                    "`[postgres]` needs the service built with `--features postgres`".into(),
                );
            }
            pg.validate()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_listener_and_postgres_paths_are_taken_from_the_file_s_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tls")).unwrap();
        let pki = rca_listen::TestPki::generate(&dir.path().join("tls")).unwrap();
        let postgres = if cfg!(feature = "postgres") {
            "[postgres]\nurl = \"host=127.0.0.1 sslmode=require\"\nca_file = \"tls/ca.pem\"\n"
        } else {
            ""
        };
        let text = format!(
            "store_dir = \"reports\"\n\
             [data]\nmetrics = [\"metrics.csv\"]\n\
             [listener.tls]\ncert_file = \"tls/server.pem\"\nkey_file = \"tls/server-key.pem\"\n\
             [[listener.clients]]\nname = \"am\"\nroutes = [\"alerts\"]\nbearer_token_file = \"am.sha256\"\n\
             {postgres}"
        );
        let path = dir.path().join("service.toml");
        std::fs::write(&path, text).unwrap();
        let config = ServiceConfig::load(&path).unwrap();
        let tls = config.listener.tls.as_ref().unwrap();
        assert_eq!(tls.cert_file, pki.server_cert_file);
        assert_eq!(tls.key_file, pki.server_key_file);
        assert_eq!(
            config.listener.clients[0].bearer_token_file.as_deref(),
            Some(dir.path().join("am.sha256").as_path())
        );
        if let Some(pg) = &config.postgres {
            assert_eq!(pg.ca_file.as_deref(), Some(pki.ca_file.as_path()));
        }
    }

    #[test]
    fn an_overflowing_lookback_is_refused() {
        let mut c = ServiceConfig::new("store");
        c.lookback_minutes = i64::MAX;
        let e = c.validate_limits().unwrap_err();
        assert!(
            e.contains("lookback_minutes") && e.contains("a week"),
            "{e}"
        );
        c.lookback_minutes = MAX_LOOKBACK_MINUTES;
        c.current_minutes = 5;
        assert!(c.validate_limits().is_ok());
    }

    #[test]
    fn postgres_settings_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.toml");
        let write = |text: &str| std::fs::write(&path, text).unwrap();
        // `store_dir` may be left out with `[postgres]`, not without.
        write("[data]\nmetrics = [\"m.csv\"]\n");
        let err = ServiceConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("store_dir"), "{err}");
        write(
            "[data]\nmetrics = [\"m.csv\"]\n[postgres]\nurl = \"host=127.0.0.1 password=pw\"\n\
             schema = \"diagnosis_2\"\nlease_seconds = 5\n",
        );
        let loaded = ServiceConfig::load(&path);
        if cfg!(feature = "postgres") {
            let config = loaded.unwrap();
            let pg = config.postgres.clone().unwrap();
            assert_eq!(pg.schema(), "diagnosis_2");
            assert_eq!(
                (pg.lease_seconds, pg.poll_millis, pg.timeout_seconds),
                (5, 500, 10)
            );
            assert_eq!(pg.memory_search_limit, 10_000);
            assert!(
                config.uses_memory(),
                "long-term memory is on by default with [postgres]"
            );
            // The connection string may carry a password: it is not shown.
            assert!(!format!("{pg:?}").contains("pw"));
        } else {
            let err = loaded.unwrap_err().to_string();
            assert!(err.contains("--features postgres"), "{err}");
        }
        let mut pg = PostgresConfig::new("host=127.0.0.1");
        assert_eq!(pg.schema(), "public");
        assert!(pg.validate().is_ok());
        pg.schema = Some("Bad-Name".into());
        assert!(pg.validate().unwrap_err().contains("postgres.schema"));
        pg.schema = None;
        pg.lease_seconds = 0;
        assert!(pg.validate().unwrap_err().contains("lease_seconds"));
        pg.lease_seconds = 1;
        pg.memory_search_limit = 0;
        assert!(pg.validate().unwrap_err().contains("memory_search_limit"));
        pg.memory_search_limit = 1;
        pg.url = " ".into();
        assert!(pg.validate().unwrap_err().contains("postgres.url"));
        assert_eq!(
            PostgresConfig {
                worker_name: Some("w".into()),
                ..PostgresConfig::new("host=x")
            }
            .worker(),
            "w"
        );
    }

    #[test]
    fn memory_can_be_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.toml");
        std::fs::write(
            &path,
            "store_dir = \"r\"\nmemory = false\n[data]\nmetrics = [\"m.csv\"]\n",
        )
        .unwrap();
        assert!(!ServiceConfig::load(&path).unwrap().uses_memory());
        assert!(
            !ServiceConfig::new("r").uses_memory(),
            "off with the file store"
        );
    }
}
