//! Explorers that need no model: each reads one modality through a data-source trait and runs
//! the matching analyzer of `rca_tools::analyze` over a baseline and a current window.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::source::{
    LogQuery, LogSource, MetricQuery, MetricSource, TraceQuery, TraceSource, collect_records,
};
use rca_core::{Evidence, Incident, Modality, TimeRange};
use rca_tools::analyze::{Finding, Window};

// The analyzers appear in [`Telemetry`]; re-exported so hosts that link only rca-agents can
// name them.
pub use rca_tools::analyze::events::EventAnalyzer;
pub use rca_tools::analyze::logs::LogAnalyzer;
pub use rca_tools::analyze::metrics::MetricAnalyzer;
pub use rca_tools::analyze::traces::TraceAnalyzer;

use super::roles::{Escalation, Exploration, ExploreRequest, Explorer, OrchestraError};

/// How the windows are cut around the detection time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowPolicy {
    /// Length of the current window, ending at the detection time (milliseconds).
    pub current_millis: i64,
    /// The baseline, when the host knows a quiet period; otherwise the part of the incident
    /// window before the current window.
    pub baseline: Option<TimeRange>,
}

impl Default for WindowPolicy {
    fn default() -> Self {
        WindowPolicy {
            current_millis: 10 * 60_000,
            baseline: None,
        }
    }
}

impl WindowPolicy {
    /// The windows for an incident; `Refine` doubles the current window.
    pub fn windows(&self, incident: &Incident, escalation: Escalation) -> Window {
        let span = match escalation {
            Escalation::Refine => self.current_millis.saturating_mul(2),
            _ => self.current_millis,
        };
        let end = incident.detected_at;
        let start = end.offset_millis(-span).max(incident.window.start);
        let current = TimeRange::new(start, end);
        let baseline = self
            .baseline
            .map(|b| b.clamp_end(start))
            .unwrap_or_else(|| TimeRange::new(incident.window.start, start));
        Window::new(baseline, current)
    }

    /// The range that covers both windows.
    fn span(&self, w: &Window) -> TimeRange {
        TimeRange::new(w.baseline.start.min(w.current.start), w.current.end)
    }
}

/// The telemetry one explorer reads.
#[derive(Clone)]
pub enum Telemetry {
    /// Metrics, judged by a [`MetricAnalyzer`].
    Metrics(Arc<dyn MetricSource>, MetricAnalyzer),
    /// Spans, judged by a [`TraceAnalyzer`].
    Traces(Arc<dyn TraceSource>, TraceAnalyzer),
    /// Logs, judged by a [`LogAnalyzer`].
    Logs(Arc<dyn LogSource>, LogAnalyzer),
}

/// An explorer over one modality's data source and analyzer.
pub struct TelemetryExplorer {
    name: String,
    telemetry: Telemetry,
    windows: WindowPolicy,
    spans: Option<(Arc<dyn TraceSource>, EventAnalyzer)>,
    /// How many findings (strongest first) become evidence.
    pub max_evidence: usize,
}

impl std::fmt::Debug for TelemetryExplorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryExplorer")
            .field("name", &self.name)
            .field("windows", &self.windows)
            .finish()
    }
}

impl TelemetryExplorer {
    /// An explorer named after its modality (`metrics-explorer`, ...).
    pub fn new(telemetry: Telemetry, windows: WindowPolicy) -> Self {
        let name = match &telemetry {
            Telemetry::Metrics(..) => "metrics-explorer",
            Telemetry::Traces(..) => "traces-explorer",
            Telemetry::Logs(..) => "logs-explorer",
        };
        TelemetryExplorer {
            name: name.to_string(),
            telemetry,
            windows,
            spans: None,
            max_evidence: 200,
        }
    }

    /// A logs explorer that also joins log lines to their spans (by the `trace_id` and
    /// `span_id` attributes) and runs the [`EventAnalyzer`]: per operation, which log lines
    /// and calls its spans stopped (or started) showing. Other explorers ignore it.
    pub fn with_spans(mut self, spans: Arc<dyn TraceSource>, analyzer: EventAnalyzer) -> Self {
        self.spans = Some((spans, analyzer));
        self
    }

