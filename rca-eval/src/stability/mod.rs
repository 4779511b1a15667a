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
pub mod sim;

use std::collections::BTreeSet;
use std::sync::Arc;

use rca_agents::react::{Cancellation, ErrorRules, ReactAgent, ReactConfig, ReactRun};
use rca_llm::json::JsonRegen;
use serde::{Deserialize, Serialize};

use chaos::ChaosModel;
use policy::InvestigationPolicy;
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
    /// Probability that a turn is corrupted.
    pub corruption: f64,
    /// Episode `i` uses seed `seed + i`.
    pub seed: u64,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    /// The configuration.
    pub config: String,
    /// Passed episodes over all episodes.
    pub pass_rate: f64,
    /// Invalid actions over all actions.
    pub invalid_rate: f64,
}

/// The benchmark result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StabilityReport {
    /// Episodes per configuration.
    pub episodes: usize,
    /// The corruption probability.
    pub corruption: f64,
    /// One row per configuration, in [`CONFIGS`] order.
    pub rows: Vec<StabilityRow>,
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

/// The outcome of one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Whether it passed.
    pub passed: bool,
    /// Invalid actions.
    pub invalid: usize,
    /// All actions (steps).
    pub actions: usize,
    /// The run.
    pub run: ReactRun,
}

/// Runs one episode of configuration `config`.
pub async fn run_episode(
    config: &ReactConfig,
    corruption: f64,
    seed: u64,
) -> Result<Episode, StabilityError> {
    let sim = Arc::new(SimIncident::generate(seed, DEPTH));
    let tools = sim
        .tools()
        .map_err(|e| StabilityError::Setup(e.to_string()))?;
    let model = Arc::new(ChaosModel::new(
        Arc::new(InvestigationPolicy),
        corruption,
        seed,
    ));
    let agent = ReactAgent::new(model, tools, TASK, config.clone());
    let run = agent.run(&sim.incident(), &Cancellation::new()).await;
    let passed = run
        .report
        .as_ref()
        .is_some_and(|r| sim.is_correct(r) && run.trajectory.steps.len() <= 15);
    let invalid = invalid_actions(&run, &sim);
    Ok(Episode {
        passed,
        invalid,
        actions: run.trajectory.steps.len(),
        run,
    })
}

/// Invalid actions of a run: recorded errors, repeats of an earlier successful call, and a
/// finalize naming the wrong root cause.
pub fn invalid_actions(run: &ReactRun, sim: &SimIncident) -> usize {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut invalid = 0;
    for step in &run.trajectory.steps {
        if step.error.is_some() {
            invalid += 1;
            continue;
        }
        let Some(action) = &step.action else {
            invalid += 1;
            continue;
        };
        if action.name == "finalize" {
            if !run.report.as_ref().is_some_and(|r| sim.is_correct(r)) {
                invalid += 1;
            }
            continue;
        }
        if !seen.insert((action.name.clone(), action.args.to_string())) {
            invalid += 1;
        }
    }
    invalid
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

/// Runs every configuration.
pub async fn run_stability(settings: StabilitySettings) -> Result<StabilityReport, StabilityError> {
    if settings.episodes == 0 {
        return Err(StabilityError::InvalidSetting(
            "episodes must be at least 1".into(),
        ));
    }
    if !(0.0..=1.0).contains(&settings.corruption) {
        return Err(StabilityError::InvalidSetting(
            "corruption must be a probability between 0 and 1".into(),
        ));
    }
    let mut rows = Vec::new();
    for name in CONFIGS {
        let config = react_config(name)?;
        let (mut passed, mut invalid, mut actions) = (0usize, 0usize, 0usize);
        for i in 0..settings.episodes {
            let ep = run_episode(
                &config,
                settings.corruption,
                settings.seed.wrapping_add(i as u64),
            )
            .await?;
            passed += usize::from(ep.passed);
            invalid += ep.invalid;
            actions += ep.actions;
        }
        rows.push(StabilityRow {
            config: name.to_string(),
            pass_rate: passed as f64 / settings.episodes as f64,
            invalid_rate: if actions == 0 {
                0.0
            } else {
                invalid as f64 / actions as f64
            },
        });
    }
    Ok(StabilityReport {
        episodes: settings.episodes,
        corruption: settings.corruption,
        rows,
    })
}

impl StabilityReport {
    /// `{"episodes": N, "corruption": P, "rows": [{"config": "all", "pass_rate": x,
    /// "invalid_rate": y}, ...]}` on one line.
    pub fn to_json_line(&self) -> String {
        let num = |x: f64| {
            serde_json::Number::from_f64(x)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "null".into())
        };
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"config\": {}, \"pass_rate\": {}, \"invalid_rate\": {}}}",
                    serde_json::Value::String(r.config.clone()),
                    num(r.pass_rate),
                    num(r.invalid_rate)
                )
            })
            .collect();
        format!(
            "{{\"episodes\": {}, \"corruption\": {}, \"rows\": [{}]}}",
            self.episodes,
            num(self.corruption),
            rows.join(", ")
        )
    }

    /// The Markdown table for docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "Stability of the RCAgent controller (shape of RCAgent Table 4): {} seeded episodes \
             per configuration, each model turn corrupted with probability {} (broken JSON, \
             unknown tool, repeated call, premature finalize, evenly). Simulated incidents with \
             a known root cause {} hops below the alerting component; a scripted deterministic \
             investigation policy plays the model.\n\n\
             | configuration | pass rate | invalid-action rate |\n|---|---|---|\n",
            self.episodes, self.corruption, DEPTH
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {:.4} | {:.4} |\n",
                r.config, r.pass_rate, r.invalid_rate
            ));
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
        let a = run_stability(s).await.unwrap();
        let b = run_stability(s).await.unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rows.len(), 5);
        let line = a.to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["episodes"], 30);
        assert_eq!(v["rows"][0]["config"], "all");
        assert!(line.starts_with(
            "{\"episodes\": 30, \"corruption\": 0.3, \"rows\": [{\"config\": \"all\""
        ));
        assert!(a.markdown().contains("| none |"));
        assert!(
            run_stability(StabilitySettings { episodes: 0, ..s })
                .await
                .is_err()
        );
        assert!(react_config("bogus").is_err());
    }
}
