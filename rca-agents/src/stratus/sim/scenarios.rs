//! Fault scenarios as data: a YAML file holds the healthy cluster as Kubernetes-style
//! manifests ([`super::manifest`]), how its images behave, its user routes, the fault as the
//! commands that break it, a reference fix and the oracle. The thirteen built-in scenarios
//! (modelled on AIOpsLab and ITBench mitigation problems, on a small shop) are such files,
//! compiled in; `rca mitigate --scenario-file F` and `--scenario-dir D` run anyone's.
//!
//! Fault lines are commands of the mitigation language, run without confinement (a fault may
//! delete a config map, which no agent may), or simulator events that no command can cause:
//!
//! - `sim stop-kubelet NODE`: the node stops reporting Ready;
//! - `sim hang deployment/NAME`: its first pod's process hangs (it still passes a TCP check);
//! - `sim revoke secret/NAME`: the issuer revokes the credentials the secret holds;
//! - `sim surge ROUTE FACTOR`: the route's offered load is multiplied by FACTOR;
//! - `sim repush IMAGE FROM`: a new build is pushed under an existing tag: IMAGE now behaves
//!   as FROM (another entry of `images`) does, with no change to any manifest.
//!
//! `{pod:NAME}` in a fault or fix line stands for the first pod of deployment NAME.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::manifest::{Manifest, cluster_from};
use super::model::{Cluster, ImageProfile, Route};
use crate::stratus::command::{Command, ResourceKind, ResourceRef};
use crate::stratus::error::StratusError;
pub use crate::stratus::oracle::{OracleVerdict, oracle};

/// The largest scenario file read (a cluster of a few hundred objects is far below it).
pub const MAX_SCENARIO_BYTES: u64 = 4 * 1024 * 1024;

/// Seconds the simulated incident has been going on when the agents arrive.
pub const INCIDENT_AGE_S: u64 = 300;

/// The longest start-up an image may declare, seconds: well inside the time a transaction
/// waits for convergence (`TnrConfig::settle_s`), so that judging and undo see started pods.
pub const MAX_STARTUP_S: u64 = 120;

/// The longest simulated wait for pods to start while building a scenario.
const BUILD_SETTLE_S: u64 = 3600;

/// What must hold when a scenario is mitigated, on top of the three standard oracles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OracleSpec {
    /// Routes whose functional probe the scenario is about. The standard oracle already
    /// requires every route's probe to pass; listing them documents the scenario.
    #[serde(default)]
    pub probes: Vec<String>,
    /// Deployments that must have at least this many ready pods.
    #[serde(default)]
    pub min_ready: BTreeMap<String, u32>,
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Its name (`rca mitigate --scenario NAME`).
    pub name: String,
    /// What is broken, for people (agents never see it).
    pub summary: String,
    /// The fault family, for reports (generated scenarios carry one; agents never see it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Components the fault involves (the stochastic demonstration's wrong fixes avoid them).
    #[serde(default)]
    pub involved: Vec<String>,
    /// The healthy cluster.
    pub cluster: Vec<Manifest>,
    /// How each image behaves (the simulator's registry; agents never see it).
    pub images: BTreeMap<String, ImageProfile>,
    /// User-facing routes and their SLOs.
    pub routes: Vec<Route>,
    /// The commands and simulator events that break the healthy cluster.
    pub fault: Vec<String>,
    /// A known-good fix (used by tests and the stochastic demonstration, never by agents).
    #[serde(default)]
    pub fix: Vec<String>,
    /// What must hold when it is mitigated.
    #[serde(default)]
    pub oracle: OracleSpec,
    /// Seed of the metric noise.
    #[serde(default)]
    pub noise_seed: u64,
}

fn invalid(name: &str, message: impl Into<String>) -> StratusError {
    StratusError::InvalidScenario {
        name: name.to_string(),
        message: message.into(),
    }
}

