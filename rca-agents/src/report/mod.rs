//! Reports people read: Markdown for terminals and tickets, JSON with a published schema for
//! machines, and a self-contained HTML page with the trajectory timeline, the evidence chain
//! (each of its metrics charted against the baseline, the onset marked), the slowest trace
//! through the top candidate as a waterfall, and the service graph laid out in layers by call
//! depth with the candidates coloured by rank.
//!
//! Module map: `html` (the page), `graph` (the service graph's SVG), `layout` (its layered
//! layout), `charts` (metric charts), `waterfall` (the trace), `telemetry` (what a bundle
//! gathers from the incident's data sources, bounded), `svg` (escaping and labels),
//! `markdown`.

mod charts;
mod graph;
mod html;
mod layout;
mod markdown;
pub mod runs;
mod svg;
mod telemetry;
mod waterfall;

use rca_core::trajectory::Trajectory;
use rca_core::{DiagnosisReport, Incident};
use serde::{Deserialize, Serialize};

pub use graph::{MAX_GRAPH_NODES, RANKED_COLOURS};
pub use html::render_html;
pub use layout::{EdgeRoute, GraphLayout};
pub use markdown::render_markdown;
pub use telemetry::{
    MAX_BASELINE_POINTS, MAX_CHARTS, MAX_CURRENT_POINTS, MAX_NAME_CHARS, MAX_TRACE_SPANS,
    MAX_WATERFALL_SPANS, MetricChart, ReportTelemetry, ReportWindows, TraceWaterfall,
    WaterfallSpan, downsample, evidence_metrics, waterfall_spans,
};

/// Everything a rendered report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportBundle {
    /// The incident.
    pub incident: Incident,
    /// The diagnosis.
    pub report: DiagnosisReport,
    /// How the diagnosis was reached.
    pub trajectory: Trajectory,
    /// Caller -> callee edges of the service graph (from the incident's topology or traces).
    #[serde(default)]
    pub service_graph: Vec<(String, String)>,
    /// The evidence chain's metrics over the baseline and the current window (empty when the
    /// bundle was built without telemetry; older bundles have none).
    #[serde(default)]
    pub metric_charts: Vec<MetricChart>,
    /// The slowest trace through the top candidate, when there are spans of it.
    #[serde(default)]
    pub slowest_trace: Option<TraceWaterfall>,
}

impl ReportBundle {
    /// A bundle without telemetry drawings.
    pub fn new(
        incident: Incident,
        report: DiagnosisReport,
        trajectory: Trajectory,
        service_graph: Vec<(String, String)>,
    ) -> Self {
        ReportBundle {
            incident,
            report,
            trajectory,
            service_graph,
            metric_charts: Vec::new(),
            slowest_trace: None,
        }
    }

    /// The bundle with what [`ReportTelemetry::gather`] read.
    pub fn with_telemetry(mut self, telemetry: ReportTelemetry) -> Self {
        self.metric_charts = telemetry.metric_charts;
        self.slowest_trace = telemetry.slowest_trace;
        self
    }

    /// What a report shows of a diagnosis of `loaded`: the report, the trajectory and the
    /// service graph, plus what is drawn from the incident's telemetry over the windows the
    /// diagnosis compared (the current window from `onset`, else the incident's onset, else the
    /// last `current_minutes` before the detection time): the evidence chain's metrics and the
    /// slowest trace through the top candidate. `rca diagnose`, `rca react`, `rca flash` and
    /// the MCP server's `diagnose` build their bundles here.
    pub async fn of_incident_dir(
        loaded: &rca_tools::incident_dir::IncidentDir,
        report: DiagnosisReport,
        trajectory: Trajectory,
        service_graph: Vec<(String, String)>,
        onset: Option<rca_core::Timestamp>,
        current_minutes: i64,
    ) -> ReportBundle {
        let windows = ReportWindows::for_incident(
            &loaded.incident,
            onset,
            current_minutes.max(1).saturating_mul(60_000),
            loaded.baseline,
        );
        let telemetry = ReportTelemetry::gather(
            &report,
            windows,
            Some(&loaded.metrics),
            Some(&loaded.traces),
        )
        .await;
        ReportBundle::new(loaded.incident.clone(), report, trajectory, service_graph)
            .with_telemetry(telemetry)
    }
}

/// The format version of a saved trajectory record (`format_version` in the
/// `trajectory.json` that `rca diagnose` and the MCP server's `diagnose` write).
pub const TRAJECTORY_FORMAT_VERSION: u32 = 1;

/// The JSON schema of [`DiagnosisReport`], as published in `docs/report.schema.json`.
pub fn report_schema() -> serde_json::Value {
    serde_json::Value::from(schemars::schema_for!(DiagnosisReport))
}

