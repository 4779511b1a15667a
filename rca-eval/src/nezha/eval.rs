//! Scoring the diagnosis pipeline over every case: service-level AS@k, fault-type accuracy,
//! onset error, time; and the same under cross-validation, where the ranker's and the onset
//! detector's constants are chosen on the other folds of cases.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use rca_agents::orchestra::{DiagnosisMemory, PipelineConfig};

use super::NezhaError;
use super::diagnose::{Withheld, diagnose_case, diagnose_case_with_memory};
use super::loader::{CaseOptions, DayMetrics, NezhaCase, NezhaDay, discover, load_case};

/// The service of a pod: its name without the two trailing dash-separated parts (the
/// replica-set hash and the pod suffix). Names with fewer parts are their own service.
pub fn service_of(pod: &str) -> &str {
    let mut cut = pod.len();
    for _ in 0..2 {
        match pod[..cut].rfind('-') {
            Some(i) if i > 0 => cut = i,
            _ => return pod,
        }
    }
    &pod[..cut]
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// How each case becomes an incident (the protocol among it).
    pub case: CaseOptions,
    /// Only these day folders (all when empty).
    pub days: Vec<String>,
    /// The diagnosis pipeline's settings (`rca diagnose`'s defaults by default).
    pub pipeline: PipelineConfig,
    /// Telemetry withheld from every case (none by default).
    pub withheld: Option<Withheld>,
}

impl EvalOptions {
    /// The defaults: the alert protocol, every day, `rca diagnose`'s pipeline settings with
    /// the benchmark's fault-type vocabulary ([`super::taxonomy`]).
    pub fn new() -> Result<Self, NezhaError> {
        Ok(EvalOptions {
            case: CaseOptions::default(),
            days: Vec::new(),
            pipeline: PipelineConfig {
                taxonomy: super::taxonomy()?,
                ..PipelineConfig::default()
            },
            withheld: None,
        })
    }
}

/// One case's outcome. Serialises to `{"id", "truth_pod", "ranked_pods", "fault_type",
/// "seconds"}`.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// The true root-cause pod.
    pub truth_pod: String,
    /// Pods, most likely first.
    pub ranked_pods: Vec<String>,
    /// The predicted fault type.
    pub fault_type: String,
    /// Wall time to read and analyse the case.
    pub seconds: f64,
    /// The onset the pipeline used, minus the true fault time, in seconds (`None`: none).
    pub onset_error_secs: Option<f64>,
    /// The true fault type.
    #[serde(skip)]
    pub truth_type: String,
    /// How many explorations the run made.
    #[serde(skip)]
    pub explorations: usize,
    /// Whether long-term memory chose the plan's first modality.
    #[serde(skip)]
    pub planned_from_memory: bool,
    /// 1-based rank of the true service among distinct ranked services (`None`: absent).
    #[serde(skip)]
    pub service_rank: Option<usize>,
    /// Under the alert protocol, the same case diagnosed with the trivial onset rule (the
    /// first retained log line or span plus 60 s, stated as the onset): the baseline the
    /// estimator must beat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial: Option<TrivialOutcome>,
    /// 1-based rank of the true service in the trivial ranking of the same case
    /// ([`loudest_pods`]): the baseline the pipeline's ranking must beat.
    #[serde(skip)]
    pub loudest_rank: Option<usize>,
}

/// The trivial ranking: pods by their warning and error log lines in the case's window, then
/// by all their log lines and spans, then by name. It compares nothing with a baseline
/// period: the pipeline's ranking must beat the pod that is simply loudest.
pub fn loudest_pods(data: &super::loader::CaseData) -> Vec<String> {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in &data.logs {
        let c = counts.entry(r.component.as_str()).or_default();
        c.1 += 1;
        if r.level
            .is_some_and(|l| l >= rca_core::source::Level::Warning)
        {
            c.0 += 1;
        }
    }
    for s in &data.spans {
        counts.entry(s.component.as_str()).or_default().1 += 1;
    }
    let mut pods: Vec<(&str, (usize, usize))> = counts.into_iter().collect();
    pods.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    pods.into_iter().map(|(p, _)| p.to_string()).collect()
}

