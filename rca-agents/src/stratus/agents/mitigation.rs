//! The mitigation agent: plans a transaction (at most K write commands) from a diagnosis and
//! the verdicts of earlier attempts. It only reads; [`crate::stratus::transaction::Tnr`] runs
//! the plan.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::diagnosis::{Diagnosis, FaultKind, backticked, items, str_of};
use super::hypotheses::edit_distance;
use super::observed::strings_at;
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

/// Deterministic mitigation. Given ranked hypotheses (from
/// [`super::PolicyDiagnoser`]), it searches under TNR: each attempt runs the fix of the best
/// hypothesis this run has not tried, an abort undoes it and the next is tried. Given a bare
/// diagnosis (a model's), it falls back to a remedy per fault kind, built from what the
/// diagnosis found and what the cluster shows (never from what the simulator knows), with an
/// alternative when the same plan already failed. Remedies that cannot know the right value step towards it
/// (a memory limit doubles, a scaled-to-zero deployment gets one replica, then more under
/// load) and let TNR and the oracle judge each step.
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
        let tried = |cmds: &[String]| ctx.feedback.iter().any(|f| f.commands == cmds);
        // Search under TNR: the best-ranked hypothesis whose fix has not been tried on this
        // state. A fix that failed (aborted, refused, or committed without curing) is not
        // tried again until another transaction commits; once every hypothesis is spent
        // there is no plan.
        if !d.hypotheses.is_empty() {
            let spent = Feedback::spent(&ctx.feedback);
            return Ok(d
                .hypotheses
                .iter()
                .find(|h| !spent.contains(&h.fix.as_slice()) && h.fix.len() <= ctx.max_commands)
                .map(|h| h.fix.clone())
                .unwrap_or_default());
        }
        let name = name_of(&d.component);
        let cmds = match d.fault {
            FaultKind::WrongTargetPort => {
                // The port the diagnosis saw the pods listen on, else the one they declare.
                let seen = d
                    .reason
                    .split("listen on ")
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse::<u64>().ok());
                let port = match seen {
                    Some(p) => Value::from(p),
                    None => {
                        let svc = get_json(env, &format!("service {name}")).await?;
                        let pods = items(env, "pods").await?;
                        let sel = svc.get("selector").cloned().unwrap_or(Value::Null);
                        pods.iter()
                            .find(|p| {
                                sel.as_object().is_some_and(|m| {
                                    m.iter()
                                        .all(|(k, v)| p.pointer(&format!("/labels/{k}")) == Some(v))
                                })
                            })
                            .and_then(|p| p.get("containerPort").cloned())
                            .unwrap_or(Value::Null)
                    }
                };
                if port.is_null() {
                    Vec::new()
                } else {
                    vec![format!(
                        "patch service {name} -p '{}'",
                        json!({"targetPort": port})
                    )]
                }
            }
            FaultKind::NodeSelector => vec![format!(
                "patch deployment {name} -p '{}'",
                json!({"template": {"node_selector": null}})
            )],
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
            FaultKind::ScaledToZero => vec![format!("scale deployment {name} --replicas=1")],
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
                // Never the deployment's own service: a process does not call itself.
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let own = |s: &Value| {
                    s.get("selector")
                        .and_then(Value::as_object)
                        .is_some_and(|sel| {
                            !sel.is_empty()
                                && sel.iter().all(|(k, v)| {
                                    dep.pointer(&format!("/template/labels/{k}")) == Some(v)
                                })
                        })
                };
                let target = services
                    .iter()
                    .filter(|s| !own(s))
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
            FaultKind::MissingConfigKey | FaultKind::InvalidConfigValue => {
                let key = backticked(&d.reason).unwrap_or("");
                let example = d
                    .reason
                    .split("(example: ")
                    .nth(1)
                    .and_then(|r| r.split(')').next())
                    .unwrap_or("");
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let maps = strings_at(&dep, "/template/config_maps");
                // The map that holds the key, else the first one mounted.
                let mut target = maps.first().cloned().unwrap_or_default();
                for m in &maps {
                    let cm = get_json(env, &format!("configmap {m}")).await?;
                    if cm.pointer(&format!("/data/{key}")).is_some() {
                        target = m.clone();
                        break;
                    }
                }
                if key.is_empty() || example.is_empty() || target.is_empty() {
                    Vec::new()
                } else {
                    vec![format!(
                        "patch configmap {target} -p '{}'",
                        json!({"data": {key: example}})
                    )]
                }
            }
            FaultKind::MemoryLimit => {
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let cur = dep
                    .pointer("/template/resources/memory_mi")
                    .and_then(Value::as_u64)
                    .unwrap_or(128);
                vec![format!(
                    "set resources deployment/{name} --limits=memory={}Mi",
                    (cur * 2).div_ceil(64) * 64
                )]
            }
            FaultKind::CpuThrottling => {
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let cur = dep
                    .pointer("/template/resources/cpu_milli")
                    .and_then(Value::as_u64)
                    .unwrap_or(100)
                    .max(1);
                // The share of throttled periods says how far below its need the limit is;
                // a quarter on top covers the noise of that reading.
                let share = number_before(&d.reason, "% throttling")
                    .map(|p| f64::from(p) / 100.0)
                    .filter(|s| *s > 0.0 && *s < 0.95);
                let need = match share {
                    Some(s) => (cur as f64 / (1.0 - s) * 1.25).ceil() as u64,
                    None => cur * 2,
                };
                vec![format!(
                    "set resources deployment/{name} --limits=cpu={}m",
                    need.div_ceil(50) * 50
                )]
            }
            FaultKind::NodeNotReady => {
                // Cordon, then move the stateless pods off one by one; a pod whose data lives
                // in it (emptyDir) is left alone: evicting it would destroy the data.
                let node = get_json(env, &format!("node {name}")).await?;
                let deployments = items(env, "deployments").await?;
                let pods = items(env, "pods").await?;
                let mut cmds = vec![format!("cordon {name}")];
                for p in node
                    .get("pods")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    let owner = pods
                        .iter()
                        .find(|x| str_of(x, "name") == p)
                        .map(|x| str_of(x, "deployment"))
                        .unwrap_or("");
                    // Pod-local storage (an emptyDir volume) goes with the pod.
                    let stateful = deployments.iter().any(|d| {
                        str_of(d, "name") == owner
                            && d.get("volumes")
                                .and_then(Value::as_array)
                                .is_some_and(|v| v.iter().any(|v| v.get("emptyDir").is_some()))
                    });
                    if !stateful && cmds.len() < ctx.max_commands {
                        cmds.push(format!("delete pod {p}"));
                    }
                }
                cmds
            }
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
                // The deployment whose pod labels agree with most of the selector (then the
                // closest name): keep the pairs that agree, correct the values that differ,
                // drop the keys its pods do not carry.
                let svc = get_json(env, &format!("service {name}")).await?;
                let sel = svc
                    .get("selector")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let deployments = items(env, "deployments").await?;
                let best = deployments
                    .iter()
                    .filter_map(|d| {
                        let labels = d.pointer("/template/labels").and_then(Value::as_object)?;
                        let agree = sel
                            .iter()
                            .filter(|(k, v)| labels.get(*k) == Some(*v))
                            .count();
                        let distance: usize = sel
                            .iter()
                            .map(|(k, v)| {
                                edit_distance(
                                    v.as_str().unwrap_or(""),
                                    labels.get(k).and_then(Value::as_str).unwrap_or(""),
                                )
                            })
                            .sum();
                        Some((
                            agree,
                            distance,
                            edit_distance(str_of(d, "name"), name),
                            labels,
                        ))
                    })
                    .min_by_key(|(agree, distance, by_name, _)| {
                        (std::cmp::Reverse(*agree), *by_name, *distance)
                    });
                match best {
                    Some((_, _, _, labels)) if !labels.is_empty() => {
                        let new: serde_json::Map<String, Value> = sel
                            .keys()
                            .map(|k| (k.clone(), labels.get(k).cloned().unwrap_or(Value::Null)))
                            .collect();
                        if new.values().all(Value::is_null) {
                            Vec::new()
                        } else {
                            vec![format!(
                                "patch service {name} -p '{}'",
                                json!({"selector": new})
                            )]
                        }
                    }
                    _ => Vec::new(),
                }
            }
            FaultKind::RevokedSecret => {
                // Either a named secret's credential is rejected, or no mounted secret holds
                // the credential key: mount the newest other secret that holds it.
                let rejected = d
                    .reason
                    .contains("of secret")
                    .then(|| backticked(&d.reason))
                    .flatten()
                    .unwrap_or("");
                let missing_key = d
                    .reason
                    .contains("credential key")
                    .then(|| backticked(&d.reason))
                    .flatten();
                let dep = get_json(env, &format!("deployment {name}")).await?;
                let mounted = strings_at(&dep, "/template/secrets");
                let secrets = items(env, "secrets").await?;
                let keys_of = |n: &str| {
                    secrets
                        .iter()
                        .find(|s| str_of(s, "name") == n)
                        .and_then(|s| s.get("keys").cloned())
                        .unwrap_or(Value::Null)
                };
                let holds = |s: &Value, key: &str| {
                    s.get("keys")
                        .and_then(Value::as_array)
                        .is_some_and(|k| k.iter().any(|x| x.as_str() == Some(key)))
                };
                let tried_before = |n: &str| {
                    ctx.feedback
                        .iter()
                        .any(|f| f.commands.iter().any(|c| c.contains(&format!("\"{n}\""))))
                };
                let wanted = keys_of(rejected);
                let replacement = secrets
                    .iter()
                    .filter(|s| {
                        let n = str_of(s, "name");
                        n != rejected
                            && !mounted.iter().any(|m| m == n)
                            && !tried_before(n)
                            && match missing_key {
                                Some(k) => holds(s, k),
                                None => s.get("keys") == Some(&wanted),
                            }
                    })
                    .max_by_key(|s| s.get("created").and_then(Value::as_u64).unwrap_or(0));
                // Which mounted secret it replaces: the rejected one, or one without the key.
                let replaced = match missing_key {
                    Some(k) => mounted
                        .iter()
                        .find(|m| {
                            !secrets
                                .iter()
                                .any(|s| str_of(s, "name") == m.as_str() && holds(s, k))
                        })
                        .cloned(),
                    None => mounted.iter().find(|m| m.as_str() == rejected).cloned(),
                };
                match replacement {
                    Some(rep) => {
                        let rep = str_of(rep, "name").to_string();
                        let mut new_list: Vec<String> = mounted
                            .iter()
                            .map(|m| {
                                if Some(m) == replaced.as_ref() {
                                    rep.clone()
                                } else {
                                    m.clone()
                                }
                            })
                            .collect();
                        if replaced.is_none() {
                            new_list.push(rep);
                        }
                        vec![format!(
                            "patch deployment {name} -p '{}'",
                            json!({"template": {"secrets": new_list}})
                        )]
                    }
                    None => Vec::new(),
                }
            }
            FaultKind::StuckPod => vec![format!("delete pod {name}")],
            FaultKind::Unknown | FaultKind::RecentChange => Vec::new(),
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
        assert_eq!(
            number_before("62% throttling of CPU in deployment x", "% throttling"),
            Some(62)
        );
        assert_eq!(name_of("deployment/x"), "x");
    }
}
