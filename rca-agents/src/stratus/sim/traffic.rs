//! Pod status and the request model: demand flows from user routes through the service
//! graph; success, latency, alerts, SLA violations and capacity loss all follow from state.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{Cluster, Deployment, ImageProfile, Pod};
use crate::stratus::environment::ServiceGraph;
use crate::stratus::severity::{Alert, HealthReport, SlaViolation};

/// The status of a pod, computed from state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodStatus {
    /// `Running`, `Pending`, `Unknown`.
    pub phase: &'static str,
    /// Passes readiness.
    pub ready: bool,
    /// Why it is not running well (`OOMKilled`, `ImagePullBackOff`, ...), if so.
    pub reason: Option<&'static str>,
    /// Details.
    pub message: String,
}

impl Cluster {
    /// The image profile of a deployment's current template.
    pub fn profile(&self, d: &Deployment) -> Option<&ImageProfile> {
        self.registry.get(&d.template.image)
    }

    /// Computes a pod's status.
    pub fn pod_status(&self, d: &Deployment, pod: &Pod) -> PodStatus {
        let st = |phase, ready, reason, message: String| PodStatus {
            phase,
            ready,
            reason,
            message,
        };
        let Some(node) = &pod.node else {
            let why = self.pick_node(d).err().unwrap_or_default();
            return st("Pending", false, Some("Unschedulable"), why);
        };
        if !self.nodes.get(node).is_some_and(|n| n.ready) {
            return st(
                "Unknown",
                false,
                Some("NodeNotReady"),
                format!("node {node} is not ready"),
            );
        }
        let t = &d.template;
        let Some(p) = self.registry.get(&t.image) else {
            return st(
                "Pending",
                false,
                Some("ImagePullBackOff"),
                format!("failed to pull image \"{}\": manifest unknown", t.image),
            );
        };
        for cm in &t.config_maps {
            if !self.config_maps.contains_key(cm) {
                return st(
                    "Pending",
                    false,
                    Some("CreateContainerConfigError"),
                    format!("configmap \"{cm}\" not found"),
                );
            }
        }
        for s in &t.secrets {
            if !self.secrets.contains_key(s) {
                return st(
                    "Pending",
                    false,
                    Some("CreateContainerConfigError"),
                    format!("secret \"{s}\" not found"),
                );
            }
        }
        if p.memory_mi > t.resources.memory_mi {
            return st(
                "Running",
                false,
                Some("OOMKilled"),
                format!(
                    "last state: OOMKilled (exit code 137) at its memory limit of {}Mi; back-off restarting failed container",
                    t.resources.memory_mi
                ),
            );
        }
        if p.crashes {
            return st(
                "Running",
                false,
                Some("CrashLoopBackOff"),
                format!(
                    "last state: Error (exit code 2) shortly after start; back-off restarting failed container (image {})",
                    t.image
                ),
            );
        }
        if !self.missing_config_keys(d).is_empty() {
            return st(
                "Running",
                false,
                Some("CrashLoopBackOff"),
                "last state: Error (exit code 1) at start; back-off restarting failed container"
                    .to_string(),
            );
        }
        let startup = p.startup_s;
        if self.clock < pod.started_at.saturating_add(startup) {
            return st(
                "Running",
                false,
                Some("Starting"),
                format!(
                    "container started {}s ago; readiness probe not passed yet",
                    self.clock.saturating_sub(pod.started_at)
                ),
            );
        }
        st("Running", true, None, String::new())
    }

    /// Config keys `d`'s image reads that none of its mounted config maps holds.
    pub fn missing_config_keys(&self, d: &Deployment) -> Vec<String> {
        let Some(p) = self.profile(d) else {
            return Vec::new();
        };
        p.config
            .keys()
            .filter(|key| self.config_value(d, key).is_none())
            .cloned()
            .collect()
    }

    /// The value of config key `key` as `d`'s container sees it (first mounted map that has it).
    pub fn config_value(&self, d: &Deployment, key: &str) -> Option<&str> {
        d.template.config_maps.iter().find_map(|cm| {
            self.config_maps
                .get(cm)
                .and_then(|c| c.data.get(key))
                .map(String::as_str)
        })
    }

