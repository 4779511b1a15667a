//! Ranking root-cause pods for one case from the analyzers' evidence, and naming the fault
//! type from the kind of evidence that convicts the top pod. The ranker and the fault-type
//! classifier are those of `rca diagnose` (`Ranker::multimodal`, `classify::fault_type`).

use rca_core::Evidence;
use rca_tools::analyze::Finding;
use rca_tools::analyze::classify;
use rca_tools::analyze::events::EventAnalyzer;
use rca_tools::analyze::logs::{LogAnalyzer, simple_template};
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::rank::{RankedComponent, Ranker};
use rca_tools::analyze::traces::TraceAnalyzer;
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

/// The ranker used for Nezha cases: the shared [`Ranker::multimodal`].
pub fn ranker() -> Ranker {
    Ranker::multimodal()
}

/// Runs the metric, trace, span-event and log analyzers over a case and ranks its
/// components, with the simple built-in log templater. Reads only telemetry, never the
/// ground truth.
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
        findings.extend(EventAnalyzer::default().analyze(
            &data.logs,
            &data.spans,
            w,
            &simple_template,
        ));
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

/// Names the fault type from the findings about the top candidate with the shared
/// classifier ([`classify::fault_type`], the one `rca diagnose` uses); `unknown` when nothing
/// fits.
pub fn fault_type_of(findings: &[Finding]) -> &'static str {
    let evidence: Vec<Evidence> = findings.iter().map(Finding::to_evidence).collect();
    let refs: Vec<&Evidence> = evidence.iter().collect();
    classify::fault_type(&refs).unwrap_or("unknown")
}
