//! Running commands against the simulated cluster: writes, `get`/`describe` views and logs.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::model::{Cluster, ConfigMap, Deployment, PodTemplate, Secret, Service};
use super::wording::{LogLine, LogWording};
use crate::stratus::command::{Command, OutputFormat, ResourceKind, ResourceRef};
use crate::stratus::error::EnvError;

fn not_found(r: &ResourceRef) -> EnvError {
    EnvError::NotFound {
        what: r.to_string(),
    }
}

fn invalid(message: impl Into<String>) -> EnvError {
    EnvError::Invalid {
        message: message.into(),
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The patchable view of a deployment (its spec).
#[derive(serde::Serialize, serde::Deserialize)]
struct DeploymentSpec {
    replicas: u32,
    template: PodTemplate,
}

fn patched<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: &T,
    patch: &Value,
) -> Result<T, EnvError> {
    let mut v = serde_json::to_value(value).map_err(|e| invalid(e.to_string()))?;
    merge_patch(&mut v, patch);
    serde_json::from_value(v).map_err(|e| invalid(format!("patched object is not valid: {e}")))
}

impl Cluster {
    fn deployment_mut(&mut self, name: &str) -> Result<&mut Deployment, EnvError> {
        self.deployments
            .get_mut(name)
            .ok_or_else(|| not_found(&ResourceRef::new(ResourceKind::Deployment, name)))
    }

    fn node_mut(&mut self, name: &str) -> Result<&mut super::model::Node, EnvError> {
        self.nodes
            .get_mut(name)
            .ok_or_else(|| not_found(&ResourceRef::new(ResourceKind::Node, name)))
    }

    /// Runs a write command as the operator ([`super::audit::OPERATOR_USER`]), then the
    /// controllers.
    pub fn apply_write(&mut self, cmd: &Command) -> Result<String, EnvError> {
        self.apply_write_by(cmd, super::audit::OPERATOR_USER)
    }

    /// Runs a write command as `user`, then the controllers, and records the change in the
    /// history.
    pub fn apply_write_by(&mut self, cmd: &Command, user: &str) -> Result<String, EnvError> {
        let target = Cluster::write_target(cmd);
        let before = target.as_ref().and_then(|t| self.audit_view(t));
        let out = self.run_write(cmd)?;
        if let Some(t) = &target {
            self.record_change(t, before, user);
        }
        Ok(out)
    }

    fn run_write(&mut self, cmd: &Command) -> Result<String, EnvError> {
        let out = match cmd {
            Command::Scale {
                deployment,
                replicas,
            } => {
                if *replicas > 50 {
                    return Err(invalid("replicas above 50 exceed the namespace quota"));
                }
                self.deployment_mut(deployment)?.replicas = *replicas;
                format!("deployment.apps/{deployment} scaled")
            }
            Command::SetImage {
                deployment,
                container,
                image,
            } => {
                let d = self.deployment_mut(deployment)?;
                if container != &d.name {
                    return Err(invalid(format!(
                        "unable to find container named \"{container}\" (the container is \"{}\")",
                        d.name
                    )));
                }
                let mut t = d.template.clone();
                t.image = image.clone();
                d.roll_to(t);
                format!("deployment.apps/{deployment} image updated")
            }
            Command::SetEnv { deployment, vars } => {
                let d = self.deployment_mut(deployment)?;
                let mut t = d.template.clone();
                for (k, v) in vars {
                    match v {
                        Some(v) => {
                            t.env.insert(k.clone(), v.clone());
                        }
                        None => {
                            t.env.remove(k);
                        }
                    }
                }
                d.roll_to(t);
                format!("deployment.apps/{deployment} env updated")
            }
            Command::SetResources {
                deployment,
                cpu_milli,
                memory_mi,
            } => {
                let d = self.deployment_mut(deployment)?;
                let mut t = d.template.clone();
                if let Some(c) = cpu_milli {
                    t.resources.cpu_milli = *c;
                }
                if let Some(m) = memory_mi {
                    t.resources.memory_mi = *m;
                }
                if t.resources.cpu_milli == 0 || t.resources.memory_mi == 0 {
                    return Err(invalid("limits must be positive"));
                }
                d.roll_to(t);
                format!("deployment.apps/{deployment} resource requirements updated")
            }
            Command::Patch { target, patch } => {
                self.patch(target, patch)?;
                format!("{} patched", target)
            }
            Command::Apply { manifest } => self.apply_manifest(manifest)?,
            Command::RolloutUndo {
                deployment,
                to_revision,
            } => {
                let d = self.deployment_mut(deployment)?;
                let r = d.rollback(*to_revision).map_err(invalid)?;
                format!(
                    "deployment.apps/{deployment} rolled back (to the template of revision {r})"
                )
            }
            Command::Delete { target } if target.kind == ResourceKind::ConfigMap => {
                self.config_maps
                    .remove(&target.name)
                    .ok_or_else(|| not_found(target))?;
                format!("configmap \"{}\" deleted", target.name)
            }
            Command::Delete { target } if target.kind == ResourceKind::Secret => {
                self.secrets
                    .remove(&target.name)
                    .ok_or_else(|| not_found(target))?;
                format!("secret \"{}\" deleted", target.name)
            }
            Command::Delete { target } if target.kind == ResourceKind::Pod => {
                let owner = self
                    .pod_owner(&target.name)
                    .map(|d| d.name.clone())
                    .ok_or_else(|| not_found(target))?;
                self.deployment_mut(&owner)?.delete_pod(&target.name);
                format!("pod \"{}\" deleted", target.name)
            }
            Command::Cordon { node } => {
                self.node_mut(node)?.unschedulable = true;
                format!("node/{node} cordoned")
            }
            Command::Uncordon { node } => {
                self.node_mut(node)?.unschedulable = false;
                format!("node/{node} uncordoned")
            }
            Command::Drain { node } => {
                self.node_mut(node)?.unschedulable = true;
                let mut evicted = Vec::new();
                for d in self.deployments.values_mut() {
                    let victims: Vec<String> = d
                        .pods
                        .iter()
                        .filter(|p| p.node.as_deref() == Some(node.as_str()))
                        .map(|p| p.name.clone())
                        .collect();
                    for v in victims {
                        d.delete_pod(&v);
                        evicted.push(v);
                    }
                }
                let mut s = String::new();
                for v in &evicted {
                    let _ = writeln!(s, "evicting pod {v}");
                }
                let _ = write!(s, "node/{node} drained");
                s
            }
            other => return Err(invalid(format!("not a write command: {other:?}"))),
        };
        self.reconcile();
        Ok(out)
    }

    /// What `kubectl top pod` and the container's memory graph would show: CPU used, the
    /// share of CPU periods throttled, and the last few memory samples (a container killed
    /// for memory climbs to its limit). `null` for a container that is not running.
    pub fn usage(&self, d: &Deployment, pod: &super::model::Pod) -> Value {
        let s = self.pod_status(d, pod);
        let Some(p) = self.profile(d) else {
            return Value::Null;
        };
        let limit = d.template.resources.memory_mi;
        let series: Vec<u32> = match s.reason {
            Some("OOMKilled") => [40u32, 62, 81, 96, 100]
                .iter()
                .map(|share| (u64::from(limit) * u64::from(*share) / 100) as u32)
                .collect(),
            None | Some("Starting") => (0..5)
                .map(|i| {
                    let n = self.noise(&format!("{}:mem:{i}", pod.name));
                    (f64::from(p.memory_mi) * (0.9 + 0.05 * n)).round() as u32
                })
                .collect(),
            _ => return Value::Null,
        };
        let throttled = self.throttled_share(d, &pod.name);
        let cpu = (f64::from(p.cpu_milli.min(d.template.resources.cpu_milli))
            * (0.92 + 0.05 * self.noise(&format!("{}:cpu", pod.name))))
        .round();
        json!({"cpu_milli": cpu, "cpu_throttled": (throttled * 100.0).round() / 100.0,
            "memory_mi": series})
    }

    fn patch(&mut self, target: &ResourceRef, patch: &Value) -> Result<(), EnvError> {
        match target.kind {
            ResourceKind::Deployment => {
                let d = self.deployment_mut(&target.name)?;
                let spec = DeploymentSpec {
                    replicas: d.replicas,
                    template: d.template.clone(),
                };
                let new = patched(&spec, patch)?;
                d.replicas = new.replicas;
                d.roll_to(new.template);
            }
            ResourceKind::Service => {
                let s = self
                    .services
                    .get(&target.name)
                    .ok_or_else(|| not_found(target))?;
                let mut new: Service = patched(s, patch)?;
                new.name = target.name.clone();
                self.services.insert(target.name.clone(), new);
            }
            ResourceKind::Node => {
                let n = self.node_mut(&target.name)?;
                if let Some(u) = patch
                    .pointer("/spec/unschedulable")
                    .or(patch.get("unschedulable"))
                {
                    n.unschedulable = u
                        .as_bool()
                        .ok_or_else(|| invalid("unschedulable must be a boolean"))?;
                } else {
                    return Err(invalid("only `unschedulable` of a node may be patched"));
                }
            }
            ResourceKind::ConfigMap => {
                let c = self
                    .config_maps
                    .get(&target.name)
                    .ok_or_else(|| not_found(target))?;
                let mut new: ConfigMap = patched(c, patch)?;
                new.name = target.name.clone();
                self.config_maps.insert(target.name.clone(), new);
            }
            ResourceKind::Secret => {
                let s = self
                    .secrets
                    .get(&target.name)
                    .ok_or_else(|| not_found(target))?;
                let mut new: Secret = patched(s, patch)?;
                new.name = target.name.clone();
                self.secrets.insert(target.name.clone(), new);
            }
            ResourceKind::Pod | ResourceKind::ReplicaSet => {
                return Err(invalid(
                    "pods and replica sets are owned by their deployment",
                ));
            }
        }
        Ok(())
    }

    fn apply_manifest(&mut self, m: &Value) -> Result<String, EnvError> {
        let kind = m
            .get("kind")
            .and_then(Value::as_str)
            .and_then(ResourceKind::parse)
            .ok_or_else(|| invalid("manifest needs a known `kind`"))?;
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("manifest needs a `name`"))?
            .to_string();
        let mut body = m.clone();
        if let Value::Object(o) = &mut body {
            o.remove("kind");
        }
        let bad =
            |e: serde_json::Error| invalid(format!("invalid {} manifest: {e}", kind.as_str()));
        let verb = match kind {
            ResourceKind::ConfigMap => {
                let c: ConfigMap = serde_json::from_value(body).map_err(bad)?;
                self.config_maps
                    .insert(name.clone(), c)
                    .map_or("created", |_| "configured")
            }
            ResourceKind::Secret => {
                let mut s: Secret = serde_json::from_value(body).map_err(bad)?;
                let newest = self.secrets.values().map(|s| s.created).max().unwrap_or(0);
                if s.created == 0 {
                    s.created = newest + 1;
                }
                self.secrets
                    .insert(name.clone(), s)
                    .map_or("created", |_| "configured")
            }
            ResourceKind::Service => {
                let s: Service = serde_json::from_value(body).map_err(bad)?;
                self.services
                    .insert(name.clone(), s)
                    .map_or("created", |_| "configured")
            }
            ResourceKind::Deployment => {
                let spec: DeploymentSpec = serde_json::from_value(body).map_err(bad)?;
                match self.deployments.get_mut(&name) {
                    Some(d) => {
                        d.replicas = spec.replicas;
                        d.roll_to(spec.template);
                        "configured"
                    }
                    None => {
                        self.deployments.insert(
                            name.clone(),
                            Deployment::new(&name, spec.replicas, spec.template),
                        );
                        "created"
                    }
                }
            }
            _ => {
                return Err(invalid(
                    "apply supports ConfigMap, Secret, Service, Deployment",
                ));
            }
        };
        Ok(format!("{}/{name} {verb}", kind.as_str()))
    }

    /// The JSON view of one resource (what `get KIND NAME -o json` prints).
    pub fn view(&self, r: &ResourceRef) -> Result<Value, EnvError> {
        let traffic = self.traffic();
        self.view_with(r, &traffic)
    }

    fn view_with(
        &self,
        r: &ResourceRef,
        traffic: &super::traffic::TrafficReport,
    ) -> Result<Value, EnvError> {
        let to = |v: Result<Value, serde_json::Error>| v.map_err(|e| invalid(e.to_string()));
        match r.kind {
            ResourceKind::Node => {
                let n = self.nodes.get(&r.name).ok_or_else(|| not_found(r))?;
                let (cpu, mem) = self.free(n);
                let pods: Vec<&str> = self
                    .deployments
                    .values()
                    .flat_map(|d| d.pods.iter())
                    .filter(|p| p.node.as_deref() == Some(n.name.as_str()))
                    .map(|p| p.name.as_str())
                    .collect();
                Ok(
                    json!({"name": n.name, "ready": n.ready, "unschedulable": n.unschedulable,
                    "allocatable": {"cpu_milli": n.cpu_milli, "memory_mi": n.memory_mi},
                    "free": {"cpu_milli": cpu, "memory_mi": mem}, "pods": pods}),
                )
            }
            ResourceKind::Deployment => {
                let d = self.deployments.get(&r.name).ok_or_else(|| not_found(r))?;
                let ready = d
                    .pods
                    .iter()
                    .filter(|p| self.pod_status(d, p).ready)
                    .count();
                let mut volumes: Vec<Value> = d
                    .template
                    .config_maps
                    .iter()
                    .map(|c| json!({"name": c, "configMap": {"name": c}}))
                    .collect();
                volumes.extend(
                    d.template
                        .secrets
                        .iter()
                        .map(|s| json!({"name": s, "secret": {"secretName": s}})),
                );
                if d.stateful {
                    volumes.push(json!({"name": "data", "emptyDir": {}}));
                }
                let history: Vec<Value> = d
                    .history
                    .iter()
                    .map(|h| json!({"revision": h.number, "image": h.template.image}))
                    .collect();
                Ok(
                    json!({"name": d.name, "replicas": d.replicas, "readyReplicas": ready,
                    "selector": d.selector, "revision": d.revision, "template": to(serde_json::to_value(&d.template))?,
                    "history": history, "volumes": volumes,
                    "replicaSets": to(serde_json::to_value(&d.replica_sets))?}),
                )
            }
            ResourceKind::ReplicaSet => {
                for d in self.deployments.values() {
                    if let Some(rs) = d.replica_sets.iter().find(|s| s.name == r.name) {
                        let ready = d
                            .pods
                            .iter()
                            .filter(|p| p.name.starts_with(&rs.name) && self.pod_status(d, p).ready)
                            .count();
                        return Ok(
                            json!({"name": rs.name, "deployment": d.name, "revision": rs.revision,
                            "replicas": rs.replicas, "readyReplicas": ready}),
                        );
                    }
                }
                Err(not_found(r))
            }
            ResourceKind::Pod => {
                let d = self.pod_owner(&r.name).ok_or_else(|| not_found(r))?;
                let p = d
                    .pods
                    .iter()
                    .find(|p| p.name == r.name)
                    .ok_or_else(|| not_found(r))?;
                let s = self.pod_status(d, p);
                let m = traffic.pods.get(&p.name).cloned().unwrap_or_default();
                Ok(
                    json!({"name": p.name, "deployment": d.name, "node": p.node, "phase": s.phase,
                    "ready": s.ready, "reason": s.reason, "message": s.message,
                    "labels": d.template.labels, "image": d.template.image,
                    "containerPort": d.template.container_port,
                    "limits": {"cpu_milli": d.template.resources.cpu_milli, "memory_mi": d.template.resources.memory_mi},
                    "usage": self.usage(d, p),
                    "metrics": to(serde_json::to_value(&m))?}),
                )
            }
            ResourceKind::Service => {
                let s = self.services.get(&r.name).ok_or_else(|| not_found(r))?;
                let eps: Vec<String> = self
                    .endpoints(&s.name)
                    .iter()
                    .map(|(_, p)| format!("{}:{}", p.name, s.target_port))
                    .collect();
                let h = traffic.services.get(&s.name).cloned().unwrap_or_default();
                let jitter = |x: f64, k: &str| {
                    let v = x * (1.0 + 0.05 * self.noise(&format!("{}:{k}", s.name)));
                    (v * 100.0).round() / 100.0
                };
                Ok(
                    json!({"name": s.name, "selector": s.selector, "port": s.port,
                    "targetPort": s.target_port, "endpoints": eps,
                    "metrics": {"rps": jitter(h.demand, "rps"), "success_rate": (h.success * 1000.0).round() / 1000.0,
                        "latency_ms": jitter(h.latency_ms, "latency"), "errors": h.errors,
                        "calls": h.callees}}),
                )
            }
            ResourceKind::ConfigMap => {
                let c = self.config_maps.get(&r.name).ok_or_else(|| not_found(r))?;
                to(serde_json::to_value(c))
            }
            ResourceKind::Secret => {
                let s = self.secrets.get(&r.name).ok_or_else(|| not_found(r))?;
                let keys: Vec<&String> = s.data.keys().collect();
                Ok(json!({"name": s.name, "keys": keys, "created": s.created}))
            }
        }
    }

    fn names(&self, kind: ResourceKind) -> Vec<String> {
        match kind {
            ResourceKind::Node => self.nodes.keys().cloned().collect(),
            ResourceKind::Deployment => self.deployments.keys().cloned().collect(),
            ResourceKind::ReplicaSet => self
                .deployments
                .values()
                .flat_map(|d| d.replica_sets.iter().map(|r| r.name.clone()))
                .collect(),
            ResourceKind::Pod => self
                .deployments
                .values()
                .flat_map(|d| d.pods.iter().map(|p| p.name.clone()))
                .collect(),
            ResourceKind::Service => self.services.keys().cloned().collect(),
            ResourceKind::ConfigMap => self.config_maps.keys().cloned().collect(),
            ResourceKind::Secret => self.secrets.keys().cloned().collect(),
        }
    }

    /// Runs a read command.
    pub fn apply_read(&self, cmd: &Command) -> Result<String, EnvError> {
        let traffic = self.traffic();
        match cmd {
            Command::Get { kind, name, output } => {
                let names = match name {
                    Some(n) => vec![n.clone()],
                    None => self.names(*kind),
                };
                let mut views = Vec::new();
                for n in names {
                    views.push(self.view_with(&ResourceRef::new(*kind, n), &traffic)?);
                }
                match output {
                    OutputFormat::Json => {
                        let v = if name.is_some() {
                            views.into_iter().next().unwrap_or(Value::Null)
                        } else {
                            json!({"items": views})
                        };
                        serde_json::to_string_pretty(&v).map_err(|e| invalid(e.to_string()))
                    }
                    OutputFormat::Table => Ok(table(*kind, &views)),
                }
            }
            Command::Describe { target } => {
                let v = self.view_with(target, &traffic)?;
                let mut out = String::new();
                describe(&mut out, &v, 0);
                if target.kind == ResourceKind::Pod || target.kind == ResourceKind::Deployment {
                    let _ = writeln!(out, "Events:");
                    for a in self.health().alerts {
                        let owner = match target.kind {
                            ResourceKind::Pod => {
                                self.pod_owner(&target.name).map(|d| d.name.clone())
                            }
                            _ => Some(target.name.clone()),
                        };
                        if owner.is_some_and(|o| a.component == format!("deployment/{o}")) {
                            let _ = writeln!(out, "  Warning  {}  {}", a.reason, a.message);
                        }
                    }
                }
                Ok(out)
            }
            Command::History { target } => {
                serde_json::to_string_pretty(&self.history(target.as_ref()))
                    .map_err(|e| invalid(e.to_string()))
            }
            Command::Logs { target, tail } => {
                let lines = self.logs(target, &traffic)?;
                let skip = tail.map_or(0, |t| lines.len().saturating_sub(t));
                Ok(lines[skip..].join("\n"))
            }
            other => Err(invalid(format!("not a read command: {other:?}"))),
        }
    }

    fn logs(
        &self,
        target: &ResourceRef,
        traffic: &super::traffic::TrafficReport,
    ) -> Result<Vec<String>, EnvError> {
        let (d, pod) = match target.kind {
            ResourceKind::Pod => {
                let d = self
                    .pod_owner(&target.name)
                    .ok_or_else(|| not_found(target))?;
                (d, d.pods.iter().find(|p| p.name == target.name))
            }
            ResourceKind::Deployment => {
                let d = self
                    .deployments
                    .get(&target.name)
                    .ok_or_else(|| not_found(target))?;
                // As kubectl does: a pod that runs, else the first.
                let running = d.pods.iter().find(|p| {
                    p.node
                        .as_ref()
                        .is_some_and(|n| self.nodes.get(n).is_some_and(|n| n.ready))
                });
                (d, running.or(d.pods.first()))
            }
            _ => return Err(invalid("logs takes a pod or deployment/NAME")),
        };
        let Some(pod) = pod else {
            return Err(invalid(format!("deployment {} has no pods", d.name)));
        };
        let s = self.pod_status(d, pod);
        let mut out = Vec::new();
        let prof = self.profile(d);
        match s.reason {
            Some("Unschedulable")
            | Some("ImagePullBackOff")
            | Some("CreateContainerConfigError") => {
                return Err(invalid(format!(
                    "container \"{}\" in pod \"{}\" is waiting to start: {}",
                    d.name, pod.name, s.message
                )));
            }
            Some("NodeNotReady") => {
                return Err(invalid(format!(
                    "node of pod {} is not reachable",
                    pod.name
                )));
            }
            _ => {}
        }
        let default_wording = LogWording::default();
        let w = prof.map_or(&default_wording, |p| &p.logs);
        out.push(w.render(
            LogLine::Starting,
            &[("name", &d.name), ("image", &d.template.image)],
        ));
        let Some(p) = prof else {
            return Ok(out);
        };
        let limit = d.template.resources.memory_mi;
        match s.reason {
            Some("OOMKilled") => {
                for share in [40u32, 62, 81, 96] {
                    let mi = (u64::from(limit) * u64::from(share) / 100).to_string();
                    out.push(w.render(LogLine::Heap, &[("mi", &mi)]));
                }
                out.push(w.render(LogLine::Killed, &[]));
                return Ok(out);
            }
            Some("CrashLoopBackOff") => {
                let missing = self.missing_config_keys(d);
                match missing.first() {
                    Some(key) => {
                        let expected = p.config.get(key).map_or("", |r| r.expected.as_str());
                        out.push(
                            w.render(LogLine::MissingKey, &[("key", key), ("expected", expected)]),
                        );
                    }
                    None => out.push(w.render(LogLine::Crash, &[])),
                }
                return Ok(out);
            }
            _ => {}
        }
        out.push(w.render(LogLine::Listening, &[("port", &p.listen_port.to_string())]));
        for (key, value, expected) in self.invalid_config(d) {
            out.push(w.render(
                LogLine::InvalidValue,
                &[("key", &key), ("value", &value), ("expected", &expected)],
            ));
        }
        if s.reason.is_some() {
            out.push(w.render(LogLine::Warming, &[]));
            return Ok(out);
        }
        for var in &p.dependency_env {
            match d.template.env.get(var) {
                Some(addr) if self.resolve(addr).is_none() => {
                    out.push(w.render(LogLine::DialRefused, &[("addr", addr), ("var", var)]))
                }
                None => out.push(w.render(LogLine::DependencyUnset, &[("var", var)])),
                _ => {}
            }
        }
        match (self.credential_secret(d), &p.credential_key) {
            (Some((sec, true)), _) => {
                out.push(w.render(LogLine::CredentialRejected, &[("secret", sec)]))
            }
            (None, Some(key)) => out.push(w.render(LogLine::CredentialMissing, &[("key", key)])),
            _ => {}
        }
        if let Some(m) = traffic.pods.get(&pod.name)
            && m.timeout_rate > 0.0
        {
            out.push(w.render(LogLine::Hung, &[]));
        }
        if p.error_rate > 0.0 {
            out.push(w.render(LogLine::RequestErrors, &[]));
        }
        if d.template.resources.cpu_milli < p.cpu_milli {
            out.push(w.render(LogLine::CpuSaturated, &[]));
        }
        Ok(out)
    }
}

