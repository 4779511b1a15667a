//! Cross-validation over cases: the ranker's constants (modality weights, how strengths
//! combine) and the onset detector's are chosen on K-1 folds of cases and scored on the
//! held-out fold, so the figure says how the choice carries to cases it was not made on.

use std::path::Path;

use rca_agents::orchestra::PipelineConfig;
use rca_core::Modality;
use rca_tools::analyze::onset::OnsetDetector;
use rca_tools::analyze::rank::{Aggregation, Ranker};
use serde::Serialize;

use super::NezhaError;
use super::eval::{CaseResult, EvalOptions};

/// One candidate setting of the pipeline.
#[derive(Debug, Clone)]
pub struct GridPoint {
    /// A short name (`metrics=0.5 traces=0.4 strongest`).
    pub name: String,
    /// The settings.
    pub config: PipelineConfig,
}

/// The candidate settings, `base` first: the weights of metrics and traces against logs
/// (each in {0.25, 0.5, 1} and {0.2, 0.4, 1}) and the aggregation (strongest modality or
/// sum); with `onset`, also the onset detector's leading edge ({0.25, 0.5, 0.75, 1}) and
/// significance ({3, 4, 6}) with the base ranker. The order is fixed and depends on no data.
pub fn default_grid(base: &PipelineConfig, onset: bool) -> Vec<GridPoint> {
    let mut grid = vec![GridPoint {
        name: describe(&base.ranker),
        config: base.clone(),
    }];
    for aggregation in [Aggregation::Strongest, Aggregation::Sum] {
        for metrics in [0.25, 0.5, 1.0] {
            for traces in [0.2, 0.4, 1.0] {
                let ranker = Ranker {
                    weights: [
                        (Modality::Logs, 1.0),
                        (Modality::Metrics, metrics),
                        (Modality::Traces, traces),
                    ]
                    .into_iter()
                    .collect(),
                    aggregation,
                    ..base.ranker.clone()
                };
                if ranker == base.ranker {
                    continue;
                }
                grid.push(GridPoint {
                    name: describe(&ranker),
                    config: PipelineConfig {
                        ranker,
                        ..base.clone()
                    },
                });
            }
        }
    }
    if let (true, Some(detector)) = (onset, &base.onset) {
        for leading_edge in [0.25, 0.5, 0.75, 1.0] {
            for min_strength in [3.0, 4.0, 6.0] {
                let candidate = OnsetDetector {
                    leading_edge,
                    min_strength,
                    ..detector.clone()
                };
                if candidate == *detector {
                    continue;
                }
                grid.push(GridPoint {
                    name: format!(
                        "{} onset edge={leading_edge} strength={min_strength}",
                        describe(&base.ranker)
                    ),
                    config: PipelineConfig {
                        onset: Some(candidate),
                        ..base.clone()
                    },
                });
            }
        }
    }
    grid
}

fn describe(r: &Ranker) -> String {
    let w = |m: Modality| r.weights.get(&m).copied().unwrap_or(1.0);
    format!(
        "logs={} metrics={} traces={} {}",
        w(Modality::Logs),
        w(Modality::Metrics),
        w(Modality::Traces),
        match r.aggregation {
            Aggregation::Strongest => "strongest",
            Aggregation::Sum => "sum",
        }
    )
}

/// One held-out fold.
#[derive(Debug, Clone, Serialize)]
pub struct Fold {
    /// The fold's name: its number in time order, or the held-out fault type.
    pub label: String,
    /// The held-out cases.
    pub cases: Vec<String>,
    /// The setting chosen on the other folds.
    pub chosen: String,
    /// Its AS@1 on the other folds.
    pub training_as1: f64,
    /// Its AS@1 on this fold.
    pub held_out_as1: f64,
    /// Its AS@3 on this fold.
    pub held_out_as3: f64,
}

