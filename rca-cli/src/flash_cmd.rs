//! `rca flash DIR --guide FILE`: FLASH following a troubleshooting guide on an incident
//! directory, with the real tools. The configured model (if any) reads the status, plans,
//! refines and reasons, supervised by the guide's rules; without one the deterministic policy
//! runs the guide. `human_query` steps ask on the terminal and wait a bounded time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use rca_agents::flash::{
    FlashAgent, FlashConfig, FlashError, FlashPolicy, HindsightBase, HumanChannel, ModelPolicy,
    RulePolicy,
};
use rca_agents::orchestra::deadline::{DeadlineModel, within};
use rca_agents::orchestra::pipeline::service_graph;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::tools::IncidentTools;
use tokio::sync::{Mutex, mpsc};

use crate::diagnose::{Outputs, TRAJECTORY_FORMAT_VERSION, load_config, report_bundle};

/// Arguments of `rca flash`.
#[derive(Debug, Args)]
pub struct FlashArgs {
    /// The incident directory (an `incident.json` manifest and telemetry files).
    pub dir: PathBuf,
    /// The troubleshooting guide (Markdown; the format is in docs/guides/flash.md).
    #[arg(long, value_name = "FILE")]
    pub guide: PathBuf,
    /// A fact the guide's `{placeholders}` read, as `name=value` (repeatable), e.g.
    /// `--fact component=checkout`. `alert_start` defaults to the incident window's start.
    #[arg(long = "fact", value_name = "NAME=VALUE", value_parser = parse_fact)]
    pub facts: Vec<(String, String)>,
    /// A configuration file: `roles.controller` names the model (none: the deterministic
    /// policy).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A hindsight knowledge base (JSON, as `recurring-incidents learn` writes) whose lessons
    /// the run is offered.
    #[arg(long, value_name = "FILE")]
    pub hindsight: Option<PathBuf>,
    /// Seconds a `human_query` waits for an answer on the terminal before the step fails.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub human_timeout: u64,
    /// Iterations before the run stops.
    #[arg(long, default_value_t = 40, value_parser = crate::numbers::at_least_one())]
    pub max_iterations: usize,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
    /// Where to save the trajectory (default: a new run in the runs store,
    /// `rca-runs/<incident id>/<run id>/trajectory.json`, named in
    /// `rca-runs/<incident id>/latest`).
    #[arg(long, value_name = "FILE")]
    pub trajectory: Option<PathBuf>,
}

