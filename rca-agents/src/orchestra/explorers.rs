//! Explorers that need no model: each reads one modality through a data-source trait and runs
//! the matching analyzer of `rca_tools::analyze` over a baseline and a current window.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::source::{
    LogQuery, LogRecord, LogSource, MetricQuery, MetricSource, SharedRecords, Span, TraceQuery,
    TraceSource, collect_records,
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
    /// The windows for an incident: the current window runs from the incident's onset (when
    /// known or estimated) to the detection time, or else is the last `current_millis` before
    /// it; the baseline ends where the current window begins. `Refine` doubles the current
    /// window.
    pub fn windows(&self, incident: &Incident, escalation: Escalation) -> Window {
        let end = incident.detected_at;
        let length = match incident.onset {
            Some(onset) if onset < end => end.millis() - onset.millis(),
            _ => self.current_millis,
        };
        let span = match escalation {
            Escalation::Refine => length.saturating_mul(2),
            _ => length,
        };
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
    alarms: Option<Arc<dyn MetricSource>>,
    /// How many findings per component (strongest first) become evidence: a cap per
    /// component, so a component with many findings cannot push another's out of the
    /// ranking.
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
            alarms: None,
            max_evidence: 10,
        }
    }

    /// A logs explorer that also joins log lines to their spans (by the `trace_id` and
    /// `span_id` attributes) and runs the [`EventAnalyzer`]: per operation, which log lines
    /// and calls its spans stopped (or started) showing. Other explorers ignore it.
    pub fn with_spans(mut self, spans: Arc<dyn TraceSource>, analyzer: EventAnalyzer) -> Self {
        self.spans = Some((spans, analyzer));
        self
    }

    /// With [`with_spans`](Self::with_spans): the components' metric alarms join the span
    /// events ([`EventAnalyzer::analyze_with_alarms`]), so a resource fault shows as a new
    /// pattern on the spans of the component it hit (that finding is metrics evidence).
    pub fn with_alarms(mut self, metrics: Arc<dyn MetricSource>) -> Self {
        self.alarms = Some(metrics);
        self
    }

    /// Reads the records of both windows once.
    async fn fetch(&self, window: &Window) -> Result<Fetched, OrchestraError> {
        let range = self.windows.span(window);
        let fail = |e: rca_core::SourceError| OrchestraError::Role {
            role: self.name.clone(),
            message: e.to_string(),
        };
        Ok(match &self.telemetry {
            Telemetry::Metrics(source, _) => Fetched::Metrics(
                collect_records(source.samples(&MetricQuery::range(range)).await)
                    .await
                    .map_err(fail)?,
            ),
            Telemetry::Traces(source, _) => {
                Fetched::Traces(spans_in(source.as_ref(), range).await.map_err(fail)?)
            }
            Telemetry::Logs(source, _) => {
                let records = logs_in(source.as_ref(), range).await.map_err(fail)?;
                let spans = match &self.spans {
                    Some((traces, _)) => {
                        Some(spans_in(traces.as_ref(), range).await.map_err(fail)?)
                    }
                    None => None,
                };
                let alarms = match (&self.alarms, &spans) {
                    (Some(metrics), Some(_)) => {
                        collect_records(metrics.samples(&MetricQuery::range(range)).await)
                            .await
                            .map_err(fail)?
                    }
                    _ => Vec::new(),
                };
                Fetched::Logs(records, spans, alarms)
            }
        })
    }

    /// The analyzer's threshold (the log analyzer's for logs).
    fn min_z(&self) -> f64 {
        match &self.telemetry {
            Telemetry::Metrics(_, a) => a.min_z,
            Telemetry::Traces(_, a) => a.min_z,
            Telemetry::Logs(_, a) => a.min_z,
        }
    }

    /// The analyzer's findings over `window`, its thresholds scaled by `scale`.
    fn analyze(&self, data: &Fetched, window: &Window, scale: f64) -> Vec<Finding> {
        let loosen = |z: f64| if scale < 1.0 { (z * scale).max(1.0) } else { z };
        match (&self.telemetry, data) {
            (Telemetry::Metrics(_, analyzer), Fetched::Metrics(samples)) => {
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                a.analyze(samples, window)
            }
            (Telemetry::Traces(_, analyzer), Fetched::Traces(spans)) => {
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                a.analyze(spans, window)
            }
            (Telemetry::Logs(_, analyzer), Fetched::Logs(records, spans, alarms)) => {
                let mut a = analyzer.clone();
                a.min_z = loosen(a.min_z);
                let mut findings = a.analyze(records, window);
                if let (Some((_, events)), Some(spans)) = (&self.spans, spans) {
                    let mut e = events.clone();
                    e.min_z = loosen(e.min_z);
                    findings.extend(e.analyze_with_alarms(
                        records,
                        spans,
                        alarms,
                        window,
                        &rca_tools::analyze::logs::simple_template,
                    ));
                }
                findings
            }
            _ => Vec::new(),
        }
    }
}

