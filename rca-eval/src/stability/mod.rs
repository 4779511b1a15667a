//! The stability benchmark (the shape of RCAgent's Table 4).
//!
//! Simulated incidents with a known root cause ([`sim`]) are investigated by a scripted,
//! deterministic investigation policy ([`policy`]) through the RCAgent controller; a chaos
//! wrapper ([`chaos`]) corrupts each policy turn with probability `P`, split evenly over broken
//! JSON (half repairable locally, half cut inside a key so that only regeneration recovers
//! it), an unknown tool, a repeated call and a premature finalize.
//!
//! Over seeded episodes it reports, for each controller configuration, the pass rate (the run
//! finalized within 15 steps with a schema-valid report naming the true root component and
//! fault) and the invalid-action rate (invalid actions over all actions). An action is invalid
//! when the controller recorded an error for it, when it repeats an earlier successful call
//! with the same arguments, or when it is a finalize that names the wrong root cause. Episode
//! `i` uses seed `seed + i` for both the incident and the chaos in every configuration, so
//! configurations are compared on the same corruptions.

pub mod chaos;
pub mod policy;
pub mod shared;
pub mod sim;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rca_agents::react::{
    ActionMode, Cancellation, ErrorRules, ReactAgent, ReactConfig, ReactRun, Violation,
};
use rca_core::Usage;
use rca_core::llm::ChatModel;
use rca_core::trajectory::Outcome;
use rca_llm::json::JsonRegen;
use serde::{Deserialize, Serialize};

use chaos::ChaosModel;
use policy::InvestigationPolicy;
use shared::SharedAnswers;
use sim::SimIncident;

/// The configurations, in report order.
pub const CONFIGS: [&str; 5] = [
    "all",
    "no_json_repair",
    "no_regen",
    "no_error_rules",
    "none",
];

/// Hops from the alerting entry down to the faulty component in every simulated incident
/// (the policy then needs 8 steps: alerts, four metric reads, logs, the log expert, finalize).
pub const DEPTH: usize = 3;

/// Characters of an observation shown before its snapshot key.
pub const HEAD_CHARS: usize = 1000;

/// Task requirements given to the controller in the benchmark.
const TASK: &str = "Diagnose the incident in the simulated service graph. A diagnosis names the \
    faulty component and its fault, and rests on at least two pieces of evidence.";

/// Benchmark settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StabilitySettings {
    /// Episodes per configuration.
    pub episodes: usize,
    /// Probability that a turn is corrupted (the chaos mode; ignored with a real model).
    pub corruption: f64,
    /// Episode `i` uses seed `seed + i`.
    pub seed: u64,
}

/// Who writes the controller's turns.
#[derive(Clone)]
pub enum TurnSource {
    /// The scripted investigation policy, each turn corrupted with probability `corruption`
    /// (the fast offline check of the mechanism).
    Chaos {
        /// The corruption probability.
        corruption: f64,
    },
    /// A real model: its own turns, and its own regenerations.
    Model {
        /// The model.
        model: Arc<dyn ChatModel>,
        /// Budgets of each episode.
        budgets: EpisodeBudgets,
        /// How the controller asks for actions.
        action_mode: ActionMode,
    },
}

impl std::fmt::Debug for TurnSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnSource::Chaos { corruption } => write!(f, "Chaos({corruption})"),
            TurnSource::Model {
                model,
                budgets,
                action_mode,
            } => write!(
                f,
                "Model({}, {budgets:?}, {action_mode:?})",
                model.model_id()
            ),
        }
    }
}

/// Budgets of an episode with a real model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpisodeBudgets {
    /// Steps before the episode stops (a pass needs [`DEPTH`] + 5).
    pub max_steps: usize,
    /// Token limit of each model turn (and of each regeneration call).
    pub max_turn_tokens: u32,
    /// Wall time of an episode.
    pub wall_time: Duration,
}