/// A case diagnosed with the trivial onset rule ([`trivial_onset`]).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TrivialOutcome {
    /// The rule's onset minus the fault time, in seconds.
    pub onset_error_secs: f64,
    /// 1-based rank of the true service (`None`: absent).
    pub service_rank: Option<usize>,
}

/// The trivial onset rule: the first log line or span of the case's last unbroken stretch of
/// them (no gap over a minute), plus 60 s. It knows nothing of the telemetry's content; it
/// wins only where the data's extent gives the fault away (the Nezha data keep a few minutes
/// around each fault; splicing normal minutes before them takes that away).
pub fn trivial_onset(data: &super::loader::CaseData) -> Option<rca_core::Timestamp> {
    let mut times: Vec<i64> = data
        .logs
        .iter()
        .map(|r| r.timestamp.millis())
        .chain(data.spans.iter().map(|s| s.start.millis()))
        .collect();
    times.sort_unstable();
    let first = times
        .windows(2)
        .rev()
        .find(|w| w[1] - w[0] > 60_000)
        .map_or(*times.first()?, |w| w[1]);
    Some(
        rca_core::Timestamp(first)
            .offset_millis(60_000)
            .min(data.detected_at),
    )
}

/// The summary line of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Cases evaluated.
    pub cases: usize,
    /// Share of cases whose true service ranks first.
    pub as1: f64,
    /// ... among the first three distinct services.
    pub as3: f64,
    /// ... among the first five.
    pub as5: f64,
    /// Share of cases whose fault type was named right.
    pub fault_type_accuracy: f64,
    /// Median wall time per case.
    pub median_seconds: f64,
    /// Median absolute onset error in seconds, over the cases with an onset.
    pub median_onset_error_secs: Option<f64>,
}

/// A whole run: `{"summary": {...}, "cases": [...]}`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NezhaReport {
    /// The scores.
    pub summary: Summary,
    /// The trivial onset rule's scores (alert protocol): AS@k and median onset error, the
    /// other fields as in `summary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial: Option<Summary>,
    /// The trivial ranking's scores ([`loudest_pods`]; AS@k only, the other fields zero),
    /// when every case has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loudest: Option<Summary>,
    /// Every case.
    pub cases: Vec<CaseResult>,
}

impl NezhaReport {
    /// Builds the summary from the cases.
    pub fn from_cases(cases: Vec<CaseResult>) -> Self {
        let n = cases.len();
        let right = cases
            .iter()
            .filter(|c| c.fault_type == c.truth_type)
            .count();
        let secs: Vec<f64> = cases.iter().map(|c| c.seconds).collect();
        let onset_errors: Vec<f64> = cases
            .iter()
            .filter_map(|c| c.onset_error_secs.map(f64::abs))
            .collect();
        let trivial: Vec<TrivialOutcome> = cases.iter().filter_map(|c| c.trivial).collect();
        let trivial = (!trivial.is_empty() && trivial.len() == n).then(|| {
            let ranks: Vec<Option<usize>> = trivial.iter().map(|t| t.service_rank).collect();
            let errors: Vec<f64> = trivial.iter().map(|t| t.onset_error_secs.abs()).collect();
            Summary {
                median_onset_error_secs: Some(rca_tools::analyze::stats::median(&errors)),
                ..summary_of_ranks(&ranks)
            }
        });
        let loudest = (n > 0 && cases.iter().all(|c| c.loudest_rank.is_some()))
            .then(|| summary_of_ranks(&cases.iter().map(|c| c.loudest_rank).collect::<Vec<_>>()));
        let ranks: Vec<Option<usize>> = cases.iter().map(|c| c.service_rank).collect();
        NezhaReport {
            trivial,
            loudest,
            summary: Summary {
                fault_type_accuracy: if n == 0 { 0.0 } else { right as f64 / n as f64 },
                median_seconds: rca_tools::analyze::stats::median(&secs),
                median_onset_error_secs: (!onset_errors.is_empty())
                    .then(|| rca_tools::analyze::stats::median(&onset_errors)),
                ..summary_of_ranks(&ranks)
            },
            cases,
        }
    }
}

