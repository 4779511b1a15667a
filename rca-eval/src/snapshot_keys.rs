//! Observation snapshot keys measured on the bundled real incidents with the real tools
//! (`rca bench obsk`).
//!
//! Each incident is investigated twice by the same driver: with OBSK (tool outputs kept in
//! full in the snapshot store, the prompt shown their head and a key) and with every output in
//! full in the prompt. The driver is the controller's deterministic policy, or a model:
//!
//! - with the policy, both runs take the same actions, so the two prompt-token sums compare
//!   the same investigation; the counts are the controller's estimates
//!   ([`rca_core::llm::estimate_tokens`]);
//! - with a model, the counts are the server's, each run takes its own actions, and the
//!   count of expert calls that were handed a snapshot key says whether the model uses them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rca_agents::react::{
    Cancellation, ErrorRules, PlannedInvestigation, ReactAgent, ReactConfig, ReactRun,
};
use rca_core::llm::ChatModel;
use rca_core::memory::is_snapshot_key;
use rca_core::trajectory::Outcome;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::tools::{FULL_OUTPUT_CHARS, IncidentTools};
use serde::{Deserialize, Serialize};

/// Characters of an observation shown before its key.
pub const HEAD_CHARS: usize = 1500;

/// The task requirements of these runs.
const TASK: &str = "Find the component whose fault caused the incident and what the fault is. \
    Hand long logs to the log expert by their snapshot key.";

/// One run of one incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObskRun {
    /// Steps taken.
    pub steps: usize,
    /// Prompt tokens of every call.
    pub prompt_tokens: u64,
    /// Whether the counts are estimates.
    pub estimated: bool,
    /// Expert calls.
    pub expert_calls: usize,
    /// Expert calls whose arguments held a snapshot key.
    pub expert_calls_with_key: usize,
    /// Characters of tool output the run produced in all.
    pub output_chars: usize,
    /// How it ended.
    pub outcome: String,
}

/// Both runs of one incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObskRow {
    /// The incident's folder name.
    pub incident: String,
    /// With snapshot keys.
    pub with_keys: ObskRun,
    /// With every observation in full.
    pub full: ObskRun,
}

impl ObskRow {
    /// Full-observation prompt tokens over OBSK prompt tokens.
    pub fn ratio(&self) -> f64 {
        self.full.prompt_tokens as f64 / self.with_keys.prompt_tokens.max(1) as f64
    }
}

/// Why the measurement could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ObskBenchError {
    /// An incident directory could not be loaded or its tools built.
    #[error("{path}: {message}")]
    Incident {
        /// The directory.
        path: String,
        /// What went wrong.
        message: String,
    },
}

fn summarize(run: &ReactRun, expert_tools: &[&str]) -> ObskRun {
    let steps = &run.trajectory.steps;
    let experts: Vec<_> = steps
        .iter()
        .filter_map(|s| s.action.as_ref())
        .filter(|a| expert_tools.contains(&a.name.as_str()))
        .collect();
    let with_key = experts
        .iter()
        .filter(|a| {
            let text = a.args.to_string();
            text.match_indices("obs-")
                .any(|(i, _)| text.get(i..i + 20).is_some_and(is_snapshot_key))
        })
        .count();
    ObskRun {
        steps: steps.len(),
        prompt_tokens: run.trajectory.usage.prompt_tokens,
        estimated: run.trajectory.usage.estimated,
        expert_calls: experts.len(),
        expert_calls_with_key: with_key,
        output_chars: steps
            .iter()
            .filter_map(|s| s.observation.as_ref())
            .map(|o| o.full_chars)
            .sum(),
        outcome: match &run.trajectory.outcome {
            Outcome::Failed(why) => format!("failed: {why}"),
            other => format!("{other:?}"),
        },
    }
}