    /// Config keys whose value `d`'s image rejects, with what it expects.
    pub fn invalid_config(&self, d: &Deployment) -> Vec<(String, String, String)> {
        let Some(p) = self.profile(d) else {
            return Vec::new();
        };
        p.config
            .iter()
            .filter_map(|(key, rule)| {
                let v = self.config_value(d, key)?;
                (!rule.accepts(v)).then(|| (key.clone(), v.to_string(), rule.expected.clone()))
            })
            .collect()
    }

    /// The secret that provides the credential of `d`'s image, if its image needs one, and
    /// whether its issuer rejects that credential.
    pub fn credential_secret(&self, d: &Deployment) -> Option<(&str, bool)> {
        let key = self.profile(d)?.credential_key.as_ref()?;
        d.template.secrets.iter().find_map(|s| {
            self.secrets.get(s).and_then(|sec| {
                sec.data
                    .get(key)
                    .map(|v| (sec.name.as_str(), self.revoked_credentials.contains(v)))
            })
        })
    }

    /// The upstream rejects `d`'s requests: its image presents a credential that is revoked,
    /// or that no mounted secret holds.
    pub fn credential_rejected(&self, d: &Deployment) -> bool {
        let needs = self.profile(d).is_some_and(|p| p.credential_key.is_some());
        needs && self.credential_secret(d).is_none_or(|(_, revoked)| revoked)
    }
}

/// Per-pod request metrics (as a service mesh would report them).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PodMetrics {
    /// Requests per second sent to the pod.
    pub rps: f64,
    /// Fraction that failed.
    pub error_rate: f64,
    /// Fraction that timed out.
    pub timeout_rate: f64,
}

/// The computed health of one service.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServiceHealth {
    /// Offered load, rps.
    pub demand: f64,
    /// Serving capacity of working endpoints, rps.
    pub capacity: f64,
    /// Ready endpoints.
    pub endpoints: usize,
    /// Ready endpoints that actually answer on the target port.
    pub working: usize,
    /// End-to-end success rate (including callees).
    pub success: f64,
    /// End-to-end latency, ms.
    pub latency_ms: f64,
    /// Fraction of successful answers that are correct, end to end (a process running on a
    /// config value it rejects answers, but wrongly).
    pub correct: f64,
    /// Failure causes as HTTP-like status -> fraction of requests.
    pub errors: BTreeMap<String, f64>,
    /// Dependency addresses that do not resolve to a service port.
    pub broken_dependencies: Vec<String>,
    /// Callees.
    pub callees: Vec<String>,
    /// Nominal capacity of one pod (for capacity loss).
    pub nominal_pod_rps: f64,
}

/// Everything the request model computes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrafficReport {
    /// Per service.
    pub services: BTreeMap<String, ServiceHealth>,
    /// Per pod.
    pub pods: BTreeMap<String, PodMetrics>,
}

const MAX_DEPTH: usize = 16;

