//! The STRATUS benchmark on scenario files: agents that must find the fault and the fix
//! themselves, each run under TNR and without undo, with the figures the paper reports
//! (mitigated, steps, transactions, aborts, visible crashes, the largest visible severity
//! relative to the start). Unlike the fixed-odds demonstration of [`super::bench`], nothing
//! here is given the answer: the result can fail.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use rca_core::llm::ChatModel;
use serde::Serialize;
use tokio::sync::RwLock;

use super::agents::{ModelDiagnoser, ModelMitigator, NewestChangeBaseline, PolicyDetector};
use super::error::StratusError;
use super::machine::Stratus;
use super::severity::SeverityWeights;
use super::sim::SimEnvironment;
use super::sim::scenarios::Scenario;
use super::transaction::{Outcome, Tnr, TnrConfig};

/// Who plays detection, diagnosis and mitigation.
#[derive(Clone)]
pub enum AgentSet {
    /// The deterministic policies.
    Deterministic,
    /// The trivial baseline: put back the newest change made by others
    /// ([`super::agents::NewestChangeBaseline`] diagnoses and mitigates), with the
    /// deterministic detection.
    NewestChange,
    /// Model-backed diagnosis (with `reads` read commands per attempt) and mitigation. Detection
    /// stays the deterministic threshold on alerts: it is not what the benchmark compares,
    /// and a small model that cannot answer it in shape would end every run before the
    /// agents under test begin.
    Model {
        /// The model.
        model: Arc<dyn ChatModel>,
        /// Read commands the diagnoser may run per attempt.
        reads: usize,
    },
}

impl AgentSet {
    /// Its name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            AgentSet::Deterministic => "deterministic",
            AgentSet::NewestChange => "baseline-newest-change",
            AgentSet::Model { .. } => "model",
        }
    }

    fn machine(&self) -> Stratus {
        match self {
            AgentSet::Deterministic => Stratus::default(),
            AgentSet::NewestChange => Stratus::new(
                Arc::new(PolicyDetector),
                Arc::new(NewestChangeBaseline),
                Arc::new(NewestChangeBaseline),
            ),
            AgentSet::Model { model, reads } => Stratus::new(
                Arc::new(PolicyDetector),
                Arc::new(ModelDiagnoser::new(Arc::clone(model), *reads)),
                Arc::new(ModelMitigator::new(Arc::clone(model))),
            ),
        }
    }
}

/// Settings of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AgentBenchConfig {
    /// Attempts per run.
    pub max_attempts: usize,
    /// Wall time of one run (a model-backed run that exceeds it counts as not mitigated).
    pub run_timeout: Duration,
    /// Severity weights.
    pub weights: SeverityWeights,
    /// Erase the change history of each faulty cluster before the agents arrive: an
    /// environment that keeps no audit trail (deployments keep their rollout history).
    pub without_history: bool,
}

impl Default for AgentBenchConfig {
    fn default() -> Self {
        AgentBenchConfig {
            max_attempts: 10,
            run_timeout: Duration::from_secs(600),
            weights: SeverityWeights::default(),
            without_history: false,
        }
    }
}

/// One run: one scenario, one agent set, one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioRun {
    /// The scenario.
    pub scenario: String,
    /// Its fault family (`-` when the file names none).
    pub family: String,
    /// `deterministic` or `model`.
    pub agents: String,
    /// `tnr` or `no_undo`.
    pub mode: String,
    /// The scenario's oracle passed at the end.
    pub mitigated: bool,
    /// Commands executed, undo restores included.
    pub steps: usize,
    /// Transactions run.
    pub transactions: usize,
    /// Attempts that ran no transaction (no usable plan, or one refused before it ran).
    pub no_plan: usize,
    /// Transactions aborted (undone under TNR; stopped without undo).
    pub aborts: usize,
    /// Visible states that were crashed.
    pub visible_crashes: usize,
    /// The largest visible mu / mu(s0) over non-crashed visible states.
    pub max_visible_ratio: f64,
    /// Why the run ended early (a model error, the time limit), if it did.
    pub error: Option<String>,
}