    async fn findings(
        &self,
        window: &Window,
        escalation: Escalation,
    ) -> Result<(Vec<Finding>, usize), OrchestraError> {
        let range = self.windows.span(window);
        let fail = |e: rca_core::SourceError| OrchestraError::Role {
            role: self.name.clone(),
            message: e.to_string(),
        };
        // Refine also loosens the analyzer's threshold.
        let loosen = |z: f64| {
            if escalation == Escalation::Refine {
                (z * 0.75).max(1.0)
            } else {
                z
            }
        };
        Ok(match &self.telemetry {
            Telemetry::Metrics(source, analyzer) => {
                let samples: Vec<_> =
                    collect_records(source.samples(&MetricQuery::range(range)).await)
                        .await
                        .map_err(fail)?;
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                (a.analyze(&samples, window), samples.len())
            }
            Telemetry::Traces(source, analyzer) => {
                let spans: Vec<_> = collect_records(source.spans(&TraceQuery::range(range)).await)
                    .await
                    .map_err(fail)?;
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                (a.analyze(&spans, window), spans.len())
            }
            Telemetry::Logs(source, analyzer) => {
                let records: Vec<_> = collect_records(source.logs(&LogQuery::range(range)).await)
                    .await
                    .map_err(fail)?;
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                let mut findings = a.analyze(&records, window);
                if let Some((traces, events)) = &self.spans {
                    let spans: Vec<_> =
                        collect_records(traces.spans(&TraceQuery::range(range)).await)
                            .await
                            .map_err(fail)?;
                    let mut e = events.clone();
                    e.min_z = loosen(e.min_z);
                    findings.extend(e.analyze(
                        &records,
                        &spans,
                        window,
                        &rca_tools::analyze::logs::simple_template,
                    ));
                }
                (findings, records.len())
            }
        })
    }
}

fn modality_of(t: &Telemetry) -> Modality {
    match t {
        Telemetry::Metrics(..) => Modality::Metrics,
        Telemetry::Traces(..) => Modality::Traces,
        Telemetry::Logs(..) => Modality::Logs,
    }
}

#[async_trait]
impl Explorer for TelemetryExplorer {
    fn name(&self) -> &str {
        &self.name
    }

    fn modality(&self) -> Modality {
        modality_of(&self.telemetry)
    }

