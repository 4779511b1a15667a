//! Generated scenarios: random applications (service graphs, names, data-holding pods, config,
//! credentials, capacity) with faults composed from the manifest model, one family per kind
//! of object and relation it has, plus two faults at once. Every scenario is checked
//! ([`Scenario::check`]: broken visibly, not crashed, its reference fix passes) before it is
//! returned; a draw that does not break the application, or crashes it, is drawn again.
//!
//! Half of the applications word their log lines in an unfamiliar vocabulary (random words
//! around the placeholders), and half carry a harmless change made shortly before the
//! fault, so that neither a phrase nor "the last change" gives the answer away.

use std::collections::{BTreeMap, BTreeSet};

use rca_core::seeded::{SeededRng, mix64};
use serde_json::json;

use super::manifest::manifests_of;
use super::model::{
    Cluster, ConfigMap, ConfigRule, Deployment, ImageProfile, Node, PodTemplate, Resources, Route,
    Secret, Service,
};
use super::scenarios::{OracleSpec, Scenario};
use super::wording::{LogLine, LogWording};
use crate::stratus::error::StratusError;

/// The fault families, one per kind of object and relation of the manifest model.
pub const FAMILIES: [&str; 20] = [
    "service-selector",
    "service-target-port",
    "image-listen-port",
    "env-address",
    "config-map-mount",
    "config-value",
    "secret-credential",
    "image-missing",
    "image-bad-build",
    "memory-limit",
    "cpu-limit",
    "replicas",
    "node-selector",
    "requests-too-large",
    "node-not-ready",
    "node-drained",
    "pod-hung",
    "demand-surge",
    "image-repushed",
    "two-faults",
];

/// Most draws for one scenario before the generator gives up on it.
const MAX_DRAWS: usize = 40;

/// Most scenarios one call generates.
pub const MAX_COUNT: usize = 10_000;

const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
const VOWELS: &[u8] = b"aeiou";

fn syllables(rng: &mut SeededRng, n: usize) -> String {
    let mut s = String::new();
    for _ in 0..n {
        s.push(CONSONANTS[rng.below(CONSONANTS.len())] as char);
        s.push(VOWELS[rng.below(VOWELS.len())] as char);
    }
    s
}

/// A name not in `taken`, of 2 or 3 syllables (with a second word sometimes).
fn fresh_name(rng: &mut SeededRng, taken: &mut BTreeSet<String>) -> String {
    loop {
        let len = 2 + rng.below(2);
        let mut n = syllables(rng, len);
        if rng.chance(0.4) {
            n = format!("{n}-{}", syllables(rng, 2));
        }
        if taken.insert(n.clone()) {
            return n;
        }
    }
}

/// Unfamiliar wording of every log line: random words around each line's placeholders.
pub fn unfamiliar_wording(rng: &mut SeededRng) -> LogWording {
    let mut w = LogWording::default();
    for line in LogLine::ALL {
        let mut parts: Vec<String> = (0..2 + rng.below(3)).map(|_| syllables(rng, 2)).collect();
        for p in line.placeholders() {
            let at = rng.below(parts.len() + 1);
            parts.insert(at, format!("{{{p}}}"));
        }
        w.set(line, Some(parts.join(" ")));
    }
    w
}

/// One service of a generated application.
struct Svc {
    name: String,
    port: u16,
    listen: u16,
    replicas: u32,
    stateful: bool,
    callees: Vec<usize>,
    config: Vec<(String, ConfigRule, String)>,
    credential: Option<(String, String)>,
    image: String,
    tag: (u32, u32),
}

impl Svc {
    /// The image reference its deployment runs.
    fn image_ref(&self) -> String {
        format!("{}:{}.{}.0", self.image, self.tag.0, self.tag.1)
    }
}

/// A generated application: its healthy cluster, images and routes.
struct App {
    cluster: Cluster,
    svcs: Vec<Svc>,
    nodes: Vec<String>,
}

fn address_var(callee: &str) -> String {
    format!("{}_ADDR", callee.to_ascii_uppercase().replace('-', "_"))
}