impl Default for EpisodeBudgets {
    fn default() -> Self {
        EpisodeBudgets {
            max_steps: 15,
            max_turn_tokens: 128,
            wall_time: Duration::from_secs(600),
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    /// The configuration.
    pub config: String,
    /// Passed episodes over all episodes.
    pub pass_rate: f64,
    /// Invalid actions over all actions, after stabilising (see [`invalid_actions`]).
    pub invalid_rate: f64,
    /// Turns that were not a valid action as the model wrote them (they needed repair or
    /// regeneration, or were invalid after it) over all turns: the same count in every
    /// configuration.
    pub turn_invalid_rate: f64,
    /// Turns (steps) in all episodes.
    pub turns: usize,
    /// Turns repaired locally.
    pub repaired: usize,
    /// Turns sent to regeneration.
    pub regenerated: usize,
    /// Turns whose regeneration gave a readable turn.
    pub regen_recovered: usize,
    /// Turns an advisory error rule caught (repeated call, trivial expert input, premature
    /// finalize).
    pub rule_caught: usize,
    /// Episodes that ended in a model or store failure.
    pub failed: usize,
    /// Prompt tokens of all calls (turns and regenerations).
    pub prompt_tokens: u64,
    /// Completion tokens of all calls.
    pub completion_tokens: u64,
    /// Whether any token count was estimated rather than reported by the server.
    pub tokens_estimated: bool,
    /// Mean wall time of an episode in seconds.
    pub seconds_per_episode: f64,
}

/// The benchmark result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StabilityReport {
    /// Who wrote the turns: `chaos` or the model's name.
    pub source: String,
    /// Episodes per configuration.
    pub episodes: usize,
    /// The corruption probability (chaos mode only).
    pub corruption: Option<f64>,
    /// Per-episode budgets (real model only).
    pub budgets: Option<EpisodeBudgets>,
    /// One row per configuration, in the order asked.
    pub rows: Vec<StabilityRow>,
    /// Requests answered from the model's earlier answer to the same greedy request within
    /// the episode (real model only).
    #[serde(default)]
    pub shared_answers: Option<u64>,
}

/// Why the benchmark could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StabilityError {
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    InvalidSetting(String),
    /// A configuration name is not one of [`CONFIGS`].
    #[error("unknown configuration `{0}`")]
    UnknownConfig(String),
    /// The simulated tools could not be registered.
    #[error("simulation set-up failed: {0}")]
    Setup(String),
}

/// The controller configuration of a named row.
pub fn react_config(name: &str) -> Result<ReactConfig, StabilityError> {
    let rules = ErrorRules {
        expert_tools: vec!["analyze_logs".into()],
        min_expert_input_chars: 64,
        min_observations: 1,
        min_evidence: 2,
        ..ErrorRules::default()
    };
    let base = ReactConfig {
        max_steps: 15,
        obsk_head_chars: Some(HEAD_CHARS),
        regen: Some(JsonRegen::default()),
        rules,
        ..ReactConfig::default()
    };
    let (repair, regen, rules_on) = match name {
        "all" => (true, true, true),
        "no_json_repair" => (false, true, true),
        "no_regen" => (true, false, true),
        "no_error_rules" => (true, true, false),
        "none" => (false, false, false),
        other => return Err(StabilityError::UnknownConfig(other.to_string())),
    };
    let mut c = base;
    c.json_repair = repair;
    c.regen = regen.then(|| JsonRegen {
        lenient: repair,
        ..JsonRegen::default()
    });
    c.rules.enabled = rules_on;
    c.sanitize_observations = repair || regen || rules_on;
    Ok(c)
}

/// The controller configuration of a named row for a real model within `budgets`: the turn
/// and regeneration token limits, the step and wall-time budgets, and the episode's seed.
pub fn model_config(
    name: &str,
    budgets: &EpisodeBudgets,
    action_mode: ActionMode,
    seed: u64,
) -> Result<ReactConfig, StabilityError> {
    let mut c = react_config(name)?;
    c.action_mode = action_mode;
    c.max_steps = budgets.max_steps;
    c.max_turn_tokens = Some(budgets.max_turn_tokens);
    c.max_wall_time = Some(budgets.wall_time);
    c.seed = Some(seed);
    if let Some(regen) = &mut c.regen {
        regen.max_tokens = Some(budgets.max_turn_tokens.saturating_mul(2));
    }
    Ok(c)
}

/// The outcome of one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Whether it passed.
    pub passed: bool,
    /// Invalid actions (after stabilising).
    pub invalid: usize,
    /// Turns that were not a valid action as written.
    pub invalid_turns: usize,
    /// All actions (steps).
    pub actions: usize,
    /// Wall time in seconds.
    pub seconds: f64,
    /// The run.
    pub run: ReactRun,
}

