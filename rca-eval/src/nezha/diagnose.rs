//! Ranking root-cause pods for one case from the analyzers' evidence, and naming the fault
//! type from the kind of evidence that convicts the top pod.

use rca_core::{Evidence, Modality};
use rca_tools::analyze::logs::LogAnalyzer;
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::rank::{RankedComponent, Ranker};
use rca_tools::analyze::traces::TraceAnalyzer;
use rca_tools::analyze::{Finding, Signal};
use serde::Serialize;

use super::loader::CaseData;

/// What the analyzers concluded about one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseDiagnosis {
    /// Pods (components) from most to least likely root cause.
    pub ranked: Vec<RankedComponent>,
    /// The predicted fault type (one of the benchmark's labels).
    pub fault_type: String,
    /// The evidence chain for the top candidate.
    pub evidence: Vec<Evidence>,
}

/// The ranker used for Nezha cases. Modalities are weighted by how specific their anomalies
/// are to the faulty component rather than to its symptoms: latency (traces) propagates to
/// every caller on the path, and resource and request KPIs (metrics) move with load and with
/// the callers' retries, while a component's own log behaviour (templates vanishing or
/// appearing, error share) changes mostly where the fault is. Logs 1, metrics 1/2, traces
/// 1/4; chosen on the development day (see `docs/arch/nezha.md`).
pub fn ranker() -> Ranker {
    let mut r = Ranker::default();
    r.weights.insert(Modality::Logs, 1.0);
    r.weights.insert(Modality::Metrics, 0.5);
    r.weights.insert(Modality::Traces, 0.25);
    r
}

/// Runs the metric, trace and log analyzers over a case and ranks its components, with the
/// simple built-in log templater. Reads only telemetry, never the ground truth.
pub fn diagnose_case(data: &CaseData) -> CaseDiagnosis {
    diagnose_case_with(data, false)
}

/// As [`diagnose_case`]; with `use_miner` the log templates come from the online template
/// miner of `rca_tools::logs` instead of the simple templater.
pub fn diagnose_case_with(data: &CaseData, use_miner: bool) -> CaseDiagnosis {
    let mut findings: Vec<Finding> = Vec::new();
    if let Some(w) = &data.metric_window {
        findings.extend(MetricAnalyzer::default().analyze(&data.metrics, w));
    }
    if let Some(w) = &data.event_window {
        findings.extend(TraceAnalyzer::default().analyze(&data.spans, w));
        if use_miner {
            let mut miner = rca_tools::logs::OnlineMiner::default();
            findings.extend(LogAnalyzer::default().analyze_with_miner(&data.logs, w, &mut miner));
        } else {
            findings.extend(LogAnalyzer::default().analyze(&data.logs, w));
        }
    }
    let ranked = ranker().rank(&findings);
    let fault_type = ranked
        .first()
        .map(|r| fault_type_of(&r.findings))
        .unwrap_or("unknown")
        .to_string();
    let evidence = ranked
        .first()
        .map(|r| {
            r.findings
                .iter()
                .take(8)
                .map(Finding::to_evidence)
                .collect()
        })
        .unwrap_or_default();
    CaseDiagnosis {
        ranked,
        fault_type,
        evidence,
    }
}

/// Names the fault type from the findings about the top candidate:
/// a CPU KPI that moved most -> `cpu_contention`; new or growing error-level log lines ->
/// `return` (the code noticed a wrong value and said so); normal log lines or call paths
/// that vanished without errors -> `exception` (execution was cut short); slower spans or
/// call gaps with nothing else -> `network_delay`.
pub fn fault_type_of(findings: &[Finding]) -> &'static str {
    let best = |pred: &dyn Fn(&Finding) -> bool| {
        findings
            .iter()
            .filter(|f| pred(f))
            .map(|f| f.score)
            .fold(0.0_f64, f64::max)
    };
    let cpu = best(
        &|f| matches!(&f.signal, Signal::MetricShift { kpi, delta } if *delta > 0.0 && kpi.to_ascii_lowercase().contains("cpu")),
    );
    let metrics = best(&|f| f.modality == Modality::Metrics);
    let error_logs = best(&|f| {
        matches!(
            f.signal,
            Signal::ErrorBurst
                | Signal::NewTemplate { error: true, .. }
                | Signal::TemplateShift { error: true, .. }
        )
    });
    let vanished = best(&|f| {
        matches!(
            f.signal,
            Signal::PathDropped { .. } | Signal::TemplateShift { error: false, .. }
        )
    });
    let slower = best(&|f| {
        matches!(
            f.signal,
            Signal::Latency { .. } | Signal::CallGap { .. } | Signal::Blame
        )
    });
    if cpu > 0.0 && cpu >= metrics && cpu >= 10.0 {
        "cpu_contention"
    } else if error_logs > 0.0 {
        "return"
    } else if vanished > 0.0 {
        "exception"
    } else if slower > 0.0 {
        "network_delay"
    } else {
        "unknown"
    }
}