    async fn explore(&self, request: &ExploreRequest<'_>) -> Result<Exploration, OrchestraError> {
        let window = self.windows.windows(request.incident, request.escalation);
        let (mut findings, records) = self.findings(&window, request.escalation).await?;
        findings.sort_by(|a, b| b.score.total_cmp(&a.score));
        let action = format!(
            "{} analyzer over {records} records (baseline {}, current {})",
            self.modality(),
            window.baseline,
            window.current
        );
        if records == 0 {
            return Ok(Exploration {
                evidence: Vec::new(),
                conclusion: format!("no {} data in the windows", self.modality()),
                completed: false,
                actions: vec![action],
            });
        }
        let evidence: Vec<Evidence> = findings
            .iter()
            .take(self.max_evidence)
            .map(Finding::to_evidence)
            .collect();
        let mut top: Vec<String> = Vec::new();
        for f in &findings {
            if !top.contains(&f.component) {
                top.push(f.component.clone());
            }
            if top.len() == 3 {
                break;
            }
        }
        let focus = if request.subgoal.focus.is_empty() {
            String::new()
        } else {
            let hit: Vec<&String> = request
                .subgoal
                .focus
                .iter()
                .filter(|c| findings.iter().any(|f| &f.component == *c))
                .collect();
            format!(
                "; of the focus components, {} show anomalies",
                if hit.is_empty() {
                    "none".to_string()
                } else {
                    hit.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        };
        let conclusion = match findings.first() {
            Some(f) => format!(
                "{} anomalies point at {} (strongest: {}){focus}",
                self.modality(),
                top.join(", "),
                f.summary
            ),
            None => format!("no {} anomaly against the baseline{focus}", self.modality()),
        };
        Ok(Exploration {
            evidence,
            conclusion,
            completed: true,
            actions: vec![action],
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rca_core::Timestamp;
    use rca_core::source::{Level, LogRecord, MetricSample, Span};
    use rca_tools::sources::{FileLogSource, FileMetricSource, FileTraceSource};

    use super::super::policy::{ConvergenceController, EvidenceReasoner, OrderedPlanner};
    use super::super::{Decision, Orchestrator};
    use super::*;
    use crate::memory::InMemoryShortTermMemory;

    const MIN: i64 = 60_000;

    fn incident() -> Incident {
        Incident {
            id: "synthetic".into(),
            title: "checkout latency".into(),
            description: String::new(),
            detected_at: Timestamp(60 * MIN),
            window: TimeRange::new(Timestamp(0), Timestamp(60 * MIN)),
            system: String::new(),
            topology: Vec::new(),
        }
    }

    /// An hour of telemetry in which `db` goes wrong in the last eight minutes.
    fn telemetry() -> (Vec<MetricSample>, Vec<Span>, Vec<LogRecord>) {
        let mut metrics = Vec::new();
        let mut spans = Vec::new();
        let mut logs = Vec::new();
        for minute in 0..60i64 {
            let t = Timestamp(minute * MIN);
            let bad = minute >= 52;
            for (c, base) in [("web", 20.0), ("db", 30.0), ("cache", 10.0)] {
                let wiggle = ((minute * 7 + c.len() as i64) % 5) as f64;
                let value = if bad && c == "db" {
                    95.0
                } else {
                    base + wiggle
                };
                metrics.push(MetricSample {
                    timestamp: t,
                    component: c.into(),
                    metric: "cpu".into(),
                    value,
                    labels: BTreeMap::new(),
                });
            }
            for k in 0..4i64 {
                let trace = format!("t{minute}-{k}");
                let start = t.offset_millis(k * 1000);
                let db_us = if bad {
                    400_000
                } else {
                    20_000 + (k as u64) * 1000
                };
                spans.push(Span {
                    trace_id: trace.clone(),
                    span_id: "a".into(),
                    parent_id: None,
                    component: "web".into(),
                    operation: "GET /checkout".into(),
                    start,
                    duration_us: db_us + 10_000,
                    error: false,
                    attributes: BTreeMap::new(),
                });
                spans.push(Span {
                    trace_id: trace.clone(),
                    span_id: "b".into(),
                    parent_id: Some("a".into()),
                    component: "db".into(),
                    operation: "query".into(),
                    start: start.offset_millis(1),
                    duration_us: db_us,
                    error: false,
                    attributes: BTreeMap::new(),
                });
            }
            for k in 0..3i64 {
                let (level, message) = if bad && k == 0 {
                    (
                        Level::Error,
                        format!("query timeout after {} ms on shard {k}", 400 + minute),
                    )
                } else {
                    (
                        Level::Info,
                        format!("served request {} in {} ms", minute * 10 + k, 20 + k),
                    )
                };
                let component = if k == 0 { "db" } else { "web" };
                logs.push(LogRecord {
                    timestamp: t.offset_millis(k * 10),
                    component: component.into(),
                    level: Some(level),
                    message,
                    attributes: BTreeMap::new(),
                });
            }
        }
        (metrics, spans, logs)
    }

    fn explorers(cutoff: Option<Timestamp>) -> Vec<Arc<dyn Explorer>> {
        let (metrics, spans, logs) = telemetry();
        let policy = WindowPolicy::default();
        vec![
            Arc::new(TelemetryExplorer::new(
                Telemetry::Metrics(
                    Arc::new(FileMetricSource::from_samples(metrics, cutoff)),
                    MetricAnalyzer::default(),
                ),
                policy,
            )),
            Arc::new(TelemetryExplorer::new(
                Telemetry::Traces(
                    Arc::new(FileTraceSource::from_spans(spans, cutoff)),
                    TraceAnalyzer::default(),
                ),
                policy,
            )),
            Arc::new(TelemetryExplorer::new(
                Telemetry::Logs(
                    Arc::new(FileLogSource::from_records(logs, cutoff)),
                    LogAnalyzer::default(),
                ),
                policy,
            )),
        ]
    }

    #[test]
    fn windows_end_at_detection() {
        let w = WindowPolicy::default().windows(&incident(), Escalation::None);
        assert_eq!(
            w.current,
            TimeRange::new(Timestamp(50 * MIN), Timestamp(60 * MIN))
        );
        assert_eq!(
            w.baseline,
            TimeRange::new(Timestamp(0), Timestamp(50 * MIN))
        );
        let r = WindowPolicy::default().windows(&incident(), Escalation::Refine);
        assert_eq!(r.current.start, Timestamp(40 * MIN));
    }

    #[tokio::test]
    async fn telemetry_explorers_converge_on_the_faulty_component() {
        let o = Orchestrator::new(
            Arc::new(OrderedPlanner::default()),
            Arc::new(ConvergenceController::default()),
            Arc::new(EvidenceReasoner::default()),
            explorers(Some(incident().detected_at)),
        );
        let run = o
            .run(&incident(), &InMemoryShortTermMemory::new())
            .await
            .unwrap();
        assert!(
            matches!(&run.decision, Some(Decision::Conclude { component, .. }) if component == "db"),
            "{:?}",
            run.decision
        );
        assert_eq!(run.report.candidates[0].component, "db");
        assert!(
            run.report
                .evidence
                .iter()
                .any(|e| e.kind.as_deref() == Some("metric_shift:cpu"))
        );
        assert!(
            run.report
                .evidence
                .iter()
                .all(|e| e.observed_at < incident().detected_at)
        );
    }

    #[tokio::test]
    async fn an_explorer_without_data_does_not_complete() {
        let empty = TelemetryExplorer::new(
            Telemetry::Logs(
                Arc::new(FileLogSource::from_records(Vec::new(), None)),
                LogAnalyzer::default(),
            ),
            WindowPolicy::default(),
        );
        let inc = incident();
        let sub = super::super::Subgoal {
            modality: Modality::Logs,
            goal: "g".into(),
            focus: vec![],
        };
        let req = ExploreRequest {
            incident: &inc,
            subgoal: &sub,
            conclusions: &[],
            past: &[],
            escalation: Escalation::None,
        };
        let out = empty.explore(&req).await.unwrap();
        assert!(!out.completed);
        assert!(out.conclusion.contains("no logs data"));
    }
}