impl Scenario {
    /// Parses a scenario from YAML text and checks it builds (`origin` names it in errors).
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, StratusError> {
        let s: Scenario =
            serde_norway::from_str(text).map_err(|e| invalid(origin, e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The scenario as YAML, in the format [`Scenario::from_yaml`] reads.
    pub fn to_yaml(&self) -> Result<String, StratusError> {
        serde_norway::to_string(self).map_err(|e| invalid(&self.name, e.to_string()))
    }

    /// Reads one scenario file.
    pub fn from_file(path: &Path) -> Result<Self, StratusError> {
        let origin = path.display().to_string();
        let len = std::fs::metadata(path)
            .map_err(|e| invalid(&origin, e.to_string()))?
            .len();
        if len > MAX_SCENARIO_BYTES {
            return Err(invalid(
                &origin,
                format!("the file has {len} bytes; at most {MAX_SCENARIO_BYTES} are read"),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| invalid(&origin, e.to_string()))?;
        Self::from_yaml(&text, &origin)
    }

    /// Reads every `*.yaml` / `*.yml` file of a directory, in file-name order.
    pub fn from_dir(dir: &Path) -> Result<Vec<Self>, StratusError> {
        let origin = dir.display().to_string();
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| invalid(&origin, e.to_string()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(invalid(
                &origin,
                "the directory holds no .yaml scenario file",
            ));
        }
        let mut out: Vec<Scenario> = Vec::new();
        for p in paths {
            let s = Self::from_file(&p)?;
            if out.iter().any(|o| o.name == s.name) {
                return Err(invalid(
                    &p.display().to_string(),
                    format!("another file already defines scenario `{}`", s.name),
                ));
            }
            out.push(s);
        }
        Ok(out)
    }

    fn validate(&self) -> Result<(), StratusError> {
        if self.name.trim().is_empty() {
            return Err(invalid("<unnamed>", "the scenario needs a name"));
        }
        if self.fault.is_empty() {
            return Err(invalid(&self.name, "the scenario has no fault"));
        }
        for (image, p) in &self.images {
            if p.startup_s > MAX_STARTUP_S {
                return Err(invalid(
                    &self.name,
                    format!(
                        "image {image}: startupS {} is above {MAX_STARTUP_S}",
                        p.startup_s
                    ),
                ));
            }
            p.logs
                .validate()
                .map_err(|e| invalid(&self.name, format!("image {image}: {e}")))?;
            for (key, rule) in &p.config {
                regex::Regex::new(&rule.pattern).map_err(|e| {
                    invalid(&self.name, format!("image {image}, config key {key}: {e}"))
                })?;
            }
        }
        let healthy = self.healthy()?;
        for r in &self.routes {
            if !healthy.services.contains_key(&r.service) {
                return Err(invalid(
                    &self.name,
                    format!("route {} enters at unknown service {}", r.name, r.service),
                ));
            }
        }
        for p in &self.oracle.probes {
            if !self.routes.iter().any(|r| &r.name == p) {
                return Err(invalid(
                    &self.name,
                    format!("oracle probe of unknown route {p}"),
                ));
            }
        }
        for d in self.oracle.min_ready.keys() {
            if !healthy.deployments.contains_key(d) {
                return Err(invalid(
                    &self.name,
                    format!("oracle names unknown deployment {d}"),
                ));
            }
        }
        self.build().map(|_| ())
    }

    /// The healthy cluster, reconciled and settled (every pod started).
    pub fn healthy(&self) -> Result<Cluster, StratusError> {
        let mut c = cluster_from(&self.cluster).map_err(|e| invalid(&self.name, e))?;
        c.registry = self.images.clone();
        c.routes = self.routes.clone();
        c.noise_seed = self.noise_seed;
        c.reconcile();
        c.settle(BUILD_SETTLE_S);
        Ok(c)
    }

    /// The faulty cluster: the healthy one, broken by the fault, after the incident has run
    /// for [`INCIDENT_AGE_S`] seconds.
    pub fn build(&self) -> Result<Cluster, StratusError> {
        let mut c = self.healthy()?;
        for line in &self.fault {
            let line_now = substitute(&c, line);
            inject(&mut c, &line_now)
                .map_err(|e| invalid(&self.name, format!("fault `{line}`: {e}")))?;
        }
        c.settle(BUILD_SETTLE_S);
        c.clock += INCIDENT_AGE_S;
        Ok(c)
    }

    /// The reference fix for the faulty state, with `{pod:NAME}` filled in.
    pub fn fix(&self, cluster: &Cluster) -> Vec<String> {
        self.fix.iter().map(|l| substitute(cluster, l)).collect()
    }

    /// The oracle's verdict on a state: the three standard oracles, plus this scenario's
    /// probes and ready counts.
    pub fn verdict(&self, cluster: &Cluster) -> OracleVerdict {
        let h = cluster.health();
        let mut v = oracle(&h);
        for (d, min) in &self.oracle.min_ready {
            let ready = cluster.deployments.get(d).map_or(0, |dep| {
                dep.pods
                    .iter()
                    .filter(|p| cluster.pod_status(dep, p).ready)
                    .count()
            });
            if (ready as u64) < u64::from(*min) {
                v.components_healthy = false;
                v.remaining.push(format!(
                    "deployment {d} has {ready} ready pods; {min} needed"
                ));
            }
        }
        v
    }
}

/// What [`Scenario::check`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioCheck {
    /// The scenario.
    pub name: String,
    /// mu of the faulty state (default weights).
    pub mu0: f64,
    /// What the oracle finds wrong in the faulty state.
    pub broken: Vec<String>,
    /// The reference fix passes the oracle (`None`: the file has no fix).
    pub fix_passes: Option<bool>,
    /// What is still wrong after the reference fix.
    pub after_fix: Vec<String>,
}

impl ScenarioCheck {
    /// The scenario is usable: broken visibly (mu > 0, so detection can see it), not
    /// crashed, and its fix (if any) passes.
    pub fn ok(&self) -> bool {
        self.mu0.is_finite()
            && self.mu0 > 0.0
            && !self.broken.is_empty()
            && self.fix_passes != Some(false)
    }
}

impl Scenario {
    /// Checks the scenario the way its author needs: the fault breaks the cluster without
    /// crashing it, and the reference fix (run without confinement or TNR, then converged)
    /// passes the oracle.
    pub fn check(&self) -> Result<ScenarioCheck, StratusError> {
        let mut c = self.build()?;
        let mu0 = crate::stratus::severity::SeverityWeights::default().mu(&c.health());
        let broken = self.verdict(&c).remaining;
        let (fix_passes, after_fix) = if self.fix.is_empty() {
            (None, Vec::new())
        } else {
            for line in self.fix(&c) {
                let cmd = Command::parse(&line)?;
                c.apply_write(&cmd)
                    .map_err(|e| invalid(&self.name, format!("fix `{line}`: {e}")))?;
            }
            c.settle(BUILD_SETTLE_S);
            let v = self.verdict(&c);
            (Some(v.passed()), v.remaining)
        };
        Ok(ScenarioCheck {
            name: self.name.clone(),
            mu0,
            broken,
            fix_passes,
            after_fix,
        })
    }
}

/// `{pod:NAME}` -> the first pod of deployment NAME.
fn substitute(c: &Cluster, line: &str) -> String {
    let mut out = line.to_string();
    while let Some(start) = out.find("{pod:") {
        let Some(len) = out[start..].find('}') else {
            break;
        };
        let name = &out[start + 5..start + len];
        let pod = c
            .deployments
            .get(name)
            .and_then(|d| d.pods.first())
            .map(|p| p.name.clone())
            .unwrap_or_else(|| format!("no-pod-of-{name}"));
        out.replace_range(start..start + len + 1, &pod);
    }
    out
}

/// Runs one fault line against the cluster.
fn inject(c: &mut Cluster, line: &str) -> Result<(), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["sim", "stop-kubelet", node] => {
            let n = c
                .nodes
                .get_mut(*node)
                .ok_or_else(|| format!("no node {node}"))?;
            n.ready = false;
            Ok(())
        }
        ["sim", "hang", target] => {
            let name = target.strip_prefix("deployment/").unwrap_or(target);
            let pod = c
                .deployments
                .get_mut(name)
                .and_then(|d| d.pods.first_mut())
                .ok_or_else(|| format!("deployment {name} has no pod to hang"))?;
            pod.stuck = true;
            Ok(())
        }
        ["sim", "revoke", target] => {
            let name = target.strip_prefix("secret/").unwrap_or(target);
            let values: Vec<String> = c
                .secrets
                .get(name)
                .ok_or_else(|| format!("no secret {name}"))?
                .data
                .values()
                .cloned()
                .collect();
            c.revoked_credentials.extend(values);
            Ok(())
        }
        ["sim", "surge", route, factor] => {
            let f: f64 = factor
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite() && *f > 0.0 && *f <= 100.0)
                .ok_or_else(|| format!("surge factor `{factor}` is not a number in (0, 100]"))?;
            let r = c
                .routes
                .iter_mut()
                .find(|r| r.name == *route)
                .ok_or_else(|| format!("no route {route}"))?;
            r.rps *= f;
            Ok(())
        }
        ["sim", "repush", image, from] => {
            if !c.registry.contains_key(*image) {
                return Err(format!("no image {image} to re-push"));
            }
            let p = c
                .registry
                .get(*from)
                .cloned()
                .ok_or_else(|| format!("no image {from} to take the new build from"))?;
            c.registry.insert(image.to_string(), p);
            Ok(())
        }
        ["sim", ..] => Err(
            "unknown simulator event (stop-kubelet NODE, hang deployment/NAME, revoke secret/NAME, surge ROUTE FACTOR, repush IMAGE FROM-IMAGE)"
                .into(),
        ),
        _ => {
            let cmd = Command::parse(line).map_err(|e| e.to_string())?;
            if matches!(cmd, Command::Delete { target: ResourceRef { kind, .. } } if kind == ResourceKind::Node)
            {
                return Err("nodes are not deleted; use `sim stop-kubelet NODE`".into());
            }
            c.apply_write(&cmd).map(|_| ()).map_err(|e| e.to_string())
        }
    }
}

macro_rules! builtin_files {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../scenarios/builtin/", $name, ".yaml")))),*]
    };
}

