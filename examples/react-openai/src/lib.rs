//! Example: the RCAgent controller on a bundled incident.
//!
//! The incident (a web shop whose checkout fails) and its telemetry are bundled under `data/`.
//! [`tools`] exposes them as three tools (logs, metrics and a log expert); [`diagnose`] runs
//! the controller with any [`ChatModel`]. The binary (`src/main.rs`, feature `http`) points it
//! at an OpenAI-compatible server named by environment variables; the tests run it offline with
//! a scripted model and through record/replay.
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use rca_agents::react::{Cancellation, ErrorRules, ReactAgent, ReactConfig, ReactRun};
use rca_core::incident::{Evidence, Incident, Modality};
use rca_core::llm::ChatModel;
use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
use rca_core::{Timestamp, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

const INCIDENT: &str = include_str!("../data/incident.json");
const LOGS: &str = include_str!("../data/logs.json");
const METRICS: &str = include_str!("../data/metrics.json");

/// The host's task requirements placed in the controller's prompt.
pub const TASK: &str = "You diagnose incidents of a web shop running on a cloud platform. \
    Services call each other over HTTP; errors propagate from callees to callers, so follow \
    failing calls downstream to the first component whose own behaviour is wrong. Resource \
    exhaustion (CPU, memory, connections, disk) and bad deployments are common causes. \
    Responsibility is `platform` for the shop's services and databases, `infrastructure` for \
    hosts and network.";

/// The bundled incident.
pub fn incident() -> Result<Incident, serde_json::Error> {
    serde_json::from_str(INCIDENT)
}

/// The bundled telemetry as tools.
pub fn tools() -> Result<ToolRegistry, Box<dyn std::error::Error + Send + Sync>> {
    let logs: BTreeMap<String, Vec<String>> = serde_json::from_str(LOGS)?;
    let metrics: BTreeMap<String, String> = serde_json::from_str(METRICS)?;
    let mut r = ToolRegistry::new();
    r.register_typed(GetLogs(Arc::new(logs)))?;
    r.register_typed(GetMetrics(Arc::new(metrics)))?;
    r.register_typed(LogExpert)?;
    Ok(r)
}

/// The controller configuration of the example.
pub fn config() -> ReactConfig {
    ReactConfig {
        obsk_head_chars: Some(1200),
        rules: ErrorRules {
            expert_tools: vec!["log_expert".into()],
            min_evidence: 1,
            ..ErrorRules::default()
        },
        ..ReactConfig::default()
    }
}

/// Runs the controller with `model` on the bundled incident.
pub async fn diagnose(
    model: Arc<dyn ChatModel>,
) -> Result<ReactRun, Box<dyn std::error::Error + Send + Sync>> {
    let agent = ReactAgent::new(model, tools()?, TASK, config());
    Ok(agent.run(&incident()?, &Cancellation::new()).await)
}

/// A service name.
#[derive(Deserialize, JsonSchema)]
pub struct ServiceArgs {
    /// The service, as named in the system description.
    pub service: String,
}

/// Text to analyse.
#[derive(Deserialize, JsonSchema)]
pub struct TextArgs {
    /// Log text, or the snapshot key of an observation holding it.
    pub text: String,
}

struct GetLogs(Arc<BTreeMap<String, Vec<String>>>);

#[async_trait]
impl TypedTool for GetLogs {
    type Args = ServiceArgs;
    fn name(&self) -> &str {
        "get_logs"
    }
    fn description(&self) -> &str {
        "Returns the log lines of a service in the incident window."
    }
    async fn run(&self, a: ServiceArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let lines = self.0.get(&a.service).ok_or_else(|| ToolError::Failed {
            message: format!(
                "no logs for `{}`; services: {}",
                a.service,
                self.0.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })?;
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

struct GetMetrics(Arc<BTreeMap<String, String>>);

#[async_trait]
impl TypedTool for GetMetrics {
    type Args = ServiceArgs;
    fn name(&self) -> &str {
        "get_metrics"
    }
    fn description(&self) -> &str {
        "Returns a service's resource usage, error rate, latency and the health of its calls."
    }
    async fn run(&self, a: ServiceArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let m = self.0.get(&a.service).ok_or_else(|| ToolError::Failed {
            message: format!("no metrics for `{}`", a.service),
        })?;
        Ok(ToolOutput::text(format!("{}: {m}", a.service)))
    }
}

/// A small log expert: groups ERROR and WARN lines by their message with numbers masked and
/// reports the most frequent groups as evidence.
struct LogExpert;

fn template(message: &str) -> String {
    message
        .split_whitespace()
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_digit()) {
                "<*>"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[async_trait]
impl TypedTool for LogExpert {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "log_expert"
    }
    fn description(&self) -> &str {
        "Log expert: groups the error and warning lines of log text into templates and reports \
         the most frequent, with the component that logged them."
    }
    async fn run(&self, a: TextArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut groups: BTreeMap<(String, String, String), usize> = BTreeMap::new();
        for line in a.text.lines() {
            let mut parts = line.splitn(4, ' ');
            let (_, Some(component), Some(level), Some(msg)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if level == "ERROR" || level == "WARN" {
                *groups
                    .entry((component.to_string(), level.to_string(), template(msg)))
                    .or_default() += 1;
            }
        }
        if groups.is_empty() {
            return Ok(ToolOutput::text("no error or warning lines"));
        }
        let mut ranked: Vec<_> = groups.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = ToolOutput::text(
            ranked
                .iter()
                .map(|((c, l, t), n)| format!("{n} x {c} {l}: {t}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        if let Some(((c, _, t), n)) = ranked.first() {
            out.evidence.push(
                Evidence::new(
                    Modality::Logs,
                    Timestamp(0),
                    c.clone(),
                    format!("{n} x {t}"),
                )
                .with_score(*n as f64),
            );
        }
        Ok(out)
    }
}