/// The benchmark's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentBenchReport {
    /// Settings.
    pub config: AgentBenchConfig,
    /// Every run, by scenario, then agents, then mode.
    pub runs: Vec<ScenarioRun>,
}

/// The most runs the per-scenario table lists in full.
const MAX_LISTED_RUNS: usize = 120;

/// The two modes: TNR, and the same agents with no undo.
const MODES: [(&str, bool); 2] = [("tnr", true), ("no_undo", false)];

/// Runs `agents` on one scenario in one mode.
pub async fn run_scenario(
    scenario: &Scenario,
    agents: &AgentSet,
    undo: bool,
    config: &AgentBenchConfig,
) -> Result<ScenarioRun, StratusError> {
    let mut cluster = scenario.build()?;
    if config.without_history {
        cluster.changes.clear();
    }
    let env = Arc::new(RwLock::new(SimEnvironment::new(cluster)));
    let tnr = Tnr::new(
        Arc::clone(&env),
        TnrConfig {
            weights: config.weights,
            undo,
            ..TnrConfig::default()
        },
    )
    .await?;
    let machine = agents.machine().with_max_attempts(config.max_attempts);
    let result = tokio::time::timeout(config.run_timeout, machine.run(&tnr)).await;
    let (transactions, attempts, error) = match result {
        Ok(Ok(report)) => (report.transactions, report.diagnoses.len(), None),
        Ok(Err(e @ StratusError::UnfaithfulUndo { .. })) => return Err(e),
        Ok(Err(e)) => (Vec::new(), 0, Some(e.to_string())),
        Err(_) => (
            Vec::new(),
            0,
            Some(format!(
                "timed out after {} s",
                config.run_timeout.as_secs()
            )),
        ),
    };
    let paths = tnr.paths();
    let mu0 = paths.visible.first().copied().flatten().unwrap_or(0.0);
    let visible_crashes = paths.visible.iter().filter(|m| m.is_none()).count();
    let max_visible_ratio = paths
        .visible
        .iter()
        .flatten()
        .map(|m| if mu0 > 0.0 { m / mu0 } else { 0.0 })
        .fold(0.0, f64::max);
    let mitigated = scenario.verdict(env.read().await.cluster()).passed();
    Ok(ScenarioRun {
        scenario: scenario.name.clone(),
        family: scenario.family.clone().unwrap_or_else(|| "-".into()),
        agents: agents.name().to_string(),
        mode: if undo { "tnr" } else { "no_undo" }.to_string(),
        mitigated,
        steps: transactions
            .iter()
            .map(|t| t.outputs.len() + t.undo_steps)
            .sum(),
        transactions: transactions.len(),
        no_plan: attempts.saturating_sub(transactions.len()),
        aborts: transactions
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Aborted { .. }))
            .count(),
        visible_crashes,
        max_visible_ratio,
        error,
    })
}

/// Runs every agent set on every scenario, under TNR and without undo; `progress(done,
/// total)` after each run.
pub async fn run_agent_bench(
    scenarios: &[Scenario],
    agent_sets: &[AgentSet],
    config: &AgentBenchConfig,
    mut progress: impl FnMut(usize, usize),
) -> Result<AgentBenchReport, StratusError> {
    let total = scenarios.len() * agent_sets.len() * MODES.len();
    let mut runs = Vec::new();
    for s in scenarios {
        for a in agent_sets {
            for (_, undo) in MODES {
                runs.push(run_scenario(s, a, undo, config).await?);
                progress(runs.len(), total);
            }
        }
    }
    Ok(AgentBenchReport {
        config: *config,
        runs,
    })
}

/// Totals of one (agents, mode) pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchTotals {
    /// `deterministic` or `model`.
    pub agents: String,
    /// `tnr` or `no_undo`.
    pub mode: String,
    /// Scenarios run.
    pub scenarios: usize,
    /// Scenarios mitigated.
    pub mitigated: usize,
    /// Commands executed.
    pub steps: usize,
    /// Transactions.
    pub transactions: usize,
    /// Attempts with no transaction.
    pub no_plan: usize,
    /// Aborts.
    pub aborts: usize,
    /// Visible crashed states.
    pub visible_crashes: usize,
    /// The largest visible mu / mu(s0).
    pub max_visible_ratio: f64,
}