/// AS@1, AS@3 and AS@5 of 1-based ranks (`None`: absent) over their cases; the other fields
/// zero.
fn summary_of_ranks(ranks: &[Option<usize>]) -> Summary {
    let n = ranks.len();
    let share = |k: usize| {
        if n == 0 {
            0.0
        } else {
            ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count() as f64 / n as f64
        }
    };
    Summary {
        cases: n,
        as1: share(1),
        as3: share(3),
        as5: share(5),
        ..Summary::default()
    }
}

/// 1-based rank of `truth`'s service among the distinct services of `ranked`.
pub(crate) fn service_rank(ranked: &[String], truth: &str) -> Option<usize> {
    let want = service_of(truth);
    let mut seen: Vec<&str> = Vec::new();
    for p in ranked {
        let s = service_of(p);
        if !seen.contains(&s) {
            seen.push(s);
            if s == want {
                return Some(seen.len());
            }
        }
    }
    None
}

/// The cases of the selected days, with their day.
pub(crate) fn selected(root: &Path, days: &[String]) -> Result<Vec<NezhaDay>, NezhaError> {
    Ok(discover(root)?
        .into_iter()
        .filter(|d| days.is_empty() || days.contains(&d.name))
        .collect())
}

/// A runtime for the pipeline's async run (one thread: cases run one after another).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, NezhaError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| NezhaError::Diagnosis(format!("cannot start a runtime: {e}")))
}

/// Runs every configuration of `configs` over every case of `days`, loading each case once.
/// `progress(done, total, case_id)` is called after each case.
fn run_cases(
    days: &[NezhaDay],
    case_options: &CaseOptions,
    variants: &[(Option<Withheld>, PipelineConfig)],
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Vec<CaseResult>>, NezhaError> {
    let mut memories: Vec<Option<DiagnosisMemory>> = vec![None; variants.len()];
    run_cases_remembering(days, case_options, variants, &mut memories, progress)
}

/// As [`run_cases`], variant `i` reading and writing `memories[i]` when it is set (shared
/// across the cases, in case order).
pub(crate) fn run_cases_remembering(
    days: &[NezhaDay],
    case_options: &CaseOptions,
    variants: &[(Option<Withheld>, PipelineConfig)],
    memories: &mut [Option<DiagnosisMemory>],
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Vec<CaseResult>>, NezhaError> {
    let runtime = runtime()?;
    let total: usize = days.iter().map(|d| d.cases.len()).sum();
    let mut results: Vec<Vec<CaseResult>> = vec![Vec::with_capacity(total); variants.len()];
    // One plain run under the alert protocol is also scored with the trivial onset rule.
    let trivial_too = variants.len() == 1
        && memories.iter().all(Option::is_none)
        && case_options.protocol == super::loader::Protocol::Alert;
    let mut done = 0;
    for day in days {
        let metrics = DayMetrics::load(day)?;
        for case in &day.cases {
            let started = Instant::now();
            let data = load_case(day, &metrics, case, case_options)?;
            let load_secs = started.elapsed().as_secs_f64();
            for (((withheld, config), out), memory) in variants
                .iter()
                .zip(results.iter_mut())
                .zip(memories.iter_mut())
            {
                let started = Instant::now();
                let diagnosis = runtime.block_on(diagnose_case_with_memory(
                    &data,
                    config,
                    *withheld,
                    memory.as_mut(),
                ))?;
                let seconds = load_secs + started.elapsed().as_secs_f64();
                let mut result = case_result(case, diagnosis, seconds);
                result.loudest_rank =
                    Some(service_rank(&loudest_pods(&data), &case.truth_pod).unwrap_or(usize::MAX));
                if trivial_too && let Some(onset) = trivial_onset(&data) {
                    let mut stated = data.clone();
                    stated.incident.onset = Some(onset);
                    let d = runtime.block_on(diagnose_case(&stated, config, *withheld))?;
                    result.trivial = Some(TrivialOutcome {
                        onset_error_secs: (onset.millis() - case.inject_time.millis()) as f64
                            / 1000.0,
                        service_rank: service_rank(&d.ranked, &case.truth_pod),
                    });
                }
                out.push(result);
            }
            done += 1;
            progress(done, total, &case.id);
        }
    }
    Ok(results)
}

fn case_result(case: &NezhaCase, diagnosis: super::CaseDiagnosis, seconds: f64) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        truth_pod: case.truth_pod.clone(),
        service_rank: service_rank(&diagnosis.ranked, &case.truth_pod),
        ranked_pods: diagnosis.ranked,
        fault_type: diagnosis.fault_type,
        seconds,
        onset_error_secs: diagnosis
            .onset
            .map(|t| (t.millis() - case.inject_time.millis()) as f64 / 1000.0),
        truth_type: case.truth_type.clone(),
        explorations: diagnosis.explorations,
        planned_from_memory: diagnosis.planned_from_memory,
        trivial: None,
        loudest_rank: None,
    }
}

