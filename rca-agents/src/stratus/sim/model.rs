//! The simulated cluster's objects and its controllers (deployment -> replica set -> pods,
//! and the scheduler).

use std::collections::{BTreeMap, BTreeSet};

use rca_core::seeded::stable_hash;
use serde::{Deserialize, Serialize};

/// A node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Whether its kubelet reports Ready.
    pub ready: bool,
    /// Cordoned (no new pods are scheduled on it).
    pub unschedulable: bool,
    /// Allocatable CPU, millicores.
    pub cpu_milli: u32,
    /// Allocatable memory, MiB.
    pub memory_mi: u32,
}

/// Container resources; requests equal limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU limit, millicores.
    pub cpu_milli: u32,
    /// Memory limit, MiB.
    pub memory_mi: u32,
}

/// A pod template (one container, named after its deployment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodTemplate {
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// Container image.
    pub image: String,
    /// Declared container port.
    pub container_port: u16,
    /// Environment variables.
    pub env: BTreeMap<String, String>,
    /// Config maps mounted into the container.
    pub config_maps: Vec<String>,
    /// Secrets mounted into the container.
    pub secrets: Vec<String>,
    /// Limits (and requests).
    pub resources: Resources,
    /// Pin to one node, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,
}

/// An earlier revision of a deployment's template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    /// Revision number.
    pub number: u32,
    /// The template of that revision.
    pub template: PodTemplate,
}

/// A replica set (derived from its deployment by the controller).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaSet {
    /// `<deployment>-<template hash>`.
    pub name: String,
    /// The revision it belongs to.
    pub revision: u32,
    /// Desired pods.
    pub replicas: u32,
}

/// A pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    /// `<replica set>-<ordinal>`.
    pub name: String,
    /// The template hash of its replica set.
    pub template_hash: String,
    /// The node it runs on, or `None` while pending.
    pub node: Option<String>,
    /// A hung process: passes its TCP readiness check but answers no request.
    #[serde(default)]
    pub stuck: bool,
    /// Simulated second at which its container started (it turns ready `startup_s` later).
    #[serde(default)]
    pub started_at: u64,
}

/// A deployment, with the replica sets and pods it owns. Only its spec
/// ([`DeploymentSpec`]) is snapshotted and restored, as `kubectl apply` of a saved manifest
/// would; the controller then recreates pods, and lost data stays lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// Its name (also the container's name).
    pub name: String,
    /// Desired replicas.
    pub replicas: u32,
    /// Label selector.
    pub selector: BTreeMap<String, String>,
    /// The current template.
    pub template: PodTemplate,
    /// The current revision number.
    pub revision: u32,
    /// Earlier revisions, oldest first (at most 10).
    pub history: Vec<Revision>,
    /// Keeps its data in the pod (an `emptyDir`): deleting or evicting a pod loses the data.
    #[serde(default)]
    pub stateful: bool,
    /// The data of a stateful deployment was lost: the system has crashed. This is not part
    /// of the deployment's spec, so no snapshot holds it and no restore brings the data back.
    #[serde(default)]
    pub data_lost: bool,
    /// The next pod ordinal.
    pub next_pod: u32,
    /// Owned replica sets.
    pub replica_sets: Vec<ReplicaSet>,
    /// Owned pods.
    pub pods: Vec<Pod>,
}

/// A service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// Its name (also its DNS name).
    pub name: String,
    /// Label selector for endpoints.
    pub selector: BTreeMap<String, String>,
    /// The port clients call.
    pub port: u16,
    /// The container port traffic is sent to.
    #[serde(rename = "targetPort")]
    pub target_port: u16,
}

/// A config map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigMap {
    /// Its name.
    pub name: String,
    /// Its data.
    pub data: BTreeMap<String, String>,
}

/// A secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Secret {
    /// Its name.
    pub name: String,
    /// Its data (shown as keys only).
    pub data: BTreeMap<String, String>,
    /// Creation order (larger is newer).
    #[serde(default)]
    pub created: u32,
}

/// What a config key's value must look like for the process to answer correctly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigRule {
    /// A regular expression the whole value must match.
    pub pattern: String,
    /// What the process logs it expects (`a positive integer (example: 24)`).
    pub expected: String,
}

