//! Why a case was missed: for each case whose true service is not ranked first, the true
//! service's rank in each modality, the finding that outranked it, and a cause class, decided
//! by re-running the pipeline where a cause can be tested (the true onset stated; a window
//! that ends at the labelled fault time) and by reading the run's evidence otherwise.
//!
//! The classes are checked in this order, the first that holds names the miss:
//! 1. [`MissCause::WrongOnset`] (alert protocol): stated the true onset, with everything else
//!    unchanged, the pipeline ranks the true service first.
//! 2. [`MissCause::SignalBeforeLabel`]: a window that ends at the labelled fault time (its last
//!    two minutes against what came before) already ranks the true service first, so the
//!    fault's footprint precedes its label and the current window sees its tail.
//! 3. [`MissCause::NoSignal`]: no evidence about the true service in any modality.
//! 4. [`MissCause::OutrankedByCaller`]: the top candidate calls the true service, directly or
//!    through others (an error or slowdown surfaced where it is relayed).
//! 5. [`MissCause::OutrankedByMetric`]: the top candidate's strongest evidence is a metric
//!    shift (a resource or load KPI of another component moved more).
//! 6. [`MissCause::OutrankedOther`]: none of the above.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rca_core::{Evidence, Modality, TimeRange, Timestamp};
use rca_tools::analyze::traces::ServiceGraph;
use serde::Serialize;

use super::NezhaError;
use super::diagnose::diagnose_case;
use super::eval::{EvalOptions, runtime, selected, service_of, service_rank};
use super::loader::{CaseData, DayMetrics, Protocol, load_case};

/// Why a miss happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissCause {
    /// Stated the true onset, the pipeline ranks the true service first.
    WrongOnset,
    /// The true service ranks first in a window ending at the labelled fault time.
    SignalBeforeLabel,
    /// No evidence about the true service in any modality.
    NoSignal,
    /// Outranked by a component that calls it (directly or through others).
    OutrankedByCaller,
    /// Outranked by a component whose strongest evidence is a metric shift.
    OutrankedByMetric,
    /// Outranked for another reason.
    OutrankedOther,
}

impl MissCause {
    /// Every class, in the order they are checked.
    pub const ALL: [MissCause; 6] = [
        MissCause::WrongOnset,
        MissCause::SignalBeforeLabel,
        MissCause::NoSignal,
        MissCause::OutrankedByCaller,
        MissCause::OutrankedByMetric,
        MissCause::OutrankedOther,
    ];
}

impl std::fmt::Display for MissCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MissCause::WrongOnset => "wrong onset",
            MissCause::SignalBeforeLabel => "signal before the labelled time",
            MissCause::NoSignal => "no signal in any modality",
            MissCause::OutrankedByCaller => "outranked by a caller",
            MissCause::OutrankedByMetric => "outranked by a metric shift",
            MissCause::OutrankedOther => "outranked otherwise",
        })
    }
}

/// One missed case, explained.
#[derive(Debug, Clone, Serialize)]
pub struct MissExplanation {
    /// The case id.
    pub id: String,
    /// The true service.
    pub truth: String,
    /// The true fault type.
    pub truth_type: String,
    /// The true service's rank overall (`None`: not ranked).
    pub rank: Option<usize>,
    /// The true service's rank among the services each modality has evidence about.
    pub rank_by_modality: BTreeMap<String, Option<usize>>,
    /// The top candidate's service.
    pub top: String,
    /// The top candidate's strongest evidence: its modality, kind and sentence.
    pub outranked_by: String,
    /// The true service's strongest evidence, when it has any.
    pub truth_strongest: Option<String>,
    /// The onset the run used minus the fault time, in seconds.
    pub onset_error_secs: Option<f64>,
    /// The cause class.
    pub cause: MissCause,
}

/// The explained misses of a run, and how many cases it scored.
#[derive(Debug, Clone, Serialize)]
pub struct MissReport {
    /// Cases scored.
    pub cases: usize,
    /// The misses (true service not first), in case order.
    pub misses: Vec<MissExplanation>,
}

/// The services ranked by their strongest evidence within each modality.
fn ranks_by_modality(evidence: &[Evidence]) -> BTreeMap<Modality, Vec<String>> {
    let mut best: BTreeMap<Modality, BTreeMap<&str, f64>> = BTreeMap::new();
    for e in evidence {
        let s = best
            .entry(e.modality.clone())
            .or_default()
            .entry(service_of(&e.component))
            .or_insert(f64::NEG_INFINITY);
        *s = s.max(e.score);
    }
    best.into_iter()
        .map(|(m, scores)| {
            let mut v: Vec<(&str, f64)> = scores.into_iter().collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            (m, v.into_iter().map(|(s, _)| s.to_string()).collect())
        })
        .collect()
}

