//! Reports people read: Markdown for terminals and tickets, JSON with a published schema for
//! machines, and a self-contained HTML page with the trajectory timeline, the evidence chain
//! and the service graph with the suspected root cause highlighted.

mod html;
mod markdown;

use rca_core::trajectory::Trajectory;
use rca_core::{DiagnosisReport, Incident};
use serde::{Deserialize, Serialize};

pub use html::{GraphLayout, render_html};
pub use markdown::render_markdown;

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
}

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
        ReportBundle {
            incident: Incident {
                id: "inc-1".into(),
                title: "checkout latency & errors".into(),
                description: "p99 above 3 s".into(),
                detected_at: t0.offset_millis(120_000),
                window: TimeRange::new(t0, t0.offset_millis(120_000)),
                system: String::new(),
                topology: Vec::new(),
                onset: None,
            },
            report: DiagnosisReport {
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
            service_graph: vec![
                ("frontend".into(), "orders".into()),
                ("orders".into(), "payments".into()),
                ("frontend".into(), "catalog".into()),
            ],
        }
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
