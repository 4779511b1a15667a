//! A demonstration of the mechanism of STRATUS Table 3, not a measurement: a stochastic
//! mitigation policy with fixed odds per attempt (the scenario's reference fix, a wrong but
//! harmless fix, a harmful fix) run with TNR undo-and-retry (`tnr`), with retry but no undo
//! (`retry_no_undo`) and with no retry (`no_retry`), over every scenario and many seeds. Its
//! success rates follow from the odds it was given (tnr about `1 - (1 - right)^attempts`);
//! what it shows is that undo keeps harmful draws from accumulating. The measurement of
//! agents that must find the fix themselves is [`crate::stratus::scenario_bench`].
//! Seeded and deterministic: the same (scenario, seed) draws the same random stream in
//! every mode.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::sync::RwLock;

use super::agents::{Mitigator, Plan, PlanContext};
use super::confinement::confine_write;
use super::environment::ReadAccess;
use super::error::StratusError;
use super::oracle::oracle;
use super::severity::SeverityWeights;
use super::sim::SimEnvironment;
use super::sim::model::Cluster;
use super::sim::scenarios::Scenario;
use super::transaction::{Tnr, TnrConfig};

/// How a run may recover from a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every attempt is a TNR transaction: aborted attempts are undone, then retried.
    Tnr,
    /// Attempts run directly; a failed attempt's changes stay, and the next attempt builds on them.
    RetryNoUndo,
    /// One direct attempt.
    NoRetry,
}

impl Mode {
    /// Its name in reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Tnr => "tnr",
            Mode::RetryNoUndo => "retry_no_undo",
            Mode::NoRetry => "no_retry",
        }
    }
}

/// The odds of the stochastic policy, per attempt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Odds {
    /// The right fix.
    pub right: f64,
    /// A wrong but harmless fix.
    pub harmless: f64,
    /// A harmful fix (the rest).
    pub harmful: f64,
}

impl Default for Odds {
    fn default() -> Self {
        Odds {
            right: 0.35,
            harmless: 0.45,
            harmful: 0.20,
        }
    }
}

/// Benchmark settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchConfig {
    /// Seeds per scenario.
    pub seeds: u64,
    /// Attempts per run (modes with retry).
    pub max_attempts: usize,
    /// The policy's odds.
    pub odds: Odds,
    /// Severity weights.
    pub weights: SeverityWeights,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            seeds: 50,
            max_attempts: 10,
            odds: Odds::default(),
            weights: SeverityWeights::default(),
        }
    }
}

/// What the stochastic policy chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    /// The scenario's fix.
    Right,
    /// A harmless change elsewhere.
    Harmless,
    /// A harmful change (raises severity or crashes a component).
    Harmful,
}

fn candidates(cluster: &Cluster, scenario: &Scenario) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let mut harmless = Vec::new();
    let mut harmful = Vec::new();
    for d in cluster.deployments.values() {
        if scenario.involved.contains(&d.name) {
            continue;
        }
        if d.stateful {
            if let Some(p) = d.pods.first() {
                harmful.push(vec![format!("delete pod {}", p.name)]);
                if let Some(n) = &p.node {
                    harmful.push(vec![format!("drain {n}")]);
                }
            }
            continue;
        }
        harmless.push(vec![format!(
            "set env deployment/{} LOG_LEVEL=debug",
            d.name
        )]);
        if d.replicas > 0 {
            harmful.push(vec![format!("scale deployment {} --replicas=0", d.name)]);
            harmful.push(vec![format!(
                "set image deployment/{0} {0}={1}-broken",
                d.name, d.template.image
            )]);
        }
    }
    (harmless, harmful)
}

/// One draw of the stochastic policy against the current state.
pub fn draw(
    rng: &mut ChaCha8Rng,
    odds: &Odds,
    cluster: &Cluster,
    scenario: &Scenario,
) -> (Choice, Vec<String>) {
    let u: f64 = rng.random();
    let (harmless, harmful) = candidates(cluster, scenario);
    let pick = |rng: &mut ChaCha8Rng, v: &[Vec<String>]| -> Vec<String> {
        if v.is_empty() {
            return Vec::new();
        }
        v[rng.random_range(0..v.len())].clone()
    };
    if u < odds.right {
        (Choice::Right, scenario.fix(cluster))
    } else if u < odds.right + odds.harmless {
        (Choice::Harmless, pick(rng, &harmless))
    } else {
        (Choice::Harmful, pick(rng, &harmful))
    }
}

/// The stochastic policy as a [`Mitigator`], for running it through the state machine (the
/// CLI's `--policy stochastic`). It reads the simulated cluster's state through the read lock
/// only.
pub struct StochasticMitigator {
    env: Arc<RwLock<SimEnvironment>>,
    scenario: Scenario,
    odds: Odds,
    rng: Mutex<ChaCha8Rng>,
}

