//! The diagnosis agent (read-only), bootstrapped from the service call graph: alerting
//! services are examined deepest first, since faults propagate towards the entries.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// Not enough replicas for the load.
    Overload,
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

pub(crate) fn quoted(s: &str) -> Option<&str> {
    let a = s.find('"')?;
    let rest = &s[a + 1..];
    let b = rest.find('"')?;
    Some(&rest[..b])
}

pub(crate) fn backticked(s: &str) -> Option<&str> {
    let a = s.find('`')?;
    let rest = &s[a + 1..];
    let b = rest.find('`')?;
    Some(&rest[..b])
}

/// Deterministic diagnosis from pod states, node states, service metrics and the call graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyDiagnoser;

fn diag(component: String, fault: FaultKind, reason: impl Into<String>) -> Diagnosis {
    Diagnosis {
        component,
        fault,
        reason: reason.into(),
    }
}

#[async_trait]
impl Diagnoser for PolicyDiagnoser {
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        _feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError> {
        let health = env.observe().await?;
        let nodes = items(env, "nodes").await?;
        for n in &nodes {
            let has_pods = n
                .get("pods")
                .and_then(Value::as_array)
                .is_some_and(|p| !p.is_empty());
            if n.get("ready") == Some(&Value::Bool(false)) && has_pods {
                return Ok(diag(
                    format!("node/{}", str_of(n, "name")),
                    FaultKind::NodeNotReady,
                    "node is NotReady and still hosts pods",
                ));
            }
        }
        let pods = items(env, "pods").await?;
        for p in &pods {
            if p.get("ready") == Some(&Value::Bool(true)) {
                continue;
            }
            let dep = format!("deployment/{}", str_of(p, "deployment"));
            let msg = str_of(p, "message");
            let d = match str_of(p, "reason") {
                "ImagePullBackOff" => diag(dep, FaultKind::BadImage, msg),
                "CreateContainerConfigError" => {
                    let kind = if msg.starts_with("secret") {
                        "secret"
                    } else {
                        "configmap"
                    };
                    diag(
                        format!("{kind}/{}", quoted(msg).unwrap_or("")),
                        FaultKind::MissingConfig,
                        format!("{msg} (needed by {dep})"),
                    )
                }
                "OOMKilled" => diag(dep, FaultKind::MemoryLimit, msg),
                "CrashLoopBackOff" if msg.contains("missing config key") => {
                    diag(dep, FaultKind::MissingConfigKey, msg)
                }
                "CrashLoopBackOff" => diag(dep, FaultKind::BadRollout, msg),
                "Unschedulable" => {
                    let cordoned: Vec<&str> = nodes
                        .iter()
                        .filter(|n| {
                            n.get("ready") == Some(&Value::Bool(true))
                                && n.get("unschedulable") == Some(&Value::Bool(true))
                        })
                        .map(|n| str_of(n, "name"))
                        .collect();
                    match cordoned.first() {
                        Some(n) => diag(
                            format!("node/{n}"),
                            FaultKind::NodeCordoned,
                            format!(
                                "pods pending ({msg}); ready but cordoned: {}",
                                cordoned.join(", ")
                            ),
                        ),
                        None => diag(dep, FaultKind::Overload, msg),
                    }
                }
                "NodeNotReady" => diag(
                    format!("node/{}", str_of(p, "node")),
                    FaultKind::NodeNotReady,
                    msg,
                ),
                _ => continue,
            };
            return Ok(d);
        }
        // Bootstrap from the call graph: alerting services, deepest first.
        let graph = env.service_graph().await?;
        let services = items(env, "services").await?;
        let deployments = items(env, "deployments").await?;
        let mut svc: Vec<&Value> = services
            .iter()
            .filter(|s| {
                s.pointer("/metrics/rps")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
                    > 0.0
            })
            .collect();
        svc.sort_by_key(|s| std::cmp::Reverse(graph.depth(str_of(s, "name")).min(1000)));
        let selects = |s: &Value, d: &Value| -> bool {
            let Some(sel) = s.get("selector").and_then(Value::as_object) else {
                return false;
            };
            !sel.is_empty()
                && sel
                    .iter()
                    .all(|(k, v)| d.pointer(&format!("/template/labels/{k}")) == Some(v))
        };
        for s in svc {
            let name = str_of(s, "name");
            let backing: Vec<&Value> = deployments.iter().filter(|d| selects(s, d)).collect();
            let endpoints = s
                .get("endpoints")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let errors = s.pointer("/metrics/errors").cloned().unwrap_or(Value::Null);
            let dep = backing
                .first()
                .map(|d| format!("deployment/{}", str_of(d, "name")))
                .unwrap_or_default();
            if endpoints == 0 {
                if let Some(d) = backing
                    .iter()
                    .find(|d| d.get("replicas") == Some(&Value::from(0)))
                {
                    return Ok(diag(
                        format!("deployment/{}", str_of(d, "name")),
                        FaultKind::ScaledToZero,
                        format!("service {name} has no endpoints; its deployment has 0 replicas"),
                    ));
                }
                if backing.is_empty() {
                    return Ok(diag(
                        format!("service/{name}"),
                        FaultKind::SelectorMismatch,
                        format!("service {name} selects no deployment's pods"),
                    ));
                }
                continue;
            }
            if let Some(b) = s
                .pointer("/metrics/broken_dependencies")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
            {
                return Ok(diag(
                    dep,
                    FaultKind::WrongEnv,
                    format!("dependency address does not resolve: {b}"),
                ));
            }
            if errors.get("503").is_some() {
                return Ok(diag(
                    format!("service/{name}"),
                    FaultKind::WrongTargetPort,
                    format!(
                        "endpoints refuse connections on targetPort {}",
                        s.get("targetPort").cloned().unwrap_or(Value::Null)
                    ),
                ));
            }
            if errors.get("504").is_some() {
                let stuck = pods.iter().find(|p| {
                    p.pointer("/metrics/timeout_rate")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0)
                        > 0.0
                        && backing
                            .iter()
                            .any(|d| str_of(d, "name") == str_of(p, "deployment"))
                });
                if let Some(p) = stuck {
                    return Ok(diag(
                        format!("pod/{}", str_of(p, "name")),
                        FaultKind::StuckPod,
                        "every request to this pod times out",
                    ));
                }
            }
            if errors.get("401").is_some() {
                return Ok(diag(
                    dep,
                    FaultKind::RevokedSecret,
                    "upstream rejects the mounted credential (401)",
                ));
            }
            if errors.get("500").is_some() {
                return Ok(diag(
                    dep,
                    FaultKind::BadRollout,
                    "the current build fails requests (500)",
                ));
            }
            if errors.get("429").is_some() {
                let throttled = health
                    .alerts
                    .iter()
                    .any(|a| a.name == "CPUThrottlingHigh" && a.component == dep);
                let kind = if throttled {
                    FaultKind::CpuThrottling
                } else {
                    FaultKind::Overload
                };
                return Ok(diag(dep, kind, "offered load exceeds serving capacity"));
            }
        }
        if let Some(a) = health.alerts.iter().find(|a| a.name == "CPUThrottlingHigh") {
            return Ok(diag(
                a.component.clone(),
                FaultKind::CpuThrottling,
                a.message.clone(),
            ));
        }
        Ok(diag(
            String::new(),
            FaultKind::Unknown,
            "no known fault signature",
        ))
    }
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
                      missing_config_key, memory_limit, node_not_ready, selector_mismatch, revoked_secret, \
                      cpu_throttling, bad_rollout, stuck_pod, node_cordoned, overload, unknown";
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
