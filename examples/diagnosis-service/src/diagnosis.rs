//! One alert group -> one incident -> one staged diagnosis (the library's diagnosis pipeline
//! with deterministic policies), as a redacted [`StoredReport`].
//!
//! A group's report id is `<hash of the groupKey>-<earliest startsAt of its firing alerts, in
//! Unix milliseconds>`: every notification of the same episode of the group (a repeat, an
//! alert joining it) maps to the same id, and the group firing again after it resolved gets a
//! new one.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::SourceError;
use rca_core::source::{MetricQuery, MetricSample, MetricSource, RecordStream};

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
use crate::memory::SharedMemory;
use crate::store::Resolution;

/// Why one alert could not be diagnosed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiagnosisError {
    /// An alert of the group is unusable (bad `startsAt`): the sender should fix it.
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

/// The alert group a report answers, as the report records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertSummary {
    /// `alertname` (of the group's first alert).
    pub name: String,
    /// The value of the component label, when every alert of the group has the same one.
    pub component: Option<String>,
    /// The earliest `startsAt` of the group's firing alerts.
    pub starts_at: String,
    /// Alertmanager's fingerprint of the alert that started first.
    pub fingerprint: String,
    /// Alertmanager's key of the group (empty for a hand-written payload without one).
    #[serde(default)]
    pub group_key: String,
    /// The fingerprints of the group's firing alerts when it was accepted.
    #[serde(default)]
    pub fingerprints: Vec<String>,
}

/// What the service returns and stores for one alert group.
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
    /// The group's resolution, once Alertmanager sent it (kept beside the report, in
    /// `resolved/<id>.json`, and added when the report is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
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
    scope_labels: Vec<String>,
    redactor: Redactor,
    memory: Option<SharedMemory>,
}

/// At most this many alerts of a group are listed in its incident's description.
pub const MAX_LISTED_ALERTS: usize = 20;

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

/// The hex of the first 64 bits of SHA-256 over `sender`, a NUL and `key`.
fn group_hash(sender: &str, key: &str) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(sender.as_bytes());
    hash.update([0u8]);
    hash.update(key.as_bytes());
    hash.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A stable hash (of labels, for alerts without a fingerprint).