impl Cluster {
    /// Ready pods selected by a service, with their deployment.
    pub fn endpoints<'a>(&'a self, service: &str) -> Vec<(&'a Deployment, &'a Pod)> {
        let Some(svc) = self.services.get(service) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for d in self.deployments.values() {
            if !svc
                .selector
                .iter()
                .all(|(k, v)| d.template.labels.get(k) == Some(v))
                || svc.selector.is_empty()
            {
                continue;
            }
            for p in &d.pods {
                if self.pod_status(d, p).ready {
                    out.push((d, p));
                }
            }
        }
        out
    }

    /// Deployments whose pods a service selects.
    pub fn backing_deployments(&self, service: &str) -> Vec<&Deployment> {
        let Some(svc) = self.services.get(service) else {
            return Vec::new();
        };
        self.deployments
            .values()
            .filter(|d| {
                !svc.selector.is_empty()
                    && svc
                        .selector
                        .iter()
                        .all(|(k, v)| d.template.labels.get(k) == Some(v))
            })
            .collect()
    }

    /// Resolves a `host:port` address to a service name.
    pub fn resolve(&self, addr: &str) -> Option<&str> {
        let (host, port) = addr.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        self.services
            .get(host)
            .filter(|s| s.port == port)
            .map(|s| s.name.as_str())
    }

    /// (callees, broken addresses) of the deployments behind a service.
    fn dependencies(&self, service: &str) -> (Vec<String>, Vec<String>) {
        let mut callees = Vec::new();
        let mut broken = Vec::new();
        for d in self.backing_deployments(service) {
            // The image says which variables are dependencies; a deployment whose image cannot
            // run still has its intended callees (every variable that resolves to a service),
            // so the load those callees must carry does not vanish from the severity metric.
            let vars: Vec<String> = match self.profile(d) {
                Some(p) => p.dependency_env.clone(),
                None => d
                    .template
                    .env
                    .iter()
                    .filter(|(_, v)| self.resolve(v).is_some())
                    .map(|(k, _)| k.clone())
                    .collect(),
            };
            for var in &vars {
                match d.template.env.get(var) {
                    Some(addr) => match self.resolve(addr) {
                        Some(s) => {
                            if !callees.iter().any(|c| c == s) {
                                callees.push(s.to_string());
                            }
                        }
                        None => broken.push(format!("{var}={addr}")),
                    },
                    None => broken.push(format!("{var} (unset)")),
                }
            }
        }
        (callees, broken)
    }

    /// The service call graph implied by the current configuration.
    pub fn service_graph(&self) -> ServiceGraph {
        let mut g = ServiceGraph {
            services: self.services.keys().cloned().collect(),
            entries: Vec::new(),
            edges: Vec::new(),
        };
        for r in &self.routes {
            if !g.entries.contains(&r.service) {
                g.entries.push(r.service.clone());
            }
        }
        for s in self.services.keys() {
            for c in self.dependencies(s).0 {
                g.edges.push((s.clone(), c));
            }
        }
        g
    }

    /// Requests per second offered to `service`: its routes' load plus what its callers
    /// forward. A call cycle forwards nothing around the cycle (memoised, linear in the graph).
    fn demand(
        &self,
        service: &str,
        callers: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        memo: &mut BTreeMap<String, f64>,
    ) -> f64 {
        if let Some(v) = memo.get(service) {
            return *v;
        }
        if path.iter().any(|p| p == service) || path.len() > MAX_DEPTH {
            return 0.0;
        }
        let own: f64 = self
            .routes
            .iter()
            .filter(|r| r.service == service)
            .map(|r| r.rps)
            .sum();
        path.push(service.to_string());
        let mut up = 0.0;
        for c in callers.get(service).into_iter().flatten() {
            up += self.demand(c, callers, path, memo);
        }
        path.pop();
        let total = own + up;
        memo.insert(service.to_string(), total);
        total
    }

    /// Runs the request model.
    pub fn traffic(&self) -> TrafficReport {
        let mut deps = BTreeMap::new();
        let mut callers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in self.services.keys() {
            let (c, b) = self.dependencies(s);
            for callee in &c {
                callers.entry(callee.clone()).or_default().push(s.clone());
            }
            deps.insert(s.clone(), (c, b));
        }
        let mut report = TrafficReport::default();
        // Own behaviour of each service, before callees.
        let mut own: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut own_correct: BTreeMap<String, f64> = BTreeMap::new();
        let mut demand_memo: BTreeMap<String, f64> = BTreeMap::new();
        for (name, svc) in &self.services {
            let demand = self.demand(name, &callers, &mut Vec::new(), &mut demand_memo);
            let eps = self.endpoints(name);
            let mut h = ServiceHealth {
                demand,
                endpoints: eps.len(),
                ..ServiceHealth::default()
            };
            let (c, b) = deps.get(name).cloned().unwrap_or_default();
            h.callees = c;
            h.broken_dependencies = b;
            h.nominal_pod_rps = self
                .backing_deployments(name)
                .iter()
                .filter_map(|d| self.profile(d))
                .map(|p| p.rps_per_pod)
                .fold(0.0, f64::max);
            let mut ok_weighted = 0.0;
            let mut correct_weighted = 0.0;
            let mut latency = 0.0;
            let mut per_pod = Vec::new();
            for (d, p) in &eps {
                let prof = self.profile(d);
                let listens = prof.is_some_and(|pr| pr.listen_port == svc.target_port);
                let working = listens && !p.stuck;
                let (cap, ok, lat) = match (working, prof) {
                    (true, Some(pr)) => {
                        let throttle = (f64::from(d.template.resources.cpu_milli)
                            / f64::from(pr.cpu_milli.max(1)))
                        .min(1.0);
                        let revoked = self.credential_rejected(d);
                        let ok = if revoked { 0.0 } else { 1.0 - pr.error_rate };
                        (pr.rps_per_pod * throttle, ok, pr.latency_ms)
                    }
                    _ => (0.0, 0.0, 0.0),
                };
                if working {
                    h.working += 1;
                    h.capacity += cap;
                    ok_weighted += cap * ok;
                    if self.invalid_config(d).is_empty() {
                        correct_weighted += cap * ok;
                    }
                    latency += cap * lat;
                }
                per_pod.push((p.name.clone(), working, listens, cap, ok));
            }
            let n = eps.len().max(1) as f64;
            let working_frac = h.working as f64 / n;
            let load = if h.capacity > 0.0 {
                demand / h.capacity
            } else {
                f64::INFINITY
            };
            let served = if demand <= 0.0 {
                1.0
            } else {
                (1.0 / load).min(1.0)
            };
            let ok_frac = if h.capacity > 0.0 {
                ok_weighted / h.capacity
            } else {
                0.0
            };
            let own_success = if eps.is_empty() {
                0.0
            } else {
                working_frac * served * ok_frac
            };
            let base_latency = if h.capacity > 0.0 {
                latency / h.capacity
            } else {
                0.0
            };
            let own_latency = base_latency / (1.0 - load.min(0.95));
            // Error causes.
            let mut errs = BTreeMap::new();
            if eps.is_empty() {
                errs.insert("503".to_string(), 1.0);
            } else {
                let not_listening = per_pod.iter().filter(|x| !x.2).count() as f64 / n;
                let stuck = per_pod.iter().filter(|x| x.2 && !x.1).count() as f64 / n;
                if not_listening > 0.0 {
                    errs.insert("503".into(), not_listening);
                }
                if stuck > 0.0 {
                    errs.insert("504".into(), stuck);
                }
                if served < 1.0 && h.working > 0 {
                    errs.insert("429".into(), working_frac * (1.0 - served));
                }
                let bad = working_frac * served * (1.0 - ok_frac);
                if bad > 1e-9 {
                    let revoked = eps.iter().any(|(d, _)| self.credential_rejected(d));
                    errs.insert(if revoked { "401" } else { "500" }.into(), bad);
                }
            }
            if !h.broken_dependencies.is_empty() && !eps.is_empty() {
                errs.insert("502".into(), own_success);
            }
            h.errors = errs;
            // Per-pod metrics: requests spread evenly over endpoints.
            let per = demand / n;
            for (name, working, listens, _cap, ok) in per_pod {
                let m = if working {
                    PodMetrics {
                        rps: per,
                        error_rate: 1.0 - served * ok,
                        timeout_rate: 0.0,
                    }
                } else if listens {
                    PodMetrics {
                        rps: per,
                        error_rate: 1.0,
                        timeout_rate: 1.0,
                    }
                } else {
                    PodMetrics {
                        rps: per,
                        error_rate: 1.0,
                        timeout_rate: 0.0,
                    }
                };
                report.pods.insert(name, m);
            }
            let own_success = if h.broken_dependencies.is_empty() {
                own_success
            } else {
                0.0
            };
            own.insert(name.clone(), (own_success, own_latency));
            own_correct.insert(
                name.clone(),
                if ok_weighted > 0.0 {
                    correct_weighted / ok_weighted
                } else {
                    1.0
                },
            );
            report.services.insert(name.clone(), h);
        }
        // End to end: multiply by callees' success, add their latency.
        let names: Vec<String> = report.services.keys().cloned().collect();
        let mut e2e: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut e2e_correct: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let correct_own: BTreeMap<String, (f64, f64)> = own_correct
            .into_iter()
            .map(|(k, c)| (k, (c, 0.0)))
            .collect();
        for name in &names {
            let v = end_to_end(name, &report, &own, &mut e2e, 0);
            let c = end_to_end(name, &report, &correct_own, &mut e2e_correct, 0);
            if let Some(h) = report.services.get_mut(name) {
                h.success = v.0;
                h.latency_ms = v.1;
                h.correct = c.0;
            }
        }
        report
    }

    /// Replicas of `d` the demand on the services selecting it needs at nominal capacity.
    fn replicas_needed(&self, d: &Deployment, traffic: &TrafficReport) -> u32 {
        let Some(p) = self.profile(d).filter(|p| p.rps_per_pod > 0.0) else {
            return 0;
        };
        let demand: f64 = self
            .services
            .keys()
            .filter(|s| self.backing_deployments(s).iter().any(|b| b.name == d.name))
            .filter_map(|s| traffic.services.get(s))
            .map(|h| h.demand)
            .sum();
        (demand / p.rps_per_pod).ceil().min(1000.0) as u32
    }

    /// Alerts, SLA violations, capacity loss and crash, all computed from state.
    pub fn health(&self) -> HealthReport {
        let traffic = self.traffic();
        let mut r = HealthReport::default();
        let alert = |name: &str, component: String, reason: &str, message: String| Alert {
            name: name.to_string(),
            component,
            reason: reason.to_string(),
            message,
        };
        for n in self.nodes.values() {
            let hosts = self.deployments.values().any(|d| {
                d.pods
                    .iter()
                    .any(|p| p.node.as_deref() == Some(n.name.as_str()))
            });
            // A NotReady node that is cordoned and empty is out of service, not unhealthy.
            if !n.ready && (!n.unschedulable || hosts) {
                r.unhealthy_components.push(format!("node/{}", n.name));
                {
                    r.alerts.push(alert(
                        "KubeNodeNotReady",
                        format!("node/{}", n.name),
                        "NodeNotReady",
                        format!("node {} has been unready", n.name),
                    ));
                }
            }
        }
        let mut loss: u32 = 0;
        for d in self.deployments.values() {
            let comp = format!("deployment/{}", d.name);
            let mut ready = 0u32;
            let mut first_bad: Option<PodStatus> = None;
            for p in &d.pods {
                let s = self.pod_status(d, p);
                if s.ready {
                    ready += 1;
                } else {
                    r.unhealthy_components.push(format!("pod/{}", p.name));
                    if first_bad.is_none() {
                        first_bad = Some(s);
                    }
                }
            }
            // Replicas the offered load needs, so that scaling a deployment down cannot hide
            // lost capacity: loss is measured against max(desired, needed).
            let needed = self.replicas_needed(d, &traffic);
            loss = loss.saturating_add(d.replicas.max(needed).saturating_sub(ready));
            if let Some(s) = first_bad {
                let reason = s.reason.unwrap_or("NotReady");
                let name = match reason {
                    "OOMKilled" | "CrashLoopBackOff" => "KubePodCrashLooping",
                    "ImagePullBackOff" | "CreateContainerConfigError" => "KubeContainerWaiting",
                    "Unschedulable" => "KubePodNotScheduled",
                    _ => "KubePodNotReady",
                };
                r.alerts.push(alert(name, comp.clone(), reason, s.message));
            }
            if let Some(p) = self.profile(d)
                && d.template.resources.cpu_milli < p.cpu_milli
                && d.replicas > 0
            {
                let throttled = self.throttled_share(d, &format!("alert:{}", d.name));
                r.alerts.push(alert(
                    "CPUThrottlingHigh",
                    comp.clone(),
                    "CPUThrottling",
                    format!(
                        "{:.0}% throttling of CPU in deployment {} (limit {}m)",
                        throttled * 100.0,
                        d.name,
                        d.template.resources.cpu_milli
                    ),
                ));
            }
            if d.data_lost {
                r.crashed = true;
                r.alerts.push(alert(
                    "DataLoss",
                    comp.clone(),
                    "DataLoss",
                    format!("{} restarted with an empty data directory", d.name),
                ));
            }
        }
        if !self.nodes.values().any(|n| n.ready) {
            r.crashed = true;
        }
        for (name, h) in &traffic.services {
            if h.demand <= 0.0 {
                continue;
            }
            let comp = format!("service/{name}");
            if h.endpoints == 0 {
                r.alerts.push(alert(
                    "KubeServiceNoEndpoints",
                    comp.clone(),
                    "NoEndpoints",
                    format!("service {name} has no ready endpoints"),
                ));
            }
            if h.success < 0.99 {
                r.alerts.push(alert(
                    "HighErrorRate",
                    comp.clone(),
                    "Errors",
                    format!("{name}: {:.1}% of requests fail", (1.0 - h.success) * 100.0),
                ));
            }
            let unmet = (h.demand - h.capacity).max(0.0);
            if unmet > 0.0 {
                let unit = if h.nominal_pod_rps > 0.0 {
                    h.nominal_pod_rps
                } else {
                    100.0
                };
                loss = loss.saturating_add((unmet / unit).ceil().min(1000.0) as u32);
            }
        }
        r.capacity_loss = loss;
        for route in &self.routes {
            let correct = traffic
                .services
                .get(&route.service)
                .map_or(0.0, |h| h.correct);
            if correct < 0.99 {
                let text = format!(
                    "route {}: {:.0}% of answers are wrong",
                    route.name,
                    (1.0 - correct) * 100.0
                );
                // A synthetic probe that checks answers (a blackbox exporter's content
                // check) alerts on them.
                r.alerts.push(alert(
                    "ProbeFailed",
                    format!("route/{}", route.name),
                    "WrongAnswers",
                    text.clone(),
                ));
                r.failed_probes.push(text);
            }
            let (s, l) = traffic
                .services
                .get(&route.service)
                .map(|h| (h.success, h.latency_ms))
                .unwrap_or((0.0, f64::INFINITY));
            if s < route.slo_success || l > route.slo_latency_ms {
                r.sla_violations.push(SlaViolation {
                    route: route.name.clone(),
                    success_rate: s,
                    latency_ms: if l.is_finite() { l } else { 1.0e9 },
                });
            }
        }
        r.alerts.sort();
        r
    }
}