fn parse_fact(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{text}` is not NAME=VALUE")),
    }
}

/// Asks on the terminal: the question goes to stderr, the answer is the next line of stdin.
/// A reader thread, started by the first question, feeds the lines, so an unanswered question
/// (timed out by the agent) does not hold up the process.
#[derive(Default)]
struct TerminalHuman {
    lines: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(line.trim_end().to_string()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

#[async_trait]
impl HumanChannel for TerminalHuman {
    async fn ask(&self, question: &str) -> Result<String, FlashError> {
        eprintln!("flash asks: {question}");
        eprint!("> ");
        let mut lines = self.lines.lock().await;
        lines
            .get_or_insert_with(stdin_lines)
            .recv()
            .await
            .ok_or_else(|| FlashError::Human("the terminal closed before an answer".into()))
    }
}

/// Prints each step on stderr as it is recorded (redacted): its index, the status and
/// thought's first line, the action and the start of what it observed.
fn step_printer(redactor: rca_llm::redact::Redactor) -> rca_agents::flash::StepObserver {
    Arc::new(move |step: &rca_core::trajectory::Step| {
        eprintln!("{}", redactor.redact(&step_line(step)));
    })
}

/// One line for a step: `step N: thought -> action: observation`, each part cut short.
fn step_line(step: &rca_core::trajectory::Step) -> String {
    let cut = |text: &str, n: usize| -> String {
        let first = text.lines().next().unwrap_or("");
        if first.chars().count() > n {
            format!("{}...", first.chars().take(n).collect::<String>())
        } else {
            first.to_string()
        }
    };
    let mut line = format!("flash: step {}: {}", step.index + 1, cut(&step.thought, 80));
    if let Some(action) = &step.action {
        line.push_str(&format!(" -> {}", action.name));
    }
    match (&step.error, &step.observation) {
        (Some(e), _) => line.push_str(&format!(": failed: {}", cut(e, 100))),
        (None, Some(o)) => line.push_str(&format!(": {}", cut(&o.text, 100))),
        (None, None) => {}
    }
    line
}

/// Runs the command.
pub async fn run(args: FlashArgs) -> anyhow::Result<()> {
    let config = load_config(args.config.as_deref())?;
    let redactor = config.redactor();
    let loaded = IncidentDir::open(&args.dir)
        .with_context(|| format!("cannot load the incident directory {}", args.dir.display()))?;
    let guide = std::fs::read_to_string(&args.guide)
        .with_context(|| format!("cannot read the guide {}", args.guide.display()))?;
    rca_agents::flash::parse_tsg(&guide)
        .with_context(|| format!("cannot use the guide {}", args.guide.display()))?;
    // Every model call ends by the run's wall budget (`budgets.wall_seconds`).
    let model = config
        .model_for(config.roles.controller.as_ref())?
        .map(|m| Arc::new(DeadlineModel::new(m)) as Arc<dyn rca_core::ChatModel>);
    let tools = IncidentTools::from_dir(loaded.clone())?
        .registry(model.clone())
        .await?;
    let policy: Arc<dyn FlashPolicy> = match &model {
        Some(m) => Arc::new(ModelPolicy::new(Arc::clone(m))),
        None => Arc::new(RulePolicy),
    };
    let hindsight = match &args.hindsight {
        Some(path) => HindsightBase::load(path)
            .with_context(|| format!("cannot read the hindsight base {}", path.display()))?,
        None => HindsightBase::new(),
    };
    let mut facts: BTreeMap<String, serde_json::Value> = args
        .facts
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    facts
        .entry("alert_start".into())
        .or_insert_with(|| serde_json::json!(loaded.incident.window.start.to_string()));
    eprintln!(
        "flash: {} with {}, guide {}",
        loaded.incident.id,
        model
            .as_ref()
            .map(|m| m.model_id().to_string())
            .unwrap_or_else(|| "the deterministic policy".into()),
        args.guide.display()
    );
    let agent = FlashAgent::new(policy, tools)
        .with_hindsight(hindsight)
        .with_human(Arc::new(TerminalHuman::default()))
        .with_config(FlashConfig {
            max_iterations: args.max_iterations,
            human_timeout_ms: args.human_timeout * 1000,
            wall_ms: Some(config.budgets.wall_seconds.saturating_mul(1000)),
            ..FlashConfig::default()
        })
        .with_progress(step_printer(redactor.clone()));
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_secs(config.budgets.wall_seconds);
    let run = within(deadline, agent.run(&loaded.incident, &guide, facts)).await?;
    if run.trajectory.outcome == rca_core::trajectory::Outcome::TimedOut {
        eprintln!(
            "flash: the wall budget ({} s, budgets.wall_seconds) ran out; the run stopped after {} step(s)",
            config.budgets.wall_seconds,
            run.trajectory.steps.len()
        );
    }
    let record = serde_json::json!({
        "format_version": TRAJECTORY_FORMAT_VERSION,
        "agent": "flash",
        "incident": loaded.incident,
        "guide": args.guide.display().to_string(),
        "trajectory": run.trajectory,
        "contexts": run.contexts,
        "memory": run.memory,
        "report": run.report,
    });
    let bundle = report_bundle(
        &loaded,
        run.report.clone(),
        run.trajectory.clone(),
        service_graph(&loaded),
        None,
        config.diagnosis.current_minutes,
    )
    .await;
    let outputs = Outputs {
        trajectory: args.trajectory.as_deref(),
        html: None,
        json: args.json,
    };
    let saved = outputs.write(&bundle, record, &redactor)?;
    outputs.print(&bundle, &redactor);
    if !run.established {
        // Not a success: the report says so, and so does the exit status.
        return Err(crate::NoRootCause(format!(
            "the guide did not establish a root cause ({:?}: {}); trajectory saved to {}",
            run.trajectory.outcome,
            run.report.root_cause,
            saved.display()
        ))
        .into());
    }
    eprintln!("trajectory saved to {}", saved.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_name_value_pairs() {
        assert_eq!(
            parse_fact("component=a=b").unwrap(),
            ("component".into(), "a=b".into())
        );
        assert!(parse_fact("=x").is_err() && parse_fact("novalue").is_err());
    }
}