impl StochasticMitigator {
    /// A stochastic mitigator for `scenario` on `env`, seeded with `seed`.
    pub fn new(
        env: Arc<RwLock<SimEnvironment>>,
        scenario: Scenario,
        odds: Odds,
        seed: u64,
    ) -> Self {
        StochasticMitigator {
            env,
            scenario,
            odds,
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        }
    }
}

#[async_trait]
impl Mitigator for StochasticMitigator {
    async fn plan(&self, _env: &dyn ReadAccess, _ctx: &PlanContext) -> Result<Plan, StratusError> {
        let cluster = self.env.read().await.cluster().clone();
        let mut rng = self.rng.lock().map_err(|_| StratusError::Internal {
            message: "the stochastic policy's random state was poisoned".into(),
        })?;
        let (choice, commands) = draw(&mut rng, &self.odds, &cluster, &self.scenario);
        Ok(Plan {
            commands,
            rationale: format!("stochastic policy drew {choice:?}"),
        })
    }
}

/// The outcome of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    /// The oracles passed at the end.
    pub success: bool,
    /// Attempts made.
    pub attempts: usize,
    /// Commands executed, undo restores included.
    pub steps: usize,
    /// mu(s0).
    pub mu0: f64,
    /// Visible mu after each attempt, starting with mu(s0) (infinity: crashed).
    pub visible: Vec<f64>,
}

fn seed_for(scenario_index: usize, seed: u64) -> u64 {
    seed.wrapping_mul(rca_core::seeded::GOLDEN_GAMMA)
        ^ (scenario_index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
}

/// Runs one (scenario, seed, mode).
pub async fn run_one(
    scenario: &Scenario,
    scenario_index: usize,
    seed: u64,
    mode: Mode,
    config: &BenchConfig,
) -> Result<RunOutcome, StratusError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed_for(scenario_index, seed));
    let w = config.weights;
    let cluster = scenario.build()?;
    let mu0 = w.mu(&cluster.health());
    let mut out = RunOutcome {
        success: false,
        attempts: 0,
        steps: 0,
        mu0,
        visible: vec![mu0],
    };
    let attempts = match mode {
        Mode::NoRetry => 1,
        _ => config.max_attempts,
    };
    match mode {
        Mode::Tnr => {
            let env = Arc::new(RwLock::new(SimEnvironment::new(cluster)));
            let tnr = Tnr::new(
                Arc::clone(&env),
                TnrConfig {
                    weights: w,
                    ..TnrConfig::default()
                },
            )
            .await?;
            for _ in 0..attempts {
                let current = env.read().await.cluster().clone();
                let (_, cmds) = draw(&mut rng, &config.odds, &current, scenario);
                out.attempts += 1;
                if !cmds.is_empty() {
                    let rec = tnr.run_text(&cmds).await?;
                    out.steps += rec.outputs.len() + rec.undo_steps;
                }
                let h = env.read().await.cluster().health();
                out.visible.push(w.mu(&h));
                if oracle(&h).passed() {
                    out.success = true;
                    break;
                }
            }
        }
        Mode::RetryNoUndo | Mode::NoRetry => {
            let mut env = SimEnvironment::new(cluster);
            for _ in 0..attempts {
                let (_, cmds) = draw(&mut rng, &config.odds, env.cluster(), scenario);
                out.attempts += 1;
                for c in &cmds {
                    let cmd = confine_write(c)?;
                    out.steps += 1;
                    if env.write_now(&cmd).is_err() {
                        break;
                    }
                }
                env.settle_now(TnrConfig::default().settle_s);
                let h = env.cluster().health();
                out.visible.push(w.mu(&h));
                if h.crashed {
                    break;
                }
                if oracle(&h).passed() {
                    out.success = true;
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// Aggregates of one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeResult {
    /// The mode.
    pub mode: Mode,
    /// Runs.
    pub runs: usize,
    /// Fraction of runs whose oracles passed.
    pub success_rate: f64,
    /// Visible crashed states, over all runs.
    pub visible_crashes: usize,
    /// The largest visible mu / mu(s0) among non-crashed visible states.
    pub max_visible_mu_ratio: f64,
    /// Mean attempts per run.
    pub mean_attempts: f64,
    /// Mean commands executed per run (undo restores included).
    pub mean_steps: f64,
    /// Mean visible mu / mu(s0) after attempt k (k = 0 is s0), over runs not crashed by
    /// then; a finished run keeps its last state.
    pub severity_over_time: Vec<f64>,
    /// Fraction of runs crashed by attempt k.
    pub crashed_over_time: Vec<f64>,
    /// Success rate per scenario, in scenario order.
    pub per_scenario: Vec<(String, f64)>,
}

/// The summary of one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeSummary {
    /// `tnr`, `retry_no_undo` or `no_retry`.
    pub mode: &'static str,
    /// Fraction of runs whose oracles passed.
    pub success_rate: f64,
    /// Visible crashed states.
    pub visible_crashes: usize,
    /// Largest visible mu / mu(s0) among non-crashed visible states.
    pub max_visible_mu_ratio: f64,
}

/// The benchmark's summary, in the shape `rca mitigate demo --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchSummary {
    /// Scenarios run.
    pub scenarios: usize,
    /// Seeds per scenario.
    pub seeds: u64,
    /// tnr, retry_no_undo, no_retry.
    pub modes: Vec<ModeSummary>,
}

/// The benchmark's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// Scenarios run.
    pub scenarios: usize,
    /// Seeds per scenario.
    pub seeds: u64,
    /// Settings.
    pub config: BenchConfig,
    /// One entry per mode: tnr, retry_no_undo, no_retry.
    pub modes: Vec<ModeResult>,
}