/// Runs every configuration over every case of the selected days (one result list per
/// configuration, in case order).
pub(crate) fn run_grid(
    root: &Path,
    options: &EvalOptions,
    configs: &[PipelineConfig],
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Vec<CaseResult>>, NezhaError> {
    let days = selected(root, &options.days)?;
    let variants: Vec<_> = configs
        .iter()
        .map(|c| (options.withheld, c.clone()))
        .collect();
    run_cases(&days, &options.case, &variants, progress)
}

/// One row of the long-term memory comparison.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    /// `cold` (no memory) or `warm` (one memory across the cases, in order, starting empty).
    pub run: String,
    /// The scores.
    pub summary: Summary,
    /// Mean explorations per case.
    pub explorations_per_case: f64,
    /// Cases whose plan's first modality long-term memory chose.
    pub planned_from_memory: usize,
    /// Cases whose top candidate differs from the cold run's.
    pub top_changed: usize,
    /// The trivial ranking's scores on the same cases ([`loudest_pods`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loudest: Option<Summary>,
}

/// Runs the cases in order without memory (cold) and with one long-term memory that starts
/// empty and remembers each case for the ones after it (warm), and compares them.
pub fn memory_effect(
    root: &Path,
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<MemoryRow>, NezhaError> {
    let days = selected(root, &options.days)?;
    let variants = vec![
        (options.withheld, options.pipeline.clone()),
        (options.withheld, options.pipeline.clone()),
    ];
    let mut memories = vec![None, Some(DiagnosisMemory::in_memory())];
    let runs = run_cases_remembering(&days, &options.case, &variants, &mut memories, progress)?;
    let cold_tops: Vec<Option<String>> = runs
        .first()
        .map(|cases| {
            cases
                .iter()
                .map(|c| c.ranked_pods.first().cloned())
                .collect()
        })
        .unwrap_or_default();
    Ok(["cold", "warm"]
        .into_iter()
        .zip(runs)
        .map(|(name, cases)| {
            let n = cases.len().max(1) as f64;
            let explorations = cases.iter().map(|c| c.explorations).sum::<usize>() as f64 / n;
            let planned = cases.iter().filter(|c| c.planned_from_memory).count();
            let changed = cases
                .iter()
                .zip(&cold_tops)
                .filter(|(c, top)| c.ranked_pods.first() != top.as_ref())
                .count();
            let report = NezhaReport::from_cases(cases);
            MemoryRow {
                run: name.to_string(),
                loudest: report.loudest,
                summary: report.summary,
                explorations_per_case: explorations,
                planned_from_memory: planned,
                top_changed: changed,
            }
        })
        .collect())
}

/// The memory comparison as a Markdown table.
pub fn memory_table(rows: &[MemoryRow]) -> String {
    let mut out = format!(
        "{MEASURES_IN_SAMPLE}\n\n\
         | run | AS@1 | AS@3 | fault-type accuracy | explorations per case | plans led by memory | top candidate changed |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.2} | {} of {} | {} |\n",
            r.run,
            r.summary.as1,
            r.summary.as3,
            r.summary.fault_type_accuracy,
            r.explorations_per_case,
            r.planned_from_memory,
            r.summary.cases,
            r.top_changed
        ));
    }
    if let Some(l) = rows.first().and_then(|r| r.loudest.as_ref()) {
        out.push_str(&format!(
            "| trivial: loudest pod | {:.3} | {:.3} | - | - | - | - |\n",
            l.as1, l.as3
        ));
    }
    out
}

