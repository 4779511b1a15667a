//! What the server offers: its tools with their input schemas (the tools' own schemars
//! schemas) and output schemas, the arguments of its own tools and the structured results.

use std::sync::Arc;

use rca_core::{DiagnosisReport, Evidence};
use rca_tools::tools::{AnalyzeCodeArgs, AnalyzeLogsArgs, DbRecordsArgs, EntityArgs, LogsArgs};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The argument every incident tool takes besides its own: which incident.
pub const INCIDENT_ARG: &str = "incident";

const INCIDENT_DOC: &str = "The incident: the name of its folder under the server's incident \
    root (see list_components, which lists them). Optional when the server serves one incident.";

/// The information-gathering tools and experts of an incident (rca-tools), served by name;
/// their input schemas are their own argument types' schemas plus [`INCIDENT_ARG`].
pub(crate) fn incident_tools() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    vec![
        (
            "get_logs",
            "Log lines of one component (an entity) in a time range before the detection time, \
             merged by template with counts; below WARNING dropped unless min_level lowers it.",
            schema_of::<LogsArgs>(),
        ),
        (
            "get_metrics",
            "Metric series of one component in a time range before the detection time: baseline \
             and recent level, min, max, last, and anomaly flags.",
            schema_of::<EntityArgs>(),
        ),
        (
            "get_traces",
            "Spans of one component: per operation calls, errors, p50/p95/max latency, the \
             slowest traces and latency shifts.",
            schema_of::<EntityArgs>(),
        ),
        (
            "get_db_records",
            "Database records (the incident's tables) that mention one component.",
            schema_of::<DbRecordsArgs>(),
        ),
        (
            "analyze_logs",
            "The log expert: segments log text (or the text under a snapshot key), and answers \
             with findings whose evidence is quoted verbatim from the lines.",
            schema_of::<AnalyzeLogsArgs>(),
        ),
        (
            "analyze_code",
            "The code expert: what the incident's code does on the failing path (incidents with \
             a code/ folder only).",
            schema_of::<AnalyzeCodeArgs>(),
        ),
    ]
}

/// The JSON schema of `T` as schemars writes it.
pub(crate) fn schema_of<T: JsonSchema>() -> serde_json::Value {
    serde_json::Value::from(schemars::schema_for!(T))
}

/// `schema` with the optional [`INCIDENT_ARG`] property added.
pub(crate) fn with_incident(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(map) = schema.as_object_mut() {
        let props = map
            .entry("properties")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(props) = props.as_object_mut() {
            props.insert(
                INCIDENT_ARG.into(),
                serde_json::json!({"type": "string", "description": INCIDENT_DOC}),
            );
        }
    }
    schema
}

fn object(schema: serde_json::Value) -> Arc<JsonObject> {
    Arc::new(match schema {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .open_world(false)
}

/// Every tool the server lists.
pub(crate) fn tools() -> Vec<Tool> {
    let mut out: Vec<Tool> = incident_tools()
        .into_iter()
        .map(|(name, description, schema)| {
            Tool::new(name, description, object(with_incident(schema)))
                .with_raw_output_schema(object(schema_of::<ObservationOutput>()))
                .with_annotations(read_only().idempotent(true))
        })
        .collect();
    out.push(
        Tool::new(
            "diagnose",
            "Runs the whole diagnosis of an incident (as `rca diagnose`): ranked root-cause \
             candidates with their evidence chain, as structured content (the report's JSON \
             schema) and as the Markdown report. The trajectory and report are stored and listed \
             as resources.",
            object(schema_of::<DiagnoseArgs>()),
        )
        .with_raw_output_schema(object(schema_of::<DiagnoseOutput>()))
        // It stores its trajectory and report (new files, nothing overwritten but its own).
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .open_world(false),
        ),
    );
    out.push(
        Tool::new(
            "list_components",
            "The incidents served, and the components of one incident with the modalities that \
             have data about each, and the service graph's edges.",
            object(schema_of::<ListComponentsArgs>()),
        )
        .with_raw_output_schema(object(schema_of::<ComponentsOutput>()))
        .with_annotations(read_only().idempotent(true)),
    );
    out.push(
        Tool::new(
            "log_templates",
            "Log templates mined from an incident's lines before the detection time (optionally \
             of one component and at or above a level), most frequent first.",
            object(schema_of::<LogTemplatesArgs>()),
        )
        .with_raw_output_schema(object(schema_of::<TemplatesOutput>()))
        .with_annotations(read_only().idempotent(true)),
    );
    out.push(
        Tool::new(
            "read_snapshot",
            "Reads the full text of a cut result by its snapshot key (`obs-` and 16 hex digits), \
             a page at a time.",
            object(schema_of::<ReadSnapshotArgs>()),
        )
        .with_raw_output_schema(object(schema_of::<SnapshotPage>()))
        .with_annotations(read_only().idempotent(true)),
    );
    out
}

/// Arguments of `diagnose`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnoseArgs {
    /// The incident: the name of its folder under the server's incident root. Optional when the
    /// server serves one incident.
    #[serde(default)]
    pub incident: Option<String>,
    /// Length of the current window before the detection time, in minutes (default: the
    /// server's, 10).
    #[serde(default)]
    pub current_minutes: Option<i64>,
    /// How many modalities must agree before the controller concludes (default: the
    /// server's, 2).
    #[serde(default)]
    pub min_modalities: Option<usize>,
}