/// The spans whose start lies in `range`: lent by the source when it holds them in memory
/// (read once, however many explorers look), streamed and collected otherwise.
async fn spans_in(
    source: &dyn TraceSource,
    range: TimeRange,
) -> Result<SharedRecords<Span>, rca_core::SourceError> {
    if let Some(lent) = source.lend_spans(range) {
        return Ok(lent);
    }
    Ok(SharedRecords::owned(
        collect_records(source.spans(&TraceQuery::range(range)).await).await?,
    ))
}

/// The log lines whose time lies in `range`, lent or streamed as [`spans_in`].
async fn logs_in(
    source: &dyn LogSource,
    range: TimeRange,
) -> Result<SharedRecords<LogRecord>, rca_core::SourceError> {
    if let Some(lent) = source.lend_logs(range) {
        return Ok(lent);
    }
    Ok(SharedRecords::owned(
        collect_records(source.logs(&LogQuery::range(range)).await).await?,
    ))
}

/// The records one explorer read.
enum Fetched {
    Metrics(Vec<rca_core::source::MetricSample>),
    Traces(SharedRecords<Span>),
    Logs(
        SharedRecords<LogRecord>,
        Option<SharedRecords<Span>>,
        Vec<rca_core::source::MetricSample>,
    ),
}

impl Fetched {
    fn len(&self) -> usize {
        match self {
            Fetched::Metrics(v) => v.len(),
            Fetched::Traces(v) => v.len(),
            Fetched::Logs(v, _, _) => v.len(),
        }
    }
}