fn fnv(text: &str) -> u64 {
    rca_core::seeded::stable_hash(text.as_bytes())
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
            scope_labels: config.scope_labels.clone(),
            redactor,
            memory: None,
        }
    }

    /// The same diagnoser reading and writing the long-term memory `memory` (shared by the
    /// process's workers): each diagnosis is offered the past incidents with the nearest
    /// alerts, and is remembered when it ends.
    pub fn with_memory(mut self, memory: SharedMemory) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The long-term memory, when there is one.
    pub fn memory(&self) -> Option<&SharedMemory> {
        self.memory.as_ref()
    }

    /// The redactor applied to everything stored.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
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

    /// The alerts of `group` a report is about: its firing ones, or all of them when none
    /// fires (a resolved group), ordered by `startsAt` (the earliest first).
    fn considered<'a>(
        &self,
        group: &'a WebhookPayload,
    ) -> Result<Vec<(Timestamp, &'a Alert)>, DiagnosisError> {
        let firing = group.alerts.iter().any(Alert::is_firing);
        let mut alerts = Vec::new();
        for alert in group.alerts.iter().filter(|a| !firing || a.is_firing()) {
            let starts = Timestamp::parse_rfc3339(&alert.starts_at).ok_or_else(|| {
                DiagnosisError::BadAlert {
                    alert: alert.name().to_string(),
                    message: format!("`startsAt` = {:?} is not an RFC 3339 time", alert.starts_at),
                }
            })?;
            alerts.push((starts, alert));
        }
        alerts.sort_by_key(|(t, _)| *t);
        Ok(alerts)
    }

    /// The report id of `group` (one notification's group, see [`WebhookPayload::groups`]):
    /// `<hash of the groupKey>-<earliest startsAt millis>` over its firing alerts, or over all
    /// of them when the group has resolved. Without a group key the single alert's fingerprint
    /// (or its labels) stands in for it.
    ///
    /// `sender` is the authenticated client that posted the group (empty without
    /// authentication): the id is the first 64 bits of SHA-256 over the sender and the
    /// group's key, so a group is its sender's own. Another client can neither name it (a
    /// forged first alert opens a group of its own) nor resolve or repeat it, nor find a key
    /// of its own that hashes to it.
    pub fn group_id(&self, group: &WebhookPayload, sender: &str) -> Result<String, DiagnosisError> {
        let alerts = self.considered(group)?;
        let Some((earliest, first)) = alerts.first() else {
            return Err(DiagnosisError::BadAlert {
                alert: "group".into(),
                message: "the group carries no alerts".into(),
            });
        };
        let key = if !group.group_key.is_empty() {
            group.group_key.clone()
        } else if !first.fingerprint.is_empty() {
            first.fingerprint.clone()
        } else {
            format!("{:?}", first.labels)
        };
        Ok(format!(
            "{}-{}",
            group_hash(sender, &key),
            earliest.millis()
        ))
    }

    /// The value every alert of `alerts` gives `label`, if they agree.
    fn common<'a>(alerts: &[(Timestamp, &'a Alert)], label: &str) -> Option<&'a String> {
        let first = alerts.first()?.1.labels.get(label)?;
        alerts
            .iter()
            .all(|(_, a)| a.labels.get(label) == Some(first))
            .then_some(first)
    }

    /// The incident an alert group describes: detected at the earliest `startsAt` of its
    /// firing alerts, over the lookback before it; the component is the component label's
    /// value when the alerts agree on it.
    pub fn incident(
        &self,
        group: &WebhookPayload,
    ) -> Result<(String, Incident, AlertSummary), DiagnosisError> {
        let id = self.group_id(group, "")?;
        let alerts = self.considered(group)?;
        let Some(&(detected_at, first)) = alerts.first() else {
            return Err(DiagnosisError::BadAlert {
                alert: "group".into(),
                message: "the group carries no alerts".into(),
            });
        };
        let component = Self::common(&alerts, &self.component_label).cloned();
        let summary = first
            .annotations
            .get("summary")
            .or_else(|| group.common_annotations.get("summary"));
        let title = match (&component, summary) {
            (Some(c), Some(s)) => format!("{} on {c}: {s}", first.name()),
            (Some(c), None) => format!("{} on {c}", first.name()),
            (None, Some(s)) => format!("{}: {s}", first.name()),
            (None, None) => first.name().to_string(),
        };
        let mut description = first
            .annotations
            .get("description")
            .cloned()
            .unwrap_or_default();
        if !description.is_empty() {
            description.push('\n');
        }
        let described = |a: &Alert| {
            let labels: Vec<String> = a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.join(", ")
        };
        if alerts.len() == 1 {
            description.push_str(&format!("alert labels: {}", described(first)));
        } else {
            description.push_str(&format!("{} alerts in the group:", alerts.len()));
            for (_, a) in alerts.iter().take(MAX_LISTED_ALERTS) {
                description.push_str(&format!("\n- {}", described(a)));
            }
            if alerts.len() > MAX_LISTED_ALERTS {
                description.push_str(&format!(
                    "\n- and {} more",
                    alerts.len() - MAX_LISTED_ALERTS
                ));
            }
        }
        if group.truncated_alerts > 0 {
            description.push_str(&format!(
                "\n({} more alerts left out by Alertmanager's max_alerts)",
                group.truncated_alerts
            ));
        }
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
        let fingerprint = |a: &Alert| {
            if a.fingerprint.is_empty() {
                format!("{:016x}", fnv(&format!("{:?}", a.labels)))
            } else {
                a.fingerprint.clone()
            }
        };
        let summary = AlertSummary {
            name: first.name().to_string(),
            component,
            starts_at: first.starts_at.clone(),
            fingerprint: fingerprint(first),
            group_key: group.group_key.clone(),
            fingerprints: alerts.iter().map(|(_, a)| fingerprint(a)).collect(),
        };
        Ok((id, incident, summary))
    }

    /// The labels of `scope_labels` on which every firing alert of `group` agrees, with their
    /// values: the metrics a diagnosis reads are limited to series that agree with them.
    pub fn scope(&self, group: &WebhookPayload) -> BTreeMap<String, String> {
        let Ok(alerts) = self.considered(group) else {
            return BTreeMap::new();
        };
        self.scope_labels
            .iter()
            .filter_map(|l| Self::common(&alerts, l).map(|v| (l.clone(), v.clone())))
            .collect()
    }

    fn explorers(&self, scope: BTreeMap<String, String>) -> Vec<Arc<dyn Explorer>> {
        let windows = WindowPolicy {
            current_millis: self.current_millis,
            baseline: self.sources.baseline,
        };
        let mut explorers: Vec<Arc<dyn Explorer>> = Vec::new();
        if let Some(m) = &self.sources.metrics {
            let metrics: Arc<dyn MetricSource> = if scope.is_empty() {
                m.clone()
            } else {
                Arc::new(ScopedMetrics {
                    inner: m.clone(),
                    scope,
                })
            };
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Metrics(metrics, MetricAnalyzer::default()),
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

    /// Diagnoses one firing alert group (one notification's group, see
    /// [`WebhookPayload::groups`]); the result is already redacted.
    pub async fn diagnose(&self, group: &WebhookPayload) -> Result<StoredReport, DiagnosisError> {
        self.diagnose_as(group, None).await
    }

    /// [`Diagnoser::diagnose`], the incident (and its report, and what long-term memory
    /// remembers of it) taking the id `given_id` when given: the id the queue computed when it
    /// accepted the group.
    pub async fn diagnose_as(
        &self,
        group: &WebhookPayload,
        given_id: Option<&str>,
    ) -> Result<StoredReport, DiagnosisError> {
        let (mut id, mut incident, summary) = self.incident(group)?;
        if let Some(given) = given_id {
            id = given.to_string();
            incident.id = id.clone();
        }
        let failed = |message: String| DiagnosisError::Failed {
            incident: id.clone(),
            message,
        };
        // The library's diagnosis pipeline (deterministic roles), over this service's
        // explorers. Its sources are queried live, so the onset is not estimated: the current
        // window is the last `current_minutes` before the alert.
        let build = || {
            DiagnosisPipeline::with_explorers(
                self.explorers(self.scope(group)),
                self.sources.topology.clone(),
                RoleModels::default(),
                PipelineConfig {
                    current_minutes: (self.current_millis / 60_000).max(1),
                    min_modalities: self.min_modalities,
                    onset: None,
                    ..PipelineConfig::default()
                },
            )
            .map_err(|e| failed(e.to_string()))
        };
        let pipeline = match &self.memory {
            Some(memory) => {
                // Held only while the pipeline takes its stores (opened on first use); what
                // it guards (the opened stores) stays whole should a holder have panicked.
                let mut memory = memory.lock().unwrap_or_else(|e| e.into_inner());
                match build()?.with_memory(&mut memory) {
                    Ok(pipeline) => pipeline,
                    // A store that cannot be opened costs the diagnosis its memory only.
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "diagnosing without long-term memory");
                        build()?
                    }
                }
            }
            None => build()?,
        };
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
            resolution: None,
        };
        // Redact through JSON so every string field is covered.
        let mut value = serde_json::to_value(&stored).map_err(|e| failed(e.to_string()))?;
        self.redactor.redact_json(&mut value);
        serde_json::from_value(value).map_err(|e| failed(e.to_string()))
    }
}

