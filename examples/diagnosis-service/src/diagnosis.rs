//! One alert -> one incident -> one staged diagnosis (the library's diagnosis pipeline with
//! deterministic policies), as a redacted [`StoredReport`].

use std::sync::Arc;

use rca_agents::orchestra::explorers::{Telemetry, TelemetryExplorer, WindowPolicy};
use rca_agents::orchestra::{DiagnosisPipeline, Explorer, PipelineConfig, RoleModels};
use rca_core::trajectory::Trajectory;
use rca_core::{DiagnosisReport, Evidence, Incident, TimeRange, Timestamp};
use rca_llm::redact::Redactor;
use rca_tools::analyze::logs::LogAnalyzer;
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::traces::TraceAnalyzer;
use serde::{Deserialize, Serialize};

use crate::alert::{Alert, WebhookPayload};
use crate::config::{ServiceConfig, Sources};

/// Why one alert could not be diagnosed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiagnosisError {
    /// The alert itself is unusable (bad `startsAt`): the sender should fix it.
    #[error("alert {alert}: {message}")]
    BadAlert {
        /// The alert's name.
        alert: String,
        /// What is wrong.
        message: String,
    },
    /// The diagnosis failed (a data source or a role failed).
    #[error("diagnosis of {incident} failed: {message}")]
    Failed {
        /// The incident id.
        incident: String,
        /// What happened.
        message: String,
    },
}

/// The alert a report answers, as the report records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertSummary {
    /// `alertname`.
    pub name: String,
    /// The value of the component label, when the alert has it.
    pub component: Option<String>,
    /// The alert's `startsAt`.
    pub starts_at: String,
    /// Alertmanager's fingerprint.
    pub fingerprint: String,
}

/// What the service returns and stores for one alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredReport {
    /// The stored report's format version.
    pub format_version: u32,
    /// The report id (also its file name and its URL: `GET /reports/{id}`).
    pub id: String,
    /// The alert.
    pub alert: AlertSummary,
    /// The incident the alert became.
    pub incident: Incident,
    /// The diagnosis.
    pub report: DiagnosisReport,
    /// The evidence gathered.
    pub evidence: Vec<Evidence>,
    /// How the diagnosis was reached.
    pub trajectory: Trajectory,
    /// Caller -> callee edges of the service graph.
    pub service_graph: Vec<(String, String)>,
    /// When the service accepted the alert (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_at_ms: Option<i64>,
    /// When the report was finished (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_at_ms: Option<i64>,
}

/// The stored report format this build writes and reads.
pub const REPORT_FORMAT_VERSION: u32 = 1;

/// Turns alerts into diagnoses over fixed data sources.
#[derive(Debug, Clone)]
pub struct Diagnoser {
    sources: Sources,
    lookback_millis: i64,
    current_millis: i64,
    min_modalities: usize,
    component_label: String,
    redactor: Redactor,
}