/// The null windows inside a baseline: its last stretch as long as the current window
/// against the rest (or its two halves when it is shorter than twice the current window).
/// What the analyzer finds there is what normal variation alone produces.
fn null_window(window: &Window) -> Option<Window> {
    let b = window.baseline;
    let length = b.duration_millis();
    if length < 2 {
        return None;
    }
    let current = window.current.duration_millis().max(1);
    let split = if length >= 2 * current {
        b.end.offset_millis(-current)
    } else {
        b.start.offset_millis(length / 2)
    };
    Some(Window::new(
        TimeRange::new(b.start, split),
        TimeRange::new(split, b.end),
    ))
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
        let data = self.fetch(&window).await?;
        let records = data.len();
        // Refine loosens the analyzer's threshold.
        let scale = if request.escalation == Escalation::Refine {
            0.75
        } else {
            1.0
        };
        let mut findings = self.analyze(&data, &window, scale);
        // Calibration: the strongest finding the baseline produces against itself. A finding
        // counts as this modality agreeing only above it (and above the analyzer's threshold).
        let null_max = null_window(&window)
            .map(|w| {
                self.analyze(&data, &w, scale)
                    .iter()
                    .map(|f| f.score)
                    .fold(0.0, f64::max)
            })
            .unwrap_or(0.0);
        let significance = null_max.max(self.min_z() * scale);
        // Short-term memory: the components earlier explorers published are examined again
        // at a looser threshold, and what that shows is reported in the step. It is not
        // evidence: a wrong early conclusion can draw this explorer's attention but cannot
        // lend it this modality's support.
        let mut published: Vec<(String, String)> = Vec::new();
        for c in request.conclusions.iter().filter(|c| c.author != self.name) {
            for component in &c.components {
                if !published.iter().any(|(p, _)| p == component) {
                    published.push((component.clone(), c.author.clone()));
                }
            }
        }
        // Long-term memory: what this explorer found significant in similar past incidents
        // is looked at the same way (a recurring culprit), and likewise lends no support.
        for past in request.past {
            for component in past.components.iter().take(3) {
                if !published.iter().any(|(p, _)| p == component) {
                    published.push((
                        component.clone(),
                        format!("long-term memory of {}", past.incident),
                    ));
                }
            }
        }
        let mut looked_harder: Vec<Finding> = Vec::new();
        if !published.is_empty() {
            let known: std::collections::HashSet<(&str, &str)> = findings
                .iter()
                .map(|f| (f.component.as_str(), f.summary.as_str()))
                .collect();
            looked_harder = self
                .analyze(&data, &window, scale * 0.75)
                .into_iter()
                .filter(|f| published.iter().any(|(p, _)| *p == f.component))
                .filter(|f| !known.contains(&(f.component.as_str(), f.summary.as_str())))
                .collect();
            looked_harder.sort_by(|a, b| b.score.total_cmp(&a.score));
        }
        findings.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut action = format!(
            "{} analyzer over {records} records (baseline {}, current {}); significance {} \
             (baseline against itself: {})",
            self.modality(),
            window.baseline,
            window.current,
            fmt_score(significance),
            fmt_score(null_max)
        );
        if !published.is_empty() {
            let names: Vec<String> = published
                .iter()
                .map(|(c, by)| format!("{c} (from {by})"))
                .collect();
            action.push_str(&format!(
                "; looked harder at the published {}: {} weaker finding(s){}",
                names.join(", "),
                looked_harder.len(),
                looked_harder
                    .first()
                    .map(|f| format!(", the strongest: {}", f.summary))
                    .unwrap_or_default()
            ));
        }
        if records == 0 {
            return Ok(Exploration {
                evidence: Vec::new(),
                conclusion: format!("no {} data in the windows", self.modality()),
                completed: false,
                actions: vec![action],
                significance: None,
            });
        }
        let mut per_component: std::collections::HashMap<&str, usize> = Default::default();
        let evidence: Vec<Evidence> = findings
            .iter()
            .filter(|f| {
                let n = per_component.entry(f.component.as_str()).or_default();
                *n += 1;
                *n <= self.max_evidence.max(1)
            })
            .map(Finding::to_evidence)
            .collect();
        let mut top: Vec<String> = Vec::new();
        for f in findings.iter().filter(|f| f.score > significance) {
            if !top.contains(&f.component) {
                top.push(f.component.clone());
            }
            if top.len() == 3 {
                break;
            }
        }
        let mut focus_list: Vec<&String> = request.subgoal.focus.iter().collect();
        for (c, _) in &published {
            if !focus_list.contains(&c) {
                focus_list.push(c);
            }
        }
        let focus = if focus_list.is_empty() {
            String::new()
        } else {
            let hit: Vec<&str> = focus_list
                .iter()
                .filter(|c| findings.iter().any(|f| &f.component == **c))
                .map(|c| c.as_str())
                .collect();
            format!(
                "; of the focus components, {} show anomalies",
                if hit.is_empty() {
                    "none".to_string()
                } else {
                    hit.join(", ")
                }
            )
        };
        let conclusion = match (findings.first(), top.is_empty()) {
            (Some(f), false) => format!(
                "{} anomalies point at {} (strongest: {}){focus}",
                self.modality(),
                top.join(", "),
                f.summary
            ),
            (Some(f), true) => format!(
                "no {} anomaly above the significance level {} (strongest: {}){focus}",
                self.modality(),
                fmt_score(significance),
                f.summary
            ),
            (None, _) => format!("no {} anomaly against the baseline{focus}", self.modality()),
        };
        Ok(Exploration {
            evidence,
            conclusion,
            completed: true,
            actions: vec![action],
            significance: Some(significance),
        })
    }
}

