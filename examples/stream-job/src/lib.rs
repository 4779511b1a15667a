//! Example: a stream-processing job incident diagnosed with the information-gathering tools and
//! the log and code experts of `rca_tools`.
//!
//! The incident directory under `data/` is example data written for this example (a
//! fictional job `sessionizer` that keeps failing with out-of-memory errors): logs, metrics,
//! a table of job lifecycle events (`tables/`), the job's code (`code/`) and a few past log
//! analyses the log expert retrieves as in-context examples (`log_examples.json`).
#![deny(missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;

use rca_agents::react::{Cancellation, ErrorRules, ReactAgent, ReactConfig, ReactRun};
use rca_core::llm::ChatModel;
use rca_core::tool::ToolRegistry;
use rca_tools::experts::logs::LogExample;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::tools::IncidentTools;

/// A boxed error for the example's functions.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The host's task requirements placed in the controller's prompt.
pub const TASK: &str = "You diagnose failures of stream-processing jobs. Read the job's \
    lifecycle events, logs and metrics; use the log expert on long logs and the code expert on \
    the classes named in stack traces. Name the root cause in the job's code or configuration \
    when the evidence shows it. Responsibility is `user` for the job's code and configuration, \
    `platform` for the processing service, `infrastructure` for hosts and network.";

/// The bundled incident directory.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// The incident's sources, with the bundled past log analyses.
pub fn incident_tools() -> Result<IncidentTools, Error> {
    let dir = data_dir();
    let mut tools = IncidentTools::from_dir(IncidentDir::open(&dir)?)?;
    let examples = std::fs::read_to_string(dir.join("log_examples.json"))?;
    tools.log_examples = serde_json::from_str::<Vec<LogExample>>(&examples)?;
    Ok(tools)
}

/// The tools: `get_logs`, `get_metrics`, `get_db_records`, `analyze_logs`, `analyze_code`.
/// The experts ask `expert_model`; without one they run their deterministic policies.
pub async fn tools(expert_model: Option<Arc<dyn ChatModel>>) -> Result<ToolRegistry, Error> {
    Ok(incident_tools()?.registry(expert_model).await?)
}

/// The controller configuration of the example.
pub fn config() -> ReactConfig {
    ReactConfig {
        obsk_head_chars: Some(800),
        rules: ErrorRules {
            expert_tools: vec!["analyze_logs".into(), "analyze_code".into()],
            min_evidence: 1,
            ..ErrorRules::default()
        },
        ..ReactConfig::default()
    }
}

/// Runs the controller with `model` on the bundled incident; the experts ask `expert_model`
/// (or run their deterministic policies).
pub async fn diagnose(
    model: Arc<dyn ChatModel>,
    expert_model: Option<Arc<dyn ChatModel>>,
) -> Result<ReactRun, Error> {
    let sources = incident_tools()?;
    let registry = sources.registry(expert_model).await?;
    let agent = ReactAgent::new(model, registry, TASK, config());
    Ok(agent.run(&sources.incident, &Cancellation::new()).await)
}