/// A file-name-safe form of `text`.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A stable FNV-1a hash, for alerts without a fingerprint.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Diagnoser {
    /// A diagnoser over `sources` with the windows and label of `config`.
    pub fn new(config: &ServiceConfig, sources: Sources, redactor: Redactor) -> Self {
        Diagnoser {
            sources,
            lookback_millis: config.lookback_minutes.max(1) * 60_000,
            current_millis: config.current_minutes.max(1) * 60_000,
            min_modalities: config.min_modalities,
            component_label: config.component_label.clone(),
            redactor,
        }
    }

    /// `payload` with every string redacted (what the inbox keeps on disk). A payload that
    /// would not read back after redaction is kept as it was.
    pub fn redact_payload(&self, payload: &WebhookPayload) -> WebhookPayload {
        let Ok(mut value) = serde_json::to_value(payload) else {
            return payload.clone();
        };
        self.redactor.redact_json(&mut value);
        serde_json::from_value(value).unwrap_or_else(|_| payload.clone())
    }

    /// The incident an alert describes: detected at `startsAt`, over the lookback before it.
    pub fn incident(
        &self,
        payload: &WebhookPayload,
        alert: &Alert,
    ) -> Result<(String, Incident, AlertSummary), DiagnosisError> {
        let detected_at =
            Timestamp::parse_rfc3339(&alert.starts_at).ok_or_else(|| DiagnosisError::BadAlert {
                alert: alert.name().to_string(),
                message: format!("`startsAt` = {:?} is not an RFC 3339 time", alert.starts_at),
            })?;
        let fingerprint = if alert.fingerprint.is_empty() {
            format!("{:016x}", fnv(&format!("{:?}", alert.labels)))
        } else {
            alert.fingerprint.clone()
        };
        let id = sanitize(&format!("{fingerprint}-{}", detected_at.millis()));
        let component = alert.labels.get(&self.component_label).cloned();
        let summary = alert
            .annotations
            .get("summary")
            .or_else(|| payload.common_annotations.get("summary"));
        let title = match (&component, summary) {
            (Some(c), Some(s)) => format!("{} on {c}: {s}", alert.name()),
            (Some(c), None) => format!("{} on {c}", alert.name()),
            (None, Some(s)) => format!("{}: {s}", alert.name()),
            (None, None) => alert.name().to_string(),
        };
        let mut description = alert
            .annotations
            .get("description")
            .cloned()
            .unwrap_or_default();
        let labels: Vec<String> = alert
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !description.is_empty() {
            description.push('\n');
        }
        description.push_str(&format!("alert labels: {}", labels.join(", ")));
        let incident = Incident {
            id: id.clone(),
            title,
            description,
            detected_at,
            window: TimeRange::new(
                detected_at.offset_millis(-self.lookback_millis),
                detected_at,
            ),
            system: String::new(),
            topology: self.sources.topology.clone(),
            onset: None,
        };
        let summary = AlertSummary {
            name: alert.name().to_string(),
            component,
            starts_at: alert.starts_at.clone(),
            fingerprint,
        };
        Ok((id, incident, summary))
    }

    fn explorers(&self) -> Vec<Arc<dyn Explorer>> {
        let windows = WindowPolicy {
            current_millis: self.current_millis,
            baseline: self.sources.baseline,
        };
        let mut explorers: Vec<Arc<dyn Explorer>> = Vec::new();
        if let Some(m) = &self.sources.metrics {
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Metrics(m.clone(), MetricAnalyzer::default()),
                windows,
            )));
        }
        if let Some(t) = &self.sources.traces {
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Traces(t.clone(), TraceAnalyzer::default()),
                windows,
            )));
        }
        if let Some(l) = &self.sources.logs {
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Logs(l.clone(), LogAnalyzer::default()),
                windows,
            )));
        }
        explorers
    }

    /// Diagnoses one firing alert; the result is already redacted.
    pub async fn diagnose(
        &self,
        payload: &WebhookPayload,
        alert: &Alert,
    ) -> Result<StoredReport, DiagnosisError> {
        let (id, incident, summary) = self.incident(payload, alert)?;
        let failed = |message: String| DiagnosisError::Failed {
            incident: id.clone(),
            message,
        };
        // The library's diagnosis pipeline (deterministic roles), over this service's
        // explorers. Its sources are queried live, so the onset is not estimated: the current
        // window is the last `current_minutes` before the alert.
        let pipeline = DiagnosisPipeline::with_explorers(
            self.explorers(),
            self.sources.topology.clone(),
            RoleModels::default(),
            PipelineConfig {
                current_minutes: (self.current_millis / 60_000).max(1),
                min_modalities: self.min_modalities,
                onset: None,
                ..PipelineConfig::default()
            },
        )
        .map_err(|e| failed(e.to_string()))?;
        let run = pipeline
            .run(&incident)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let stored = StoredReport {
            format_version: REPORT_FORMAT_VERSION,
            id: id.clone(),
            alert: summary,
            incident,
            trajectory: run.trajectory(),
            report: run.report,
            evidence: run.evidence,
            service_graph: self.sources.topology.clone(),
            received_at_ms: None,
            reported_at_ms: None,
        };
        // Redact through JSON so every string field is covered.
        let mut value = serde_json::to_value(&stored).map_err(|e| failed(e.to_string()))?;
        self.redactor.redact_json(&mut value);
        serde_json::from_value(value).map_err(|e| failed(e.to_string()))
    }
}