/// Runs one chaos episode of configuration `config`.
pub async fn run_episode(
    config: &ReactConfig,
    corruption: f64,
    seed: u64,
) -> Result<Episode, StabilityError> {
    let model = Arc::new(ChaosModel::new(
        Arc::new(InvestigationPolicy),
        corruption,
        seed,
    ));
    episode(config, model, seed).await
}

/// Runs configuration `config` on simulated incident `seed` with `model` writing the turns.
pub async fn episode(
    config: &ReactConfig,
    model: Arc<dyn ChatModel>,
    seed: u64,
) -> Result<Episode, StabilityError> {
    let sim = Arc::new(SimIncident::generate(seed, DEPTH));
    let tools = sim
        .tools()
        .map_err(|e| StabilityError::Setup(e.to_string()))?;
    let agent = ReactAgent::new(model, tools, TASK, config.clone());
    let started = Instant::now();
    let run = agent.run(&sim.incident(), &Cancellation::new()).await;
    let seconds = started.elapsed().as_secs_f64();
    let passed = run
        .report
        .as_ref()
        .is_some_and(|r| sim.is_correct(r) && run.trajectory.steps.len() <= 15);
    let invalid = invalid_actions(&run, &sim);
    let invalid_turns = invalid_turns(&run, &sim);
    Ok(Episode {
        passed,
        invalid,
        invalid_turns,
        actions: run.trajectory.steps.len(),
        seconds,
        run,
    })
}

/// The steps of a run that were invalid after stabilising: recorded errors, repeats of an
/// earlier successful call, and a finalize naming the wrong root cause.
fn invalid_steps(run: &ReactRun, sim: &SimIncident) -> Vec<bool> {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    run.trajectory
        .steps
        .iter()
        .map(|step| {
            if step.error.is_some() {
                return true;
            }
            let Some(action) = &step.action else {
                return true;
            };
            if action.name == "finalize" {
                return !run.report.as_ref().is_some_and(|r| sim.is_correct(r));
            }
            !seen.insert((action.name.clone(), action.args.to_string()))
        })
        .collect()
}

/// Invalid actions of a run: recorded errors, repeats of an earlier successful call, and a
/// finalize naming the wrong root cause.
pub fn invalid_actions(run: &ReactRun, sim: &SimIncident) -> usize {
    invalid_steps(run, sim).into_iter().filter(|b| *b).count()
}

/// Turns that were not a valid action as the model wrote them: those invalid after
/// stabilising, and those that became valid only by local repair or regeneration.
pub fn invalid_turns(run: &ReactRun, sim: &SimIncident) -> usize {
    invalid_steps(run, sim)
        .into_iter()
        .zip(&run.trajectory.steps)
        .filter(|(invalid, step)| *invalid || step.repairs > 0 || step.regenerations > 0)
        .count()
}

/// Sums episodes of one configuration into a row.
#[derive(Debug, Default)]
struct RowTotals {
    episodes: usize,
    passed: usize,
    invalid: usize,
    invalid_turns: usize,
    actions: usize,
    repaired: usize,
    regenerated: usize,
    regen_recovered: usize,
    rule_caught: usize,
    failed: usize,
    usage: Usage,
    seconds: f64,
}

impl RowTotals {
    fn add(&mut self, ep: &Episode) {
        self.episodes += 1;
        self.passed += usize::from(ep.passed);
        self.invalid += ep.invalid;
        self.invalid_turns += ep.invalid_turns;
        self.actions += ep.actions;
        self.seconds += ep.seconds;
        let steps = &ep.run.trajectory.steps;
        self.repaired += steps.iter().filter(|s| s.repairs > 0).count();
        let invalid_turn_steps: BTreeSet<usize> = ep
            .run
            .violations
            .iter()
            .filter(|v| matches!(v.violation, Violation::InvalidTurn { .. }))
            .map(|v| v.step)
            .collect();
        for s in steps.iter().filter(|s| s.regenerations > 0) {
            self.regenerated += 1;
            self.regen_recovered += usize::from(!invalid_turn_steps.contains(&s.index));
        }
        self.rule_caught += ep
            .run
            .violations
            .iter()
            .filter(|v| v.violation.is_advisory())
            .count();
        self.failed += usize::from(matches!(ep.run.trajectory.outcome, Outcome::Failed(_)));
        self.usage.add(&ep.run.trajectory.usage);
    }

