//! `rca react DIR`: the RCAgent controller on an incident directory, with the real
//! information-gathering tools and both experts; its deterministic policy plays the model when
//! none is configured.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use rca_agents::consistency::{Aggregation, SamplingConfig, SelfConsistency};
use rca_agents::orchestra::pipeline::service_graph;
use rca_agents::react::{
    ActionMode, Cancellation, ErrorRules, PlannedInvestigation, ReactAgent, ReactConfig,
    ReactEvent, RunObserver,
};
use rca_core::llm::ChatModel;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::tools::{FULL_OUTPUT_CHARS, IncidentTools};

use crate::diagnose::{Outputs, TRAJECTORY_FORMAT_VERSION, load_config, report_bundle};

/// Arguments of `rca react`.
#[derive(Debug, Args)]
pub struct ReactArgs {
    /// The incident directory (an `incident.json` manifest and telemetry files).
    pub dir: PathBuf,
    /// A configuration file: `roles.explorer` (or else `roles.controller`) names the model;
    /// `budgets` bound the run.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Where to save the trajectory (default: a new run in the runs store,
    /// `rca-runs/<incident id>/<run id>/trajectory.json`, named in
    /// `rca-runs/<incident id>/latest`).
    #[arg(long, value_name = "FILE")]
    pub trajectory: Option<PathBuf>,
    /// Steps before the run stops (default: the config's `budgets.max_steps`).
    #[arg(long)]
    pub max_steps: Option<usize>,
    /// Completion tokens per model turn.
    #[arg(long, default_value_t = 256)]
    pub max_turn_tokens: u32,
    /// How the model is asked for actions.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub action_mode: Mode,
    /// Characters of a tool's output shown before its snapshot key.
    #[arg(long, default_value_t = 1500)]
    pub obsk_head: usize,
    /// Show every tool output in full (no snapshot keys; tools cut their own output).
    #[arg(long)]
    pub no_obsk: bool,
    /// Self-consistency of the final answer.
    #[arg(long, value_enum, default_value_t = Consistency::Off)]
    pub consistency: Consistency,
    /// Samples of self-consistency.
    #[arg(long, default_value_t = 3, value_parser = crate::numbers::at_least_one())]
    pub samples: usize,
    /// Aggregate self-consistency samples by asking the model to merge them (default: an
    /// embedding vote).
    #[arg(long)]
    pub merge: bool,
    /// Do not print each step to stderr as it ends.
    #[arg(long)]
    pub quiet: bool,
}

/// How the model is asked for actions (`--action-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Mode {
    /// Native tool calls where the model has them, JSON in text otherwise.
    Auto,
    /// RCAgent's JSON in text.
    JsonText,
    /// Native tool calls (a schema-constrained pick and a named tool choice where the server
    /// honours only that).
    NativeTools,
}

/// Self-consistency (`--consistency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Consistency {
    /// One greedy run.
    Off,
    /// Samples of the finalizing turn.
    Text,
    /// Continuations from the prefix before finalizing.
    Trajectory,
    /// Continuations that must finalize where the greedy run did (discarded before acting).
    Stepwise,
}

/// The controller configuration the arguments ask for.
pub fn react_config(args: &ReactArgs, budgets: &crate::config::BudgetsConfig) -> ReactConfig {
    let sampling = SamplingConfig {
        k: args.samples,
        temperature: 0.7,
        base_seed: 0,
        concurrency: 1,
    };
    let aggregation = if args.merge {
        Aggregation::ModelMerge
    } else {
        Aggregation::EmbeddingVote
    };
    ReactConfig {
        max_steps: args.max_steps.unwrap_or(budgets.max_steps).max(1),
        max_prompt_tokens: Some(budgets.max_prompt_tokens),
        max_wall_time: Some(Duration::from_secs(budgets.wall_seconds.max(1))),
        obsk_head_chars: (!args.no_obsk).then_some(args.obsk_head.max(1)),
        max_turn_tokens: Some(args.max_turn_tokens.max(16)),
        seed: Some(0),
        rules: ErrorRules {
            expert_tools: vec!["analyze_logs".into(), "analyze_code".into()],
            ..ErrorRules::default()
        },
        action_mode: match args.action_mode {
            Mode::Auto => ActionMode::Auto,
            Mode::JsonText => ActionMode::JsonText,
            Mode::NativeTools => ActionMode::NativeTools,
        },
        self_consistency: match args.consistency {
            Consistency::Off => SelfConsistency::Off,
            Consistency::Text => SelfConsistency::Text {
                sampling,
                aggregation,
            },
            Consistency::Trajectory | Consistency::Stepwise => SelfConsistency::Trajectory {
                sampling,
                stepwise: args.consistency == Consistency::Stepwise,
                aggregation,
            },
        },
        ..ReactConfig::default()
    }
}

