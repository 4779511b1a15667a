//! How far the suite's guides carry to the other occurrences of their incident types: every
//! Nezha case whose fault type has a guide in the suite is exported (as
//! `rca eval nezha --export` does) and the deterministic policy runs it twice with the live
//! tools:
//! - pod and guide given: the alert names the injected pod and every guide of the suite runs
//!   on it (its type's guide decides whether it is solved);
//! - the full job: the alert names the entry point and the symptom there
//!   ([`entry_alert`]), the suite's triage guide finds the component, and the guide whose
//!   triggers match runs ([`rca_agents::flash::run_triaged`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rca_agents::flash::{
    FlashAgent, FlashConfig, FlashPolicy, GuideCatalog, HindsightBase, ModelPolicy, Reviewer,
    RulePolicy, run_triaged,
};
use rca_core::Timestamp;
use rca_core::llm::ChatModel;
use rca_core::source::Span;
use rca_eval::nezha;
use serde::Serialize;

pub use crate::entry_alert::{EntryAlert, entry_alert};
use crate::{Alert, Case, CaseFile, Expected, SuiteError, full_job_tools, live_tools};

/// One Nezha case under the suite's guides.
#[derive(Debug, Clone, Serialize)]
pub struct EvalCase {
    /// The Nezha case id (`2023-01-29/06`).
    pub id: String,
    /// The injected fault type.
    pub fault_type: String,
    /// The injected pod (the alert's component).
    pub pod: String,
    /// The answer of each guide (by suite case name).
    pub answers: BTreeMap<String, String>,
    /// The suite case whose guide covers its type.
    pub own_guide: String,
    /// Whether the guide of its type named its fault type and pod.
    pub own_guide_right: bool,
    /// Whether some guide named a fault type other than the truth.
    pub wrong_fault_named: bool,
    /// How many hindsight lessons the runs were offered (collected from the cases before).
    pub lessons_before: usize,
    /// The full job's alert (entry point and symptom).
    pub full_job_alert: Option<String>,
    /// The guide the full job picked by its triggers.
    pub full_job_guide: Option<String>,
    /// The component its triage found.
    pub full_job_component: Option<String>,
    /// Its answer.
    pub full_job_answer: Option<String>,
    /// Whether the answer names the fault type and the pod.
    pub full_job_right: bool,
    /// The full job's entry point (the component its alert names).
    pub full_job_entry_point: Option<String>,
}

/// The fault type most cases have, and how many have it (ties: the first in name order).
fn most_common_type(cases: &[EvalCase]) -> Option<(&str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for c in cases {
        *counts.entry(c.fault_type.as_str()).or_default() += 1;
    }
    counts.into_iter().fold(None, |best, (t, n)| match best {
        Some((_, m)) if m >= n => best,
        _ => Some((t, n)),
    })
}

/// The trivial answer's successes: the most common fault type named for the given pod, and
/// for the full job's entry point (right only where the entry point is the injected pod).
fn trivial_solved(cases: &[EvalCase]) -> Option<(&str, usize, usize)> {
    let (t, n) = most_common_type(cases)?;
    let at_entry = cases
        .iter()
        .filter(|c| c.fault_type == t && c.full_job_entry_point.as_deref() == Some(&c.pod))
        .count();
    Some((t, n, at_entry))
}

fn err(e: impl std::fmt::Display) -> SuiteError {
    SuiteError::Data(e.to_string())
}

/// The fault-type label an answer starts with (`cpu_contention: ...`), if any.
pub fn label_of<'a>(answer: &str, labels: &'a [String]) -> Option<&'a str> {
    labels
        .iter()
        .find(|l| answer.starts_with(&format!("{l}:")))
        .map(String::as_str)
}

/// Iterations of a model-driven run: a guide of two steps takes about eight when every
/// decision is right, so 20 leaves room for retries without letting a looping model spend
/// the default 40.
pub const MODEL_ITERATIONS: usize = 20;