fn table(kind: ResourceKind, views: &[Value]) -> String {
    let s = |v: &Value, k: &str| match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "<none>".into(),
        Some(x) => x.to_string(),
    };
    let mut out = String::new();
    match kind {
        ResourceKind::Pod => {
            let _ = writeln!(out, "NAME\tREADY\tSTATUS\tNODE");
            for v in views {
                let status = match v.get("reason").and_then(Value::as_str) {
                    Some(r) => r.to_string(),
                    None => s(v, "phase"),
                };
                let ready = if v.get("ready") == Some(&Value::Bool(true)) {
                    "1/1"
                } else {
                    "0/1"
                };
                let _ = writeln!(out, "{}\t{ready}\t{status}\t{}", s(v, "name"), s(v, "node"));
            }
        }
        ResourceKind::Deployment => {
            let _ = writeln!(out, "NAME\tREADY\tREVISION\tIMAGE");
            for v in views {
                let image = v
                    .pointer("/template/image")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let _ = writeln!(
                    out,
                    "{}\t{}/{}\t{}\t{image}",
                    s(v, "name"),
                    s(v, "readyReplicas"),
                    s(v, "replicas"),
                    s(v, "revision")
                );
            }
        }
        ResourceKind::Service => {
            let _ = writeln!(out, "NAME\tPORT\tTARGET\tENDPOINTS\tSUCCESS");
            for v in views {
                let eps = v
                    .get("endpoints")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let succ = v
                    .pointer("/metrics/success_rate")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{eps}\t{succ:.3}",
                    s(v, "name"),
                    s(v, "port"),
                    s(v, "targetPort")
                );
            }
        }
        ResourceKind::Node => {
            let _ = writeln!(out, "NAME\tSTATUS");
            for v in views {
                let mut st = if v.get("ready") == Some(&Value::Bool(true)) {
                    "Ready".to_string()
                } else {
                    "NotReady".to_string()
                };
                if v.get("unschedulable") == Some(&Value::Bool(true)) {
                    st.push_str(",SchedulingDisabled");
                }
                let _ = writeln!(out, "{}\t{st}", s(v, "name"));
            }
        }
        _ => {
            let _ = writeln!(out, "NAME");
            for v in views {
                let _ = writeln!(out, "{}", s(v, "name"));
            }
        }
    }
    out
}

fn describe(out: &mut String, v: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match x {
                    Value::Object(_) | Value::Array(_) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        describe(out, x, indent + 1);
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}{k}: {}", scalar(x));
                    }
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                match x {
                    Value::Object(_) | Value::Array(_) => {
                        let _ = writeln!(out, "{pad}-");
                        describe(out, x, indent + 1);
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}- {}", scalar(x));
                    }
                }
            }
        }
        x => {
            let _ = writeln!(out, "{pad}{}", scalar(x));
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