impl Cluster {
    /// A deterministic noise value in [-1, 1] for metric `key` at the current time.
    pub fn noise(&self, key: &str) -> f64 {
        let h = rca_core::seeded::stable_hash(
            format!("{}:{}:{key}", self.noise_seed, self.clock).as_bytes(),
        );
        (h % 20_001) as f64 / 10_000.0 - 1.0
    }

    /// The share of CPU periods throttled in `d`'s pods, with a few points of noise.
    pub fn throttled_share(&self, d: &Deployment, key: &str) -> f64 {
        let Some(p) = self.profile(d) else {
            return 0.0;
        };
        let need = f64::from(p.cpu_milli.max(1));
        let limit = f64::from(d.template.resources.cpu_milli);
        if limit >= need {
            return 0.0;
        }
        ((1.0 - limit / need) + 0.03 * self.noise(key)).clamp(0.01, 0.99)
    }
}

fn end_to_end(
    name: &str,
    report: &TrafficReport,
    own: &BTreeMap<String, (f64, f64)>,
    memo: &mut BTreeMap<String, (f64, f64)>,
    depth: usize,
) -> (f64, f64) {
    if let Some(v) = memo.get(name) {
        return *v;
    }
    let (mut s, mut l) = own.get(name).copied().unwrap_or((0.0, 0.0));
    if depth <= MAX_DEPTH
        && let Some(h) = report.services.get(name)
    {
        for c in &h.callees {
            let (cs, cl) = end_to_end(c, report, own, memo, depth + 1);
            s *= cs;
            l += cl;
        }
    }
    memo.insert(name.to_string(), (s, l));
    (s, l)
}