const RULES: [(&str, &str, &str, &str); 3] = [
    (
        "[1-9][0-9]*",
        "a positive integer (example: {v})",
        "12",
        "-1",
    ),
    (
        "0\\.[0-9]+",
        "a fraction between 0 and 1 (example: {v})",
        "0.75",
        "75%",
    ),
    ("[a-z]+", "a lowercase word (example: {v})", "fast", "FAST!"),
];

fn build_app(rng: &mut SeededRng) -> App {
    let mut taken = BTreeSet::new();
    let n = 5 + rng.below(5);
    let mut svcs: Vec<Svc> = Vec::new();
    for i in 0..n {
        let name = fresh_name(rng, &mut taken);
        let listen = 2000 + rng.below(7000) as u16;
        let port = if rng.chance(0.5) {
            listen
        } else {
            [80u16, 8080, 9000, 5000][rng.below(4)]
        };
        // Callers come before callees: entries first, every service reachable.
        let stateful = i >= 2 && rng.chance(0.25);
        svcs.push(Svc {
            image: format!("{}/{name}", syllables(rng, 2)),
            tag: (1 + rng.below(4) as u32, rng.below(20) as u32),
            name,
            port,
            listen,
            replicas: if stateful { 1 } else { 1 + rng.below(3) as u32 },
            stateful,
            callees: Vec::new(),
            config: Vec::new(),
            credential: None,
        });
    }
    let entries = 1 + rng.below(2);
    for i in entries..n {
        let callers = 1 + rng.below(2);
        for _ in 0..callers {
            let c = rng.below(i);
            if !svcs[c].callees.contains(&i) && !svcs[c].stateful {
                svcs[c].callees.push(i);
            }
        }
        if !(0..i).any(|c| svcs[c].callees.contains(&i)) {
            let c = (0..i).find(|c| !svcs[*c].stateful).unwrap_or(0);
            svcs[c].callees.push(i);
        }
    }
    for s in svcs.iter_mut() {
        for _ in 0..rng.below(3) {
            let (pattern, expected, good, _) = RULES[rng.below(RULES.len())];
            let key = format!("{}_{}", syllables(rng, 2), syllables(rng, 1));
            let good = if pattern.starts_with("[1") {
                (5 + rng.below(60)).to_string()
            } else {
                good.to_string()
            };
            s.config.push((
                key,
                ConfigRule {
                    pattern: pattern.into(),
                    expected: expected.replace("{v}", &good),
                },
                good,
            ));
        }
        if !s.stateful && rng.chance(0.3) {
            s.credential = Some((
                format!("{}-key", syllables(rng, 2)),
                format!("tok_{}", rng.next_u64() % 1_000_000),
            ));
        }
    }
    // Demand along the graph: every caller forwards its whole load.
    let routes: Vec<Route> = (0..entries)
        .map(|i| Route {
            name: format!("{}-{}", syllables(rng, 2), i),
            service: svcs[i].name.clone(),
            rps: (50 + rng.below(250)) as f64,
            slo_success: 0.99,
            slo_latency_ms: 0.0,
        })
        .collect();
    let mut demand = vec![0.0f64; n];
    for (i, r) in routes.iter().enumerate() {
        demand[i] += r.rps;
    }
    for i in 0..n {
        let d = demand[i];
        for c in svcs[i].callees.clone() {
            demand[c] += d;
        }
    }
    let mut c = Cluster::default();
    let mut latency = vec![0.0f64; n];
    let mut total_cpu = 0u32;
    let mut total_mem = 0u32;
    for (i, s) in svcs.iter().enumerate() {
        let cpu_need = 100 + 50 * rng.below(6) as u32;
        let mem_need = 64 * (2 + rng.below(6) as u32);
        let limits = Resources {
            cpu_milli: cpu_need + 50 * (1 + rng.below(3) as u32),
            memory_mi: mem_need + 64 * (1 + rng.below(3) as u32),
        };
        total_cpu += limits.cpu_milli * (s.replicas + 2);
        total_mem += limits.memory_mi * (s.replicas + 2);
        latency[i] = (5 + rng.below(40)) as f64;
        let per_pod = (demand[i].max(1.0) * (1.6 + rng.below(10) as f64 / 10.0)
            / f64::from(s.replicas))
        .ceil();
        let image = s.image_ref();
        let wording = if rng.chance(0.5) {
            unfamiliar_wording(rng)
        } else {
            LogWording::default()
        };
        c.registry.insert(
            image.clone(),
            ImageProfile {
                listen_port: s.listen,
                memory_mi: mem_need,
                cpu_milli: cpu_need,
                rps_per_pod: per_pod,
                latency_ms: latency[i],
                error_rate: 0.0,
                crashes: false,
                dependency_env: s
                    .callees
                    .iter()
                    .map(|k| address_var(&svcs[*k].name))
                    .collect(),
                config: s
                    .config
                    .iter()
                    .map(|(k, r, _)| (k.clone(), r.clone()))
                    .collect(),
                credential_key: s.credential.as_ref().map(|_| "token".to_string()),
                startup_s: 5 + rng.below(30) as u64,
                logs: wording,
            },
        );
        let mut labels = BTreeMap::new();
        labels.insert("app".to_string(), s.name.clone());
        labels.insert("tier".to_string(), syllables(rng, 2));
        let mut template = PodTemplate {
            labels: labels.clone(),
            image,
            container_port: s.listen,
            env: s
                .callees
                .iter()
                .map(|k| {
                    let t = &svcs[*k];
                    (address_var(&t.name), format!("{}:{}", t.name, t.port))
                })
                .collect(),
            config_maps: Vec::new(),
            secrets: Vec::new(),
            resources: limits,
            node_selector: None,
        };
        if !s.config.is_empty() {
            let map = format!("{}-config", s.name);
            template.config_maps.push(map.clone());
            c.config_maps.insert(
                map.clone(),
                ConfigMap {
                    name: map,
                    data: s
                        .config
                        .iter()
                        .map(|(k, _, v)| (k.clone(), v.clone()))
                        .collect(),
                },
            );
        }
        if let Some((secret, value)) = &s.credential {
            template.secrets.push(secret.clone());
            let created = c.secrets.len() as u32 + 1;
            c.secrets.insert(
                secret.clone(),
                Secret {
                    name: secret.clone(),
                    data: [("token".to_string(), value.clone())].into(),
                    created,
                },
            );
        }
        let mut d = Deployment::new(&s.name, s.replicas, template);
        d.stateful = s.stateful;
        let mut selector = BTreeMap::new();
        selector.insert("app".to_string(), s.name.clone());
        d.selector = selector.clone();
        c.deployments.insert(s.name.clone(), d);
        c.services.insert(
            s.name.clone(),
            Service {
                name: s.name.clone(),
                selector,
                port: s.port,
                target_port: s.listen,
            },
        );
    }
    // Nodes with room for every pod twice over, spread over three to five.
    let count = 3 + rng.below(3);
    let cpu = (total_cpu / count as u32).div_ceil(500) * 500 + 1000;
    let mem = (total_mem / count as u32).div_ceil(1024) * 1024 + 1024;
    let mut nodes = Vec::new();
    for k in 0..count {
        let name = format!("{}-{}", syllables(rng, 2), k + 1);
        c.nodes.insert(
            name.clone(),
            Node {
                name: name.clone(),
                ready: true,
                unschedulable: false,
                cpu_milli: cpu,
                memory_mi: mem,
            },
        );
        nodes.push(name);
    }
    // Latency objectives: three times the slowest path from the entry, with queueing room.
    let mut routes = routes;
    for (i, r) in routes.iter_mut().enumerate() {
        r.slo_latency_ms = (path_latency(i, &svcs, &latency) * 3.0 + 50.0).round();
    }
    c.routes = routes;
    App {
        cluster: c,
        svcs,
        nodes,
    }
}