impl ConfigRule {
    /// Whether `value` satisfies the rule (an invalid pattern accepts nothing). The request
    /// model asks this for every running pod on every health reading, so compiled patterns
    /// are kept (at most [`MAX_CACHED_PATTERNS`]; past that the cache starts over).
    pub fn accepts(&self, value: &str) -> bool {
        static CACHE: std::sync::OnceLock<
            std::sync::Mutex<BTreeMap<String, Option<regex::Regex>>>,
        > = std::sync::OnceLock::new();
        let compile = || regex::Regex::new(&format!("^(?:{})$", self.pattern)).ok();
        let Ok(mut cache) = CACHE
            .get_or_init(|| std::sync::Mutex::new(BTreeMap::new()))
            .lock()
        else {
            return compile().is_some_and(|r| r.is_match(value));
        };
        if !cache.contains_key(&self.pattern) && cache.len() >= MAX_CACHED_PATTERNS {
            cache.clear();
        }
        cache
            .entry(self.pattern.clone())
            .or_insert_with(compile)
            .as_ref()
            .is_some_and(|r| r.is_match(value))
    }
}

/// Most compiled config patterns kept by [`ConfigRule::accepts`].
pub const MAX_CACHED_PATTERNS: usize = 1024;

fn default_startup() -> u64 {
    10
}

/// How an image behaves: the simulator's "registry". Agents never see it; they see what the
/// process does (logs, status, metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageProfile {
    /// The port the process listens on.
    pub listen_port: u16,
    /// Memory the process needs, MiB (more than the limit: OOMKilled).
    pub memory_mi: u32,
    /// CPU one pod needs to serve `rps_per_pod`, millicores (a lower limit throttles).
    pub cpu_milli: u32,
    /// Requests per second one unthrottled pod serves.
    pub rps_per_pod: f64,
    /// Latency of one request with no queueing, milliseconds.
    pub latency_ms: f64,
    /// Fraction of requests a bug makes fail.
    #[serde(default)]
    pub error_rate: f64,
    /// The process exits right after start.
    #[serde(default)]
    pub crashes: bool,
    /// Environment variables holding `host:port` of services this image calls.
    #[serde(default)]
    pub dependency_env: Vec<String>,
    /// Config keys the process reads from its mounted config maps: a missing key stops it at
    /// start, a value its rule rejects makes it answer wrongly.
    #[serde(default)]
    pub config: BTreeMap<String, ConfigRule>,
    /// A secret key holding a credential this image presents upstream.
    #[serde(default)]
    pub credential_key: Option<String>,
    /// Seconds from container start to passing readiness.
    #[serde(default = "default_startup")]
    pub startup_s: u64,
    /// How the process words its log lines (each defaults to the simulator's wording).
    #[serde(default, skip_serializing_if = "is_default_wording")]
    pub logs: super::wording::LogWording,
}

fn is_default_wording(w: &super::wording::LogWording) -> bool {
    *w == super::wording::LogWording::default()
}

/// A user-facing route with its SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Route {
    /// The route's name.
    pub name: String,
    /// The entry service.
    pub service: String,
    /// Offered load, requests per second.
    pub rps: f64,
    /// Minimum success rate.
    pub slo_success: f64,
    /// Maximum latency, milliseconds.
    pub slo_latency_ms: f64,
}

/// The whole simulated cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Cluster {
    /// Nodes.
    pub nodes: BTreeMap<String, Node>,
    /// Deployments (with their replica sets and pods).
    pub deployments: BTreeMap<String, Deployment>,
    /// Services.
    pub services: BTreeMap<String, Service>,
    /// Config maps.
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// Secrets.
    pub secrets: BTreeMap<String, Secret>,
    /// The image registry: images that exist and how they behave.
    pub registry: BTreeMap<String, ImageProfile>,
    /// User-facing routes.
    pub routes: Vec<Route>,
    /// Credential values their issuer has revoked (outside the cluster: no resource holds
    /// this, so agents see it only as the upstream's rejections).
    #[serde(default)]
    pub revoked_credentials: BTreeSet<String>,
    /// Simulated time, seconds. Writes take effect over it: new pods become ready
    /// `startup_s` after they start.
    #[serde(default)]
    pub clock: u64,
    /// Seed of the metric noise.
    #[serde(default)]
    pub noise_seed: u64,
    /// Every write to a top-level object, oldest first ([`super::audit`]). Not part of the
    /// restorable state: undo adds to it, as an audit log would.
    #[serde(default)]
    pub changes: Vec<super::audit::Change>,
}

/// The restorable part of a deployment: what `kubectl get deploy -o json` gives back to
/// `kubectl apply`. Pods are not in it (the controller recreates them), nor is lost data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSpec {
    /// Its name.
    pub name: String,
    /// Desired replicas.
    pub replicas: u32,
    /// Label selector.
    pub selector: BTreeMap<String, String>,
    /// The current template.
    pub template: PodTemplate,
    /// The current revision number.
    pub revision: u32,
    /// Earlier revisions.
    pub history: Vec<Revision>,
    /// Keeps its data in the pod.
    pub stateful: bool,
}