/// [`report_schema`] as the pretty JSON text published in `docs/report.schema.json` (with a
/// trailing newline); `rca report-schema` prints it and a test keeps the file in step.
pub fn report_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&report_schema())
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// The report as pretty JSON.
pub fn render_json(report: &DiagnosisReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

#[cfg(test)]
pub(crate) mod fixtures {
    use rca_core::trajectory::{Action, Observation, Outcome, RootCauseCandidate, Step};
    use rca_core::{Evidence, Modality, Responsibility, TimeRange, Timestamp};

    use super::*;

    pub fn bundle() -> ReportBundle {
        let t0 = Timestamp::from_civil(2023, 1, 29, 10, 0, 0, 0).unwrap_or(Timestamp(0));
        let evidence = vec![
            Evidence::new(
                Modality::Metrics,
                t0.offset_millis(60_000),
                "orders",
                "cpu 4.1x baseline <high>",
            )
            .with_score(6.0),
            Evidence::new(
                Modality::Traces,
                t0.offset_millis(90_000),
                "orders",
                "p90 latency of /pay up 5x",
            )
            .with_score(4.0),
        ];
        let mut trajectory = Trajectory::new();
        trajectory.steps.push(Step {
            index: 0,
            thought: "metrics first".into(),
            action: Some(Action {
                name: "metrics-explorer".into(),
                args: serde_json::json!({}),
            }),
            observation: Some(Observation::full("orders cpu high")),
            elapsed_ms: 12,
            ..Default::default()
        });
        trajectory.outcome = Outcome::Finalized;
        ReportBundle::new(
            Incident {
                id: "inc-1".into(),
                title: "checkout latency & errors".into(),
                description: "p99 above 3 s".into(),
                detected_at: t0.offset_millis(120_000),
                window: TimeRange::new(t0, t0.offset_millis(120_000)),
                system: String::new(),
                topology: Vec::new(),
                onset: None,
            },
            DiagnosisReport {
                root_cause: "orders is the most likely root cause".into(),
                solution: "roll back orders".into(),
                evidence,
                responsibility: Responsibility::Platform,
                confidence: 0.8,
                candidates: vec![
                    RootCauseCandidate {
                        component: "orders".into(),
                        fault_type: Some("cpu".into()),
                        time: Some(t0),
                        score: 9.0,
                    },
                    RootCauseCandidate {
                        component: "payments".into(),
                        fault_type: None,
                        time: None,
                        score: 2.0,
                    },
                ],
                usage: Default::default(),
                elapsed_ms: 40,
            },
            trajectory,
            vec![
                ("frontend".into(), "orders".into()),
                ("orders".into(), "payments".into()),
                ("frontend".into(), "catalog".into()),
            ],
        )
    }

    /// [`bundle`] with a chart of the orders' cpu and a trace through orders.
    pub fn bundle_with_telemetry() -> ReportBundle {
        let b = bundle();
        let t0 = b.incident.window.start;
        let windows = ReportWindows {
            baseline: TimeRange::new(t0, t0.offset_millis(90_000)),
            current: TimeRange::new(t0.offset_millis(90_000), b.incident.detected_at),
            onset: Some(t0.offset_millis(90_000)),
        };
        let points = (0..12)
            .map(|i| (t0.offset_millis(i * 10_000), if i >= 9 { 4.1 } else { 1.0 }))
            .collect();
        let span = |id: &str, parent: Option<&str>, component: &str, at: i64, us: u64, depth| {
            WaterfallSpan {
                span_id: id.into(),
                parent_id: parent.map(str::to_string),
                component: component.into(),
                operation: format!("op {id}"),
                start: t0.offset_millis(100_000 + at),
                duration_us: us,
                error: false,
                depth,
            }
        };
        b.with_telemetry(ReportTelemetry {
            metric_charts: vec![MetricChart {
                component: "orders".into(),
                metric: "cpu".into(),
                finding: "cpu 4.1x baseline <high>".into(),
                windows,
                points,
                baseline_median: Some(1.0),
            }],
            slowest_trace: Some(TraceWaterfall {
                trace_id: "t1".into(),
                component: "orders".into(),
                slowest_span: "b".into(),
                spans: vec![
                    span("a", None, "frontend", 0, 900_000, 0),
                    span("b", Some("a"), "orders", 5, 800_000, 1),
                    span("c", Some("b"), "payments", 10, 90_000, 2),
                ],
                total_spans: 3,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_the_report_fields() {
        let schema = report_schema();
        let props = &schema["properties"];
        for field in [
            "root_cause",
            "solution",
            "evidence",
            "responsibility",
            "confidence",
        ] {
            assert!(props.get(field).is_some(), "schema lacks {field}");
        }
        let json = render_json(&fixtures::bundle().report);
        let back: DiagnosisReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, fixtures::bundle().report);
    }

    #[test]
    fn old_bundles_without_telemetry_still_load() {
        let full = fixtures::bundle_with_telemetry();
        let mut json = serde_json::to_value(&full).unwrap();
        let back: ReportBundle = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, full);
        let obj = json.as_object_mut().unwrap();
        obj.remove("metric_charts");
        obj.remove("slowest_trace");
        let old: ReportBundle = serde_json::from_value(json).unwrap();
        assert!(old.metric_charts.is_empty() && old.slowest_trace.is_none());
        assert_eq!(old.report, full.report);
    }

    #[test]
    fn published_schema_file_matches_the_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/report.schema.json");
        let published = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            published == report_schema_text(),
            "docs/report.schema.json is out of date; regenerate it with \
             `cargo run -p rca-cli -- report-schema > docs/report.schema.json`"
        );
        let parsed: serde_json::Value = serde_json::from_str(&published).unwrap();
        assert_eq!(parsed["title"], "DiagnosisReport");
    }

    #[test]
    fn fixture_report_validates_against_the_schema_shape() {
        // Every required property of the schema is present in a serialized report.
        let schema = report_schema();
        let json: serde_json::Value =
            serde_json::from_str(&render_json(&fixtures::bundle().report)).unwrap();
        for field in schema["required"].as_array().into_iter().flatten() {
            let name = field.as_str().unwrap();
            assert!(
                json.get(name).is_some(),
                "serialized report lacks required {name}"
            );
        }
    }
}