fn path_latency(i: usize, svcs: &[Svc], latency: &[f64]) -> f64 {
    latency[i]
        + svcs[i]
            .callees
            .iter()
            .map(|c| path_latency(*c, svcs, latency))
            .sum::<f64>()
}

/// The fault lines, the reference fix and the components involved, for one family.
struct Fault {
    lines: Vec<String>,
    fix: Vec<String>,
    involved: Vec<String>,
}

fn stateless(app: &App) -> Vec<usize> {
    (0..app.svcs.len())
        .filter(|i| !app.svcs[*i].stateful)
        .collect()
}

fn pick<T: Copy>(rng: &mut SeededRng, items: &[T]) -> Option<T> {
    (!items.is_empty()).then(|| items[rng.below(items.len())])
}

/// The fault of `family` on the service `target` (a service that holds no data), or on
/// the nodes for the node families.
fn compose(rng: &mut SeededRng, app: &mut App, family: &str, target: usize) -> Option<Fault> {
    let healthy = {
        let mut c = app.cluster.clone();
        c.reconcile();
        c.settle(3600);
        c
    };
    let pods_on = |node: &str| -> Vec<(String, String)> {
        healthy
            .deployments
            .values()
            .flat_map(|d| d.pods.iter().map(move |p| (d.name.clone(), p.clone())))
            .filter(|(_, p)| p.node.as_deref() == Some(node))
            .map(|(d, p)| (d, p.name))
            .collect()
    };
    let one = |lines: Vec<String>, fix: Vec<String>, who: &str| {
        Some(Fault {
            lines,
            fix,
            involved: vec![who.to_string()],
        })
    };
    let s = app.svcs.get(target).filter(|s| !s.stateful)?;
    let name = s.name.clone();
    let limits = app.cluster.deployments.get(&name)?.template.resources;
    match family {
        "service-selector" => {
            let wrong = format!("{}{}", name, syllables(rng, 1));
            one(
                vec![format!(
                    "patch service {name} -p '{}'",
                    json!({"selector": {"app": wrong}})
                )],
                vec![format!(
                    "patch service {name} -p '{}'",
                    json!({"selector": {"app": name}})
                )],
                &name,
            )
        }
        "service-target-port" => one(
            vec![format!(
                "patch service {name} -p '{}'",
                json!({"targetPort": s.listen + 1 + rng.below(9) as u16})
            )],
            vec![format!(
                "patch service {name} -p '{}'",
                json!({"targetPort": s.listen})
            )],
            &name,
        ),
        "image-listen-port" | "image-bad-build" | "image-missing" => {
            let next = format!("{}:{}.{}.0", s.image, s.tag.0, s.tag.1 + 1);
            let current = s.image_ref();
            if family != "image-missing" {
                let mut p = app.cluster.registry.get(&current)?.clone();
                match family {
                    "image-listen-port" => p.listen_port = s.listen + 1 + rng.below(50) as u16,
                    _ if rng.chance(0.5) => p.crashes = true,
                    _ => p.error_rate = 0.2 + rng.below(6) as f64 / 10.0,
                }
                app.cluster.registry.insert(next.clone(), p);
            }
            one(
                vec![format!("set image deployment/{name} {name}={next}")],
                vec![format!("rollout undo deployment/{name}")],
                &name,
            )
        }
        "env-address" => {
            let callee = &app.svcs[*s.callees.first()?];
            let var = address_var(&callee.name);
            let wrong = if rng.chance(0.5) {
                format!("{}{}:{}", callee.name, syllables(rng, 1), callee.port)
            } else {
                format!("{}:{}", callee.name, callee.port + 1)
            };
            one(
                vec![format!("set env deployment/{name} {var}={wrong}")],
                vec![format!(
                    "set env deployment/{name} {var}={}:{}",
                    callee.name, callee.port
                )],
                &name,
            )
        }
        "config-map-mount" => {
            let map = format!("{name}-config");
            let cm = app.cluster.config_maps.get(&map)?;
            one(
                vec![format!("delete configmap {map}")],
                vec![format!(
                    "apply -f '{}'",
                    json!({"kind": "ConfigMap", "name": map, "data": cm.data})
                )],
                &name,
            )
        }
        "config-value" => {
            let (key, rule, good) = s.config.first()?;
            let bad = RULES
                .iter()
                .find(|r| r.0 == rule.pattern)
                .map_or("?", |r| r.3);
            let map = format!("{name}-config");
            one(
                vec![format!(
                    "patch configmap {map} -p '{}'",
                    json!({"data": {key: bad}})
                )],
                vec![format!(
                    "patch configmap {map} -p '{}'",
                    json!({"data": {key: good}})
                )],
                &name,
            )
        }
        "secret-credential" => {
            let (secret, _) = s.credential.as_ref()?;
            let rotated = format!("{secret}-{}", syllables(rng, 1));
            one(
                vec![
                    format!(
                        "apply -f '{}'",
                        json!({"kind": "Secret", "name": rotated,
                            "data": {"token": format!("tok_{}", rng.next_u64() % 1_000_000)}})
                    ),
                    format!("sim revoke secret/{secret}"),
                ],
                vec![format!(
                    "patch deployment {name} -p '{}'",
                    json!({"template": {"secrets": [rotated]}})
                )],
                &name,
            )
        }
        "memory-limit" | "cpu-limit" => {
            // The limit below what the process needs: half its memory, or a quarter of its
            // CPU (throttled, not killed).
            let need = app.cluster.registry.get(&s.image_ref())?;
            let (low, back) = if family == "memory-limit" {
                (
                    format!("memory={}Mi", (need.memory_mi / 2).max(16)),
                    format!("memory={}Mi", limits.memory_mi),
                )
            } else {
                (
                    format!("cpu={}m", (need.cpu_milli / 4).max(10)),
                    format!("cpu={}m", limits.cpu_milli),
                )
            };
            one(
                vec![format!("set resources deployment/{name} --limits={low}")],
                vec![format!("set resources deployment/{name} --limits={back}")],
                &name,
            )
        }
        "replicas" => one(
            vec![format!("scale deployment {name} --replicas=0")],
            vec![format!("scale deployment {name} --replicas={}", s.replicas)],
            &name,
        ),
        "node-selector" => one(
            vec![format!(
                "patch deployment {name} -p '{}'",
                json!({"template": {"node_selector": format!("{}-{}", syllables(rng, 2), 9)}})
            )],
            vec![format!(
                "patch deployment {name} -p '{}'",
                json!({"template": {"node_selector": null}})
            )],
            &name,
        ),
        "requests-too-large" => {
            // Requests above what any node can offer: the pods wait for a node forever.
            let most = app.cluster.nodes.values().map(|n| n.cpu_milli).max()?;
            let limit = limits.cpu_milli;
            one(
                vec![format!(
                    "set resources deployment/{name} --limits=cpu={}m",
                    most + 500 * (1 + rng.below(4) as u32)
                )],
                vec![format!(
                    "set resources deployment/{name} --limits=cpu={limit}m"
                )],
                &name,
            )
        }
        "node-not-ready" => {
            // A node whose pods keep no data, so moving them off loses nothing.
            let candidates: Vec<&String> = app
                .nodes
                .iter()
                .filter(|n| {
                    let pods = pods_on(n);
                    !pods.is_empty()
                        && pods
                            .iter()
                            .all(|(d, _)| app.svcs.iter().any(|s| &s.name == d && !s.stateful))
                })
                .collect();
            let node = (*candidates.get(rng.below(candidates.len().max(1)))?).clone();
            let mut fix = vec![format!("cordon {node}")];
            fix.extend(
                pods_on(&node)
                    .into_iter()
                    .map(|(_, p)| format!("delete pod {p}")),
            );
            Some(Fault {
                lines: vec![format!("sim stop-kubelet {node}")],
                fix,
                involved: vec![node],
            })
        }
        "node-drained" => {
            // Drain nodes that hold no data until the rest cannot take their pods.
            let mut drained: Vec<String> = app
                .nodes
                .iter()
                .filter(|n| {
                    pods_on(n)
                        .iter()
                        .all(|(d, _)| app.svcs.iter().any(|s| &s.name == d && !s.stateful))
                })
                .cloned()
                .collect();
            rng.shuffle(&mut drained);
            drained.truncate(app.nodes.len().saturating_sub(1));
            if drained.is_empty() {
                return None;
            }
            let mut lines: Vec<String> = drained.iter().map(|n| format!("drain {n}")).collect();
            lines.sort();
            Some(Fault {
                lines,
                fix: drained.iter().map(|n| format!("uncordon {n}")).collect(),
                involved: drained,
            })
        }
        "demand-surge" => {
            // No manifest changes: more users arrive. The fix sizes every deployment the
            // route reaches for its new load at 60% utilisation.
            let route = app
                .cluster
                .routes
                .get(rng.below(app.cluster.routes.len()))?;
            let factor = 2 + rng.below(3);
            let mut surged = healthy.clone();
            let r = surged.routes.iter_mut().find(|r| r.name == route.name)?;
            r.rps *= factor as f64;
            let traffic = surged.traffic();
            let mut fix = Vec::new();
            for d in surged.deployments.values() {
                let Some(p) = surged.profile(d) else { continue };
                let demand: f64 = surged
                    .services
                    .keys()
                    .filter(|svc| {
                        surged
                            .backing_deployments(svc)
                            .iter()
                            .any(|b| b.name == d.name)
                    })
                    .filter_map(|svc| traffic.services.get(svc))
                    .map(|h| h.demand)
                    .sum();
                let need = (demand / (p.rps_per_pod * 0.6)).ceil() as u32;
                // A deployment whose pods hold data cannot scale back without losing it:
                // that surge needs a human's approval, not a transaction.
                if need > d.replicas && d.stateful {
                    return None;
                }
                if need > d.replicas {
                    fix.push(format!("scale deployment {} --replicas={need}", d.name));
                }
            }
            Some(Fault {
                lines: vec![format!("sim surge {} {factor}", route.name)],
                fix,
                involved: vec![route.service.clone()],
            })
        }
        "image-repushed" => {
            // The same tag, a new build: it needs more memory, or listens elsewhere.
            let current = s.image_ref();
            let mut p = app.cluster.registry.get(&current)?.clone();
            let build = format!("{current}-build{}", 2 + rng.below(9));
            let limit = limits.memory_mi;
            let fix = if rng.chance(0.5) {
                p.memory_mi = limit + 64 * (1 + rng.below(4) as u32);
                vec![format!(
                    "set resources deployment/{name} --limits=memory={}Mi",
                    p.memory_mi.div_ceil(64) * 64 + 64
                )]
            } else {
                p.listen_port = s.listen + 1 + rng.below(50) as u16;
                vec![format!(
                    "patch service {name} -p '{}'",
                    json!({"targetPort": p.listen_port})
                )]
            };
            app.cluster.registry.insert(build.clone(), p);
            one(vec![format!("sim repush {current} {build}")], fix, &name)
        }
        "pod-hung" => one(
            vec![format!("sim hang deployment/{name}")],
            vec![format!("delete pod {{pod:{name}}}")],
            &name,
        ),
        _ => None,
    }
}