/// Evaluates every case of every day under `root` (the folder holding `rca_data/`) with the
/// diagnosis pipeline. `progress(done, total, case_id)` is called after each case.
pub fn evaluate(
    root: &Path,
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<NezhaReport, NezhaError> {
    let days = selected(root, &options.days)?;
    let mut runs = run_cases(
        &days,
        &options.case,
        &[(options.withheld, options.pipeline.clone())],
        progress,
    )?;
    Ok(NezhaReport::from_cases(runs.pop().unwrap_or_default()))
}

/// Evaluates every case with all telemetry and with each kind of [`Withheld`] telemetry in
/// turn (each case is loaded once): the rows of the modality-drop table.
pub fn modality_drop(
    root: &Path,
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<DropRows, NezhaError> {
    let days = selected(root, &options.days)?;
    let kinds: Vec<Option<Withheld>> = std::iter::once(None)
        .chain(Withheld::ALL.into_iter().map(Some))
        .collect();
    let variants: Vec<_> = kinds
        .iter()
        .map(|w| (*w, options.pipeline.clone()))
        .collect();
    let runs = run_cases(&days, &options.case, &variants, progress)?;
    let mut loudest = None;
    let rows = kinds
        .into_iter()
        .zip(runs)
        .map(|(w, cases)| {
            let report = NezhaReport::from_cases(cases);
            loudest = loudest.take().or(report.loudest);
            (w, report.summary)
        })
        .collect();
    Ok(DropRows { rows, loudest })
}

/// The modality-drop rows: one per kind of telemetry withheld (the first withholds nothing),
/// and the trivial ranking on the same cases.
#[derive(Debug, Clone, Serialize)]
pub struct DropRows {
    /// What was withheld, and the scores without it.
    pub rows: Vec<(Option<Withheld>, Summary)>,
    /// The trivial ranking's scores ([`loudest_pods`]), on all telemetry.
    pub loudest: Option<Summary>,
}

/// The sentence every Nezha development-day table opens with: what it measures and what
/// it is not.
pub const MEASURES_IN_SAMPLE: &str = "Measures the diagnosis on the 28 faults of the \
development day: a figure that can come out badly, but in-sample for the analyzers, their \
weights and the fault taxonomy, which were shaped on this day. The trivial ranking (pods by \
their warning and error log lines in the window, loudest first; no baseline period) is \
scored on the same cases as the baseline the ranking must beat.";

fn loudest_row(first_cell: &str, loudest: Option<&Summary>, trailing: &str) -> String {
    loudest.map_or(String::new(), |l| {
        format!(
            "| {first_cell} | {:.3} | {:.3} | {:.3} |{trailing}\n",
            l.as1, l.as3, l.as5
        )
    })
}

/// The modality-drop rows as a Markdown table.
pub fn drop_table(drop: &DropRows) -> String {
    let mut out = format!(
        "{MEASURES_IN_SAMPLE}\n\n\
         | withheld | AS@1 | AS@3 | AS@5 | fault-type accuracy | median onset error s |\n|---|---|---|---|---|---|\n",
    );
    for (w, s) in &drop.rows {
        out.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
            w.map_or("nothing".to_string(), |w| w.to_string()),
            s.as1,
            s.as3,
            s.as5,
            s.fault_type_accuracy,
            s.median_onset_error_secs
                .map_or("-".to_string(), |e| format!("{e:.0}"))
        ));
    }
    out.push_str(&loudest_row(
        "nothing; trivial ranking (loudest pod)",
        drop.loudest.as_ref(),
        " - | - |",
    ));
    out
}