fn fmt_score(x: f64) -> String {
    format!("{x:.1}")
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
            title: "checkout incident".into(),
            description: String::new(),
            detected_at: Timestamp(60 * MIN),
            window: TimeRange::new(Timestamp(0), Timestamp(60 * MIN)),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
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
                    trace_id: trace.as_str().into(),
                    span_id: "a".into(),
                    parent_id: None,
                    component: "web".into(),
                    operation: "GET /checkout".into(),
                    start,
                    duration_us: db_us + 10_000,
                    error: false,
                    attributes: Default::default(),
                });
                spans.push(Span {
                    trace_id: trace.as_str().into(),
                    span_id: "b".into(),
                    parent_id: Some("a".into()),
                    component: "db".into(),
                    operation: "query".into(),
                    start: start.offset_millis(1),
                    duration_us: db_us,
                    error: false,
                    attributes: Default::default(),
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
                    attributes: Default::default(),
                });
            }
        }
        (metrics, spans, logs)
    }

    fn explorers(cutoff: Option<Timestamp>) -> Vec<Arc<dyn Explorer>> {
        explorers_over(telemetry(), cutoff)
    }

    fn explorers_over(
        (metrics, spans, logs): (Vec<MetricSample>, Vec<Span>, Vec<LogRecord>),
        cutoff: Option<Timestamp>,
    ) -> Vec<Arc<dyn Explorer>> {
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

    /// The failure mode of shared memory: the first explorer publishes a wrong component (the
    /// metrics point at `cache`, the traces and logs at `db`). The later explorers look harder
    /// at `cache` and say so, but what that adds lies below their significance level, so the
    /// two-modality rule still concludes on `db`.
    #[tokio::test]
    async fn a_wrong_early_conclusion_does_not_lock_the_others_in() {
        let (mut metrics, spans, logs) = telemetry();
        for m in &mut metrics {
            let bad = m.timestamp >= Timestamp(52 * MIN);
            if bad && m.component == "db" {
                m.value = 31.0;
            }
            if bad && m.component == "cache" {
                m.value = 80.0;
            }
        }
        let o = Orchestrator::new(
            Arc::new(OrderedPlanner::default()),
            Arc::new(ConvergenceController::default()),
            Arc::new(EvidenceReasoner::default()),
            explorers_over((metrics, spans, logs), Some(incident().detected_at)),
        );
        let run = o
            .run(&incident(), &InMemoryShortTermMemory::new())
            .await
            .unwrap();
        let explored: Vec<&Exploration> = run
            .events
            .iter()
            .filter_map(|e| match e {
                super::super::RunEvent::Explored { exploration, .. } => Some(exploration),
                _ => None,
            })
            .collect();
        // Metrics ran first and pointed at cache.
        assert!(
            explored[0].conclusion.contains("cache"),
            "{}",
            explored[0].conclusion
        );
        // A later explorer read that and looked harder at cache.
        assert!(
            explored[1..].iter().any(|x| x
                .actions
                .iter()
                .any(|a| a.contains("looked harder at the published cache"))),
            "{explored:?}"
        );
        assert!(explored.iter().all(|x| x.significance.is_some()));
        assert!(
            matches!(&run.decision, Some(Decision::Conclude { component, .. }) if component == "db"),
            "{:?}",
            run.decision
        );
    }

    #[tokio::test]
    async fn the_onset_sets_the_current_window() {
        let mut inc = incident();
        inc.onset = Some(Timestamp(52 * MIN));
        let w = WindowPolicy::default().windows(&inc, Escalation::None);
        assert_eq!(
            w.current,
            TimeRange::new(Timestamp(52 * MIN), Timestamp(60 * MIN))
        );
        assert_eq!(
            w.baseline,
            TimeRange::new(Timestamp(0), Timestamp(52 * MIN))
        );
        let r = WindowPolicy::default().windows(&inc, Escalation::Refine);
        assert_eq!(r.current.start, Timestamp(44 * MIN));
        // An onset at the detection time leaves the fixed-length window.
        inc.onset = Some(inc.detected_at);
        let w = WindowPolicy::default().windows(&inc, Escalation::None);
        assert_eq!(w.current.start, Timestamp(50 * MIN));
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
