//! `rca bench stability`: the RCAgent stability benchmark (shape of RCAgent Table 4).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use rca_agents::react::ActionMode;
use rca_core::llm::ChatModel;
use rca_eval::model_runs::{RunBudgets, provenance_from_env};
use rca_eval::stability::{
    CONFIGS, EpisodeBudgets, TurnSource, mode_name, obsk_comparison, run_stability_with,
};
use rca_llm::{RecordingModel, ReplayModel};

use crate::bench_agents::live_client;

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Controller stability under corrupted model turns (pass and invalid-action rates).
    Stability(StabilityArgs),
    /// Every agent end to end on a real model (or a recording of one): budgets, token
    /// counts, invalid turns and invariants.
    Agents(crate::bench_agents::AgentsArgs),
    /// Observation snapshot keys on the bundled real incidents with the real tools: prompt
    /// tokens with and without them, and expert calls handed a key.
    Obsk(ObskArgs),
    /// Text self-consistency on a real model: how often the aggregated answer differs from
    /// the single greedy answer, and what the samples cost.
    Sc(ScArgs),
    /// Diagnosis at volume: the bundled incident replicated to more traffic and a large
    /// synthetic incident, each in a process of its own: time, peak memory, records per
    /// second and the top three candidates.
    Scale(crate::bench_scale::ScaleArgs),
}

/// Arguments of `rca bench sc`.
#[derive(Debug, Args)]
pub struct ScArgs {
    /// The model server (`RCA_LLM_BASE_URL` when only `--model` is given).
    #[arg(long)]
    pub model_url: Option<String>,
    /// The model name on that server (`RCA_LLM_MODEL` when only `--model-url` is given).
    #[arg(long)]
    pub model: Option<String>,
    /// Questions (seeded simulated incidents).
    #[arg(long, default_value_t = rca_eval::sc_bench::ScSettings::default().questions)]
    pub questions: usize,
    /// Samples per question.
    #[arg(long, default_value_t = rca_eval::sc_bench::ScSettings::default().samples)]
    pub samples: usize,
    /// Completion tokens per answer.
    #[arg(long, default_value_t = rca_eval::sc_bench::ScSettings::default().max_tokens)]
    pub max_tokens: u32,
    /// Per-request timeout, in seconds.
    #[arg(long, default_value_t = 120)]
    pub request_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the table into this Markdown file's `self-consistency-real-model` section.
    #[arg(long)]
    pub write_docs: Option<PathBuf>,
}

async fn sc(args: ScArgs) -> anyhow::Result<()> {
    if args.questions == 0 || args.samples == 0 {
        anyhow::bail!("--questions and --samples must be at least 1");
    }
    let model: Arc<dyn ChatModel> = Arc::new(live_client(
        &args.model_url,
        &args.model,
        Duration::from_secs(args.request_seconds.max(1)),
    )?);
    let embedder = Arc::new(rca_llm::HashingEmbedder::new(
        rca_llm::HashingConfig::default(),
    ));
    let settings = rca_eval::sc_bench::ScSettings {
        questions: args.questions,
        samples: args.samples,
        max_tokens: args.max_tokens.max(8),
        ..rca_eval::sc_bench::ScSettings::default()
    };
    let report = rca_eval::sc_bench::run_sc(model, embedder, &settings)
        .await
        .map_err(anyhow::Error::msg)?;
    let table = report.markdown();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{table}");
    }
    if let Some(path) = &args.write_docs {
        let command = format!(
            "rca bench sc --model-url URL --model NAME --questions {} --samples {} --max-tokens {} --write-docs {}",
            args.questions,
            args.samples,
            settings.max_tokens,
            path.display()
        );
        rca_eval::docs::write_section(path, "self-consistency-real-model", &command, &table)?;
    }
    Ok(())
}