impl AgentBenchReport {
    /// Totals per (agents, mode), in the order first run.
    pub fn totals(&self) -> Vec<BenchTotals> {
        Self::totals_of(self.runs.iter())
    }

    /// Totals per (family, agents, mode), families in name order.
    pub fn family_totals(&self) -> Vec<(String, BenchTotals)> {
        let families: std::collections::BTreeSet<&str> =
            self.runs.iter().map(|r| r.family.as_str()).collect();
        let mut out = Vec::new();
        for f in families {
            for t in Self::totals_of(self.runs.iter().filter(|r| r.family == f)) {
                out.push((f.to_string(), t));
            }
        }
        out
    }

    fn totals_of<'a>(runs: impl Iterator<Item = &'a ScenarioRun>) -> Vec<BenchTotals> {
        let mut out: Vec<BenchTotals> = Vec::new();
        for r in runs {
            let t = match out
                .iter_mut()
                .find(|t| t.agents == r.agents && t.mode == r.mode)
            {
                Some(t) => t,
                None => {
                    out.push(BenchTotals {
                        agents: r.agents.clone(),
                        mode: r.mode.clone(),
                        scenarios: 0,
                        mitigated: 0,
                        steps: 0,
                        transactions: 0,
                        no_plan: 0,
                        aborts: 0,
                        visible_crashes: 0,
                        max_visible_ratio: 0.0,
                    });
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            t.scenarios += 1;
            t.mitigated += usize::from(r.mitigated);
            t.steps += r.steps;
            t.transactions += r.transactions;
            t.no_plan += r.no_plan;
            t.aborts += r.aborts;
            t.visible_crashes += r.visible_crashes;
            t.max_visible_ratio = t.max_visible_ratio.max(r.max_visible_ratio);
        }
        out
    }

    /// The Markdown tables for `docs/benchmarks.md`: totals, then every run.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "At most {} attempts per run{}. `no_undo`: the same agents, with transactions that commit whatever happens (no undo, no abort, no irreversibility check). `baseline-newest-change`: the trivial rule (put back the newest change made by others, then the next).\n",
            self.config.max_attempts,
            if self.config.without_history {
                "; the change history erased before the agents arrive"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "| agents | mode | mitigated | steps | transactions | attempts without a transaction | aborts | visible crashes | max visible mu / mu(s0) |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for t in self.totals() {
            let _ = writeln!(
                s,
                "| {} | {} | {} / {} | {} | {} | {} | {} | {} | {:.2} |",
                t.agents,
                t.mode,
                t.mitigated,
                t.scenarios,
                t.steps,
                t.transactions,
                t.no_plan,
                t.aborts,
                t.visible_crashes,
                t.max_visible_ratio
            );
        }
        if self.runs.iter().any(|r| r.family != "-") {
            let _ = writeln!(s, "\nPer fault family:\n");
            let _ = writeln!(
                s,
                "| family | agents | mode | mitigated | transactions | aborts | visible crashes | max visible mu / mu(s0) |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
            for (f, t) in self.family_totals() {
                let _ = writeln!(
                    s,
                    "| {f} | {} | {} | {} / {} | {} | {} | {} | {:.2} |",
                    t.agents,
                    t.mode,
                    t.mitigated,
                    t.scenarios,
                    t.transactions,
                    t.aborts,
                    t.visible_crashes,
                    t.max_visible_ratio
                );
            }
        }
        // Past this many runs, only those that did not mitigate or aborted are listed.
        let all = self.runs.len() <= MAX_LISTED_RUNS;
        let _ = writeln!(
            s,
            "\n{}\n",
            if all {
                "Per scenario:"
            } else {
                "Runs that did not mitigate or aborted a transaction (every other run mitigated with no abort):"
            }
        );
        let _ = writeln!(
            s,
            "| scenario | agents | mode | mitigated | steps | transactions | without a transaction | aborts | visible crashes | max ratio | ended early |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
        for r in self
            .runs
            .iter()
            .filter(|r| all || !r.mitigated || r.aborts > 0)
        {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
                r.scenario,
                r.agents,
                r.mode,
                if r.mitigated { "yes" } else { "no" },
                r.steps,
                r.transactions,
                r.no_plan,
                r.aborts,
                r.visible_crashes,
                r.max_visible_ratio,
                r.error
                    .as_deref()
                    .map(|e| e
                        .chars()
                        .take(80)
                        .collect::<String>()
                        .replace('|', "/")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "))
                    .unwrap_or_default()
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_deterministic_agents_mitigate_the_built_in_scenarios_under_tnr() {
        let all = crate::stratus::builtin_scenarios().unwrap();
        let report = run_agent_bench(
            all,
            &[AgentSet::Deterministic],
            &AgentBenchConfig::default(),
            |_, _| {},
        )
        .await
        .unwrap();
        let totals = report.totals();
        let tnr = &totals[0];
        assert_eq!(
            (tnr.agents.as_str(), tnr.mode.as_str()),
            ("deterministic", "tnr")
        );
        assert_eq!(tnr.mitigated, all.len(), "{}", report.markdown());
        assert_eq!(tnr.visible_crashes, 0);
        assert!(tnr.max_visible_ratio <= 1.0);
        assert!(report.markdown().contains("| deterministic | no_undo |"));
    }

    /// The goal on the two sets of other applications' scenarios: the deterministic agents
    /// under TNR mitigate at least 80%, with no visible crash and visible severity never above
    /// its start. Neither set is out of sample any more: the agents were changed after
    /// `heldout`'s first measurement to read the symptoms it showed, and `unseen` has been
    /// measured (once, with no change after it). Scenarios written elsewhere judge
    /// generalisation.
    #[tokio::test]
    async fn the_deterministic_agents_meet_the_goal_on_the_other_applications_scenarios() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for dir in ["heldout", "unseen"] {
            let scenarios = Scenario::from_dir(&root.join(dir)).unwrap();
            let report = run_agent_bench(
                &scenarios,
                &[AgentSet::Deterministic],
                &AgentBenchConfig::default(),
                |_, _| {},
            )
            .await
            .unwrap();
            let tnr = &report.totals()[0];
            assert_eq!(tnr.mode, "tnr");
            assert!(
                tnr.mitigated * 10 >= tnr.scenarios * 8,
                "{dir}: {}",
                report.markdown()
            );
            assert_eq!(tnr.visible_crashes, 0, "{dir}");
            assert!(tnr.max_visible_ratio <= 1.0, "{dir}");
        }
    }

    /// The goal on 200 generated scenarios (seed 1; families in the guide): the
    /// deterministic agents under TNR mitigate at least 90%, with no visible crash and
    /// visible severity never above its start, with the change history and without it, and
    /// beat the trivial baseline; where agents err (the baseline, with the history), the
    /// rows without undo show the rise that TNR prevents.
    #[tokio::test]
    async fn generated_scenarios_meet_the_goal_and_undo_prevents_the_rise() {
        let scenarios = crate::stratus::sim::generate::generate(1, 200).unwrap();
        for without_history in [false, true] {
            let config = AgentBenchConfig {
                without_history,
                ..AgentBenchConfig::default()
            };
            let report = run_agent_bench(
                &scenarios,
                &[AgentSet::Deterministic, AgentSet::NewestChange],
                &config,
                |_, _| {},
            )
            .await
            .unwrap();
            let totals = report.totals();
            let row = |agents: &str, mode: &str| {
                totals
                    .iter()
                    .find(|t| t.agents == agents && t.mode == mode)
                    .unwrap()
                    .clone()
            };
            let tnr = row("deterministic", "tnr");
            assert!(
                tnr.mitigated * 10 >= tnr.scenarios * 9,
                "{}",
                report.markdown()
            );
            assert_eq!(tnr.visible_crashes, 0);
            assert!(tnr.max_visible_ratio <= 1.0);
            let baseline = row("baseline-newest-change", "tnr");
            assert!(baseline.mitigated < tnr.mitigated);
            assert!(baseline.max_visible_ratio <= 1.0);
            if !without_history {
                // The baseline errs (it puts back harmless changes, some of which the load
                // needed): without undo its visible severity rises.
                assert!(
                    row("baseline-newest-change", "no_undo").max_visible_ratio > 1.0,
                    "{}",
                    report.markdown()
                );
            }
        }
    }
}
