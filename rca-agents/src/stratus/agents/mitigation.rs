//! The mitigation agent: plans a transaction (at most K write commands) from a diagnosis and
//! the verdicts of earlier attempts. It only reads; [`crate::stratus::transaction::Tnr`] runs
//! the plan.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::diagnosis::{Diagnosis, FaultKind, backticked, items, str_of};
use super::{Feedback, ask, extract_json, health_brief};
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;

/// A planned transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Write commands, in order.
    pub commands: Vec<String>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
}

/// What the mitigation agent plans from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanContext {
    /// The attempt number (1-based).
    pub attempt: usize,
    /// The current diagnosis.
    pub diagnosis: Diagnosis,
    /// Verdicts of earlier attempts (after an abort: the oracle's verdict on the restored
    /// state and the abort reason).
    pub feedback: Vec<Feedback>,
    /// K: the most commands a plan may hold.
    pub max_commands: usize,
}

/// The mitigation role.
#[async_trait]
pub trait Mitigator: Send + Sync {
    /// Plans the next transaction.
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError>;
}

/// Deterministic mitigation: one remedy per fault kind, with an alternative when the same
/// plan already failed.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyMitigator;

fn name_of(component: &str) -> &str {
    component.split_once('/').map_or(component, |(_, n)| n)
}