    fn row(&self, config: &str) -> StabilityRow {
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        StabilityRow {
            config: config.to_string(),
            pass_rate: ratio(self.passed, self.episodes),
            invalid_rate: ratio(self.invalid, self.actions),
            turn_invalid_rate: ratio(self.invalid_turns, self.actions),
            turns: self.actions,
            repaired: self.repaired,
            regenerated: self.regenerated,
            regen_recovered: self.regen_recovered,
            rule_caught: self.rule_caught,
            failed: self.failed,
            prompt_tokens: self.usage.prompt_tokens,
            completion_tokens: self.usage.completion_tokens,
            tokens_estimated: self.usage.estimated,
            seconds_per_episode: if self.episodes == 0 {
                0.0
            } else {
                self.seconds / self.episodes as f64
            },
        }
    }
}

/// Prompt tokens of uncorrupted runs with and without observation snapshot keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObskComparison {
    /// Incidents measured.
    pub incidents: usize,
    /// Prompt tokens of all runs with OBSK at [`HEAD_CHARS`].
    pub with_snapshots: u64,
    /// Prompt tokens of all runs with every observation in full.
    pub without_snapshots: u64,
    /// Runs that passed with OBSK.
    pub passed_with: usize,
    /// Runs that passed without OBSK.
    pub passed_without: usize,
}

/// Runs the policy without corruption on `incidents` simulated incidents (seeds `seed + i`),
/// once with snapshot keys and once with full observations, and sums the prompt tokens the
/// controller sent (estimated by `rca_core::llm::estimate_tokens`).
pub async fn obsk_comparison(
    incidents: usize,
    seed: u64,
) -> Result<ObskComparison, StabilityError> {
    let with_cfg = react_config("all")?;
    let without_cfg = ReactConfig {
        obsk_head_chars: None,
        ..with_cfg.clone()
    };
    let mut out = ObskComparison {
        incidents,
        with_snapshots: 0,
        without_snapshots: 0,
        passed_with: 0,
        passed_without: 0,
    };
    for i in 0..incidents {
        let s = seed.wrapping_add(i as u64);
        let a = run_episode(&with_cfg, 0.0, s).await?;
        let b = run_episode(&without_cfg, 0.0, s).await?;
        out.with_snapshots += a.run.trajectory.usage.prompt_tokens;
        out.without_snapshots += b.run.trajectory.usage.prompt_tokens;
        out.passed_with += usize::from(a.passed);
        out.passed_without += usize::from(b.passed);
    }
    Ok(out)
}

impl ObskComparison {
    /// A Markdown paragraph.
    pub fn markdown(&self) -> String {
        format!(
            "Observation snapshot keys on the same simulated incidents without corruption \
             ({} incidents, head {} characters): {} prompt tokens with OBSK, {} with full \
             observations; {} and {} runs passed.\n",
            self.incidents,
            HEAD_CHARS,
            self.with_snapshots,
            self.without_snapshots,
            self.passed_with,
            self.passed_without
        )
    }
}

/// The name of an action mode as the CLI spells it.
pub fn mode_name(mode: ActionMode) -> &'static str {
    match mode {
        ActionMode::Auto => "auto",
        ActionMode::JsonText => "json_text",
        ActionMode::NativeTools => "native_tools",
    }
}

/// Runs every configuration in chaos mode.
pub async fn run_stability(settings: StabilitySettings) -> Result<StabilityReport, StabilityError> {
    let source = TurnSource::Chaos {
        corruption: settings.corruption,
    };
    run_stability_with(
        &source,
        settings.episodes,
        settings.seed,
        &CONFIGS,
        |_, _, _| {},
    )
    .await
}

