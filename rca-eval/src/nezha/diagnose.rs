//! Diagnosing one case with the library's diagnosis pipeline
//! ([`rca_agents::orchestra::DiagnosisPipeline`], the one `rca diagnose` runs): the case's
//! telemetry becomes an incident's sources, the pipeline (deterministic roles, the same
//! defaults as `rca diagnose`) explores, converges and reasons, and its report is what is
//! scored.

use std::sync::Arc;

use rca_agents::orchestra::{
    DiagnosisMemory, DiagnosisPipeline, IncidentTelemetry, Onset, PipelineConfig, RoleModels,
    RunEvent, RunRecord,
};
use rca_core::Timestamp;
use rca_tools::analyze::events::{SPAN_ID, TRACE_ID};
use rca_tools::sources::{FileLogSource, FileMetricSource, FileTraceSource};
use serde::Serialize;

use super::NezhaError;
use super::loader::CaseData;

/// What the pipeline concluded about one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseDiagnosis {
    /// Pods (components) from most to least likely root cause, as the report lists them.
    pub ranked: Vec<String>,
    /// The fault type the report names for the top candidate (`unknown` when none).
    pub fault_type: String,
    /// The onset the run used (stated or estimated).
    pub onset: Option<Timestamp>,
    /// Whether the onset was estimated from the telemetry.
    pub onset_estimated: bool,
    /// How many explorations the run made.
    pub explorations: usize,
    /// Whether long-term memory chose the first modality of the plan.
    pub planned_from_memory: bool,
    /// The whole run (report, evidence, events).
    #[serde(skip)]
    pub record: RunRecord,
}

/// Telemetry withheld from the diagnosis, to see how the ranking holds when a modality, or
/// the join between two, is missing (as on systems that lack them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Withheld {
    /// No metrics.
    Metrics,
    /// No spans (and so no log-span join).
    Traces,
    /// No logs.
    Logs,
    /// Logs and spans both, but log lines carry no trace or span id.
    LogSpanJoin,
}

impl Withheld {
    /// Every kind, in a fixed order.
    pub const ALL: [Withheld; 4] = [
        Withheld::Metrics,
        Withheld::Traces,
        Withheld::Logs,
        Withheld::LogSpanJoin,
    ];
}

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Withheld::Metrics => "metrics",
            Withheld::Traces => "traces",
            Withheld::Logs => "logs",
            Withheld::LogSpanJoin => "log-span join",
        })
    }
}

/// The case's telemetry as the sources of an incident, without what `withheld` names.
pub fn case_telemetry(data: &CaseData, withheld: Option<Withheld>) -> IncidentTelemetry {
    let cutoff = Some(data.detected_at);
    let logs = match withheld {
        Some(Withheld::Logs) => Vec::new(),
        Some(Withheld::LogSpanJoin) => data
            .logs
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.attributes.remove(TRACE_ID);
                r.attributes.remove(SPAN_ID);
                r
            })
            .collect(),
        _ => data.logs.clone(),
    };
    let metrics = if withheld == Some(Withheld::Metrics) {
        Vec::new()
    } else {
        data.metrics.clone()
    };
    let spans = if withheld == Some(Withheld::Traces) {
        Vec::new()
    } else {
        data.spans.clone()
    };
    IncidentTelemetry {
        logs: Arc::new(FileLogSource::from_records(logs, cutoff)),
        metrics: Arc::new(FileMetricSource::from_samples(metrics, cutoff)),
        traces: Arc::new(FileTraceSource::from_spans(spans, cutoff)),
        baseline: None,
    }
}

/// Runs the diagnosis pipeline over a case with `config` (deterministic roles), without the
/// telemetry `withheld` names. Reads only telemetry, never the ground truth.
pub async fn diagnose_case(
    data: &CaseData,
    config: &PipelineConfig,
    withheld: Option<Withheld>,
) -> Result<CaseDiagnosis, NezhaError> {
    diagnose_case_with_memory(data, config, withheld, None).await
}

/// As [`diagnose_case`], reading and writing long-term `memory` when given (the case is
/// remembered for the cases after it).
pub async fn diagnose_case_with_memory(
    data: &CaseData,
    config: &PipelineConfig,
    withheld: Option<Withheld>,
    memory: Option<&mut DiagnosisMemory>,
) -> Result<CaseDiagnosis, NezhaError> {
    let mut pipeline = DiagnosisPipeline::over(
        case_telemetry(data, withheld),
        &data.incident,
        RoleModels::default(),
        config.clone(),
    )
    .map_err(|e| NezhaError::Diagnosis(e.to_string()))?;
    if let Some(memory) = memory {
        pipeline = pipeline
            .with_memory(memory)
            .map_err(|e| NezhaError::Diagnosis(e.to_string()))?;
    }
    let record = pipeline
        .run(&data.incident)
        .await
        .map_err(|e| NezhaError::Diagnosis(e.to_string()))?;
    Ok(CaseDiagnosis {
        ranked: record
            .report
            .candidates
            .iter()
            .map(|c| c.component.clone())
            .collect(),
        fault_type: record
            .report
            .candidates
            .first()
            .and_then(|c| c.fault_type.clone())
            .unwrap_or_else(|| "unknown".into()),
        onset: record.onset.map(|o| o.at()),
        onset_estimated: matches!(record.onset, Some(Onset::Estimated(_))),
        explorations: record
            .events
            .iter()
            .filter(|e| matches!(e, RunEvent::Explored { .. }))
            .count(),
        planned_from_memory: record.events.iter().any(|e| {
            matches!(e, RunEvent::Planned { plan, .. }
                if plan.revision == 0 && plan.rationale.starts_with("long-term memory"))
        }),
        record,
    })
}