/// The outcome of a cross-validation.
#[derive(Debug, Clone, Serialize)]
pub struct NezhaCrossValidation {
    /// The number of folds.
    pub k: usize,
    /// How many settings were searched.
    pub settings: usize,
    /// The cases.
    pub cases: usize,
    /// Every fold, in case order.
    pub folds: Vec<Fold>,
    /// AS@1 with every case scored under the setting chosen without it.
    pub cross_validated_as1: f64,
    /// AS@3 likewise.
    pub cross_validated_as3: f64,
    /// The default setting's in-sample AS@1.
    pub default_as1: f64,
    /// The default setting's in-sample AS@3.
    pub default_as3: f64,
    /// The setting chosen on all cases, with its in-sample AS@1 and AS@3.
    pub in_sample_best: (String, f64, f64),
    /// Every setting's in-sample AS@1 and AS@3, in grid order.
    pub in_sample: Vec<(String, f64, f64)>,
    /// Leave one fault type out: each true fault type's cases scored under the setting
    /// chosen on the other types' cases (one fold per type, in name order).
    pub by_type: Vec<Fold>,
    /// AS@1 with every case scored under the setting chosen without its fault type.
    pub by_type_as1: f64,
    /// AS@3 likewise.
    pub by_type_as3: f64,
    /// The trivial ranking's AS@1 and AS@3 on the same cases ([`super::loudest_pods`]; no
    /// setting to choose).
    pub loudest: (f64, f64),
}

/// Each fold scored under the setting chosen on the others: the folds, and AS@1 and AS@3
/// over all cases so scored. `fold_of(j)` is case `j`'s fold, below `k`.
fn score_folds(
    results: &[Vec<CaseResult>],
    grid: &[GridPoint],
    fold_of: &dyn Fn(usize) -> usize,
    labels: &[String],
) -> (Vec<Fold>, f64, f64) {
    let n = results.first().map_or(0, Vec::len);
    let mut folds = Vec::new();
    let mut chosen_per_case: Vec<usize> = vec![0; n];
    for (f, label) in labels.iter().enumerate() {
        let (i, training_as1) = choose(results, &|j| fold_of(j) != f);
        let held: Vec<&CaseResult> = results[i]
            .iter()
            .enumerate()
            .filter(|(j, _)| fold_of(*j) == f)
            .map(|(_, c)| c)
            .collect();
        for (j, slot) in chosen_per_case.iter_mut().enumerate() {
            if fold_of(j) == f {
                *slot = i;
            }
        }
        folds.push(Fold {
            label: label.clone(),
            cases: held.iter().map(|c| c.id.clone()).collect(),
            chosen: grid[i].name.clone(),
            training_as1,
            held_out_as1: share(&held, 1),
            held_out_as3: share(&held, 3),
        });
    }
    let scored: Vec<&CaseResult> = chosen_per_case
        .iter()
        .enumerate()
        .map(|(j, &i)| &results[i][j])
        .collect();
    (folds, share(&scored, 1), share(&scored, 3))
}

fn share(cases: &[&CaseResult], k: usize) -> f64 {
    if cases.is_empty() {
        return 0.0;
    }
    cases
        .iter()
        .filter(|c| c.service_rank.is_some_and(|r| r <= k))
        .count() as f64
        / cases.len() as f64
}

/// The index of the best setting on the cases `keep` selects: the highest AS@1, then AS@3;
/// ties go to the earlier setting (the default first).
fn choose(results: &[Vec<CaseResult>], keep: &dyn Fn(usize) -> bool) -> (usize, f64) {
    let mut best = (0, f64::NEG_INFINITY, f64::NEG_INFINITY);
    for (i, run) in results.iter().enumerate() {
        let cases: Vec<&CaseResult> = run
            .iter()
            .enumerate()
            .filter(|(j, _)| keep(*j))
            .map(|(_, c)| c)
            .collect();
        let (a1, a3) = (share(&cases, 1), share(&cases, 3));
        if a1 > best.1 + 1e-12 || (a1 > best.1 - 1e-12 && a3 > best.2 + 1e-12) {
            best = (i, a1, a3);
        }
    }
    (best.0, best.1)
}