fn aggregate(mode: Mode, runs: &[RunOutcome], horizon: usize) -> ModeResult {
    let n = runs.len().max(1) as f64;
    let mut crashes = 0;
    let mut max_ratio: f64 = 0.0;
    for r in runs {
        for v in &r.visible {
            if v.is_infinite() {
                crashes += 1;
            } else if r.mu0 > 0.0 {
                max_ratio = max_ratio.max(v / r.mu0);
            }
        }
    }
    let mut sev = Vec::new();
    let mut crashed = Vec::new();
    for k in 0..=horizon {
        let (mut sum, mut cnt, mut dead) = (0.0, 0usize, 0usize);
        for r in runs {
            let v = r
                .visible
                .get(k)
                .or(r.visible.last())
                .copied()
                .unwrap_or(r.mu0);
            if v.is_infinite() {
                dead += 1;
            } else if r.mu0 > 0.0 {
                sum += v / r.mu0;
                cnt += 1;
            }
        }
        sev.push(if cnt > 0 { sum / cnt as f64 } else { 0.0 });
        crashed.push(dead as f64 / n);
    }
    ModeResult {
        mode,
        runs: runs.len(),
        success_rate: runs.iter().filter(|r| r.success).count() as f64 / n,
        visible_crashes: crashes,
        max_visible_mu_ratio: max_ratio,
        mean_attempts: runs.iter().map(|r| r.attempts).sum::<usize>() as f64 / n,
        mean_steps: runs.iter().map(|r| r.steps).sum::<usize>() as f64 / n,
        severity_over_time: sev,
        crashed_over_time: crashed,
        per_scenario: Vec::new(),
    }
}

/// Runs every scenario x `config.seeds` seeds in every mode.
pub async fn run_bench(
    config: &BenchConfig,
    scenarios: &[Scenario],
) -> Result<BenchReport, StratusError> {
    run_bench_observed(config, scenarios, |_, _| {}).await
}