/// The report as a Markdown table (overall and per true fault type).
pub fn markdown_table(report: &NezhaReport) -> String {
    let s = &report.summary;
    let mut out = format!(
        "{MEASURES_IN_SAMPLE}\n\n\
         | cases | AS@1 | AS@3 | AS@5 | fault-type accuracy | median onset error s | median s/case |\n|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&format!(
        "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.3} |\n",
        s.cases,
        s.as1,
        s.as3,
        s.as5,
        s.fault_type_accuracy,
        s.median_onset_error_secs
            .map_or("-".to_string(), |e| format!("{e:.0}")),
        s.median_seconds
    ));
    if let Some(l) = &report.loudest {
        out.push_str(&format!(
            "\n| ranking | AS@1 | AS@3 | AS@5 |\n|---|---|---|---|\n\
             | the pipeline | {:.3} | {:.3} | {:.3} |\n",
            s.as1, s.as3, s.as5
        ));
        out.push_str(&loudest_row("trivial: loudest pod", Some(l), ""));
    }
    if let Some(t) = &report.trivial {
        out.push_str(&format!(
            "\nTrivial baseline in the same run: the onset stated as the first log line or span of \
             the last unbroken stretch of them, plus 60 s (it knows nothing of the telemetry's \
             content).\n\n\
             | onset | AS@1 | AS@3 | median onset error s |\n|---|---|---|---|\n\
             | estimated by the pipeline | {:.3} | {:.3} | {} |\n\
             | trivial rule | {:.3} | {:.3} | {} |\n",
            s.as1,
            s.as3,
            s.median_onset_error_secs
                .map_or("-".to_string(), |e| format!("{e:.0}")),
            t.as1,
            t.as3,
            t.median_onset_error_secs
                .map_or("-".to_string(), |e| format!("{e:.0}")),
        ));
    }
    let mut by_type: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
    for c in &report.cases {
        by_type.entry(c.truth_type.as_str()).or_default().push(c);
    }
    out.push_str(
        "\n| true fault type | cases | AS@1 | AS@3 | type named right |\n|---|---|---|---|---|\n",
    );
    for (t, cs) in by_type {
        let n = cs.len();
        let at = |k: usize| {
            cs.iter()
                .filter(|c| c.service_rank.is_some_and(|r| r <= k))
                .count()
        };
        let right = cs.iter().filter(|c| c.fault_type == c.truth_type).count();
        out.push_str(&format!(
            "| {t} | {n} | {}/{n} | {}/{n} | {right}/{n} |\n",
            at(1),
            at(3)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_and_ranks() {
        assert_eq!(service_of("shop-cart-5dc8d4f9fd-46997"), "shop-cart");
        assert_eq!(service_of("frontend"), "frontend");
        assert_eq!(service_of("a-b"), "a-b");
        let ranked: Vec<String> = ["x-1-a", "x-1-b", "y-2-c", "z-3-d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(service_rank(&ranked, "y-9-z"), Some(2));
        assert_eq!(service_rank(&ranked, "q-1-1"), None);
    }

    #[test]
    fn summary_shape() {
        let case = |rank: Option<usize>, ft: &str| CaseResult {
            id: "d/00".into(),
            truth_pod: "p".into(),
            ranked_pods: vec![],
            fault_type: ft.into(),
            seconds: 1.0,
            onset_error_secs: Some(-30.0),
            truth_type: "return".into(),
            service_rank: rank,
            explorations: 0,
            planned_from_memory: false,
            trivial: None,
            loudest_rank: rank.map(|r| r + 1),
        };
        let r = NezhaReport::from_cases(vec![case(Some(1), "return"), case(Some(3), "exception")]);
        assert_eq!(r.summary.as1, 0.5);
        assert_eq!(r.summary.as3, 1.0);
        assert_eq!(r.summary.fault_type_accuracy, 0.5);
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<_> = v["summary"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys.len(), 7);
        assert_eq!(r.summary.median_onset_error_secs, Some(30.0));
        let case_keys: Vec<_> = v["cases"][0].as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            case_keys,
            [
                "fault_type",
                "id",
                "onset_error_secs",
                "ranked_pods",
                "seconds",
                "truth_pod"
            ]
        );
        let table = markdown_table(&r);
        assert!(table.contains("| 2 | 0.500 | 1.000 | 1.000 | 0.500 | 30 |"));
        // The trivial ranking ranked each truth one place lower: 0 at 1, 0.5 at 3, 1 at 5.
        assert!(
            table.contains("| trivial: loudest pod | 0.000 | 0.500 | 1.000 |"),
            "{table}"
        );
        assert!(table.starts_with(MEASURES_IN_SAMPLE));
    }
}
