//! What the deterministic diagnosis reads once per attempt, and the relations between the
//! objects it read: which service selects which deployment's pods, which deployment mounts
//! which config map or secret, calls which service through which address, runs on which
//! node; and which services show symptoms of their own.

use std::collections::BTreeMap;

use serde_json::Value;

use super::diagnosis::{items, str_of};
use crate::stratus::environment::{ReadAccess, ServiceGraph};
use crate::stratus::error::StratusError;
use crate::stratus::severity::HealthReport;

/// Most deployments whose logs one diagnosis reads.
pub const MAX_LOG_READS: usize = 12;

/// Log lines read per deployment.
pub const LOG_TAIL: usize = 50;

/// The state one diagnosis works from.
pub struct Observed {
    /// The current health.
    pub health: HealthReport,
    /// The service call graph.
    pub graph: ServiceGraph,
    /// `get nodes -o json` items.
    pub nodes: Vec<Value>,
    /// `get pods -o json` items.
    pub pods: Vec<Value>,
    /// `get services -o json` items.
    pub services: Vec<Value>,
    /// `get deployments -o json` items.
    pub deployments: Vec<Value>,
    /// `get configmaps -o json` items.
    pub config_maps: Vec<Value>,
    /// `get secrets -o json` items (key names only).
    pub secrets: Vec<Value>,
    /// `history` entries, oldest first (empty when the environment keeps none).
    pub history: Vec<Value>,
    /// Log lines per deployment, for the deployments whose logs were read.
    pub logs: BTreeMap<String, Vec<String>>,
}

pub(crate) fn is_true(v: &Value, k: &str) -> bool {
    v.get(k) == Some(&Value::Bool(true))
}

fn f64_at(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The strings of the JSON array at `pointer` (none when it is absent).
pub(crate) fn strings_at(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(String::from))
        .collect()
}

