//! The deterministic diagnosis agent: localise, then read the evidence (STRATUS section 4).
//!
//! 1. Nodes first: a NotReady node that still hosts pods, or pods pending while ready nodes
//!    are cordoned.
//! 2. Localise on the call graph: a service is a suspect when it has symptoms of its own
//!    (no endpoints, error responses, unready pods, wrong answers); the root is the deepest
//!    suspect none of whose callees is a suspect, since faults propagate towards the entries.
//! 3. Read the root's evidence as an SRE would, in order: its endpoints and selector, its
//!    pods' states, the status codes it answers with, and its pods' logs.
//!
//! It reads only what `kubectl get/describe/logs` and the alerts show; it knows no scenario.

use async_trait::async_trait;
use serde_json::Value;

use super::Feedback;
use super::diagnosis::{Diagnoser, Diagnosis, FaultKind, items, quoted, str_of};
use crate::stratus::environment::{ReadAccess, ServiceGraph};
use crate::stratus::error::StratusError;
use crate::stratus::severity::HealthReport;

/// Deterministic diagnosis from node and pod states, service metrics, logs and the call graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyDiagnoser;

fn diag(component: String, fault: FaultKind, reason: impl Into<String>) -> Diagnosis {
    Diagnosis {
        component,
        fault,
        reason: reason.into(),
    }
}

fn is_true(v: &Value, k: &str) -> bool {
    v.get(k) == Some(&Value::Bool(true))
}

/// What diagnosis reads once per call.
struct Observed {
    health: HealthReport,
    graph: ServiceGraph,
    nodes: Vec<Value>,
    pods: Vec<Value>,
    services: Vec<Value>,
    deployments: Vec<Value>,
}

impl Observed {
    async fn read(env: &dyn ReadAccess) -> Result<Self, StratusError> {
        Ok(Observed {
            health: env.observe().await?,
            graph: env.service_graph().await?,
            nodes: items(env, "nodes").await?,
            pods: items(env, "pods").await?,
            services: items(env, "services").await?,
            deployments: items(env, "deployments").await?,
        })
    }

    fn service(&self, name: &str) -> Option<&Value> {
        self.services.iter().find(|s| str_of(s, "name") == name)
    }

    /// Deployments whose pod labels a service's selector matches.
    fn backing(&self, service: &Value) -> Vec<&Value> {
        let Some(sel) = service.get("selector").and_then(Value::as_object) else {
            return Vec::new();
        };
        if sel.is_empty() {
            return Vec::new();
        }
        self.deployments
            .iter()
            .filter(|d| {
                sel.iter()
                    .all(|(k, v)| d.pointer(&format!("/template/labels/{k}")) == Some(v))
            })
            .collect()
    }

    fn pods_of(&self, deployment: &str) -> Vec<&Value> {
        self.pods
            .iter()
            .filter(|p| str_of(p, "deployment") == deployment)
            .collect()
    }

    /// Whether a service shows symptoms of its own.
    fn symptomatic(&self, service: &Value) -> bool {
        let rps = service
            .pointer("/metrics/rps")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        if rps <= 0.0 {
            return false;
        }
        let no_endpoints = service
            .get("endpoints")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let errors = service
            .pointer("/metrics/errors")
            .and_then(Value::as_object)
            .is_some_and(|e| !e.is_empty());
        let unready = self.backing(service).iter().any(|d| {
            self.pods_of(str_of(d, "name"))
                .iter()
                .any(|p| !is_true(p, "ready"))
        });
        no_endpoints || errors || unready
    }
}

