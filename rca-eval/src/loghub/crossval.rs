//! Leave-one-system-out cross-validation of the miner's data-driven parameters.
//!
//! For each system in turn, the configuration with the highest mean GA (original labels) on
//! all the *other* systems is chosen from a grid, and the held-out system is scored with it.
//! The mean of those held-out scores estimates how the miner does on a system nobody tuned it
//! on; the in-sample figure (one configuration scored on the systems it was chosen on) is
//! printed next to it. Ties go to the earlier grid entry, and the grid starts with the
//! default, so a parameter moves only when the data prefers another value.

use rca_tools::logs::MinerConfig;
use serde::Serialize;

use super::{LoghubError, LoghubReport, SystemData, SystemScore};

/// One fold: the system left out and the configuration chosen without it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fold {
    /// The held-out system.
    pub held_out: String,
    /// The index of the chosen configuration in the grid.
    pub chosen: usize,
    /// The chosen configuration.
    pub config: MinerConfig,
    /// Its mean GA on the training systems.
    pub training_mean_ga: f64,
}

/// The result of [`leave_one_out`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossValidation {
    /// Configurations in the grid.
    pub candidates: usize,
    /// The configuration chosen on every system (the in-sample choice), and its grid index.
    pub chosen_on_all: (usize, MinerConfig),
    /// Every system scored with the in-sample choice.
    pub in_sample: LoghubReport,
    /// Every system scored with the configuration chosen without it.
    pub held_out: LoghubReport,
    /// One fold per system, in order.
    pub folds: Vec<Fold>,
}

/// The grid searched by default, in a fixed order that does not depend on the data: the
/// generic masking, fitting and grouping mechanisms of [`MinerConfig`] (every subset, fewest
/// mechanisms first), each with the join across token counts off, then with 3 and 2 anchor
/// words (fewer joins first), each with the family thresholds around the historical default
/// (variable 5, value 3) first. Ties go to the earlier entry, so a mechanism is chosen only
/// when the training systems prefer it.
pub fn default_grid() -> Vec<MinerConfig> {
    let base = MinerConfig {
        collapse_wildcards: false,
        key_values: false,
        endpoints: false,
        numbered_names: false,
        strict_fit: false,
        join_anchors: 0,
        anchor_groups: false,
        ..MinerConfig::default()
    };
    let mut subsets: Vec<u32> = (0..64).collect();
    subsets.sort_by_key(|b| (b.count_ones(), *b));
    let thresholds = [
        (5, 3),
        (4, 2),
        (4, 3),
        (4, 4),
        (5, 2),
        (5, 4),
        (6, 2),
        (6, 3),
        (6, 4),
    ];
    let mut grid = Vec::new();
    for bits in subsets {
        for join_anchors in [0, 3, 2] {
            for (variable_threshold, value_threshold) in thresholds {
                grid.push(MinerConfig {
                    collapse_wildcards: bits & 1 != 0,
                    strict_fit: bits & 2 != 0,
                    numbered_names: bits & 4 != 0,
                    anchor_groups: bits & 8 != 0,
                    endpoints: bits & 16 != 0,
                    key_values: bits & 32 != 0,
                    join_anchors,
                    variable_threshold,
                    value_threshold,
                    ..base.clone()
                });
            }
        }
    }
    grid
}

/// A short label of a configuration: the mechanisms it turns on and its two thresholds
/// (`collapse+strict+names+groups+join2 6/3`).
pub fn label(c: &MinerConfig) -> String {
    let mut on: Vec<String> = Vec::new();
    for (flag, name) in [
        (c.collapse_wildcards, "collapse"),
        (c.strict_fit, "strict"),
        (c.numbered_names, "names"),
        (c.anchor_groups, "groups"),
        (c.endpoints, "endpoints"),
        (c.key_values, "key=value"),
    ] {
        if flag {
            on.push(name.to_string());
        }
    }
    if c.join_anchors > 0 {
        on.push(format!("join{}", c.join_anchors));
    }
    let mechanisms = if on.is_empty() {
        "base".to_string()
    } else {
        on.join("+")
    };
    format!(
        "{mechanisms} {}/{}",
        c.variable_threshold, c.value_threshold
    )
}