/// How [`evaluate`] runs.
#[derive(Clone, Default)]
pub struct EvalOptions<'a> {
    /// The triage guide of the full job.
    pub triage: &'a str,
    /// Only these case ids (all when empty).
    pub only: &'a [String],
    /// Only the first this many cases (in time order).
    pub first: Option<usize>,
    /// With a reviewer, hindsight collects itself along the way: each run of a case whose
    /// answer the Nezha fault list (the host's verdict) rejects is reviewed, and the lesson
    /// joins the base every later case's runs are offered.
    pub reviewer: Option<&'a dyn Reviewer>,
    /// A model to drive the runs ([`ModelPolicy`]) instead of the deterministic policy. Each
    /// case then runs under its own type's guide only (the other guides cost model calls and
    /// decide nothing the tables count), and the full job is left out.
    pub model: Option<Arc<dyn ChatModel>>,
}

/// Runs every guide of `suite` on every case of the Nezha data at `data` whose fault type one
/// of the guides covers, in time order, and the full job on it. Incidents are exported under
/// `work`. `progress` is told each case id.
pub async fn evaluate(
    data: &Path,
    suite: &[Case],
    work: &Path,
    options: &EvalOptions<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<EvalCase>, SuiteError> {
    let EvalOptions {
        triage,
        only,
        first,
        reviewer,
        model,
    } = options.clone();
    let policy: Arc<dyn FlashPolicy> = match &model {
        Some(m) => Arc::new(ModelPolicy::new(Arc::clone(m))),
        None => Arc::new(RulePolicy),
    };
    let catalog = &crate::catalog(suite)?;
    let mut base = HindsightBase::new();
    let labels: Vec<String> = suite
        .iter()
        .map(|c| c.expected.fault_type.clone())
        .collect();
    let mut out = Vec::new();
    for day in nezha::discover(data).map_err(err)? {
        let metrics = nezha::DayMetrics::load(&day).map_err(err)?;
        for nc in &day.cases {
            let Some(own) = suite
                .iter()
                .find(|c| c.expected.fault_type == nc.truth_type)
            else {
                continue;
            };
            if !only.is_empty() && !only.contains(&nc.id) {
                continue;
            }
            if first.is_some_and(|n| out.len() >= n) {
                break;
            }
            progress(&nc.id);
            let dir = work.join(nc.id.replace('/', "-"));
            // The alert protocol, as `rca eval nezha --export` writes it: the window ends at
            // the alert and does not begin at the fault.
            let options = nezha::CaseOptions::default();
            let loaded = nezha::load_case(&day, &metrics, nc, &options).map_err(err)?;
            nezha::export_case(nc, &loaded, &dir).map_err(err)?;
            let case = Case {
                name: nc.id.clone(),
                dir: dir.clone(),
                guide: own.guide.clone(),
                file: CaseFile {
                    incident_dir: ".".into(),
                    guide: None,
                    nezha_case: nc.id.clone(),
                    alert: Alert {
                        component: nc.truth_pod.clone(),
                        summary: format!("alert on {}", nc.truth_pod),
                    },
                },
                expected: Expected {
                    fault_type: nc.truth_type.clone(),
                    pod: nc.truth_pod.clone(),
                    source: format!("Nezha fault list, case {}", nc.id),
                },
            };
            let (incident, tools) = live_tools(&case).await?;
            let mut answers = BTreeMap::new();
            let lessons_before = base.lessons().len();
            let mut runs = Vec::new();
            for guide in suite {
                if model.is_some() && guide.name != own.name {
                    continue;
                }
                let run = FlashAgent::new(Arc::clone(&policy), tools.clone())
                    .with_hindsight(base.clone())
                    .with_config(FlashConfig {
                        max_iterations: if model.is_some() {
                            MODEL_ITERATIONS
                        } else {
                            FlashConfig::default().max_iterations
                        },
                        ..FlashConfig::default()
                    })
                    .run(&incident, &guide.guide, case.facts(&incident))
                    .await?;
                answers.insert(guide.name.clone(), run.answer.clone().unwrap_or_default());
                runs.push(run);
            }
            let verdict = case.verdict();
            if let Some(reviewer) = reviewer {
                for run in &runs {
                    rca_agents::flash::learn(reviewer, None, &mut base, run, &verdict).await?;
                }
            }
            let own_guide_right = verdict.accepts(answers.get(&own.name).map(String::as_str));
            let full = match model {
                Some(_) => FullJob::default(),
                None => full_job(&case, triage, catalog, &loaded.spans, loaded.detected_at).await?,
            };
            let wrong_fault_named = answers
                .values()
                .filter_map(|a| label_of(a, &labels))
                .any(|l| l != nc.truth_type);
            out.push(EvalCase {
                id: nc.id.clone(),
                fault_type: nc.truth_type.clone(),
                pod: nc.truth_pod.clone(),
                answers,
                own_guide: own.name.clone(),
                own_guide_right,
                wrong_fault_named,
                lessons_before,
                full_job_right: verdict.accepts(full.answer.as_deref()),
                full_job_alert: full.alert,
                full_job_guide: full.guide,
                full_job_component: full.component,
                full_job_answer: full.answer,
                full_job_entry_point: full.entry_point,
            });
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(out)
}

/// What the full job of one case did.
#[derive(Debug, Default)]
struct FullJob {
    alert: Option<String>,
    entry_point: Option<String>,
    guide: Option<String>,
    component: Option<String>,
    answer: Option<String>,
}

/// The full job on an exported case: the entry-point alert, the triage guide with
/// `rank_components`, then the guide its triggers pick.
async fn full_job(
    case: &Case,
    triage: &str,
    catalog: &GuideCatalog,
    spans: &[Span],
    detected_at: Timestamp,
) -> Result<FullJob, SuiteError> {
    let Some(alert) = entry_alert(spans, detected_at) else {
        return Ok(FullJob::default());
    };
    let (mut incident, tools) = full_job_tools(case).await?;
    incident.title = alert.summary.clone();
    // The alert's look-back, and the entry point: not the pod the case file names.
    let mut facts = case.facts(&incident);
    facts.remove("component");
    facts.insert(
        "entry_point".into(),
        serde_json::json!(alert.entry_point.clone()),
    );
    let agent = FlashAgent::new(Arc::new(RulePolicy), tools);
    let run = run_triaged(&agent, &incident, &alert.summary, triage, catalog, facts).await?;
    Ok(FullJob {
        entry_point: Some(alert.entry_point.clone()),
        alert: Some(alert.summary),
        guide: run.guide().map(str::to_string),
        component: run
            .triage
            .memory
            .facts
            .get("component")
            .and_then(|v| v.as_str())
            .filter(|c| *c != alert.entry_point)
            .map(str::to_string),
        answer: run.answer().map(str::to_string),
    })
}

/// A Markdown table per fault type: cases, how many the type's guide solved with the pod and
/// the guide given, how many the full job solved (entry-point alert, guide and pod found), on
/// how many some guide named a wrong fault.
pub fn markdown_table(cases: &[EvalCase]) -> String {
    let mut by_type: BTreeMap<&str, [usize; 6]> = BTreeMap::new();
    for c in cases {
        let e = by_type.entry(&c.fault_type).or_default();
        e[0] += 1;
        e[1] += usize::from(c.own_guide_right);
        e[2] += usize::from(c.full_job_right);
        e[3] += usize::from(c.full_job_guide.as_deref() == Some(c.own_guide.as_str()));
        e[4] += usize::from(c.full_job_component.as_deref() == Some(c.pod.as_str()));
        e[5] += usize::from(c.wrong_fault_named);
    }
    let mut out = String::from(
        "| fault type | cases | solved, pod and guide given | solved, full job | full job picked its guide | full job found the pod | some guide names a wrong fault (pod given) |\n|---|---|---|---|---|---|---|\n",
    );
    let mut total = [0; 6];
    for v in by_type.values() {
        for (t, x) in total.iter_mut().zip(v) {
            *t += x;
        }
    }
    for (t, v) in by_type
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .chain([("all".to_string(), total)])
    {
        out.push_str(&format!(
            "| {t} | {} | {} | {} | {} | {} | {} |\n",
            v[0], v[1], v[2], v[3], v[4], v[5]
        ));
    }
    if let Some((t, given, entry)) = trivial_solved(cases) {
        out.push_str(&format!(
            "| trivial: `{t}` (the most common type) named for the given pod / the entry point | {} | {given} | {entry} | - | - | - |\n",
            total[0]
        ));
    }
    out
}

/// A Markdown table per fault type: cases its guide solved without hindsight (`cold`) and with
/// the lessons collected from the cases before (`learned`), the same cases in the same order.
pub fn hindsight_table(cold: &[EvalCase], learned: &[EvalCase]) -> String {
    let mut by_type: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for (c, l) in cold.iter().zip(learned) {
        for key in [c.fault_type.clone(), "all".to_string()] {
            let e = by_type.entry(key).or_default();
            e.0 += 1;
            e.1 += usize::from(c.own_guide_right);
            e.2 += usize::from(l.own_guide_right);
        }
    }
    let mut out = String::from(
        "| fault type | cases | solved without lessons | solved with lessons from earlier cases |\n|---|---|---|---|\n",
    );
    let all = by_type.remove("all");
    for (t, (n, cold, learned)) in by_type.into_iter().chain(all.map(|v| ("all".into(), v))) {
        out.push_str(&format!("| {t} | {n} | {cold} | {learned} |\n"));
    }
    if let Some((t, given, _)) = trivial_solved(cold) {
        out.push_str(&format!(
            "| trivial: `{t}` (the most common type) named for the given pod | {} | {given} | {given} |\n",
            cold.len()
        ));
    }
    let offered = learned.last().map_or(0, |c| c.lessons_before);
    out.push_str(&format!(
        "\nThe last case was offered {offered} lesson(s).\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_table() {
        let labels = vec!["return".to_string(), "exception".to_string()];
        assert_eq!(label_of("return: x", &labels), Some("return"));
        assert_eq!(label_of("not a return: x", &labels), None);
        let case = |t: &str, right, wrong| EvalCase {
            id: "d/00".into(),
            fault_type: t.into(),
            pod: "p".into(),
            answers: BTreeMap::new(),
            own_guide: t.into(),
            own_guide_right: right,
            wrong_fault_named: wrong,
            lessons_before: 0,
            full_job_alert: None,
            full_job_guide: Some(t.into()),
            full_job_component: right.then(|| "p".to_string()),
            full_job_answer: None,
            full_job_right: right && wrong,
            full_job_entry_point: Some(if wrong { "p" } else { "q" }.to_string()),
        };
        let table = markdown_table(&[
            case("return", true, false),
            case("return", false, true),
            case("exception", true, true),
        ]);
        assert!(
            table.contains("| exception | 1 | 1 | 1 | 1 | 1 | 1 |"),
            "{table}"
        );
        assert!(
            table.contains("| return | 2 | 1 | 0 | 2 | 1 | 1 |"),
            "{table}"
        );
        assert!(table.contains("| all | 3 | 2 | 1 | 3 | 2 | 2 |"), "{table}");
        // Two of three are `return`; one of those two alerts at the injected pod.
        assert!(
            table.contains("| trivial: `return` (the most common type) named for the given pod / the entry point | 3 | 2 | 1 |"),
            "{table}"
        );
        let cold = [case("return", false, false), case("return", true, false)];
        let mut learned = [case("return", true, false), case("return", true, false)];
        learned[1].lessons_before = 1;
        let compared = hindsight_table(&cold, &learned);
        assert!(compared.contains("| return | 2 | 1 | 2 |"), "{compared}");
        assert!(compared.contains("| all | 2 | 1 | 2 |"), "{compared}");
        assert!(compared.contains("offered 1 lesson"), "{compared}");
        assert!(
            compared.contains("named for the given pod | 2 | 2 | 2 |"),
            "{compared}"
        );
    }
}