#[async_trait]
impl Diagnoser for PolicyDiagnoser {
    async fn diagnose(
        &self,
        env: &dyn ReadAccess,
        _feedback: &[Feedback],
    ) -> Result<Diagnosis, StratusError> {
        let o = Observed::read(env).await?;
        if let Some(d) = node_fault(&o) {
            return Ok(d);
        }
        for name in localise(&o) {
            if let Some(d) = examine(env, &o, &name).await? {
                return Ok(d);
            }
        }
        // No service shows a symptom of its own, yet answers are wrong: read the logs of the
        // services the failing routes reach.
        if !o.health.failed_probes.is_empty() {
            let entries: Vec<&str> = o.graph.entries.iter().map(String::as_str).collect();
            for name in reachable(&o.graph, &entries) {
                let Some(s) = o.service(&name) else {
                    continue;
                };
                for d in o.backing(s) {
                    if let Some(found) = from_logs(env, str_of(d, "name")).await? {
                        return Ok(found);
                    }
                }
            }
        }
        // A route misses its latency objective with no error anywhere: the service that adds
        // the most latency of its own (its latency minus its callees') is short of capacity.
        if !o.health.sla_violations.is_empty()
            && let Some(name) = slowest_own(&o)
            && let Some(d) = o.service(&name).and_then(|s| o.backing(s).first().copied())
        {
            return Ok(diag(
                format!("deployment/{}", str_of(d, "name")),
                FaultKind::Overload,
                format!(
                    "a route misses its latency objective; {name} adds the most latency of its own"
                ),
            ));
        }
        if let Some(a) = o
            .health
            .alerts
            .iter()
            .find(|a| a.name == "CPUThrottlingHigh")
        {
            return Ok(diag(
                a.component.clone(),
                FaultKind::CpuThrottling,
                a.message.clone(),
            ));
        }
        Ok(diag(
            String::new(),
            FaultKind::Unknown,
            "no component shows a symptom of its own",
        ))
    }
}

fn node_fault(o: &Observed) -> Option<Diagnosis> {
    for n in &o.nodes {
        let hosts = n
            .get("pods")
            .and_then(Value::as_array)
            .is_some_and(|p| !p.is_empty());
        if n.get("ready") == Some(&Value::Bool(false)) && hosts {
            return Some(diag(
                format!("node/{}", str_of(n, "name")),
                FaultKind::NodeNotReady,
                "node is NotReady and still hosts pods",
            ));
        }
    }
    let pending = o
        .pods
        .iter()
        .find(|p| str_of(p, "reason") == "Unschedulable")?;
    let cordoned: Vec<&str> = o
        .nodes
        .iter()
        .filter(|n| is_true(n, "ready") && is_true(n, "unschedulable"))
        .map(|n| str_of(n, "name"))
        .collect();
    let first = cordoned.first()?;
    Some(diag(
        format!("node/{first}"),
        FaultKind::NodeCordoned,
        format!(
            "pods pending ({}); ready but cordoned: {}",
            str_of(pending, "message"),
            cordoned.join(", ")
        ),
    ))
}