/// Index of the grid entry with the highest mean GA over the systems `include` accepts
/// (earliest on ties).
fn best(scores: &[Vec<SystemScore>], include: impl Fn(usize) -> bool) -> (usize, f64) {
    let mut best = (0, f64::NEG_INFINITY);
    for (ci, row) in scores.iter().enumerate() {
        let (sum, n) = row
            .iter()
            .enumerate()
            .filter(|(si, _)| include(*si))
            .fold((0.0, 0usize), |(s, n), (_, x)| (s + x.original.ga, n + 1));
        let mean = if n == 0 { 0.0 } else { sum / n as f64 };
        if mean > best.1 {
            best = (ci, mean);
        }
    }
    best
}

/// Runs leave-one-system-out over `systems` with the configurations of `grid` (which must not
/// be empty), scoring on `threads` threads.
pub fn leave_one_out(
    systems: &[SystemData],
    grid: &[MinerConfig],
    threads: usize,
) -> Result<CrossValidation, LoghubError> {
    leave_one_out_observed(systems, grid, threads, &|_, _| {})
}

/// [`leave_one_out`], telling `progress(done, total)` after each configuration of the grid is
/// scored on every system (from the scoring threads; a CLI draws a bar from it).
pub fn leave_one_out_observed(
    systems: &[SystemData],
    grid: &[MinerConfig],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<CrossValidation, LoghubError> {
    if grid.is_empty() {
        return Err(LoghubError::Data {
            path: "grid".into(),
            message: "the parameter grid is empty".into(),
        });
    }
    let scores = score_grid(systems, grid, threads, progress)?;
    let (all, _) = best(&scores, |_| true);
    let mut folds = Vec::new();
    let mut held_out = Vec::new();
    for (si, s) in systems.iter().enumerate() {
        let (ci, training_mean_ga) = best(&scores, |j| j != si);
        folds.push(Fold {
            held_out: s.system.clone(),
            chosen: ci,
            config: grid[ci].clone(),
            training_mean_ga,
        });
        held_out.push(scores[ci][si].clone());
    }
    Ok(CrossValidation {
        candidates: grid.len(),
        chosen_on_all: (all, grid[all].clone()),
        in_sample: LoghubReport::new(scores[all].clone(), Vec::new()),
        held_out: LoghubReport::new(held_out, Vec::new()),
        folds,
    })
}

/// Scores every configuration on every system; `threads` workers share the grid (each
/// scoring single-threaded), so the result does not depend on the thread count.
fn score_grid(
    systems: &[SystemData],
    grid: &[MinerConfig],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<Vec<SystemScore>>, LoghubError> {
    let done = std::sync::atomic::AtomicUsize::new(0);
    let row = |c: &MinerConfig| {
        let scored = systems
            .iter()
            .map(|s| s.score(c, 1))
            .collect::<Result<Vec<_>, _>>();
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(n, grid.len());
        scored
    };
    let workers = threads.clamp(1, grid.len().max(1));
    if workers == 1 {
        return grid.iter().map(row).collect();
    }
    let chunk = grid.len().div_ceil(workers);
    let parts: Vec<Result<Vec<Vec<SystemScore>>, LoghubError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = grid
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(row).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(LoghubError::Data {
                        path: "grid".into(),
                        message: "a scoring worker panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(grid.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

impl CrossValidation {
    /// A Markdown summary: per system the in-sample and held-out GA (original and corrected
    /// labels) and the configuration each fold chose.
    pub fn to_markdown(&self) -> String {
        self.to_markdown_sets(&[])
    }

    /// [`CrossValidation::to_markdown`] with a mean row for each named set of systems (for
    /// example each folder the systems came from) after the overall mean.
    pub fn to_markdown_sets(&self, sets: &[(String, Vec<String>)]) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "Grid of {} configurations; chosen on all systems: #{} ({}) `{}`.\n\n\
             | System | GA in-sample | GA held-out | GA (corr.) in-sample | GA (corr.) held-out | FGA held-out | FTA held-out | fold's choice |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.candidates,
            self.chosen_on_all.0,
            label(&self.chosen_on_all.1),
            serde_json::to_string(&self.chosen_on_all.1).unwrap_or_default()
        );
        let corr = |s: &SystemScore| {
            s.corrected
                .map_or("-".to_string(), |c| format!("{:.3}", c.ga))
        };
        for ((i, h), f) in self
            .in_sample
            .systems
            .iter()
            .zip(&self.held_out.systems)
            .zip(&self.folds)
        {
            let _ = writeln!(
                out,
                "| {} | {:.3} | {:.3} | {} | {} | {:.3} | {:.3} | #{} {} |",
                i.system,
                i.original.ga,
                h.original.ga,
                corr(i),
                corr(h),
                h.original.fga,
                h.original.fta,
                f.chosen,
                label(&f.config)
            );
        }
        let mean_corr = |r: &LoghubReport| {
            r.mean_corrected
                .map_or("-".to_string(), |c| format!("{:.3}", c.ga))
        };
        let min = |r: &LoghubReport| {
            r.min_ga()
                .map_or("-".to_string(), |(s, g)| format!("{g:.3} ({s})"))
        };
        let _ = writeln!(
            out,
            "| **mean** | **{:.3}** | **{:.3}** | {} | {} | {:.3} | {:.3} | |",
            self.in_sample.mean_ga(),
            self.held_out.mean_ga(),
            mean_corr(&self.in_sample),
            mean_corr(&self.held_out),
            self.held_out.mean_original.fga,
            self.held_out.mean_original.fta,
        );
        for (name, members) in sets {
            let (i, h) = (
                self.in_sample.subset(members),
                self.held_out.subset(members),
            );
            let _ = writeln!(
                out,
                "| **mean, {name}** ({} systems) | **{:.3}** | **{:.3}** | {} | {} | {:.3} | {:.3} | |",
                i.systems.len(),
                i.mean_ga(),
                h.mean_ga(),
                mean_corr(&i),
                mean_corr(&h),
                h.mean_original.fga,
                h.mean_original.fta,
            );
        }
        let _ = writeln!(
            out,
            "\nLowest GA: in-sample {}, held-out {}.",
            min(&self.in_sample),
            min(&self.held_out)
        );
        for (name, members) in sets {
            let _ = writeln!(
                out,
                "Lowest GA, {name}: in-sample {}, held-out {}.",
                min(&self.in_sample.subset(members)),
                min(&self.held_out.subset(members))
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loghub::Labels;

    fn system(name: &str, lines: &[(&str, &str)]) -> SystemData {
        SystemData {
            system: name.into(),
            contents: lines.iter().map(|(l, _)| l.to_string()).collect(),
            unmatched: 0,
            original: Labels::from_rows(lines.iter().map(|(_, k)| (*k, *k))),
            corrected: None,
        }
    }

    /// Five words at one position: a parameter under threshold 5, constants under 6.
    fn five_users(name: &str, same_event: bool) -> SystemData {
        let lines: Vec<(String, &str)> = ["ann", "bob", "cy", "dee", "eve"]
            .iter()
            .map(|u| {
                let key = if same_event { "E" } else { *u };
                (format!("login accepted for {u} now"), key)
            })
            .collect();
        let refs: Vec<(&str, &str)> = lines.iter().map(|(l, k)| (l.as_str(), *k)).collect();
        system(name, &refs)
    }

    #[test]
    fn each_fold_chooses_without_its_system() {
        let grid = vec![
            MinerConfig {
                variable_threshold: 5,
                value_threshold: 5,
                ..MinerConfig::default()
            },
            MinerConfig {
                variable_threshold: 6,
                value_threshold: 6,
                ..MinerConfig::default()
            },
        ];
        // Two systems want #0 (five words make a parameter), one wants them kept apart.
        let systems = vec![
            five_users("a", true),
            five_users("b", true),
            five_users("c", false),
        ];
        let seen = std::sync::Mutex::new(Vec::new());
        let cv = leave_one_out_observed(&systems, &grid, 1, &|d, t| {
            seen.lock().unwrap().push((d, t));
        })
        .unwrap();
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.last(), Some(&(grid.len(), grid.len())));
        assert_eq!(seen.len(), grid.len());
        assert_eq!(cv.candidates, 2);
        assert_eq!(cv.chosen_on_all.0, 0);
        assert_eq!(cv.in_sample.systems[2].original.ga, 0.0);
        // Leaving `a` out, the tie (b wants #0, c wants #1) goes to the earlier entry.
        assert_eq!(cv.folds[0].chosen, 0);
        // Leaving `c` out, #0 wins and c, which wanted #1, scores 0 held out.
        assert_eq!(cv.folds[2].chosen, 0);
        assert_eq!(cv.held_out.systems[2].original.ga, 0.0);
        assert!(cv.to_markdown().contains("| c |"));
        assert!(leave_one_out(&systems, &[], 1).is_err());
    }
}