fn describe(e: &Evidence) -> String {
    format!(
        "{} {}: {}",
        e.modality,
        e.kind.as_deref().unwrap_or("-"),
        e.finding
    )
}

fn strongest<'a>(evidence: &'a [Evidence], service: &str) -> Option<&'a Evidence> {
    evidence
        .iter()
        .filter(|e| service_of(&e.component) == service)
        .max_by(|a, b| a.score.total_cmp(&b.score))
}

/// Whether `caller` reaches `callee` along the call graph (services).
fn calls(graph: &ServiceGraph, caller: &str, callee: &str) -> bool {
    let services: BTreeSet<&str> = graph.components().iter().map(|c| c.as_str()).collect();
    let of_service = |s: &str| -> Vec<&str> {
        services
            .iter()
            .copied()
            .filter(|c| service_of(c) == s)
            .collect()
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<String> = of_service(caller).into_iter().map(String::from).collect();
    while let Some(c) = stack.pop() {
        for d in graph.callees(&c) {
            if service_of(&d) == callee {
                return true;
            }
            if seen.insert(d.clone()) {
                stack.push(d);
            }
        }
    }
    false
}

/// The case's telemetry cut to end at `end` (nothing at or after it), as an incident whose
/// stated onset is `onset`.
fn cut(data: &CaseData, end: Timestamp, onset: Timestamp) -> CaseData {
    let mut d = data.clone();
    let keep = |t: Timestamp| t < end;
    d.logs.retain(|r| keep(r.timestamp));
    d.spans.retain(|s| keep(s.start));
    d.metrics.retain(|s| keep(s.timestamp));
    d.detected_at = end;
    d.incident.detected_at = end;
    d.incident.window = TimeRange::new(d.incident.window.start, end);
    d.incident.onset = Some(onset);
    d
}

/// Explains every miss of the selected days under `options` (the pipeline's settings and
/// protocol). `progress(done, total, case_id)` is called after each case.
pub fn explain_misses(
    root: &Path,
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<MissReport, NezhaError> {
    let days = selected(root, &options.days)?;
    let runtime = runtime()?;
    let total: usize = days.iter().map(|d| d.cases.len()).sum();
    let mut misses = Vec::new();
    let mut done = 0;
    for day in &days {
        let metrics = DayMetrics::load(day)?;
        for case in &day.cases {
            let data = load_case(day, &metrics, case, &options.case)?;
            let run =
                runtime.block_on(diagnose_case(&data, &options.pipeline, options.withheld))?;
            let rank = service_rank(&run.ranked, &case.truth_pod);
            done += 1;
            progress(done, total, &case.id);
            if rank == Some(1) {
                continue;
            }
            let truth = service_of(&case.truth_pod).to_string();
            let evidence = &run.record.evidence;
            let by_modality = ranks_by_modality(evidence);
            let rank_by_modality = by_modality
                .iter()
                .map(|(m, v)| {
                    (
                        m.to_string(),
                        v.iter().position(|s| *s == truth).map(|i| i + 1),
                    )
                })
                .collect();
            let top = run
                .ranked
                .first()
                .map(|p| service_of(p).to_string())
                .unwrap_or_default();
            let onset_error_secs = run
                .onset
                .map(|t| (t.millis() - case.inject_time.millis()) as f64 / 1000.0);
            let first_is_truth = |data: &CaseData| -> Result<bool, NezhaError> {
                let r =
                    runtime.block_on(diagnose_case(data, &options.pipeline, options.withheld))?;
                Ok(service_rank(&r.ranked, &case.truth_pod) == Some(1))
            };
            let cause = if options.case.protocol == Protocol::Alert
                && first_is_truth(&cut(&data, data.detected_at, case.inject_time))?
            {
                MissCause::WrongOnset
            } else if first_is_truth(&cut(
                &data,
                case.inject_time,
                case.inject_time.offset_millis(-120_000),
            ))? {
                MissCause::SignalBeforeLabel
            } else if strongest(evidence, &truth).is_none() {
                MissCause::NoSignal
            } else if calls(&ServiceGraph::from_spans(&data.spans), &top, &truth) {
                MissCause::OutrankedByCaller
            } else if strongest(evidence, &top).is_some_and(|e| e.modality == Modality::Metrics) {
                MissCause::OutrankedByMetric
            } else {
                MissCause::OutrankedOther
            };
            misses.push(MissExplanation {
                id: case.id.clone(),
                truth: truth.clone(),
                truth_type: case.truth_type.clone(),
                rank,
                rank_by_modality,
                outranked_by: strongest(evidence, &top).map(describe).unwrap_or_default(),
                truth_strongest: strongest(evidence, &truth).map(describe),
                top,
                onset_error_secs,
                cause,
            });
        }
    }
    Ok(MissReport {
        cases: total,
        misses,
    })
}

/// Cuts a sentence to `n` characters (with an ellipsis) for a table cell; `|` is escaped.
fn cell(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out.replace('|', "\\|").replace('\n', " ")
}

impl MissReport {
    /// The misses as Markdown: the count per cause class, then a row per miss.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "Measures why the same run missed: each miss's cause is classified by rule from \
             the run's own findings, not by hand (the run's figures, and the trivial baseline \
             it beats, are in its own section). \
             {} of {} cases missed (true service not ranked first).\n\n| cause | misses |\n|---|---|\n",
            self.misses.len(),
            self.cases
        );
        for cause in MissCause::ALL {
            let n = self.misses.iter().filter(|m| m.cause == cause).count();
            out.push_str(&format!("| {cause} | {n} |\n"));
        }
        out.push_str(
            "\n| case | truth (type) | rank | rank in metrics / traces / logs | outranked by | its strongest finding | truth's strongest finding | onset error s | cause |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        let r = |m: &MissExplanation, k: &str| {
            m.rank_by_modality
                .get(k)
                .copied()
                .flatten()
                .map_or("-".to_string(), |r| r.to_string())
        };
        for m in &self.misses {
            out.push_str(&format!(
                "| {} | {} ({}) | {} | {} / {} / {} | {} | {} | {} | {} | {} |\n",
                m.id,
                m.truth,
                m.truth_type,
                m.rank.map_or("-".to_string(), |r| r.to_string()),
                r(m, "metrics"),
                r(m, "traces"),
                r(m, "logs"),
                m.top,
                cell(&m.outranked_by, 140),
                m.truth_strongest
                    .as_deref()
                    .map_or("-".to_string(), |s| cell(s, 140)),
                m.onset_error_secs
                    .map_or("-".to_string(), |e| format!("{e:+.0}")),
                m.cause
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(m: Modality, c: &str, score: f64) -> Evidence {
        Evidence::new(m, Timestamp(0), c, format!("{c} moved")).with_score(score)
    }

    #[test]
    fn ranks_per_modality_go_by_service_and_strongest_score() {
        let evidence = vec![
            ev(Modality::Logs, "a-svc-1-x", 3.0),
            ev(Modality::Logs, "b-svc-2-y", 5.0),
            ev(Modality::Logs, "a-svc-1-z", 7.0),
            ev(Modality::Metrics, "b-svc-2-y", 1.0),
        ];
        let r = ranks_by_modality(&evidence);
        assert_eq!(r[&Modality::Logs], ["a-svc", "b-svc"]);
        assert_eq!(r[&Modality::Metrics], ["b-svc"]);
        assert_eq!(strongest(&evidence, "a-svc").map(|e| e.score), Some(7.0));
        assert!(strongest(&evidence, "c-svc").is_none());
    }

    #[test]
    fn a_caller_is_found_through_intermediate_services() {
        let g = ServiceGraph::from_edges([
            ("front-1-a", "mid-2-b"),
            ("mid-2-b", "db-3-c"),
            ("other-4-d", "mid-2-b"),
        ]);
        assert!(calls(&g, "front", "db"));
        assert!(calls(&g, "other", "db"));
        assert!(!calls(&g, "db", "front"));
        assert!(!calls(&g, "mid", "other"));
    }

    #[test]
    fn the_table_counts_every_class_and_escapes_cells() {
        let report = MissReport {
            cases: 3,
            misses: vec![MissExplanation {
                id: "d/01".into(),
                truth: "a".into(),
                truth_type: "exception".into(),
                rank: Some(2),
                rank_by_modality: BTreeMap::from([("logs".to_string(), Some(2))]),
                top: "b".into(),
                outranked_by: "logs x: a | b".into(),
                truth_strongest: None,
                onset_error_secs: Some(-12.0),
                cause: MissCause::OutrankedByCaller,
            }],
        };
        let md = report.to_markdown();
        assert!(md.starts_with("Measures why the same run missed"), "{md}");
        assert!(md.contains("1 of 3 cases missed (true service not ranked first)"));
        assert!(md.contains("| outranked by a caller | 1 |"));
        assert!(md.contains("| wrong onset | 0 |"));
        assert!(md.contains("a \\| b"));
        assert!(md.contains("| - / - / 2 |"));
        assert!(md.contains("| -12 |"));
    }
}