/// Arguments of `rca bench obsk`.
#[derive(Debug, Args)]
pub struct ObskArgs {
    /// Drive the controller with the model on this server (default: its deterministic
    /// policy).
    #[arg(long)]
    pub model_url: Option<String>,
    /// The model name on that server.
    #[arg(long)]
    pub model: Option<String>,
    /// Steps per run.
    #[arg(long, default_value_t = 15)]
    pub max_steps: usize,
    /// Completion tokens per model turn.
    #[arg(long, default_value_t = 128)]
    pub max_turn_tokens: u32,
    /// Wall time of each run, in seconds.
    #[arg(long, default_value_t = 600)]
    pub wall_seconds: u64,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the table into this Markdown file's `obsk-real-incidents` section (or
    /// `obsk-real-incidents-model` with a model).
    #[arg(long)]
    pub write_docs: Option<PathBuf>,
}

async fn obsk(args: ObskArgs) -> anyhow::Result<()> {
    let wall = Duration::from_secs(args.wall_seconds.max(1));
    let model: Option<Arc<dyn ChatModel>> = if args.model_url.is_some() || args.model.is_some() {
        Some(Arc::new(live_client(&args.model_url, &args.model, wall)?))
    } else {
        None
    };
    let data = rca_eval::model_runs::BundledData::new(crate::bench_agents::workspace_root()?);
    let mut rows = Vec::new();
    for dir in data.incident_dirs().map_err(anyhow::Error::msg)? {
        eprintln!("measuring {} ...", dir.display());
        let row = rca_eval::snapshot_keys::measure_incident(
            &dir,
            model.clone(),
            args.max_steps.max(1),
            args.max_turn_tokens.max(16),
            wall,
        )
        .await?;
        rows.push(row);
    }
    let driver = model
        .as_ref()
        .map(|m| m.model_id().to_string())
        .unwrap_or_else(|| "policy-planned-investigation".into());
    let table = rca_eval::snapshot_keys::markdown(&rows, &driver);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{table}");
    }
    if let Some(path) = &args.write_docs {
        let (section, mut command) = match &model {
            Some(_) => (
                "obsk-real-incidents-model",
                format!(
                    "rca bench obsk --model-url URL --model NAME --max-steps {} --max-turn-tokens {}",
                    args.max_steps, args.max_turn_tokens
                ),
            ),
            None => ("obsk-real-incidents", "rca bench obsk".to_string()),
        };
        command.push_str(&format!(" --write-docs {}", path.display()));
        rca_eval::docs::write_section(path, section, &command, &table)?;
    }
    Ok(())
}

/// Arguments of `rca bench stability`.
#[derive(Debug, Args)]
pub struct StabilityArgs {
    /// Seeded episodes per configuration (default: 1000 in chaos mode, 30 with a model).
    #[arg(long)]
    pub episodes: Option<usize>,
    /// Probability that a model turn is corrupted (chaos mode).
    #[arg(long, default_value_t = 0.3, value_parser = crate::numbers::probability)]
    pub corruption: f64,
    /// Episode i uses seed `seed + i`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run on real turns from this OpenAI-compatible server instead of the chaos mode
    /// (`RCA_LLM_BASE_URL` when only `--model` is given).
    #[arg(long)]
    pub model_url: Option<String>,
    /// The model name on that server (`RCA_LLM_MODEL` when only `--model-url` is given).
    #[arg(long)]
    pub model: Option<String>,
    /// Record the calls into `DIR/stability-<mode>.json`.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Replay the recordings in `DIR` instead of asking a server.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// Only these configurations (comma-separated; default: all five).
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Steps per episode with a model.
    #[arg(long, default_value_t = EpisodeBudgets::default().max_steps)]
    pub max_steps: usize,
    /// Completion tokens per model turn.
    #[arg(long, default_value_t = EpisodeBudgets::default().max_turn_tokens)]
    pub max_turn_tokens: u32,
    /// Wall time of each episode, in seconds.
    #[arg(long, default_value_t = EpisodeBudgets::default().wall_time.as_secs())]
    pub wall_seconds: u64,
    /// How the controller asks the model for actions: `json_text` (RCAgent's JSON in text)
    /// or `native_tools` (tool calls; a pick under a schema and a named tool choice on
    /// llama-cpp-python).
    #[arg(long, default_value = "json_text", value_parser = parse_mode)]
    pub action_mode: ActionMode,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the table into this Markdown file's `stability` section (chaos mode) or
    /// `stability-real-model-<mode>` section (real turns).
    #[arg(long)]
    pub write_docs: Option<PathBuf>,
}

