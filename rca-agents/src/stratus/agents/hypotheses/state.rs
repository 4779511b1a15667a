//! Families that read states and measured quantities: NotReady nodes, pods no node takes,
//! containers at their limits, pods that answer nothing, demand above capacity.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::shapes::patch;
use super::{Builder, Family};
use crate::stratus::agents::diagnosis::{FaultKind, str_of};
use crate::stratus::agents::observed::{is_true, strings_at};

impl Builder<'_> {
    pub(super) fn nodes(&mut self, max_commands: usize) {
        let o = self.o;
        for n in &o.nodes {
            let name = str_of(n, "name");
            let hosted = strings_at(n, "/pods");
            if n.get("ready") != Some(&Value::Bool(false)) || hosted.is_empty() {
                continue;
            }
            // Cordon, then move the stateless pods off; a pod whose data lives in it stays.
            let mut fix = vec![format!("cordon {name}")];
            for p in &hosted {
                let owner = o
                    .pods
                    .iter()
                    .find(|x| str_of(x, "name") == p)
                    .map(|x| str_of(x, "deployment"))
                    .unwrap_or("");
                let keeps = o.deployment(owner).is_some_and(|d| o.keeps_data(d));
                if !keeps && fix.len() < max_commands {
                    fix.push(format!("delete pod {p}"));
                }
            }
            self.push(
                Family::Node,
                FaultKind::NodeNotReady,
                format!("node/{name}"),
                format!("node {name} is NotReady and hosts {} pods", hosted.len()),
                fix,
            );
        }
    }

    pub(super) fn placement(&mut self) {
        let o = self.o;
        let pending: Vec<&Value> = o
            .pods
            .iter()
            .filter(|p| str_of(p, "reason") == "Unschedulable")
            .collect();
        if pending.is_empty() {
            return;
        }
        let cordoned: Vec<&str> = o
            .nodes
            .iter()
            .filter(|n| is_true(n, "ready") && is_true(n, "unschedulable"))
            .map(|n| str_of(n, "name"))
            .collect();
        // As close to the symptoms as the closest deployment whose pods wait.
        let waiting = pending
            .iter()
            .map(|p| self.relevance(&format!("deployment/{}", str_of(p, "deployment"))))
            .min()
            .unwrap_or(3);
        if let Some(first) = cordoned.first()
            && let Some(h) = self.push(
                Family::Placement,
                FaultKind::NodeCordoned,
                format!("node/{first}"),
                format!(
                    "{} pods pending; ready but cordoned: {}",
                    pending.len(),
                    cordoned.join(", ")
                ),
                cordoned.iter().map(|n| format!("uncordon {n}")).collect(),
            )
        {
            h.relevance = h.relevance.min(waiting);
        }
        let mut seen = BTreeSet::new();
        for p in pending {
            let dep = str_of(p, "deployment");
            if !seen.insert(dep) {
                continue;
            }
            let pinned = o
                .deployment(dep)
                .and_then(|d| d.pointer("/template/node_selector"))
                .and_then(Value::as_str);
            if let Some(node) = pinned {
                let fix = patch(
                    "deployment",
                    dep,
                    &json!({"template": {"node_selector": null}}),
                );
                self.push(
                    Family::Placement,
                    FaultKind::NodeSelector,
                    format!("deployment/{dep}"),
                    format!("pods of {dep} pending; they are pinned to node {node}"),
                    fix.into_iter().collect(),
                );
            }
            self.requests_that_fit_nowhere(dep);
        }
    }

    /// A deployment whose pods request more CPU or memory than any ready, schedulable node
    /// has free: its requests (limits, here) lowered to what the roomiest node can take.
    fn requests_that_fit_nowhere(&mut self, dep: &str) {
        let o = self.o;
        let Some(d) = o.deployment(dep) else { return };
        let cpu = d
            .pointer("/template/resources/cpu_milli")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mem = d
            .pointer("/template/resources/memory_mi")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let free = |n: &Value, k: &str| {
            n.pointer(&format!("/free/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let nodes: Vec<&Value> = o
            .nodes
            .iter()
            .filter(|n| is_true(n, "ready") && !is_true(n, "unschedulable"))
            .collect();
        if nodes
            .iter()
            .any(|n| free(n, "cpu_milli") >= cpu && free(n, "memory_mi") >= mem)
        {
            return;
        }
        let Some(roomiest) = nodes
            .iter()
            .max_by_key(|n| (free(n, "cpu_milli").min(cpu), free(n, "memory_mi").min(mem)))
        else {
            return;
        };
        let (fit_cpu, fit_mem) = (
            free(roomiest, "cpu_milli").min(cpu),
            free(roomiest, "memory_mi").min(mem),
        );
        if fit_cpu == 0 || fit_mem == 0 {
            return;
        }
        let mut limits = Vec::new();
        if fit_cpu < cpu {
            limits.push(format!("cpu={fit_cpu}m"));
        }
        if fit_mem < mem {
            limits.push(format!("memory={fit_mem}Mi"));
        }
        self.push(
            Family::Placement,
            FaultKind::RequestsTooLarge,
            format!("deployment/{dep}"),
            format!(
                "pods of {dep} request {cpu}m and {mem}Mi; no ready node has that much free ({} has {fit_cpu}m, {fit_mem}Mi)",
                str_of(roomiest, "name")
            ),
            vec![format!(
                "set resources deployment/{dep} --limits={}",
                limits.join(",")
            )],
        );
    }

    pub(super) fn resources(&mut self) {
        let o = self.o;
        for d in &o.deployments {
            let dep = str_of(d, "name");
            let pods = o.pods_of(dep);
            let component = format!("deployment/{dep}");
            if pods.iter().any(|p| str_of(p, "reason") == "OOMKilled") {
                let cur = d
                    .pointer("/template/resources/memory_mi")
                    .and_then(Value::as_u64)
                    .unwrap_or(128);
                self.push(
                    Family::Resources,
                    FaultKind::MemoryLimit,
                    component.clone(),
                    format!("pods of {dep} are killed at their memory limit of {cur}Mi"),
                    vec![format!(
                        "set resources deployment/{dep} --limits=memory={}Mi",
                        (cur * 2).div_ceil(64) * 64
                    )],
                );
            }
            let share = pods
                .iter()
                .filter_map(|p| p.pointer("/usage/cpu_throttled").and_then(Value::as_f64))
                .fold(0.0, f64::max);
            if share >= 0.05 {
                let cur = d
                    .pointer("/template/resources/cpu_milli")
                    .and_then(Value::as_u64)
                    .unwrap_or(100)
                    .max(1);
                // The throttled share says how far below its need the limit is; a quarter
                // on top covers the noise of that reading.
                let need = (cur as f64 / (1.0 - share.min(0.95)) * 1.25).ceil() as u64;
                self.push(
                    Family::Resources,
                    FaultKind::CpuThrottling,
                    component,
                    format!(
                        "{:.0}% of CPU periods of {dep} are throttled at {cur}m",
                        share * 100.0
                    ),
                    vec![format!(
                        "set resources deployment/{dep} --limits=cpu={}m",
                        need.div_ceil(50) * 50
                    )],
                );
            }
        }
    }

    pub(super) fn liveness(&mut self) {
        let o = self.o;
        for p in &o.pods {
            let timeouts = p
                .pointer("/metrics/timeout_rate")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if timeouts <= 0.0 {
                continue;
            }
            let name = str_of(p, "name");
            let dep = str_of(p, "deployment");
            if o.deployment(dep).is_some_and(|d| o.keeps_data(d)) {
                continue;
            }
            let relevance = self.relevance(&format!("deployment/{dep}"));
            if let Some(h) = self.push(
                Family::Liveness,
                FaultKind::StuckPod,
                format!("pod/{name}"),
                format!(
                    "{:.0}% of requests to pod {name} time out",
                    timeouts * 100.0
                ),
                vec![format!("delete pod {name}")],
            ) {
                h.relevance = relevance;
            }
        }
    }

    /// Demand against capacity: a service that rejects a share of its load (429) serves
    /// `demand x (1 - share)` with its ready pods, so each pod serves that over their
    /// number, and the deployment needs `demand / per-pod / UTILISATION` pods. One
    /// hypothesis sizes every overloaded deployment at once (one transaction); each is also
    /// its own hypothesis. A route over its latency objective with no rejection steps the
    /// deployment adding the most latency of its own by half again.
    pub(super) fn capacity(&mut self, max_commands: usize) {
        let o = self.o;
        let mut sized: Vec<(String, String)> = Vec::new();
        for s in &o.services {
            let rejected = s
                .pointer("/metrics/errors/429")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if rejected <= 0.0 {
                continue;
            }
            let demand = o.demand(s);
            for d in o.backing(s) {
                let dep = str_of(d, "name");
                let n = d.get("replicas").and_then(Value::as_u64).unwrap_or(1);
                let ready = o
                    .pods_of(dep)
                    .iter()
                    .filter(|p| is_true(p, "ready"))
                    .count()
                    .max(1) as f64;
                let per_pod = demand * (1.0 - rejected.min(0.99)) / ready;
                let need = if per_pod > 0.0 {
                    (demand / per_pod / UTILISATION).ceil() as u64
                } else {
                    n + 1
                };
                let need = need.clamp(n + 1, MAX_REPLICAS);
                sized.push((
                    dep.to_string(),
                    format!("scale deployment {dep} --replicas={need}"),
                ));
                self.push(
                    Family::Capacity,
                    FaultKind::Overload,
                    format!("deployment/{dep}"),
                    format!(
                        "{} rejects {:.0}% of {demand:.0} rps (429) with {ready} ready pods; {need} carry it",
                        str_of(s, "name"),
                        rejected * 100.0
                    ),
                    vec![format!("scale deployment {dep} --replicas={need}")],
                );
            }
        }
        if sized.len() > 1 && sized.len() <= max_commands {
            let names: Vec<&str> = sized.iter().map(|(d, _)| d.as_str()).collect();
            let first = format!("deployment/{}", names[0]);
            self.push(
                Family::Capacity,
                FaultKind::Overload,
                first,
                format!(
                    "{} deployments reject load (429): {}",
                    names.len(),
                    names.join(", ")
                ),
                sized.iter().map(|(_, c)| c.clone()).collect(),
            );
            // The joint sizing is one transaction: it ranks with the closest of its
            // deployments and goes before each single one.
            let closest = names
                .iter()
                .map(|d| self.relevance(&format!("deployment/{d}")))
                .min()
                .unwrap_or(3);
            if let Some(mut h) = self.out.pop() {
                h.relevance = closest;
                let at = self.out.len() - sized.len();
                self.out.insert(at, h);
            }
        }
        if !o.health.sla_violations.is_empty()
            && let Some(s) = o.slowest_own()
            && let Some(svc) = o.service(&s)
        {
            for d in o.backing(svc) {
                let dep = str_of(d, "name");
                if sized.iter().any(|(x, _)| x == dep) {
                    continue;
                }
                let n = d.get("replicas").and_then(Value::as_u64).unwrap_or(1);
                let more = (n * 3).div_ceil(2).max(n + 1).min(MAX_REPLICAS);
                self.push(
                    Family::Capacity,
                    FaultKind::Overload,
                    format!("deployment/{dep}"),
                    format!(
                        "a route misses its latency objective; {s} adds the most latency of its own"
                    ),
                    vec![format!("scale deployment {dep} --replicas={more}")],
                );
            }
        }
    }
}

/// The utilisation a deployment is sized for: headroom keeps queueing latency low.
const UTILISATION: f64 = 0.7;

/// The most replicas a capacity hypothesis asks for (the simulated quota is 50).
const MAX_REPLICAS: u64 = 50;