/// Runs the named configurations with turns from `source`, episode `i` on simulated incident
/// `seed + i` in every configuration; `progress` hears of each episode as it ends
/// (configuration, episode index, the episode).
pub async fn run_stability_with(
    source: &TurnSource,
    episodes: usize,
    seed: u64,
    configs: &[&str],
    mut progress: impl FnMut(&str, usize, &Episode),
) -> Result<StabilityReport, StabilityError> {
    if episodes == 0 {
        return Err(StabilityError::InvalidSetting(
            "episodes must be at least 1".into(),
        ));
    }
    if configs.is_empty() {
        return Err(StabilityError::InvalidSetting(
            "at least one configuration is needed".into(),
        ));
    }
    match source {
        TurnSource::Chaos { corruption } if !(0.0..=1.0).contains(corruption) => {
            return Err(StabilityError::InvalidSetting(
                "corruption must be a probability between 0 and 1".into(),
            ));
        }
        TurnSource::Model { budgets, .. }
            if budgets.max_steps == 0 || budgets.max_turn_tokens == 0 =>
        {
            return Err(StabilityError::InvalidSetting(
                "the step and turn-token budgets must be at least 1".into(),
            ));
        }
        _ => {}
    }
    for &name in configs {
        react_config(name)?;
    }
    // Episode-major: the configurations of one episode run one after the other, so a real
    // model's greedy answers are shared between them and forgotten after the episode.
    let shared = match source {
        TurnSource::Model { model, .. } => Some(Arc::new(SharedAnswers::new(Arc::clone(model)))),
        TurnSource::Chaos { .. } => None,
    };
    let mut totals: Vec<RowTotals> = configs.iter().map(|_| RowTotals::default()).collect();
    for i in 0..episodes {
        let s = seed.wrapping_add(i as u64);
        if let Some(shared) = &shared {
            shared.clear();
        }
        for (&name, total) in configs.iter().zip(totals.iter_mut()) {
            let ep = match (source, &shared) {
                (
                    TurnSource::Model {
                        budgets,
                        action_mode,
                        ..
                    },
                    Some(shared),
                ) => {
                    let config = model_config(name, budgets, *action_mode, s)?;
                    let model: Arc<dyn ChatModel> = Arc::clone(shared) as Arc<dyn ChatModel>;
                    episode(&config, model, s).await?
                }
                (TurnSource::Chaos { corruption }, _) => {
                    run_episode(&react_config(name)?, *corruption, s).await?
                }
                (TurnSource::Model { .. }, None) => {
                    return Err(StabilityError::Setup("no model".into()));
                }
            };
            progress(name, i, &ep);
            total.add(&ep);
        }
    }
    let rows = configs
        .iter()
        .zip(&totals)
        .map(|(name, t)| t.row(name))
        .collect();
    let shared_answers = shared.as_ref().map(|s| s.hits());
    let (label, corruption, budgets) = match source {
        TurnSource::Chaos { corruption } => ("chaos".to_string(), Some(*corruption), None),
        TurnSource::Model {
            model,
            budgets,
            action_mode,
        } => (
            format!("{} ({})", model.model_id(), mode_name(*action_mode)),
            None,
            Some(*budgets),
        ),
    };
    Ok(StabilityReport {
        source: label,
        episodes,
        corruption,
        budgets,
        rows,
        shared_answers,
    })
}