fn parse_mode(s: &str) -> Result<ActionMode, String> {
    match s {
        "auto" => Ok(ActionMode::Auto),
        "json_text" => Ok(ActionMode::JsonText),
        "native_tools" => Ok(ActionMode::NativeTools),
        other => Err(format!(
            "unknown action mode `{other}` (auto, json_text, native_tools)"
        )),
    }
}

impl StabilityArgs {
    fn uses_model(&self) -> bool {
        self.model_url.is_some() || self.model.is_some() || self.replay.is_some()
    }
}

/// Runs a benchmark subcommand.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Stability(args) if args.uses_model() => stability_on_model(args).await,
        BenchCommand::Stability(args) => stability(args).await,
        BenchCommand::Agents(args) => crate::bench_agents::run(args).await,
        BenchCommand::Obsk(args) => obsk(args).await,
        BenchCommand::Sc(args) => sc(args).await,
        BenchCommand::Scale(args) => {
            tokio::task::spawn_blocking(move || crate::bench_scale::run(args))
                .await
                .map_err(|e| anyhow::anyhow!("the scale benchmark stopped: {e}"))?
        }
    }
}

fn configs(args: &StabilityArgs) -> Vec<&str> {
    if args.configs.is_empty() {
        CONFIGS.to_vec()
    } else {
        args.configs.iter().map(String::as_str).collect()
    }
}

async fn stability(args: StabilityArgs) -> anyhow::Result<()> {
    let episodes = args.episodes.unwrap_or(1000);
    let source = TurnSource::Chaos {
        corruption: args.corruption,
    };
    let report =
        run_stability_with(&source, episodes, args.seed, &configs(&args), |_, _, _| {}).await?;
    if args.json {
        println!("{}", report.to_json_line());
        if args.write_docs.is_none() {
            return Ok(());
        }
    }
    // Snapshot-key token savings on the same incidents (at most 200 of them).
    let obsk = obsk_comparison(episodes.min(200), args.seed).await?;
    let markdown = format!("{}\n{}", report.markdown(), obsk.markdown());
    if !args.json {
        print!("{markdown}");
    }
    if let Some(path) = args.write_docs {
        let mut command = format!(
            "rca bench stability --episodes {episodes} --corruption {}",
            args.corruption
        );
        if args.seed != 0 {
            command.push_str(&format!(" --seed {}", args.seed));
        }
        command.push_str(&format!(" --write-docs {}", path.display()));
        rca_eval::docs::write_section(&path, "stability", &command, &markdown)?;
    }
    Ok(())
}