/// [`run_bench`], telling `progress(done, total)` after each seeded run (a CLI draws a bar
/// from it: a large `seeds` runs for a long time).
pub async fn run_bench_observed(
    config: &BenchConfig,
    scenarios: &[Scenario],
    mut progress: impl FnMut(u64, u64),
) -> Result<BenchReport, StratusError> {
    const MODES: [Mode; 3] = [Mode::Tnr, Mode::RetryNoUndo, Mode::NoRetry];
    let total = (MODES.len() * scenarios.len()) as u64 * config.seeds;
    let mut done = 0u64;
    let mut modes = Vec::new();
    for mode in MODES {
        let mut runs = Vec::new();
        let mut per_scenario = Vec::new();
        for (i, s) in scenarios.iter().enumerate() {
            let mut ok = 0usize;
            for seed in 0..config.seeds {
                let r = run_one(s, i, seed, mode, config).await?;
                ok += usize::from(r.success);
                runs.push(r);
                done += 1;
                progress(done, total);
            }
            per_scenario.push((s.name.to_string(), ok as f64 / config.seeds.max(1) as f64));
        }
        let mut m = aggregate(mode, &runs, config.max_attempts);
        m.per_scenario = per_scenario;
        modes.push(m);
    }
    Ok(BenchReport {
        scenarios: scenarios.len(),
        seeds: config.seeds,
        config: config.clone(),
        modes,
    })
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

impl BenchReport {
    /// The summary printed by `rca mitigate demo --json`: `{"scenarios", "seeds", "modes":
    /// [{"mode", "success_rate", "visible_crashes", "max_visible_mu_ratio"}, ...]}`, keys in
    /// that order.
    pub fn summary(&self) -> BenchSummary {
        BenchSummary {
            scenarios: self.scenarios,
            seeds: self.seeds,
            modes: self
                .modes
                .iter()
                .map(|m| ModeSummary {
                    mode: m.mode.as_str(),
                    success_rate: round(m.success_rate),
                    visible_crashes: m.visible_crashes,
                    max_visible_mu_ratio: round(m.max_visible_mu_ratio),
                })
                .collect(),
        }
    }

    /// The Markdown tables for `docs/benchmarks.md`.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let o = self.config.odds;
        let _ = writeln!(
            s,
            "A demonstration of the mechanism, not a measurement: the success rates follow from the odds the policy was given.\n\n{} scenarios x {} seeds; stochastic policy per attempt: right fix {}, harmless wrong fix {}, harmful fix {}; at most {} attempts.\n",
            self.scenarios, self.seeds, o.right, o.harmless, o.harmful, self.config.max_attempts
        );
        let _ = writeln!(
            s,
            "| mode | success rate | visible crashes | max visible mu / mu(s0) | mean attempts | mean steps |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for m in &self.modes {
            let _ = writeln!(
                s,
                "| {} | {:.3} | {} | {:.3} | {:.2} | {:.2} |",
                m.mode.as_str(),
                m.success_rate,
                m.visible_crashes,
                m.max_visible_mu_ratio,
                m.mean_attempts,
                m.mean_steps
            );
        }
        let _ = writeln!(
            s,
            "\nSeverity over time: mean visible mu / mu(s0) after attempt k among runs not crashed (crashed share in brackets).\n"
        );
        let horizon = self.config.max_attempts;
        let _ = write!(s, "| mode |");
        for k in 0..=horizon {
            let _ = write!(s, " k={k} |");
        }
        let _ = writeln!(s);
        let _ = write!(s, "|---|");
        for _ in 0..=horizon {
            let _ = write!(s, "---|");
        }
        let _ = writeln!(s);
        for m in &self.modes {
            let _ = write!(s, "| {} |", m.mode.as_str());
            for k in 0..=horizon {
                let v = m.severity_over_time.get(k).copied().unwrap_or(0.0);
                let c = m.crashed_over_time.get(k).copied().unwrap_or(0.0);
                let _ = write!(s, " {v:.2} ({c:.2}) |");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "\nSuccess rate per scenario (stochastic policy).\n");
        let _ = write!(s, "| scenario |");
        for m in &self.modes {
            let _ = write!(s, " {} |", m.mode.as_str());
        }
        let _ = writeln!(s);
        let _ = write!(s, "|---|");
        for _ in &self.modes {
            let _ = write!(s, "---|");
        }
        let _ = writeln!(s);
        if let Some(first) = self.modes.first() {
            for (i, (name, _)) in first.per_scenario.iter().enumerate() {
                let _ = write!(s, "| {name} |");
                for m in &self.modes {
                    let v = m.per_scenario.get(i).map_or(0.0, |x| x.1);
                    let _ = write!(s, " {v:.2} |");
                }
                let _ = writeln!(s);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bench_is_deterministic_and_tnr_keeps_its_invariants() {
        let config = BenchConfig {
            seeds: 4,
            ..BenchConfig::default()
        };
        let all = crate::stratus::builtin_scenarios().unwrap();
        let a = run_bench(&config, all).await.unwrap();
        let b = run_bench(&config, all).await.unwrap();
        assert_eq!(a, b);
        let tnr = &a.modes[0];
        assert_eq!(tnr.mode, Mode::Tnr);
        assert_eq!(tnr.visible_crashes, 0);
        assert!(tnr.max_visible_mu_ratio <= 1.0);
        let json = serde_json::to_string(&a.summary()).unwrap();
        assert!(
            json.starts_with(r#"{"scenarios":13,"seeds":4,"modes":[{"mode":"tnr","success_rate":"#),
            "{json}"
        );
        assert!(json.contains(r#"{"mode":"retry_no_undo","success_rate":"#));
        assert!(json.contains(r#""visible_crashes":0,"max_visible_mu_ratio":"#));
        assert!(a.markdown().contains("| tnr |"));
        assert!(a.markdown().contains("not a measurement"));
    }

    #[test]
    fn draws_follow_the_odds() {
        let s = &crate::stratus::builtin_scenarios().unwrap()[0];
        let c = s.build().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut counts = [0usize; 3];
        for _ in 0..4000 {
            match draw(&mut rng, &Odds::default(), &c, s).0 {
                Choice::Right => counts[0] += 1,
                Choice::Harmless => counts[1] += 1,
                Choice::Harmful => counts[2] += 1,
            }
        }
        let f = |n: usize| n as f64 / 4000.0;
        assert!((f(counts[0]) - 0.35).abs() < 0.03, "{counts:?}");
        assert!((f(counts[1]) - 0.45).abs() < 0.03, "{counts:?}");
        assert!((f(counts[2]) - 0.20).abs() < 0.03, "{counts:?}");
    }
}