/// Arguments of `list_components`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListComponentsArgs {
    /// The incident; without it, on a folder of incidents, only the incidents are listed.
    #[serde(default)]
    pub incident: Option<String>,
}

/// Arguments of `log_templates`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogTemplatesArgs {
    /// The incident (optional when the server serves one).
    #[serde(default)]
    pub incident: Option<String>,
    /// Only the lines of this component.
    #[serde(default)]
    pub entity: Option<String>,
    /// Only lines at or above this level (TRACE, DEBUG, INFO, WARNING, ERROR, CRITICAL).
    #[serde(default)]
    pub min_level: Option<String>,
    /// Templates returned at most (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Arguments of `read_snapshot`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadSnapshotArgs {
    /// The snapshot key a cut result named.
    pub key: String,
    /// The character to start at (default 0; a previous page's `next_offset`).
    #[serde(default)]
    pub offset: usize,
}

/// The result of an information-gathering tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ObservationOutput {
    /// The incident.
    pub incident: String,
    /// The tool.
    pub tool: String,
    /// The observation (redacted); when cut, its head and a note naming the snapshot key.
    pub text: String,
    /// Whether the text was cut.
    pub cut: bool,
    /// The key of the full text, when cut (read it with `read_snapshot`).
    pub snapshot_key: Option<String>,
    /// Characters of the full text.
    pub full_chars: usize,
    /// What the tool found anomalous.
    pub evidence: Vec<Evidence>,
    /// Evidence items left out past the list bound.
    pub evidence_left_out: usize,
}

/// The result of `diagnose`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiagnoseOutput {
    /// The incident.
    pub incident: String,
    /// The diagnosis (the schema `rca diagnose --json` publishes), redacted.
    pub report: DiagnosisReport,
    /// The Markdown report (redacted); when cut, its head and a note naming the snapshot key.
    pub markdown: String,
    /// Whether the Markdown was cut.
    pub cut: bool,
    /// The key of the full Markdown report, when cut.
    pub snapshot_key: Option<String>,
    /// The onset the diagnosis used (RFC 3339), when one was stated or estimated.
    pub onset: Option<String>,
    /// Roles whose model failed and whose deterministic policy answered.
    pub fallbacks: Vec<String>,
    /// The stored trajectory, as a resource URI (when runs are stored).
    pub trajectory_uri: Option<String>,
    /// The stored Markdown report, as a resource URI (when runs are stored).
    pub report_uri: Option<String>,
}

/// A component of an incident and where data about it is.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Component {
    /// Its name (the `entity` of the tools).
    pub name: String,
    /// Whether it has log lines.
    pub logs: bool,
    /// How many metric series it has.
    pub metric_series: usize,
    /// Whether it has spans.
    pub traces: bool,
}

/// A caller -> callee edge of the service graph.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Edge {
    /// The caller.
    pub caller: String,
    /// The callee.
    pub callee: String,
}

/// The result of `list_components`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ComponentsOutput {
    /// The incidents the server serves.
    pub incidents: Vec<String>,
    /// The incident listed (absent when none was named on a folder of incidents).
    pub incident: Option<String>,
    /// Its detection time (RFC 3339): the tools see nothing at or after it.
    pub detected_at: Option<String>,
    /// Its components, sorted by name.
    pub components: Vec<Component>,
    /// The service graph.
    pub edges: Vec<Edge>,
    /// Whether a list was cut at the server's bound.
    pub cut: bool,
}

/// One mined log template.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateInfo {
    /// The template; `<*>` marks a parameter.
    pub template: String,
    /// Lines it matched.
    pub count: u64,
}

/// The result of `log_templates`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplatesOutput {
    /// The incident.
    pub incident: String,
    /// The component, when one was named.
    pub entity: Option<String>,
    /// Lines mined.
    pub lines: u64,
    /// Templates found in all.
    pub total_templates: usize,
    /// The most frequent templates (redacted).
    pub templates: Vec<TemplateInfo>,
    /// Whether templates were left out (past `limit`).
    pub cut: bool,
}

/// A page of a snapshot.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SnapshotPage {
    /// The key.
    pub key: String,
    /// The first character of the page.
    pub offset: usize,
    /// The page.
    pub text: String,
    /// Where the next page starts, when there is one.
    pub next_offset: Option<usize>,
    /// Characters of the whole snapshot.
    pub total_chars: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_input_and_output_schema_and_a_unique_name() {
        let tools = tools();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&serde_json::json!("object")),
                "{}",
                t.name
            );
            let out = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(
                out.get("type"),
                Some(&serde_json::json!("object")),
                "{}",
                t.name
            );
        }
        let logs = tools.iter().find(|t| t.name == "get_logs").unwrap();
        let props = logs.input_schema.get("properties").unwrap();
        assert!(props.get("entity").is_some() && props.get(INCIDENT_ARG).is_some());
    }
}