/// Measures one incident: with `model`, or with the deterministic policy when `None`.
pub async fn measure_incident(
    dir: &Path,
    model: Option<Arc<dyn ChatModel>>,
    max_steps: usize,
    max_turn_tokens: u32,
    wall_time: Duration,
) -> Result<ObskRow, ObskBenchError> {
    let fail = |message: String| ObskBenchError::Incident {
        path: dir.display().to_string(),
        message,
    };
    let loaded = IncidentDir::open(dir).map_err(|e| fail(e.to_string()))?;
    let mut tools = IncidentTools::from_dir(loaded.clone()).map_err(|e| fail(e.to_string()))?;
    tools.output_chars = FULL_OUTPUT_CHARS;
    let driver: Arc<dyn ChatModel> = match &model {
        Some(m) => Arc::clone(m),
        None => {
            let names: Vec<String> = tools
                .registry(None)
                .await
                .map_err(|e| fail(e.to_string()))?
                .specs()
                .into_iter()
                .map(|s| s.name)
                .collect();
            Arc::new(
                PlannedInvestigation::from_deterministic_diagnosis(&loaded, &names)
                    .await
                    .map_err(|e| fail(e.to_string()))?,
            )
        }
    };
    let expert_tools = ["analyze_logs", "analyze_code"];
    let run_with = |head: Option<usize>| {
        let tools = &tools;
        let incident = &loaded.incident;
        let model = model.clone();
        let driver = Arc::clone(&driver);
        async move {
            let registry = tools.registry(model).await.map_err(|e| e.to_string())?;
            let config = ReactConfig {
                max_steps,
                max_wall_time: Some(wall_time),
                max_turn_tokens: Some(max_turn_tokens),
                seed: Some(0),
                obsk_head_chars: head,
                rules: ErrorRules {
                    expert_tools: expert_tools.iter().map(|s| s.to_string()).collect(),
                    ..ErrorRules::default()
                },
                ..ReactConfig::default()
            };
            let agent = ReactAgent::new(driver, registry, TASK, config);
            let run = agent.run(incident, &Cancellation::new()).await;
            Ok::<_, String>(summarize(&run, &expert_tools))
        }
    };
    let with_keys = run_with(Some(HEAD_CHARS)).await.map_err(fail)?;
    let full = run_with(None).await.map_err(fail)?;
    Ok(ObskRow {
        incident: dir
            .components()
            .rev()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .find(|c| c != "incident")
            .unwrap_or_default(),
        with_keys,
        full,
    })
}

/// The Markdown table of `rows`, with the total ratio.
pub fn markdown(rows: &[ObskRow], driver: &str) -> String {
    let mut out = format!(
        "Measures the prompt tokens snapshot keys save on real incidents and real tool \
         outputs (the driving policy is deterministic). Baseline: the same runs with full \
         observations (the `full` columns). \
         Observation snapshot keys on the bundled real incidents with the real tools (tool \
         outputs up to {FULL_OUTPUT_CHARS} characters, head {HEAD_CHARS} characters), driven by \
         `{driver}`.\n\n\
         | incident | steps (OBSK / full) | prompt tokens with OBSK | prompt tokens with full observations | ratio | expert calls given a key | tool output characters | outcome with OBSK / full |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    let (mut with, mut full) = (0u64, 0u64);
    for r in rows {
        with += r.with_keys.prompt_tokens;
        full += r.full.prompt_tokens;
        out.push_str(&format!(
            "| {} | {} / {} | {} | {} | {:.2} | {} of {} | {} | {} / {} |\n",
            r.incident,
            r.with_keys.steps,
            r.full.steps,
            r.with_keys.prompt_tokens,
            r.full.prompt_tokens,
            r.ratio(),
            r.with_keys.expert_calls_with_key,
            r.with_keys.expert_calls,
            r.with_keys.output_chars,
            r.with_keys.outcome,
            r.full.outcome
        ));
    }
    let estimated = rows
        .iter()
        .any(|r| r.with_keys.estimated || r.full.estimated);
    out.push_str(&format!(
        "\nIn all: {with} prompt tokens with OBSK, {full} with full observations, {:.2}x fewer \
         with OBSK. Token counts are {}.\n",
        full as f64 / with.max(1) as f64,
        if estimated {
            "the controller's estimates (about four bytes a token)"
        } else {
            "the server's"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn snapshot_keys_cut_the_prompt_of_a_real_incident() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dirs = crate::model_runs::BundledData::new(&root)
            .incident_dirs()
            .unwrap();
        assert!(dirs.len() >= 3, "{dirs:?}");
        let row = measure_incident(&dirs[0], None, 15, 256, Duration::from_secs(120))
            .await
            .unwrap();
        // The policy takes the same steps either way; outputs longer than the head cost less
        // with OBSK, and without OBSK no expert call can carry a key.
        assert_eq!(row.with_keys.steps, row.full.steps);
        assert_eq!(row.with_keys.outcome, "Finalized");
        assert_eq!(row.with_keys.output_chars, row.full.output_chars);
        assert!(row.with_keys.output_chars > HEAD_CHARS);
        assert_eq!(row.full.expert_calls_with_key, 0);
        assert!(row.ratio() > 1.0, "{row:?}");
        assert!(markdown(&[row], "policy").contains("| ratio |"));
    }
}