/// Cross-validates `grid` over the cases of `root` in `k` contiguous folds (in time order):
/// every setting runs over every case once, each fold's setting is chosen on the others.
pub fn cross_validate(
    root: &Path,
    options: &EvalOptions,
    grid: &[GridPoint],
    k: usize,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<NezhaCrossValidation, NezhaError> {
    if grid.is_empty() {
        return Err(NezhaError::Diagnosis(
            "no settings to cross-validate".into(),
        ));
    }
    let configs: Vec<PipelineConfig> = grid.iter().map(|g| g.config.clone()).collect();
    let results = super::eval::run_grid(root, options, &configs, progress)?;
    let n = results[0].len();
    if k < 2 || k > n {
        return Err(NezhaError::Diagnosis(format!(
            "--cross-validate needs between 2 and {n} folds (the number of cases), not {k}"
        )));
    }
    let (folds, cross_validated_as1, cross_validated_as3) = score_folds(
        &results,
        grid,
        &|j| j * k / n,
        &(1..=k).map(|f| f.to_string()).collect::<Vec<_>>(),
    );
    let mut types: Vec<&str> = results[0].iter().map(|c| c.truth_type.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let type_of: Vec<usize> = results[0]
        .iter()
        .map(|c| types.iter().position(|t| *t == c.truth_type).unwrap_or(0))
        .collect();
    let (by_type, by_type_as1, by_type_as3) = if types.len() >= 2 {
        let labels: Vec<String> = types.iter().map(|t| t.to_string()).collect();
        score_folds(&results, grid, &|j| type_of[j], &labels)
    } else {
        (Vec::new(), 0.0, 0.0)
    };
    let default: Vec<&CaseResult> = results[0].iter().collect();
    let (best, _) = choose(&results, &|_| true);
    let in_sample = grid
        .iter()
        .zip(&results)
        .map(|(g, run)| {
            let cases: Vec<&CaseResult> = run.iter().collect();
            (g.name.clone(), share(&cases, 1), share(&cases, 3))
        })
        .collect();
    let best_cases: Vec<&CaseResult> = results[best].iter().collect();
    let loudest_share = |k: usize| {
        default
            .iter()
            .filter(|c| c.loudest_rank.is_some_and(|r| r <= k))
            .count() as f64
            / default.len().max(1) as f64
    };
    Ok(NezhaCrossValidation {
        loudest: (loudest_share(1), loudest_share(3)),
        k,
        settings: grid.len(),
        cases: n,
        folds,
        cross_validated_as1,
        cross_validated_as3,
        by_type,
        by_type_as1,
        by_type_as3,
        default_as1: share(&default, 1),
        default_as3: share(&default, 3),
        in_sample_best: (
            grid[best].name.clone(),
            share(&best_cases, 1),
            share(&best_cases, 3),
        ),
        in_sample,
    })
}

impl NezhaCrossValidation {
    /// The result as Markdown: the summary line and one row per fold.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "{}\n\n{}-fold cross-validation over {} cases (contiguous folds in time order), {} \
             settings searched.\n\n\
             | | AS@1 | AS@3 |\n|---|---|---|\n\
             | default setting, in-sample | {:.3} | {:.3} |\n\
             | best setting on all cases, in-sample (`{}`) | {:.3} | {:.3} |\n\
             | cross-validated (chosen without the scored fold) | {:.3} | {:.3} |\n\
             | trivial ranking (loudest pod; nothing chosen) | {:.3} | {:.3} |\n\n\
             | fold | cases | chosen on the other folds | AS@1 there | AS@1 held out | AS@3 held out |\n\
             |---|---|---|---|---|---|\n",
            super::MEASURES_IN_SAMPLE,
            self.k,
            self.cases,
            self.settings,
            self.default_as1,
            self.default_as3,
            self.in_sample_best.0,
            self.in_sample_best.1,
            self.in_sample_best.2,
            self.cross_validated_as1,
            self.cross_validated_as3,
            self.loudest.0,
            self.loudest.1,
        );
        for f in &self.folds {
            out.push_str(&format!(
                "| {} | {} | `{}` | {:.3} | {:.3} | {:.3} |\n",
                f.label,
                f.cases.len(),
                f.chosen,
                f.training_as1,
                f.held_out_as1,
                f.held_out_as3
            ));
        }
        if !self.by_type.is_empty() {
            out.push_str(&format!(
                "\nLeave one fault type out (each type's cases scored under the setting chosen on \
                 the other types'): AS@1 {:.3}, AS@3 {:.3}.\n\n\
                 | held-out type | cases | chosen on the other types | AS@1 there | AS@1 held out | AS@3 held out |\n\
                 |---|---|---|---|---|---|\n",
                self.by_type_as1, self.by_type_as3
            ));
            for f in &self.by_type {
                out.push_str(&format!(
                    "| {} | {} | `{}` | {:.3} | {:.3} | {:.3} |\n",
                    f.label,
                    f.cases.len(),
                    f.chosen,
                    f.training_as1,
                    f.held_out_as1,
                    f.held_out_as3
                ));
            }
        }
        let (lo, hi) = self
            .in_sample
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(s.1), hi.max(s.1))
            });
        out.push_str(&format!(
            "\nIn-sample AS@1 over the {} settings ranges from {lo:.3} to {hi:.3}.\n",
            self.in_sample.len()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: usize, rank: Option<usize>) -> CaseResult {
        CaseResult {
            id: format!("d/{id:02}"),
            truth_pod: "p".into(),
            ranked_pods: vec![],
            fault_type: "x".into(),
            seconds: 0.0,
            onset_error_secs: None,
            truth_type: "x".into(),
            service_rank: rank,
            explorations: 0,
            planned_from_memory: false,
            trivial: None,
            loudest_rank: None,
        }
    }

    #[test]
    fn the_grid_starts_with_the_default_and_holds_no_repeat() {
        let base = PipelineConfig::default();
        let grid = default_grid(&base, false);
        assert_eq!(grid[0].config, base);
        assert_eq!(grid.len(), 18);
        let with_onset = default_grid(&base, true);
        assert_eq!(with_onset.len(), 18 + 11);
        let grid = with_onset;
        for (i, a) in grid.iter().enumerate() {
            assert!(
                grid[i + 1..].iter().all(|b| b.config != a.config),
                "{}",
                a.name
            );
        }
    }

    #[test]
    fn choice_prefers_as1_then_as3_then_the_earlier_setting() {
        let runs = vec![
            vec![case(0, Some(1)), case(1, Some(4))],
            vec![case(0, Some(1)), case(1, Some(2))],
            vec![case(0, Some(1)), case(1, Some(2))],
        ];
        assert_eq!(choose(&runs, &|_| true), (1, 0.5));
        // On case 0 alone all tie: the default wins.
        assert_eq!(choose(&runs, &|j| j == 0).0, 0);
    }

    #[test]
    fn leaving_a_fault_type_out_scores_it_with_a_setting_chosen_on_the_others() {
        let typed = |id: usize, ty: &str, rank: Option<usize>| CaseResult {
            truth_type: ty.into(),
            ..case(id, rank)
        };
        // Setting 0 finds type a, setting 1 finds type b (and one more a than 0 finds b).
        let runs = vec![
            vec![
                typed(0, "a", Some(1)),
                typed(1, "a", Some(1)),
                typed(2, "b", Some(5)),
                typed(3, "b", Some(5)),
            ],
            vec![
                typed(0, "a", Some(5)),
                typed(1, "a", Some(5)),
                typed(2, "b", Some(1)),
                typed(3, "b", Some(1)),
            ],
        ];
        let grid: Vec<GridPoint> = ["zero", "one"]
            .iter()
            .map(|n| GridPoint {
                name: n.to_string(),
                config: PipelineConfig::default(),
            })
            .collect();
        let types = ["a", "b"];
        let (folds, as1, _) = score_folds(
            &runs,
            &grid,
            &|j| usize::from(runs[0][j].truth_type == types[1]),
            &types.map(String::from),
        );
        // Each type is scored under the setting the other type prefers: nothing is found.
        assert_eq!(as1, 0.0);
        assert_eq!(folds[0].label, "a");
        assert_eq!(folds[0].chosen, "one");
        assert_eq!(folds[1].chosen, "zero");
        assert_eq!(folds[0].cases, ["d/00", "d/01"]);
    }
}