/// The service with the largest latency of its own (its latency minus its callees').
fn slowest_own(o: &Observed) -> Option<String> {
    let latency = |name: &str| {
        o.service(name)
            .and_then(|s| s.pointer("/metrics/latency_ms"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    o.services
        .iter()
        .filter(|s| {
            s.pointer("/metrics/rps")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                > 0.0
        })
        .map(|s| {
            let name = str_of(s, "name");
            let callees: f64 = o.graph.callees(name).iter().map(|c| latency(c)).sum();
            (latency(name) - callees, name)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n.to_string())
}

/// How many nodes a scheduler message says did not match the pod's node selector.
fn selector_mismatches(message: &str) -> usize {
    message
        .split(", ")
        .find_map(|part| {
            let part = part.rsplit(": ").next().unwrap_or(part);
            part.strip_suffix(" node(s) didn't match node selector")
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The port a deployment's process says it listens on (its log's `listening on :PORT`).
async fn listen_port(env: &dyn ReadAccess, dep: &str) -> Option<u64> {
    let logs = env
        .run_text(&format!("logs deployment/{dep} --tail=50"))
        .await
        .ok()?;
    logs.lines()
        .find_map(|l| l.strip_prefix("listening on :"))
        .and_then(|p| p.trim().parse().ok())
}

/// Suspects, root causes first: a suspect none of whose callees is a suspect comes before one
/// that may only suffer from its callees; deeper before shallower.
fn localise(o: &Observed) -> Vec<String> {
    let suspects: Vec<&str> = o
        .services
        .iter()
        .filter(|s| o.symptomatic(s))
        .map(|s| str_of(s, "name"))
        .collect();
    let mut ranked: Vec<(bool, usize, &str)> = suspects
        .iter()
        .map(|s| {
            let downstream = o.graph.callees(s).iter().any(|c| suspects.contains(c));
            (downstream, o.graph.depth(s), *s)
        })
        .collect();
    ranked.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(b.1.min(1000).cmp(&a.1.min(1000)))
            .then(a.2.cmp(b.2))
    });
    ranked.into_iter().map(|(_, _, s)| s.to_string()).collect()
}

/// Services reachable from `starts` over the call graph, deepest first.
fn reachable(graph: &ServiceGraph, starts: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = starts.iter().map(|s| s.to_string()).collect();
    let mut i = 0;
    while i < seen.len() {
        let next: Vec<String> = graph
            .callees(&seen[i])
            .into_iter()
            .filter(|c| !seen.iter().any(|s| s == c))
            .map(str::to_string)
            .collect();
        for c in next {
            if !seen.contains(&c) {
                seen.push(c);
            }
        }
        i += 1;
    }
    seen.sort_by_key(|s| std::cmp::Reverse(graph.depth(s).min(1000)));
    seen
}

/// Reads the evidence of one suspect service.
async fn examine(
    env: &dyn ReadAccess,
    o: &Observed,
    name: &str,
) -> Result<Option<Diagnosis>, StratusError> {
    let Some(s) = o.service(name) else {
        return Ok(None);
    };
    let backing = o.backing(s);
    let Some(first) = backing.first() else {
        return Ok(Some(diag(
            format!("service/{name}"),
            FaultKind::SelectorMismatch,
            format!("service {name} selects no deployment's pods"),
        )));
    };
    let dep = str_of(first, "name");
    let component = format!("deployment/{dep}");
    if first.get("replicas") == Some(&Value::from(0)) {
        return Ok(Some(diag(
            component,
            FaultKind::ScaledToZero,
            format!("service {name} has no endpoints; deployment {dep} has 0 replicas"),
        )));
    }
    // Pods that do not run tell the most.
    for p in o.pods_of(dep) {
        if is_true(p, "ready") {
            continue;
        }
        let msg = str_of(p, "message");
        let found = match str_of(p, "reason") {
            "ImagePullBackOff" => Some(diag(component.clone(), FaultKind::BadImage, msg)),
            "CreateContainerConfigError" => {
                let kind = if msg.starts_with("secret") {
                    "secret"
                } else {
                    "configmap"
                };
                Some(diag(
                    format!("{kind}/{}", quoted(msg).unwrap_or("")),
                    FaultKind::MissingConfig,
                    format!("{msg} (needed by {component})"),
                ))
            }
            "OOMKilled" => Some(diag(component.clone(), FaultKind::MemoryLimit, msg)),
            "Unschedulable" if selector_mismatches(msg) > 0 => Some(diag(
                component.clone(),
                FaultKind::NodeSelector,
                format!("pods pending: {msg}"),
            )),
            "CrashLoopBackOff" => match from_logs(env, dep).await? {
                Some(d) => Some(d),
                None => Some(diag(
                    component.clone(),
                    FaultKind::BadRollout,
                    format!("the current build exits after start: {msg}"),
                )),
            },
            _ => None,
        };
        if found.is_some() {
            return Ok(found);
        }
    }
    let errors = s.pointer("/metrics/errors").cloned().unwrap_or(Value::Null);
    let has = |code: &str| errors.get(code).is_some();
    if has("503") {
        let port = s.get("targetPort").and_then(Value::as_u64);
        // What the process says it listens on beats what its manifest declares.
        let declared = o
            .pods_of(dep)
            .iter()
            .find_map(|p| p.get("containerPort").and_then(Value::as_u64));
        let listening = listen_port(env, dep).await.or(declared);
        if let (Some(port), Some(listening)) = (port, listening)
            && port != listening
        {
            return Ok(Some(diag(
                format!("service/{name}"),
                FaultKind::WrongTargetPort,
                format!(
                    "endpoints refuse connections on targetPort {port}; the pods listen on {listening}"
                ),
            )));
        }
    }
    if has("504")
        && let Some(p) = o.pods_of(dep).into_iter().find(|p| {
            p.pointer("/metrics/timeout_rate")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                > 0.0
        })
    {
        return Ok(Some(diag(
            format!("pod/{}", str_of(p, "name")),
            FaultKind::StuckPod,
            "every request to this pod times out",
        )));
    }
    if has("502") || has("401") || has("500") {
        if let Some(d) = from_logs(env, dep).await? {
            return Ok(Some(d));
        }
        if has("500") {
            return Ok(Some(diag(
                component,
                FaultKind::BadRollout,
                "the current build fails requests (500)",
            )));
        }
    }
    if has("429") {
        let throttled = o
            .health
            .alerts
            .iter()
            .find(|a| a.name == "CPUThrottlingHigh" && a.component == component);
        return Ok(Some(match throttled {
            Some(a) => diag(component, FaultKind::CpuThrottling, a.message.clone()),
            None => diag(
                component,
                FaultKind::Overload,
                "offered load exceeds serving capacity (429)",
            ),
        }));
    }
    Ok(None)
}

/// Reads a deployment's logs for the lines that name a cause.
async fn from_logs(env: &dyn ReadAccess, dep: &str) -> Result<Option<Diagnosis>, StratusError> {
    let Ok(logs) = env
        .run_text(&format!("logs deployment/{dep} --tail=50"))
        .await
    else {
        return Ok(None);
    };
    let component = format!("deployment/{dep}");
    for line in logs.lines() {
        if line.contains("config key") && line.contains("is missing") {
            return Ok(Some(diag(component, FaultKind::MissingConfigKey, line)));
        }
        if line.contains("config key") && line.contains("not valid") {
            return Ok(Some(diag(component, FaultKind::InvalidConfigValue, line)));
        }
        if let Some(rest) = line.strip_prefix("error: dial ")
            && let Some((addr, var)) = rest.split_once(" (")
        {
            let var = var.split(')').next().unwrap_or("");
            return Ok(Some(diag(
                component,
                FaultKind::WrongEnv,
                format!("dependency address does not answer: {var}={addr}"),
            )));
        }
        if line.contains("is not set") && line.starts_with("error: ") {
            return Ok(Some(diag(component, FaultKind::WrongEnv, line)));
        }
        if line.contains("no mounted secret holds credential key") {
            return Ok(Some(diag(
                component,
                FaultKind::RevokedSecret,
                line.trim_start_matches("error: ").to_string(),
            )));
        }
        if line.contains("rejected the credential") {
            let secret = line
                .split("secret ")
                .nth(1)
                .and_then(|r| r.split(':').next())
                .unwrap_or("");
            return Ok(Some(diag(
                component,
                FaultKind::RevokedSecret,
                format!("upstream rejects the credential of secret `{secret}` (401)"),
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_schedulers_selector_count() {
        let m = "0/4 nodes are available: 0 node(s) not ready, 0 node(s) unschedulable, 3 node(s) didn't match node selector, 1 insufficient cpu or memory";
        assert_eq!(selector_mismatches(m), 3);
        assert_eq!(
            selector_mismatches("0/3 nodes are available: 3 node(s) not ready"),
            0
        );
    }
}