/// The pod-template hash (6 hex digits, as Kubernetes shortens it).
pub fn template_hash(t: &PodTemplate) -> String {
    let text = serde_json::to_string(t).unwrap_or_default();
    format!("{:06x}", stable_hash(text.as_bytes()) & 0xff_ffff)
}

/// Most revisions kept in a deployment's history.
pub const REVISION_HISTORY_LIMIT: usize = 10;

impl Deployment {
    /// A new deployment at revision 1 with no pods yet (the controller creates them).
    pub fn new(name: &str, replicas: u32, template: PodTemplate) -> Self {
        Deployment {
            name: name.to_string(),
            replicas,
            selector: template.labels.clone(),
            template,
            revision: 1,
            history: Vec::new(),
            stateful: false,
            data_lost: false,
            next_pod: 0,
            replica_sets: Vec::new(),
            pods: Vec::new(),
        }
    }

    /// Replaces the template with a new revision (no-op when unchanged).
    pub fn roll_to(&mut self, template: PodTemplate) {
        if template == self.template {
            return;
        }
        let old = std::mem::replace(&mut self.template, template);
        let number = self.revision;
        self.history.push(Revision {
            number,
            template: old,
        });
        if self.history.len() > REVISION_HISTORY_LIMIT {
            self.history.remove(0);
        }
        self.revision = number + 1;
    }

    /// Rolls back to `to` (or the previous revision): that template becomes a new revision.
    pub fn rollback(&mut self, to: Option<u32>) -> Result<u32, String> {
        let idx = match to {
            None => self.history.len().checked_sub(1),
            Some(n) => self.history.iter().position(|r| r.number == n),
        }
        .ok_or_else(|| match to {
            None => format!("deployment {} has no previous revision", self.name),
            Some(n) => format!("deployment {} has no revision {n}", self.name),
        })?;
        let target = self.history.remove(idx);
        let restored = target.number;
        self.roll_to(target.template);
        Ok(restored)
    }

    fn remove_pod(&mut self, i: usize) {
        let pod = self.pods.remove(i);
        // A pod that was never placed on a node never held any data.
        if self.stateful && pod.node.is_some() {
            self.data_lost = true;
        }
    }

    /// The restorable part.
    pub fn spec(&self) -> DeploymentSpec {
        DeploymentSpec {
            name: self.name.clone(),
            replicas: self.replicas,
            selector: self.selector.clone(),
            template: self.template.clone(),
            revision: self.revision,
            history: self.history.clone(),
            stateful: self.stateful,
        }
    }

    /// Puts a saved spec back; pods and lost data stay as they are (the controller then
    /// replaces pods of another template).
    pub fn set_spec(&mut self, spec: DeploymentSpec) {
        self.replicas = spec.replicas;
        self.selector = spec.selector;
        self.template = spec.template;
        self.revision = spec.revision;
        self.history = spec.history;
        self.stateful = spec.stateful;
    }

    /// A deployment made from a saved spec, with no pods yet.
    pub fn from_spec(spec: DeploymentSpec) -> Self {
        let mut d = Deployment::new(&spec.name, spec.replicas, spec.template.clone());
        d.set_spec(spec);
        d
    }

    /// Removes the pod named `name`; the controller will replace it.
    pub fn delete_pod(&mut self, name: &str) -> bool {
        match self.pods.iter().position(|p| p.name == name) {
            Some(i) => {
                self.remove_pod(i);
                true
            }
            None => false,
        }
    }
}

impl Cluster {
    /// Memory and CPU requested on `node` by scheduled pods.
    fn allocated(&self, node: &str) -> (u32, u32) {
        let mut cpu = 0u32;
        let mut mem = 0u32;
        for d in self.deployments.values() {
            for p in &d.pods {
                if p.node.as_deref() == Some(node) {
                    cpu = cpu.saturating_add(d.template.resources.cpu_milli);
                    mem = mem.saturating_add(d.template.resources.memory_mi);
                }
            }
        }
        (cpu, mem)
    }

    /// Free (cpu, memory) on a node.
    pub fn free(&self, node: &Node) -> (u32, u32) {
        let (c, m) = self.allocated(&node.name);
        (
            node.cpu_milli.saturating_sub(c),
            node.memory_mi.saturating_sub(m),
        )
    }

