//! How far the suite's guides carry to the other occurrences of their incident types: every
//! Nezha case whose fault type has a guide in the suite is exported (as
//! `rca eval nezha --export` does), its alert names the injected pod, and the deterministic
//! policy follows every guide of the suite on it with the live tools.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rca_agents::flash::{HindsightBase, Reviewer, RulePolicy};
use rca_eval::nezha;
use serde::Serialize;

use crate::{Alert, Case, CaseFile, Expected, SuiteError, live_tools, run_case};

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
    /// Whether the guide of its type named its fault type and pod.
    pub own_guide_right: bool,
    /// Whether some guide named a fault type other than the truth.
    pub wrong_fault_named: bool,
    /// How many hindsight lessons the runs were offered (collected from the cases before).
    pub lessons_before: usize,
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

/// Runs every guide of `suite` on every case of the Nezha data at `data` whose fault type one
/// of the guides covers (only the case ids in `only`, when it is not empty), in time order.
/// Incidents are exported under `work`. `progress` is told each case id. With a `reviewer`,
/// hindsight collects itself along the way: each run of a case (under any guide) whose answer
/// the Nezha fault list (the host's verdict) rejects is reviewed, and the lesson joins the base
/// every later case's runs are offered.
pub async fn evaluate(
    data: &Path,
    suite: &[Case],
    only: &[String],
    work: &Path,
    reviewer: Option<&dyn Reviewer>,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<EvalCase>, SuiteError> {
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
                let run = run_case(
                    &case,
                    guide,
                    &incident,
                    Arc::new(RulePolicy),
                    tools.clone(),
                    base.clone(),
                )
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
            let wrong_fault_named = answers
                .values()
                .filter_map(|a| label_of(a, &labels))
                .any(|l| l != nc.truth_type);
            out.push(EvalCase {
                id: nc.id.clone(),
                fault_type: nc.truth_type.clone(),
                pod: nc.truth_pod.clone(),
                answers,
                own_guide_right,
                wrong_fault_named,
                lessons_before,
            });
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(out)
}

/// A Markdown table per fault type: cases, how many the type's guide solved, on how many some
/// guide named a wrong fault.
pub fn markdown_table(cases: &[EvalCase]) -> String {
    let mut by_type: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for c in cases {
        let e = by_type.entry(&c.fault_type).or_default();
        e.0 += 1;
        e.1 += usize::from(c.own_guide_right);
        e.2 += usize::from(c.wrong_fault_named);
    }
    let mut out = String::from(
        "| fault type | cases | its guide names the fault and pod | some guide names a wrong fault |\n|---|---|---|---|\n",
    );
    let total = by_type
        .values()
        .fold((0, 0, 0), |t, v| (t.0 + v.0, t.1 + v.1, t.2 + v.2));
    for (t, (n, right, wrong)) in by_type
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .chain([("all".to_string(), total)])
    {
        out.push_str(&format!("| {t} | {n} | {right} | {wrong} |\n"));
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
            own_guide_right: right,
            wrong_fault_named: wrong,
            lessons_before: 0,
        };
        let table = markdown_table(&[
            case("return", true, false),
            case("return", false, true),
            case("exception", true, false),
        ]);
        assert!(table.contains("| exception | 1 | 1 | 0 |"), "{table}");
        assert!(table.contains("| return | 2 | 1 | 1 |"), "{table}");
        assert!(table.contains("| all | 3 | 2 | 1 |"), "{table}");
        let cold = [case("return", false, false), case("return", true, false)];
        let mut learned = [case("return", true, false), case("return", true, false)];
        learned[1].lessons_before = 1;
        let compared = hindsight_table(&cold, &learned);
        assert!(compared.contains("| return | 2 | 1 | 2 |"), "{compared}");
        assert!(compared.contains("| all | 2 | 1 | 2 |"), "{compared}");
        assert!(compared.contains("offered 1 lesson"), "{compared}");
    }
}