impl StabilityReport {
    /// The report as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The Markdown table for docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let mut out = match (self.corruption, &self.budgets) {
            (Some(p), _) => format!(
                "Chaos mode: a scripted deterministic investigation policy writes the turns and \
                 each is corrupted with probability {p} (broken JSON, unknown tool, repeated call, \
                 premature finalize, evenly); regeneration is answered by a copyist that sees only \
                 the broken text. {} seeded episodes per configuration on simulated incidents with \
                 a known root cause {DEPTH} hops below the alerting component. This demonstrates \
                 the mechanism of each stabiliser: its figures follow from the corruption mix, and \
                 it measures nothing about a model. Baseline: the `none` row (no stabiliser).\n\n",
                self.episodes
            ),
            (None, Some(b)) => format!(
                "Demonstrates that the stabilisers run on a real model's turns: the counts \
                 are measured, a pass rate of a base model is not the point. Baseline: the \
                 `none` row (no stabiliser). \
                 Real turns: `{}` writes every turn and every regeneration; {} episodes per \
                 configuration (episode i on simulated incident i, seeded), at most {} steps, {} \
                 tokens per turn, {} s per episode; temperature 0. Token counts are the server's. \
                 The configurations of an episode share the model's answer to a request they \
                 send alike ({} requests answered so), so prompt and completion tokens count \
                 what each configuration asked for, and s / episode is the wall time with that \
                 sharing.\n\n",
                self.source,
                self.episodes,
                b.max_steps,
                b.max_turn_tokens,
                b.wall_time.as_secs(),
                self.shared_answers.unwrap_or(0)
            ),
            (None, None) => String::new(),
        };
        out.push_str(
            "| configuration | pass rate | invalid-action rate | invalid turns as written | \
             turns | repaired | regenerated (recovered) | rule-caught | failed | prompt tokens | \
             completion tokens | s / episode |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {} ({}) | {} | {} | {} | {} | {:.1} |\n",
                r.config,
                r.pass_rate,
                r.invalid_rate,
                r.turn_invalid_rate,
                r.turns,
                r.repaired,
                r.regenerated,
                r.regen_recovered,
                r.rule_caught,
                r.failed,
                r.prompt_tokens,
                r.completion_tokens,
                r.seconds_per_episode
            ));
        }
        if self.rows.iter().any(|r| r.tokens_estimated) {
            out.push_str("\nToken counts are estimates (the turns' writer reports none).\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_policy_solves_every_incident_without_chaos() {
        let config = react_config("all").unwrap();
        for seed in 0..20 {
            let ep = run_episode(&config, 0.0, seed).await.unwrap();
            assert!(ep.passed, "seed {seed}: {:#?}", ep.run.trajectory);
            assert_eq!(ep.invalid, 0);
            assert_eq!(ep.actions, DEPTH + 5);
            // The log expert got the full logs through the snapshot key.
            let logs_step = &ep.run.trajectory.steps[DEPTH + 2];
            assert!(
                logs_step
                    .observation
                    .as_ref()
                    .unwrap()
                    .snapshot_key
                    .is_some()
            );
        }
    }

    #[tokio::test]
    async fn without_stabilisation_a_premature_finalize_fails_the_episode() {
        // Find a seed whose chaos corrupts the first turn into a premature finalize.
        let none = react_config("none").unwrap();
        let all = react_config("all").unwrap();
        let mut checked = 0;
        for seed in 0..400 {
            let ep = run_episode(&none, 1.0, seed).await.unwrap();
            let first = &ep.run.trajectory.steps[0];
            if first.action.as_ref().is_some_and(|a| a.name == "finalize") {
                assert!(!ep.passed);
                let guarded = run_episode(&all, 1.0, seed).await.unwrap();
                assert!(guarded.run.trajectory.steps[0].error.is_some());
                checked += 1;
            }
        }
        assert!(checked > 0);
    }

    #[tokio::test]
    async fn snapshot_keys_save_prompt_tokens_on_simulated_incidents() {
        let c = obsk_comparison(5, 11).await.unwrap();
        assert_eq!((c.passed_with, c.passed_without), (5, 5));
        assert!(c.with_snapshots < c.without_snapshots, "{c:?}");
        assert!(c.markdown().contains("5 incidents"));
    }

    #[tokio::test]
    async fn report_is_deterministic_and_formats() {
        let s = StabilitySettings {
            episodes: 30,
            corruption: 0.3,
            seed: 1,
        };
        let untimed = |mut r: StabilityReport| {
            for row in &mut r.rows {
                row.seconds_per_episode = 0.0;
            }
            r
        };
        let a = untimed(run_stability(s).await.unwrap());
        let b = untimed(run_stability(s).await.unwrap());
        assert_eq!(a, b);
        assert_eq!(a.rows.len(), 5);
        let line = a.to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["episodes"], 30);
        assert_eq!(v["source"], "chaos");
        assert_eq!(v["rows"][0]["config"], "all");
        assert!(a.markdown().contains("| none |"));
        // Every turn counted invalid after stabilising was invalid as written too; repairs
        // make the written count higher where repair is on.
        for r in &a.rows {
            assert!(r.turn_invalid_rate >= r.invalid_rate, "{r:?}");
            assert!(r.regen_recovered <= r.regenerated);
        }
        let all = &a.rows[0];
        assert!(all.repaired > 0 && all.rule_caught > 0, "{all:?}");
        assert_eq!(a.rows[4].rule_caught, 0, "no rules in `none`");
        assert!(
            run_stability(StabilitySettings { episodes: 0, ..s })
                .await
                .is_err()
        );
        assert!(react_config("bogus").is_err());
    }
}