    /// Why a pod of `d` cannot be scheduled anywhere, or the node it goes to.
    pub fn pick_node(&self, d: &Deployment) -> Result<String, String> {
        let r = d.template.resources;
        let mut best: Option<(u32, &str)> = None;
        let (mut not_ready, mut cordoned, mut selector, mut no_room) = (0, 0, 0, 0);
        for n in self.nodes.values() {
            if !n.ready {
                not_ready += 1;
                continue;
            }
            if n.unschedulable {
                cordoned += 1;
                continue;
            }
            if d.template
                .node_selector
                .as_deref()
                .is_some_and(|s| s != n.name)
            {
                selector += 1;
                continue;
            }
            let (cpu, mem) = self.free(n);
            if cpu < r.cpu_milli || mem < r.memory_mi {
                no_room += 1;
                continue;
            }
            if best.is_none_or(|(m, _)| mem > m) {
                best = Some((mem, &n.name));
            }
        }
        best.map(|(_, n)| n.to_string()).ok_or_else(|| {
            format!(
                "0/{} nodes are available: {not_ready} node(s) not ready, {cordoned} node(s) unschedulable, {selector} node(s) didn't match node selector, {no_room} insufficient cpu or memory",
                self.nodes.len()
            )
        })
    }

    /// Runs the controllers to a fixed point: replica sets follow their deployment (Recreate
    /// strategy: pods of an old template are deleted), missing pods are created, extra pods
    /// removed, and pending pods scheduled. Idempotent on a reconciled state.
    pub fn reconcile(&mut self) {
        let now = self.clock;
        for d in self.deployments.values_mut() {
            let h = template_hash(&d.template);
            let mut sets: Vec<ReplicaSet> = Vec::new();
            for r in &d.history {
                let name = format!("{}-{}", d.name, template_hash(&r.template));
                sets.retain(|s| s.name != name);
                sets.push(ReplicaSet {
                    name,
                    revision: r.number,
                    replicas: 0,
                });
            }
            let current = format!("{}-{h}", d.name);
            sets.retain(|s| s.name != current);
            sets.push(ReplicaSet {
                name: current.clone(),
                revision: d.revision,
                replicas: d.replicas,
            });
            d.replica_sets = sets;
            while let Some(i) = d.pods.iter().position(|p| p.template_hash != h) {
                d.remove_pod(i);
            }
            while d.pods.len() > d.replicas as usize {
                d.remove_pod(d.pods.len() - 1);
            }
            while d.pods.len() < d.replicas as usize {
                d.pods.push(Pod {
                    name: format!("{current}-{}", d.next_pod),
                    template_hash: h.clone(),
                    node: None,
                    stuck: false,
                    started_at: now,
                });
                d.next_pod += 1;
            }
        }
        let names: Vec<String> = self.deployments.keys().cloned().collect();
        for name in names {
            let Some(d) = self.deployments.get(&name) else {
                continue;
            };
            let pending: Vec<usize> = d
                .pods
                .iter()
                .enumerate()
                .filter(|(_, p)| p.node.is_none())
                .map(|(i, _)| i)
                .collect();
            for i in pending {
                let Some(d) = self.deployments.get(&name) else {
                    break;
                };
                let Ok(node) = self.pick_node(d) else {
                    break;
                };
                if let Some(p) = self
                    .deployments
                    .get_mut(&name)
                    .and_then(|d| d.pods.get_mut(i))
                {
                    p.node = Some(node);
                    p.started_at = now;
                }
            }
        }
    }

    /// The deployment owning the pod `name`.
    pub fn pod_owner(&self, pod: &str) -> Option<&Deployment> {
        self.deployments
            .values()
            .find(|d| d.pods.iter().any(|p| p.name == pod))
    }

    /// A stable hash of the restorable state: nodes, deployment specs, services, config maps
    /// and secrets. Pods, time and lost data are not in it: they are what the system does
    /// with the specs, and no snapshot can set them.
    pub fn state_hash(&self) -> u64 {
        let specs: BTreeMap<&String, DeploymentSpec> = self
            .deployments
            .iter()
            .map(|(k, d)| (k, d.spec()))
            .collect();
        let view = serde_json::json!({
            "nodes": self.nodes,
            "deployments": specs,
            "services": self.services,
            "configMaps": self.config_maps,
            "secrets": self.secrets,
        });
        stable_hash(view.to_string().as_bytes())
    }

    /// Lets simulated time pass until every starting pod is ready, or at most `max_s`
    /// seconds; returns the seconds that passed.
    pub fn settle(&mut self, max_s: u64) -> u64 {
        let mut until = self.clock;
        for d in self.deployments.values() {
            let startup = self.profile(d).map_or(0, |p| p.startup_s);
            for p in &d.pods {
                if self.pod_status(d, p).reason == Some("Starting") {
                    until = until.max(p.started_at.saturating_add(startup));
                }
            }
        }
        let waited = until.saturating_sub(self.clock).min(max_s);
        self.clock += waited;
        waited
    }
}