/// A harmless change made before the fault: more replicas of a stateless deployment, or a
/// config key nobody reads.
fn harmless_change(rng: &mut SeededRng, app: &App) -> Option<String> {
    let free = stateless(app);
    let s = &app.svcs[pick(rng, &free)?];
    if rng.chance(0.5) || s.config.is_empty() {
        Some(format!(
            "scale deployment {} --replicas={}",
            s.name,
            s.replicas + 1
        ))
    } else {
        Some(format!(
            "patch configmap {}-config -p '{}'",
            s.name,
            json!({"data": {format!("{}_note", syllables(rng, 2)): syllables(rng, 3)}})
        ))
    }
}

fn draw(seed: u64, index: usize, family: &str, attempt: usize) -> Option<Scenario> {
    let mut rng = SeededRng::new(mix64(seed ^ mix64(index as u64 * 1000 + attempt as u64)));
    let mut app = build_app(&mut rng);
    let noise_seed = rng.next_u64() % 1000;
    let mut lines = Vec::new();
    if rng.chance(0.5) {
        lines.extend(harmless_change(&mut rng, &app));
    }
    let (fault_lines, fix, involved) = if family == "two-faults" {
        let singles: Vec<&str> = FAMILIES
            .iter()
            .copied()
            .filter(|f| *f != "two-faults" && !f.starts_with("node-"))
            .collect();
        // Half the time the second fault sits behind the first (on a service it calls):
        // mending the first then reveals the second, and severity rises on the way.
        let free = stateless(&app);
        let upstream = pick(&mut rng, &free)?;
        let behind: Vec<usize> = app.svcs[upstream]
            .callees
            .iter()
            .copied()
            .filter(|c| !app.svcs[*c].stateful)
            .collect();
        let downstream = match pick(&mut rng, &behind) {
            Some(c) if rng.chance(0.5) => c,
            _ => pick(&mut rng, &free)?,
        };
        let first = pick(&mut rng, &singles)?;
        let a = compose(&mut rng, &mut app, first, upstream)?;
        let second = pick(&mut rng, &singles)?;
        let b = compose(&mut rng, &mut app, second, downstream)?;
        if a.involved == b.involved {
            return None;
        }
        let mut lines = a.lines;
        lines.extend(b.lines);
        let mut fix = a.fix;
        fix.extend(b.fix);
        let mut inv = a.involved;
        inv.extend(b.involved);
        (lines, fix, inv)
    } else {
        let free = stateless(&app);
        let target = pick(&mut rng, &free)?;
        let f = compose(&mut rng, &mut app, family, target)?;
        (f.lines, f.fix, f.involved)
    };
    lines.extend(fault_lines);
    let s = Scenario {
        name: format!("gen-{seed}-{index:03}-{family}"),
        summary: format!(
            "generated ({family}): {} services on {} nodes; fault: {}",
            app.svcs.len(),
            app.nodes.len(),
            lines.join("; ")
        ),
        family: Some(family.to_string()),
        involved,
        cluster: manifests_of(&app.cluster),
        images: app.cluster.registry.clone(),
        routes: app.cluster.routes.clone(),
        fault: lines,
        fix,
        oracle: OracleSpec::default(),
        noise_seed,
    };
    let text = s.to_yaml().ok()?;
    let back = Scenario::from_yaml(&text, &s.name).ok()?;
    let check = back.check().ok()?;
    let healthy = back.healthy().ok()?;
    let fine = crate::stratus::oracle::oracle(&healthy.health()).passed();
    (fine && check.ok() && check.fix_passes == Some(true)).then_some(back)
}

