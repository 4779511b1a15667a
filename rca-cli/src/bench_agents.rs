//! `rca bench agents`: every agent end to end on a real model (or a recording of one), with
//! the table of `docs/benchmarks.md` (section `agents-real-model`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rca_core::llm::ChatModel;
use rca_eval::model_runs::{
    AGENTS, AgentRun, BundledData, RunBudgets, markdown_table, provenance_from_env, run_agent,
};
use rca_llm::{OpenAiClient, OpenAiConfig, RecordingModel, RedactingModel, Redactor, ReplayModel};

/// Arguments of `rca bench agents`.
#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// The OpenAI-compatible server (default: `RCA_LLM_BASE_URL`, which
    /// `scripts/services.sh` writes into `.services/env`).
    #[arg(long)]
    pub model_url: Option<String>,
    /// The model name (default: `RCA_LLM_MODEL`).
    #[arg(long)]
    pub model: Option<String>,
    /// Record each agent's calls into `DIR/<agent>.json` (with the model's provenance from
    /// `.services/env`).
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Replay the recordings in `DIR` instead of asking a server.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// Only these agents (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Steps per run.
    #[arg(long, default_value_t = RunBudgets::default().max_steps, value_parser = crate::numbers::at_least_one())]
    pub max_steps: usize,
    /// Completion tokens per model turn.
    #[arg(long, default_value_t = RunBudgets::default().max_turn_tokens)]
    pub max_turn_tokens: u32,
    /// Wall time of each agent's run, in seconds.
    #[arg(long, default_value_t = RunBudgets::default().wall_time.as_secs(), value_parser = crate::numbers::at_least_one_u64())]
    pub wall_seconds: u64,
    /// Print the runs as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the table into this Markdown file's `agents-real-model` section.
    #[arg(long)]
    pub write_docs: Option<PathBuf>,
}

/// The workspace root: the nearest ancestor of the current folder with the bundled incident.
pub(crate) fn workspace_root() -> anyhow::Result<PathBuf> {
    let here = std::env::current_dir()?;
    here.ancestors()
        .find(|d| d.join("examples/incidents").is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            anyhow::anyhow!("run this from the rca workspace (no examples/incidents here)")
        })
}

pub(crate) fn env_or(flag: &Option<String>, var: &str) -> anyhow::Result<String> {
    match flag {
        Some(v) => Ok(v.clone()),
        None => std::env::var(var).with_context(|| {
            format!(
                "pass --{} or set {var} (source .services/env)",
                if var.ends_with("URL") {
                    "model-url"
                } else {
                    "model"
                }
            )
        }),
    }
}

/// The client of the local model server named by `--model-url` / `--model` (or
/// `RCA_LLM_BASE_URL` / `RCA_LLM_MODEL`), with requests bounded by `request_timeout`.
pub(crate) fn live_client(
    model_url: &Option<String>,
    model: &Option<String>,
    request_timeout: Duration,
) -> anyhow::Result<OpenAiClient> {
    let url = env_or(model_url, "RCA_LLM_BASE_URL")?;
    let name = env_or(model, "RCA_LLM_MODEL")?;
    let config = OpenAiConfig::llama_cpp_python(url, name)
        .with_timeouts(Some(Duration::from_secs(5)), Some(request_timeout));
    Ok(OpenAiClient::new(config)?)
}

/// Runs `rca bench agents`.
pub async fn run(args: AgentsArgs) -> anyhow::Result<()> {
    let data = BundledData::new(workspace_root()?);
    let budgets = RunBudgets {
        max_steps: args.max_steps,
        max_turn_tokens: args.max_turn_tokens.max(16),
        wall_time: Duration::from_secs(args.wall_seconds),
        ..RunBudgets::default()
    };
    let agents: Vec<String> = if args.agents.is_empty() {
        AGENTS.iter().map(|a| a.to_string()).collect()
    } else {
        args.agents.clone()
    };
    let live = match &args.replay {
        Some(_) => None,
        None => Some(live_client(
            &args.model_url,
            &args.model,
            budgets.wall_time,
        )?),
    };
    let provenance = match (&args.record, &live) {
        (Some(_), Some(_)) => Some(provenance_from_env(&budgets).map_err(anyhow::Error::msg)?),
        _ => None,
    };
    let mut runs: Vec<AgentRun> = Vec::new();
    for agent in &agents {
        // Every prompt is redacted before it reaches the model or a cassette (as in
        // `rca diagnose`); a replay redacts the same way, so its requests match the recording.
        let redactor = Redactor::default();
        let model: Arc<dyn ChatModel> = match (&args.replay, &live, &args.record) {
            (Some(dir), _, _) => {
                let path = dir.join(format!("{agent}.json"));
                let replay = ReplayModel::open(&path)
                    .with_context(|| format!("cannot replay {}", path.display()))?;
                Arc::new(RedactingModel::new(replay, redactor))
            }
            (None, Some(client), Some(dir)) => {
                let mut rec =
                    RecordingModel::create(client.clone(), dir.join(format!("{agent}.json")));
                if let Some(p) = &provenance {
                    rec = rec.with_provenance(p.clone());
                }
                Arc::new(RedactingModel::new(rec, redactor))
            }
            (None, Some(client), None) => Arc::new(RedactingModel::new(client.clone(), redactor)),
            (None, None, _) => anyhow::bail!("no model: pass --model-url or --replay"),
        };
        eprintln!("running {agent} ...");
        let run = run_agent(agent, model, &data, &budgets)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("agent {agent}"))?;
        eprintln!(
            "  {}: {} ({} calls, {:.1} s)",
            run.agent, run.outcome, run.model_calls, run.seconds
        );
        runs.push(run);
    }
    let table = markdown_table(&runs);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
    } else {
        print!("{table}");
    }
    if let Some(path) = &args.write_docs {
        let source = match (&args.replay, &live) {
            (Some(dir), _) => format!("replayed from {}", dir.display()),
            _ => format!(
                "live: {}",
                runs.first().map(|r| r.model.as_str()).unwrap_or("-")
            ),
        };
        let body = format!(
            "Demonstrates that every agent runs end to end on a real model; it claims no \
             accuracy, so no trivial baseline applies: what can fail is an invariant (the last \
             column) and what is measured are the counts. \
             Every agent end to end on the local Gemma 3 270M base model (Q4_K_M) served by \
             llama-cpp-python on 2 cores ({source}). Budgets: {} steps, {} tokens a turn, {} s \
             a run; temperature 0, seed {}. The answers are not the point (a 270M base model \
             rarely follows instructions); the invariants and the counts are.\n\n{table}",
            budgets.max_steps,
            budgets.max_turn_tokens,
            budgets.wall_time.as_secs(),
            budgets.seed
        );
        rca_eval::docs::write_section(path, "agents-real-model", &command_line(&args), &body)?;
    }
    let broken: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            r.broken()
                .into_iter()
                .map(move |i| format!("{}: {} ({})", r.agent, i.name, i.detail))
        })
        .collect();
    anyhow::ensure!(
        broken.is_empty(),
        "invariants broken:\n{}",
        broken.join("\n")
    );
    Ok(())
}

fn command_line(args: &AgentsArgs) -> String {
    let mut out = String::from("rca bench agents");
    if let Some(dir) = &args.record {
        out.push_str(&format!(" --record {}", dir.display()));
    }
    if let Some(dir) = &args.replay {
        out.push_str(&format!(" --replay {}", dir.display()));
    }
    if let Some(p) = &args.write_docs {
        out.push_str(&format!(" --write-docs {}", p.display()));
    }
    out
}