impl Observed {
    /// Reads the cluster's objects, health, graph and history (logs come later, for the
    /// deployments that matter: [`Observed::read_logs`]).
    pub async fn read(env: &dyn ReadAccess) -> Result<Self, StratusError> {
        let history = match env.run_text("history").await {
            Ok(text) => serde_json::from_str::<Vec<Value>>(&text).unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let optional = |r: Result<Vec<Value>, StratusError>| r.unwrap_or_default();
        Ok(Observed {
            health: env.observe().await?,
            graph: env.service_graph().await?,
            nodes: items(env, "nodes").await?,
            pods: items(env, "pods").await?,
            services: items(env, "services").await?,
            deployments: items(env, "deployments").await?,
            config_maps: optional(items(env, "configmaps").await),
            secrets: optional(items(env, "secrets").await),
            history,
            logs: BTreeMap::new(),
        })
    }

    /// Reads the logs of `deployments` (at most [`MAX_LOG_READS`] in all); a deployment
    /// whose pods do not run has none.
    pub async fn read_logs(&mut self, env: &dyn ReadAccess, deployments: &[String]) {
        for d in deployments {
            if self.logs.len() >= MAX_LOG_READS {
                break;
            }
            if self.logs.contains_key(d) {
                continue;
            }
            let lines = env
                .run_text(&format!("logs deployment/{d} --tail={LOG_TAIL}"))
                .await
                .map(|t| t.lines().map(str::to_string).collect())
                .unwrap_or_default();
            self.logs.insert(d.clone(), lines);
        }
    }

    /// The service named `name`.
    pub fn service(&self, name: &str) -> Option<&Value> {
        self.services.iter().find(|s| str_of(s, "name") == name)
    }

    /// The deployment named `name`.
    pub fn deployment(&self, name: &str) -> Option<&Value> {
        self.deployments.iter().find(|d| str_of(d, "name") == name)
    }

    /// The config map named `name`.
    pub fn config_map(&self, name: &str) -> Option<&Value> {
        self.config_maps.iter().find(|c| str_of(c, "name") == name)
    }

    /// The secret named `name`.
    pub fn secret(&self, name: &str) -> Option<&Value> {
        self.secrets.iter().find(|c| str_of(c, "name") == name)
    }

    /// Deployments whose pod labels a service's selector matches.
    pub fn backing(&self, service: &Value) -> Vec<&Value> {
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

    /// Services whose selector matches a deployment's pods.
    pub fn selecting(&self, deployment: &Value) -> Vec<&Value> {
        let name = str_of(deployment, "name");
        self.services
            .iter()
            .filter(|s| self.backing(s).iter().any(|d| str_of(d, "name") == name))
            .collect()
    }

    /// The pods of a deployment.
    pub fn pods_of(&self, deployment: &str) -> Vec<&Value> {
        self.pods
            .iter()
            .filter(|p| str_of(p, "deployment") == deployment)
            .collect()
    }

    /// Config maps a deployment mounts.
    pub fn mounted_maps(&self, deployment: &Value) -> Vec<String> {
        strings_at(deployment, "/template/config_maps")
    }

    /// Secrets a deployment mounts.
    pub fn mounted_secrets(&self, deployment: &Value) -> Vec<String> {
        strings_at(deployment, "/template/secrets")
    }

    /// The deployment keeps data in its pods (an `emptyDir` volume).
    pub fn keeps_data(&self, deployment: &Value) -> bool {
        deployment
            .get("volumes")
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().any(|v| v.get("emptyDir").is_some()))
    }

    /// A service's offered load.
    pub fn demand(&self, service: &Value) -> f64 {
        f64_at(service, "/metrics/rps")
    }

    /// The error codes a service answers with.
    pub fn error_codes(&self, service: &Value) -> Vec<String> {
        service
            .pointer("/metrics/errors")
            .and_then(Value::as_object)
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Pods of a deployment that are not ready for a reason other than starting up.
    pub fn broken_pods(&self, deployment: &str) -> Vec<&Value> {
        self.pods_of(deployment)
            .into_iter()
            .filter(|p| !is_true(p, "ready") && str_of(p, "reason") != "Starting")
            .collect()
    }

    /// Whether a service shows symptoms of its own: no endpoints, error responses or unready
    /// pods while it has load.
    pub fn symptomatic(&self, service: &Value) -> bool {
        if self.demand(service) <= 0.0 {
            return false;
        }
        let no_endpoints = service
            .get("endpoints")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let errors = !self.error_codes(service).is_empty();
        let unready = self
            .backing(service)
            .iter()
            .any(|d| !self.broken_pods(str_of(d, "name")).is_empty());
        no_endpoints || errors || unready
    }

    /// Suspect services, root causes first: a suspect none of whose callees is a suspect
    /// comes before one that may only suffer from its callees; deeper before shallower.
    pub fn localise(&self) -> Vec<String> {
        let suspects: Vec<&str> = self
            .services
            .iter()
            .filter(|s| self.symptomatic(s))
            .map(|s| str_of(s, "name"))
            .collect();
        let mut ranked: Vec<(bool, usize, &str)> = suspects
            .iter()
            .map(|s| {
                let downstream = self.graph.callees(s).iter().any(|c| suspects.contains(c));
                (downstream, self.graph.depth(s), *s)
            })
            .collect();
        ranked.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.min(1000).cmp(&a.1.min(1000)))
                .then(a.2.cmp(b.2))
        });
        ranked.into_iter().map(|(_, _, s)| s.to_string()).collect()
    }

    /// Services reachable from the entries over the call graph, deepest first.
    pub fn reachable(&self) -> Vec<String> {
        let mut seen: Vec<String> = self.graph.entries.clone();
        let mut i = 0;
        while i < seen.len() {
            let next: Vec<String> = self
                .graph
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
        seen.sort_by_key(|s| std::cmp::Reverse(self.graph.depth(s).min(1000)));
        seen
    }

    /// The service with the largest latency of its own (its latency minus its callees').
    pub fn slowest_own(&self) -> Option<String> {
        let latency = |name: &str| {
            self.service(name)
                .map_or(0.0, |s| f64_at(s, "/metrics/latency_ms"))
        };
        self.services
            .iter()
            .filter(|s| self.demand(s) > 0.0)
            .map(|s| {
                let name = str_of(s, "name");
                let callees: f64 = self.graph.callees(name).iter().map(|c| latency(c)).sum();
                (latency(name) - callees, name)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n.to_string())
    }
}