async fn get_json(env: &dyn ReadAccess, what: &str) -> Result<Value, StratusError> {
    let text = env.run_text(&format!("get {what} -o json")).await?;
    serde_json::from_str(&text).map_err(|e| StratusError::MalformedModelOutput {
        message: format!("environment returned non-JSON for get {what}: {e}"),
        raw: text,
    })
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn number_before(text: &str, unit: &str) -> Option<u32> {
    let i = text.find(unit)?;
    let digits: String = text[..i]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

impl PolicyMitigator {
    async fn commands(
        &self,
        env: &dyn ReadAccess,
        ctx: &PlanContext,
    ) -> Result<Vec<String>, StratusError> {
        let d = &ctx.diagnosis;
        let name = name_of(&d.component);
        let tried = |cmds: &[String]| ctx.feedback.iter().any(|f| f.commands == cmds);
        let cmds = match d.fault {
            FaultKind::WrongTargetPort => {
                let svc = get_json(env, &format!("service {name}")).await?;
                let pods = items(env, "pods").await?;
                let sel = svc.get("selector").cloned().unwrap_or(Value::Null);
                let port = pods
                    .iter()
                    .find(|p| {
                        sel.as_object().is_some_and(|m| {
                            m.iter()
                                .all(|(k, v)| p.pointer(&format!("/labels/{k}")) == Some(v))
                        })
                    })
                    .and_then(|p| p.get("containerPort").cloned())
                    .unwrap_or(Value::Null);
                vec![format!(
                    "patch service {name} -p '{}'",
                    json!({"targetPort": port})
                )]
            }
            FaultKind::BadImage | FaultKind::BadRollout => {
                let undo = vec![format!("rollout undo deployment/{name}")];
                if !tried(&undo) {
                    undo
                } else {
                    let dep = get_json(env, &format!("deployment {name}")).await?;
                    let current = dep
                        .pointer("/template/image")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let older = dep
                        .get("history")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .rev()
                        .filter_map(|h| h.get("image").and_then(Value::as_str))
                        .find(|i| *i != current);
                    match older {
                        Some(img) => vec![format!("set image deployment/{name} {name}={img}")],
                        None => undo,
                    }
                }
            }
            FaultKind::ScaledToZero => vec![format!("scale deployment {name} --replicas=2")],
            FaultKind::Overload => {
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let n = dep.get("replicas").and_then(Value::as_u64).unwrap_or(1) + 1;
                vec![format!("scale deployment {name} --replicas={n}")]
            }
            FaultKind::WrongEnv => {
                let var_addr = d.reason.rsplit(": ").next().unwrap_or("");
                let (var, addr) = var_addr.split_once('=').unwrap_or(("", ""));
                let host = addr.split(':').next().unwrap_or("");
                let services = items(env, "services").await?;
                let target = services
                    .iter()
                    .min_by_key(|s| edit_distance(str_of(s, "name"), host))
                    .map(|s| {
                        (
                            str_of(s, "name").to_string(),
                            s.get("port").cloned().unwrap_or(Value::Null),
                        )
                    });
                match target {
                    Some((h, port)) if !var.is_empty() => {
                        vec![format!("set env deployment/{name} {var}={h}:{port}")]
                    }
                    _ => Vec::new(),
                }
            }
            FaultKind::MissingConfig => {
                let kind = if d.component.starts_with("secret/") {
                    "Secret"
                } else {
                    "ConfigMap"
                };
                vec![format!(
                    "apply -f '{}'",
                    json!({"kind": kind, "name": name, "data": {}})
                )]
            }
            FaultKind::MissingConfigKey => {
                let key = backticked(&d.reason).unwrap_or("");
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let cm = dep
                    .pointer("/template/config_maps/0")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                vec![format!(
                    "patch configmap {cm} -p '{}'",
                    json!({"data": {key: ""}})
                )]
            }
            FaultKind::MemoryLimit => {
                let need = number_before(&d.reason, "Mi,").unwrap_or(256);
                let limit = need.div_ceil(64) * 64 + 64;
                vec![format!(
                    "set resources deployment/{name} --limits=memory={limit}Mi"
                )]
            }
            FaultKind::CpuThrottling => {
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let cur = dep
                    .pointer("/template/resources/cpu_milli")
                    .and_then(Value::as_u64)
                    .unwrap_or(100);
                let h = env.observe().await?;
                let need = h
                    .alerts
                    .iter()
                    .find(|a| a.component == d.component && a.name == "CPUThrottlingHigh")
                    .and_then(|a| number_before(&a.message, "m,"))
                    .map_or(cur * 2, u64::from);
                vec![format!(
                    "set resources deployment/{name} --limits=cpu={}m",
                    need.max(cur)
                )]
            }
            FaultKind::NodeNotReady => vec![format!("cordon {name}"), format!("drain {name}")],
            FaultKind::NodeCordoned => {
                let nodes = items(env, "nodes").await?;
                nodes
                    .iter()
                    .filter(|n| {
                        n.get("ready") == Some(&Value::Bool(true))
                            && n.get("unschedulable") == Some(&Value::Bool(true))
                    })
                    .map(|n| format!("uncordon {}", str_of(n, "name")))
                    .collect()
            }
            FaultKind::SelectorMismatch => {
                let svc = get_json(env, &format!("service {name}")).await?;
                let sel = svc
                    .get("selector")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let deployments = items(env, "deployments").await?;
                let best = deployments
                    .iter()
                    .filter_map(|d| d.pointer("/template/labels").and_then(Value::as_object))
                    .filter(|labels| sel.keys().all(|k| labels.contains_key(k)))
                    .min_by_key(|labels| {
                        sel.iter()
                            .map(|(k, v)| {
                                edit_distance(
                                    v.as_str().unwrap_or(""),
                                    labels.get(k).and_then(Value::as_str).unwrap_or(""),
                                )
                            })
                            .sum::<usize>()
                    });
                match best {
                    Some(labels) => {
                        let new: serde_json::Map<String, Value> = sel
                            .keys()
                            .filter_map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
                            .collect();
                        vec![format!(
                            "patch service {name} -p '{}'",
                            json!({"selector": new})
                        )]
                    }
                    None => Vec::new(),
                }
            }
            FaultKind::RevokedSecret => {
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let mounted: Vec<String> = dep
                    .pointer("/template/secrets")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let secrets = items(env, "secrets").await?;
                let revoked: Vec<&Value> = secrets
                    .iter()
                    .filter(|s| {
                        mounted.iter().any(|m| m == str_of(s, "name"))
                            && str_of(s, "status") != "valid"
                    })
                    .collect();
                let mut new_list = mounted.clone();
                for r in revoked {
                    let keys = r.get("keys").cloned().unwrap_or(Value::Null);
                    let replacement = secrets
                        .iter()
                        .filter(|s| str_of(s, "status") == "valid" && s.get("keys") == Some(&keys))
                        .max_by_key(|s| s.get("created").and_then(Value::as_u64).unwrap_or(0));
                    if let Some(rep) = replacement {
                        for m in new_list.iter_mut() {
                            if m == str_of(r, "name") {
                                *m = str_of(rep, "name").to_string();
                            }
                        }
                    }
                }
                if new_list == mounted {
                    Vec::new()
                } else {
                    vec![format!(
                        "patch deployment {name} -p '{}'",
                        json!({"template": {"secrets": new_list}})
                    )]
                }
            }
            FaultKind::StuckPod => vec![format!("delete pod {name}")],
            FaultKind::Unknown => Vec::new(),
        };
        Ok(cmds)
    }
}

#[async_trait]
impl Mitigator for PolicyMitigator {
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError> {
        let commands = self.commands(env, ctx).await?;
        Ok(Plan {
            rationale: format!(
                "remedy for {:?} on {}",
                ctx.diagnosis.fault, ctx.diagnosis.component
            ),
            commands,
        })
    }
}

/// Mitigation by a chat model: it sees the diagnosis, the telemetry and every earlier verdict,
/// and answers `{"commands": ["..."], "rationale": "..."}`.
pub struct ModelMitigator {
    model: Arc<dyn ChatModel>,
}

impl ModelMitigator {
    /// A mitigator backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelMitigator { model }
    }
}

#[async_trait]
impl Mitigator for ModelMitigator {
    async fn plan(&self, env: &dyn ReadAccess, ctx: &PlanContext) -> Result<Plan, StratusError> {
        let brief = health_brief(env).await?;
        let raw = ask(
            &self.model,
            vec![
                Message::system(format!(
                    "You are the mitigation agent of an SRE team. Propose one transaction of at most {} \
                     kubectl write commands (scale, set image, set env, set resources, patch, apply -f \
                     '<inline JSON>', rollout undo, delete pod, cordon, uncordon, drain). The transaction \
                     is undone if severity rises. Answer only with JSON: \
                     {{\"commands\": [\"...\"], \"rationale\": \"...\"}}.",
                    ctx.max_commands
                )),
                Message::user(format!(
                    "Attempt {}. Diagnosis: {}\nTelemetry:\n{brief}\nEarlier attempts and the oracles' verdicts:\n{}",
                    ctx.attempt,
                    serde_json::to_string(&ctx.diagnosis).unwrap_or_default(),
                    serde_json::to_string(&ctx.feedback).unwrap_or_default()
                )),
            ],
        )
        .await?;
        extract_json(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(edit_distance("carts", "cart"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(
            number_before("needs 180Mi, limit is 64Mi", "Mi,"),
            Some(180)
        );
        assert_eq!(number_before("needs 400m, limit 150m", "m,"), Some(400));
        assert_eq!(name_of("deployment/x"), "x");
    }
}