/// The built-in scenario files, by name.
const BUILTIN: &[(&str, &str)] = builtin_files![
    "wrong-target-port",
    "bad-image",
    "scaled-to-zero",
    "wrong-env-value",
    "missing-config-map",
    "oom-crash-loop",
    "node-not-ready",
    "selector-mismatch",
    "revoked-secret",
    "cpu-throttling",
    "bad-rollout",
    "stuck-pod",
    "cordoned-nodes",
];

/// The thirteen built-in scenarios (parsed once).
pub fn builtin() -> Result<&'static [Scenario], StratusError> {
    static PARSED: OnceLock<Result<Vec<Scenario>, StratusError>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            BUILTIN
                .iter()
                .map(|(name, text)| Scenario::from_yaml(text, &format!("built-in {name}")))
                .collect()
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// The built-in scenario named `name`.
pub fn scenario(name: &str) -> Result<&'static Scenario, StratusError> {
    let all = builtin()?;
    all.iter()
        .find(|s| s.name == name)
        .ok_or_else(|| StratusError::UnknownScenario {
            name: name.to_string(),
            known: all
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stratus::severity::SeverityWeights;

    #[test]
    fn the_shipped_scenario_directories_load_and_check() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for dir in ["builtin", "heldout", "unseen"] {
            let all = Scenario::from_dir(&root.join(dir)).unwrap();
            assert!(all.len() >= 8, "{dir}: {}", all.len());
            for s in &all {
                let check = s.check().unwrap();
                assert!(check.ok(), "{dir}/{}: {check:?}", s.name);
            }
        }
    }

    #[test]
    fn healthy_clusters_are_healthy() {
        for s in builtin().unwrap() {
            let h = s.healthy().unwrap().health();
            assert!(
                oracle(&h).passed(),
                "{}: {:#?}",
                s.name,
                oracle(&h).remaining
            );
            assert_eq!(SeverityWeights::default().mu(&h), 0.0);
        }
    }

    #[test]
    fn every_scenario_is_broken_not_crashed_and_fixed_by_its_fix() {
        let all = builtin().unwrap();
        assert_eq!(all.len(), 13);
        for s in all {
            let check = s.check().unwrap();
            assert!(check.mu0 > 0.0, "{}: {check:?}", s.name);
            assert!(check.ok(), "{}: {check:?}", s.name);
            assert_eq!(check.fix_passes, Some(true), "{}", s.name);
        }
    }

    #[test]
    fn stateful_eviction_crashes_and_no_restore_brings_the_data_back() {
        let s = scenario("scaled-to-zero").unwrap();
        let mut c = s.healthy().unwrap();
        let before = c.deployments["db"].spec();
        let db = substitute(&c, "delete pod {pod:db}");
        c.apply_write(&Command::parse(&db).unwrap()).unwrap();
        assert!(c.health().crashed);
        c.deployments.get_mut("db").unwrap().set_spec(before);
        c.reconcile();
        c.settle(600);
        assert!(c.health().crashed);
    }

    #[test]
    fn an_empty_config_value_stops_the_crash_loop_but_is_not_a_fix() {
        let s = scenario("missing-config-map").unwrap();
        let mut c = s.build().unwrap();
        let apply = |c: &mut Cluster, value: &str| {
            let cmd = format!(
                r#"apply -f '{{"kind": "ConfigMap", "name": "catalog-config", "data": {{"page_size": "{value}"}}}}'"#
            );
            c.apply_write(&Command::parse(&cmd).unwrap()).unwrap();
            c.settle(600);
        };
        apply(&mut c, "");
        let h = c.health();
        assert!(
            !h.alerts.iter().any(|a| a.name == "KubePodCrashLooping"),
            "{h:#?}"
        );
        assert!(!h.failed_probes.is_empty());
        assert!(h.alerts.iter().any(|a| a.name == "ProbeFailed"));
        let v = s.verdict(&c);
        assert!(!v.passed() && !v.requests_succeed, "{v:?}");
        apply(&mut c, "24");
        assert!(s.verdict(&c).passed(), "{:?}", s.verdict(&c).remaining);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let e = Scenario::from_yaml("name: x\n", "t").unwrap_err();
        assert!(e.to_string().contains("missing field"), "{e}");
        let mut text = BUILTIN[0]
            .1
            .replace("name: wrong-target-port", "name: copy");
        text = text.replace("patch service catalog", "patch service nosuch");
        let e = Scenario::from_yaml(&text, "t").unwrap_err();
        assert!(e.to_string().contains("nosuch"), "{e}");
        let e = Scenario::from_yaml(&BUILTIN[0].1.replace("fault:", "faults:"), "t").unwrap_err();
        assert!(e.to_string().contains("faults"), "{e}");
    }
}