/// `count` scenarios from `seed`, the families in turn.
pub fn generate(seed: u64, count: usize) -> Result<Vec<Scenario>, StratusError> {
    if count > MAX_COUNT {
        return Err(StratusError::InvalidScenario {
            name: format!("generate --count {count}"),
            message: format!("at most {MAX_COUNT} scenarios are generated at once"),
        });
    }
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let family = FAMILIES[index % FAMILIES.len()];
        let s = (0..MAX_DRAWS)
            .find_map(|attempt| draw(seed, index, family, attempt))
            .ok_or_else(|| StratusError::InvalidScenario {
                name: format!("gen-{seed}-{index:03}-{family}"),
                message: format!(
                    "no draw of {MAX_DRAWS} gave a scenario that breaks visibly without crashing and whose fix passes"
                ),
            })?;
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_generates_checked_scenarios_and_the_same_seed_gives_the_same_files() {
        let a = generate(7, FAMILIES.len()).unwrap();
        for (s, family) in a.iter().zip(FAMILIES) {
            assert_eq!(s.family.as_deref(), Some(family));
            let check = s.check().unwrap();
            assert!(check.ok() && check.fix_passes == Some(true), "{check:?}");
        }
        let b = generate(7, FAMILIES.len()).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, generate(8, FAMILIES.len()).unwrap());
        assert!(generate(1, MAX_COUNT + 1).is_err());
    }
}
