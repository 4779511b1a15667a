//! The diagnosis role (read-only): its answer, the fault kinds, and the model-backed
//! diagnoser. The deterministic one is [`super::diagnosis_policy::PolicyDiagnoser`].

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hypotheses::Hypothesis;
use super::{Feedback, ask, extract_json, health_brief};
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;

/// The kind of fault a diagnosis names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A service's target port is not the port its pods listen on.
    WrongTargetPort,
    /// A deployment's image cannot be pulled.
    BadImage,
    /// A deployment is scaled to zero.
    ScaledToZero,
    /// An environment variable holds a wrong address.
    WrongEnv,
    /// A config map or secret a deployment mounts is missing.
    MissingConfig,
    /// A config key the process needs is missing.
    MissingConfigKey,
    /// A config value the process rejects: it runs, but answers wrongly.
    InvalidConfigValue,
    /// The memory limit is below what the process needs.
    MemoryLimit,
    /// A node is not ready.
    NodeNotReady,
    /// A service selects no pods.
    SelectorMismatch,
    /// A mounted credential was revoked.
    RevokedSecret,
    /// CPU throttling.
    CpuThrottling,
    /// A recent rollout broke the service.
    BadRollout,
    /// A pod hangs.
    StuckPod,
    /// Pods are pending because nodes are cordoned.
    NodeCordoned,
    /// Pods are pending because their node selector excludes every node with room.
    NodeSelector,
    /// Not enough replicas for the load.
    Overload,
    /// An object changed before the incident (by someone other than the agents).
    RecentChange,
    /// Pods request more CPU or memory than any schedulable node has free.
    RequestsTooLarge,
    /// Nothing recognised.
    Unknown,
}

/// The diagnosis agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The faulty component (`deployment/x`, `service/y`, `node/z`, `pod/p`, `configmap/c`).
    pub component: String,
    /// The fault.
    pub fault: FaultKind,
    /// Why.
    pub reason: String,
    /// Ranked alternatives, each with its evidence and fix (the deterministic diagnoser
    /// fills it; a model's diagnosis may leave it empty). The mitigation agent tries them
    /// one transaction at a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hypotheses: Vec<Hypothesis>,
}

impl Diagnosis {
    /// A diagnosis with no ranked alternatives.
    pub fn new(component: impl Into<String>, fault: FaultKind, reason: impl Into<String>) -> Self {
        Diagnosis {
            component: component.into(),
            fault,
            reason: reason.into(),
            hypotheses: Vec::new(),
        }
    }
}

/// The diagnosis role.
#[async_trait]
pub trait Diagnoser: Send + Sync {
    /// Localises the fault; `feedback` holds the verdicts of earlier attempts.
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError>;
}

/// `get KIND -o json` items.
pub(crate) async fn items(env: &dyn ReadAccess, kind: &str) -> Result<Vec<Value>, StratusError> {
    let text = env.run_text(&format!("get {kind} -o json")).await?;
    let v: Value = serde_json::from_str(&text).map_err(|e| StratusError::MalformedModelOutput {
        message: format!("environment returned non-JSON for get {kind}: {e}"),
        raw: text.clone(),
    })?;
    Ok(v.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

pub(crate) fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Diagnosis by a chat model, which may run read-only commands first. Each turn it answers
/// `{"command": "get pods -o json"}` to read, or
/// `{"diagnosis": {"component": "deployment/x", "fault": "bad_image", "reason": "..."}}`.
/// Writes are refused by confinement and the refusal is shown to the model.
pub struct ModelDiagnoser {
    model: Arc<dyn ChatModel>,
    max_reads: usize,
}

impl ModelDiagnoser {
    /// A diagnoser backed by `model`, allowed `max_reads` read commands.
    pub fn new(model: Arc<dyn ChatModel>, max_reads: usize) -> Self {
        ModelDiagnoser { model, max_reads }
    }
}

#[derive(Deserialize)]
struct DiagnoserTurn {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    diagnosis: Option<Diagnosis>,
}

#[async_trait]
impl Diagnoser for ModelDiagnoser {
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError> {
        let graph = env.service_graph().await?;
        let brief = health_brief(env).await?;
        let faults = "wrong_target_port, bad_image, scaled_to_zero, wrong_env, missing_config, \
                      missing_config_key, invalid_config_value, memory_limit, node_not_ready, selector_mismatch, revoked_secret, \
                      cpu_throttling, bad_rollout, stuck_pod, node_cordoned, node_selector, overload, unknown";
        let mut messages = vec![
            Message::system(format!(
                "You are the diagnosis agent of an SRE team. You may only read: get, describe, logs \
                 (kubectl syntax, `-o json` supported). Each turn answer with JSON only: either \
                 {{\"command\": \"<read command>\"}} or {{\"diagnosis\": {{\"component\": \"kind/name\", \
                 \"fault\": one of [{faults}], \"reason\": \"...\"}}}}."
            )),
            Message::user(format!(
                "Service call graph (caller -> callee): {}\nEntries: {}\nTelemetry:\n{brief}\nEarlier attempts:\n{}",
                graph
                    .edges
                    .iter()
                    .map(|(a, b)| format!("{a}->{b}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                graph.entries.join(", "),
                serde_json::to_string(feedback).unwrap_or_default()
            )),
        ];
        // Each turn reads or diagnoses; an answer that cannot be used goes back to the model
        // with the reason (an error-handling rule) and costs a turn.
        for _ in 0..=self.max_reads {
            let raw = ask(&self.model, messages.clone()).await?;
            let problem = match extract_json::<DiagnoserTurn>(&raw) {
                Ok(DiagnoserTurn {
                    diagnosis: Some(d), ..
                }) => return Ok(d),
                Ok(DiagnoserTurn {
                    command: Some(cmd), ..
                }) => {
                    let observation = match env.run_text(&cmd).await {
                        Ok(out) => out,
                        Err(e) => format!("error: {e}"),
                    };
                    messages.push(Message::assistant(raw));
                    messages.push(Message::user(format!("Output of `{cmd}`:\n{observation}")));
                    continue;
                }
                Ok(_) => "it has neither `command` nor `diagnosis`".to_string(),
                Err(e) => e.to_string(),
            };
            messages.push(Message::assistant(raw));
            messages.push(Message::user(format!(
                "That answer could not be used: {problem}. Answer with JSON only: \
                 {{\"command\": \"<read command>\"}} or {{\"diagnosis\": {{...}}}}."
            )));
        }
        Err(StratusError::MalformedModelOutput {
            message: format!("no diagnosis after {} turns", self.max_reads + 1),
            raw: String::new(),
        })
    }
}