/// The stability benchmark on real turns, with a live, recorded or replayed model.
async fn stability_on_model(args: StabilityArgs) -> anyhow::Result<()> {
    let episodes = args.episodes.unwrap_or(30);
    let budgets = EpisodeBudgets {
        max_steps: args.max_steps,
        max_turn_tokens: args.max_turn_tokens,
        wall_time: Duration::from_secs(args.wall_seconds.max(1)),
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
        (Some(_), Some(_)) => {
            let mut p = provenance_from_env(&RunBudgets::default()).map_err(anyhow::Error::msg)?;
            p.sampling = serde_json::json!({
                "temperature": 0.0,
                "seed": format!("episode seed {} + i", args.seed),
                "max_turn_tokens": budgets.max_turn_tokens,
                "max_steps": budgets.max_steps,
            });
            Some(p)
        }
        _ => None,
    };
    let cassette = format!("stability-{}.json", mode_name(args.action_mode));
    let model: Arc<dyn ChatModel> = match (&args.replay, &live, &args.record) {
        (Some(dir), _, _) => {
            let path = dir.join(&cassette);
            Arc::new(
                ReplayModel::open(&path)
                    .with_context(|| format!("cannot replay {}", path.display()))?,
            )
        }
        (None, Some(client), Some(dir)) => {
            let mut rec = RecordingModel::create(client.clone(), dir.join(&cassette));
            if let Some(p) = &provenance {
                rec = rec.with_provenance(p.clone());
            }
            Arc::new(rec)
        }
        (None, Some(client), None) => Arc::new(client.clone()),
        (None, None, _) => anyhow::bail!("no model: pass --model-url or --replay"),
    };
    let source = TurnSource::Model {
        model,
        budgets,
        action_mode: args.action_mode,
    };
    let report = run_stability_with(&source, episodes, args.seed, &configs(&args), |c, i, ep| {
        eprintln!(
            "{c} #{i}: {} steps, {} invalid turns as written, {}, {:.1} s",
            ep.actions,
            ep.invalid_turns,
            if ep.passed { "passed" } else { "failed" },
            ep.seconds
        );
    })
    .await?;
    if args.json {
        println!("{}", report.to_json_line());
    } else {
        print!("{}", report.markdown());
    }
    if let Some(path) = &args.write_docs {
        let mut command = format!(
            "rca bench stability --episodes {episodes} --max-steps {} --max-turn-tokens {} \
             --action-mode {}",
            budgets.max_steps,
            budgets.max_turn_tokens,
            mode_name(args.action_mode)
        );
        match (&args.replay, &args.record) {
            (Some(dir), _) => command.push_str(&format!(" --replay {}", dir.display())),
            (None, Some(dir)) => command.push_str(&format!(
                " --model-url URL --model NAME --record {}",
                dir.display()
            )),
            (None, None) => command.push_str(" --model-url URL --model NAME"),
        }
        if !args.configs.is_empty() {
            command.push_str(&format!(" --configs {}", args.configs.join(",")));
        }
        command.push_str(&format!(" --write-docs {}", path.display()));
        let section = format!("stability-real-model-{}", mode_name(args.action_mode));
        rca_eval::docs::write_section(path, &section, &command, &report.markdown())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(subcommand)]
        command: BenchCommand,
    }

    #[tokio::test]
    async fn parses_and_writes_the_docs_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmarks.md");
        let w = Wrapper::try_parse_from([
            "bench",
            "stability",
            "--episodes",
            "4",
            "--corruption",
            "0.5",
            "--json",
            "--write-docs",
            path.to_str().unwrap(),
        ])
        .unwrap();
        let BenchCommand::Stability(args) = &w.command else {
            panic!("not stability")
        };
        assert_eq!(
            (args.episodes, args.corruption, args.json),
            (Some(4), 0.5, true)
        );
        assert!(!args.uses_model());
        run(w.command).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("<!-- BEGIN stability -->"));
        assert!(text.contains("rca bench stability --episodes 4 --corruption 0.5"));
        assert!(text.contains("| no_regen |") && text.contains("prompt tokens with OBSK"));
        let defaults = Wrapper::try_parse_from(["bench", "stability"]).unwrap();
        let BenchCommand::Stability(d) = defaults.command else {
            panic!("not stability")
        };
        assert_eq!((d.episodes, d.corruption, d.json), (None, 0.3, false));
        let real = Wrapper::try_parse_from(["bench", "stability", "--model", "m"]).unwrap();
        let BenchCommand::Stability(r) = real.command else {
            panic!("not stability")
        };
        assert!(r.uses_model());
    }
}