/// The task requirements of the controller's prompt.
const TASK: &str = "Find the component whose fault caused the incident and what the fault is. \
    Read the telemetry of the components that look wrong, hand long logs to the log expert by \
    their snapshot key, and finalize with the root cause, the evidence and who must act.";

/// Runs the command.
pub async fn run(args: ReactArgs) -> anyhow::Result<()> {
    let config = load_config(args.config.as_deref())?;
    let redactor = config.redactor();
    let loaded = IncidentDir::open(&args.dir)
        .with_context(|| format!("cannot load the incident directory {}", args.dir.display()))?;
    let role = config
        .roles
        .explorer
        .as_ref()
        .or(config.roles.controller.as_ref());
    let model = config.model_for(role)?;
    let mut tools = IncidentTools::from_dir(loaded.clone())?;
    if !args.no_obsk {
        // The controller keeps full outputs in its snapshot store and shows their head.
        tools.output_chars = FULL_OUTPUT_CHARS;
    }
    let registry = tools.registry(model.clone()).await?;
    let names: Vec<String> = registry.specs().into_iter().map(|s| s.name).collect();
    let react_config = react_config(&args, &config.budgets);
    let driver: Arc<dyn ChatModel> = match model {
        // The configured model is redacted by the config (`Config::model_for`).
        Some(m) => m,
        None => {
            // No model: the deterministic diagnosis names the suspects and the conclusion,
            // and the policy investigates them through the same tools.
            Arc::new(PlannedInvestigation::from_deterministic_diagnosis(&loaded, &names).await?)
        }
    };
    eprintln!(
        "react: {} with {} ({}), tools: {}",
        loaded.incident.id,
        driver.model_id(),
        if react_config.obsk_head_chars.is_some() {
            "snapshot keys"
        } else {
            "full observations"
        },
        names.join(", ")
    );
    let mut agent = ReactAgent::new(driver, registry, TASK, react_config);
    if !args.quiet {
        agent = agent.with_observer(Arc::new(StepPrinter));
    }
    let run = agent.run(&loaded.incident, &Cancellation::new()).await;
    let record = serde_json::json!({
        "format_version": TRAJECTORY_FORMAT_VERSION,
        "agent": "react",
        "incident": loaded.incident,
        "trajectory": run.trajectory,
        "violations": run.violations,
        "consistency": run.consistency,
        "report": run.report,
    });
    let outputs = Outputs {
        trajectory: args.trajectory.as_deref(),
        html: args.html.as_deref(),
        json: args.json,
    };
    let Some(report) = run.report.clone() else {
        // Nothing to report; the trajectory still tells what happened.
        let saved = outputs.write_record(&loaded.incident, record, &redactor)?;
        return Err(crate::NoRootCause(format!(
            "the controller did not finalize ({:?}); trajectory saved to {}",
            run.trajectory.outcome,
            saved.display()
        ))
        .into());
    };
    let bundle = report_bundle(
        &loaded,
        report,
        run.trajectory.clone(),
        service_graph(&loaded),
        None,
        config.diagnosis.current_minutes,
    )
    .await;
    let saved = outputs.write(&bundle, record, &redactor)?;
    outputs.print(&bundle, &redactor);
    if let Some(sc) = &run.consistency {
        eprintln!(
            "self-consistency ({}): {} of {} samples kept, answer {}, {} extra tokens",
            sc.kind,
            sc.kept,
            sc.samples,
            if sc.changed { "changed" } else { "unchanged" },
            sc.extra_usage.total()
        );
    }
    eprintln!("trajectory saved to {}", saved.display());
    Ok(())
}

/// Prints each step to stderr as it ends. It wants no streamed text, so a server's own token
/// counts are kept (llama-cpp-python reports none on streams).
struct StepPrinter;

impl RunObserver for StepPrinter {
    fn on_event(&self, event: &ReactEvent) {
        if let ReactEvent::Step(step) = event {
            print_step(step);
        }
    }

    fn wants_tokens(&self) -> bool {
        false
    }
}

fn print_step(step: &rca_core::trajectory::Step) {
    let action = step
        .action
        .as_ref()
        .map(|a| format!("{} {}", a.name, short(&a.args.to_string(), 80)))
        .unwrap_or_else(|| "(no action)".into());
    let seen = step
        .error
        .as_deref()
        .map(|e| format!("error: {}", short(e, 100)))
        .or_else(|| {
            step.observation
                .as_ref()
                .map(|o| short(o.text.lines().next().unwrap_or(""), 100))
        })
        .unwrap_or_default();
    eprintln!(
        "  step {}: {action} -> {seen} ({} + {} tokens)",
        step.index, step.usage.prompt_tokens, step.usage.completion_tokens
    );
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}