/// A metric source limited to the series that agree with an alert's labels: a sample whose
/// labels give one of the scope's labels another value is left out; samples without the label
/// (a file source's, mostly) are kept.
struct ScopedMetrics {
    inner: Arc<dyn MetricSource>,
    scope: BTreeMap<String, String>,
}

#[async_trait]
impl MetricSource for ScopedMetrics {
    async fn samples(
        &self,
        query: &MetricQuery,
    ) -> Result<RecordStream<MetricSample>, SourceError> {
        let scope = self.scope.clone();
        let stream = self.inner.samples(query).await?;
        Ok(Box::pin(stream.filter(move |item| {
            let keep = match item {
                Ok(sample) => scope
                    .iter()
                    .all(|(k, v)| sample.labels.get(k).is_none_or(|have| have == v)),
                Err(_) => true,
            };
            std::future::ready(keep)
        })))
    }

    async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
        self.inner.series().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::tests::SAMPLE;

    fn diagnoser(scope_labels: &[&str]) -> Diagnoser {
        let mut config = ServiceConfig::new("unused");
        config.scope_labels = scope_labels.iter().map(|s| s.to_string()).collect();
        Diagnoser::new(&config, Sources::default(), Redactor::builtin())
    }

    #[test]
    fn a_group_keeps_its_id_across_repeats_and_joins() {
        let d = diagnoser(&["job"]);
        let payload = WebhookPayload::parse(SAMPLE.as_bytes()).unwrap();
        let id = d.group_id(&payload, "").unwrap();
        let start = Timestamp::parse_rfc3339("2024-05-01T10:15:00Z").unwrap();
        assert!(id.ends_with(&format!("-{}", start.millis())), "{id}");
        // A later alert joining the group keeps the id; another group gets another.
        let mut joined = payload.clone();
        let mut late = payload.alerts[0].clone();
        late.starts_at = "2024-05-01T10:20:00Z".into();
        late.fingerprint = "late".into();
        joined.alerts.push(late);
        assert_eq!(d.group_id(&joined, "").unwrap(), id);
        // The same group from another sender is another group.
        assert_ne!(d.group_id(&payload, "intruder").unwrap(), id);
        assert_ne!(
            d.group_id(&payload, "intruder").unwrap(),
            d.group_id(&payload, "alertmanager").unwrap()
        );
        let mut other = payload.clone();
        other.group_key.push('x');
        assert_ne!(d.group_id(&other, "").unwrap(), id);
        // The incident lists the firing alerts; they agree on no service, so none is named.
        let (_, incident, summary) = d.incident(&joined).unwrap();
        assert_eq!(incident.detected_at, start);
        assert!(
            incident.description.contains("2 alerts in the group"),
            "{}",
            incident.description
        );
        assert_eq!(summary.component.as_deref(), Some("web"));
        assert_eq!(summary.fingerprints, vec!["c3a1f0e2b7d4a915", "late"]);
        // The resolved group's id is taken over all its alerts.
        let mut resolved = payload.clone();
        resolved.status = "resolved".into();
        for a in &mut resolved.alerts {
            a.status = "resolved".into();
        }
        let earlier = Timestamp::parse_rfc3339("2024-05-01T09:00:00Z").unwrap();
        assert!(
            d.group_id(&resolved, "")
                .unwrap()
                .ends_with(&earlier.millis().to_string())
        );
    }

    #[tokio::test]
    async fn the_scope_keeps_series_that_agree_with_the_alert() {
        let d = diagnoser(&["job", "absent"]);
        let mut payload = WebhookPayload::parse(SAMPLE.as_bytes()).unwrap();
        payload.alerts[0].labels.insert("job".into(), "api".into());
        let scope = d.scope(&payload);
        assert_eq!(
            scope,
            BTreeMap::from([("job".to_string(), "api".to_string())])
        );
        let t = Timestamp::from_secs(100);
        let sample = |job: Option<&str>| MetricSample {
            timestamp: t,
            component: "c".into(),
            metric: "m".into(),
            value: 1.0,
            labels: job
                .map(|j| [("job".to_string(), j.to_string())].into())
                .unwrap_or_default(),
        };
        let inner = rca_tools::sources::FileMetricSource::from_samples(
            vec![sample(Some("api")), sample(Some("other")), sample(None)],
            None,
        );
        let scoped = ScopedMetrics {
            inner: Arc::new(inner),
            scope,
        };
        let query = MetricQuery::range(TimeRange::new(t.offset_millis(-1), t.offset_millis(1)));
        let kept = rca_core::source::collect_records(scoped.samples(&query).await)
            .await
            .unwrap();
        assert_eq!(kept.len(), 2);
        assert!(
            kept.iter()
                .all(|s| s.labels.get("job").is_none_or(|j| j == "api"))
        );
    }
}
