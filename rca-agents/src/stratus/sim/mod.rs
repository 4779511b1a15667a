//! A simulated Kubernetes-like cluster that implements [`Environment`].
//!
//! Nodes (ready, cordoned), deployments that own replica sets and pods (images, env, config
//! maps, secrets, limits, readiness), services with selectors and target ports, and a request
//! model through the service graph: alerts, SLA violations and capacity loss are computed
//! from this state, never set by hand. Faults are modelled in [`scenarios`].

pub mod audit;
pub mod exec;
pub mod generate;
pub mod manifest;
pub mod model;
pub mod scenarios;
pub mod traffic;
pub mod wording;

use async_trait::async_trait;

pub use model::Cluster;
use model::{Deployment, DeploymentSpec};

use super::command::{ResourceKind, ResourceRef};
use super::confinement::{ReadCommand, WriteCommand};
use super::environment::{Environment, ResourceSnapshot, ServiceGraph};
use super::error::EnvError;
use super::severity::{HealthReport, SeverityWeights};

/// How long a dry run lets the copy converge, simulated seconds.
const DRY_RUN_SETTLE_S: u64 = 600;

/// The simulated cluster as an [`Environment`].
#[derive(Debug, Clone, PartialEq)]
pub struct SimEnvironment {
    cluster: Cluster,
}

impl SimEnvironment {
    /// Wraps a cluster (reconciling it first).
    pub fn new(mut cluster: Cluster) -> Self {
        cluster.reconcile();
        SimEnvironment { cluster }
    }

    /// The cluster's state.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Runs `commands` on a copy, as a transaction would, and after each one checks what no
    /// snapshot brings back: a stateful deployment's pod-local data lost, or (undoing the
    /// commands so far and letting the copy converge) a system less healthy than before,
    /// as when the pods a command replaced find no node to go back to. Returns the index of
    /// the first command that makes the plan irreversible, and why.
    pub async fn trial(
        &self,
        commands: &[WriteCommand],
    ) -> Result<Option<(usize, String)>, EnvError> {
        let w = SeverityWeights::default();
        let mut original = self.clone();
        original.cluster.settle(DRY_RUN_SETTLE_S);
        let before = original.cluster.health();
        let mut copy = self.clone();
        let mut stack = Vec::new();
        for (k, command) in commands.iter().enumerate() {
            for r in copy.footprint(command).await? {
                stack.push(copy.snapshot(&r).await?);
            }
            if copy.write_now(command).is_err() {
                return Ok(None);
            }
            let lost: Vec<&str> = copy
                .cluster
                .deployments
                .values()
                .filter(|d| {
                    d.data_lost
                        && !self
                            .cluster
                            .deployments
                            .get(&d.name)
                            .is_some_and(|before| before.data_lost)
                })
                .map(|d| d.name.as_str())
                .collect();
            if !lost.is_empty() {
                return Ok(Some((
                    k,
                    format!(
                        "it deletes the pod-local data (emptyDir) of {}; no snapshot holds it",
                        lost.join(", ")
                    ),
                )));
            }
            let mut undone = copy.clone();
            for s in stack.iter().rev() {
                undone.restore(s).await?;
            }
            undone.cluster.settle(DRY_RUN_SETTLE_S);
            let after = undone.cluster.health();
            if after.crashed && !before.crashed {
                let lost: Vec<&str> = undone
                    .cluster
                    .deployments
                    .values()
                    .filter(|d| d.data_lost)
                    .map(|d| d.name.as_str())
                    .collect();
                return Ok(Some((
                    k,
                    format!(
                        "undoing it would delete pods that hold data (emptyDir) of {}",
                        lost.join(", ")
                    ),
                )));
            }
            if w.mu(&after) > w.mu(&before) {
                let worse: Vec<&str> = after
                    .unhealthy_components
                    .iter()
                    .filter(|c| !before.unhealthy_components.contains(c))
                    .map(String::as_str)
                    .collect();
                return Ok(Some((
                    k,
                    format!(
                        "undoing it would not bring back what it replaces (no node can take the pods back: {})",
                        worse.join(", ")
                    ),
                )));
            }
        }
        Ok(None)
    }

    /// Lets simulated time pass until starting pods are ready (at most `max_wait_s`).
    pub fn settle_now(&mut self, max_wait_s: u64) {
        self.cluster.settle(max_wait_s);
    }

    /// Runs a write directly (no transaction): used by the ablation modes without TNR.
    pub fn write_now(&mut self, command: &WriteCommand) -> Result<String, EnvError> {
        self.cluster
            .apply_write_by(command.command(), audit::AGENT_USER)
    }

    /// The top-level resource that holds `r` (pods and replica sets are held by their
    /// deployment).
    fn holder(&self, r: &ResourceRef) -> Result<ResourceRef, EnvError> {
        match r.kind {
            ResourceKind::Pod => self
                .cluster
                .pod_owner(&r.name)
                .map(|d| ResourceRef::new(ResourceKind::Deployment, d.name.clone()))
                .ok_or_else(|| EnvError::NotFound {
                    what: r.to_string(),
                }),
            ResourceKind::ReplicaSet => self
                .cluster
                .deployments
                .values()
                .find(|d| d.replica_sets.iter().any(|s| s.name == r.name))
                .map(|d| ResourceRef::new(ResourceKind::Deployment, d.name.clone()))
                .ok_or_else(|| EnvError::NotFound {
                    what: r.to_string(),
                }),
            _ => Ok(r.clone()),
        }
    }

    fn manifest(&self, r: &ResourceRef) -> Result<Option<serde_json::Value>, EnvError> {
        let c = &self.cluster;
        let v = match r.kind {
            ResourceKind::Node => c.nodes.get(&r.name).map(serde_json::to_value),
            ResourceKind::Deployment => c
                .deployments
                .get(&r.name)
                .map(|d| serde_json::to_value(d.spec())),
            ResourceKind::Service => c.services.get(&r.name).map(serde_json::to_value),
            ResourceKind::ConfigMap => c.config_maps.get(&r.name).map(serde_json::to_value),
            ResourceKind::Secret => c.secrets.get(&r.name).map(serde_json::to_value),
            ResourceKind::Pod | ResourceKind::ReplicaSet => {
                return Err(EnvError::Invalid {
                    message: format!("{r} is held by its deployment"),
                });
            }
        };
        v.transpose().map_err(|e| EnvError::Invalid {
            message: e.to_string(),
        })
    }

    fn top_level(&self) -> Vec<ResourceRef> {
        let c = &self.cluster;
        let mut out = Vec::new();
        out.extend(
            c.nodes
                .keys()
                .map(|n| ResourceRef::new(ResourceKind::Node, n.clone())),
        );
        out.extend(
            c.deployments
                .keys()
                .map(|n| ResourceRef::new(ResourceKind::Deployment, n.clone())),
        );
        out.extend(
            c.services
                .keys()
                .map(|n| ResourceRef::new(ResourceKind::Service, n.clone())),
        );
        out.extend(
            c.config_maps
                .keys()
                .map(|n| ResourceRef::new(ResourceKind::ConfigMap, n.clone())),
        );
        out.extend(
            c.secrets
                .keys()
                .map(|n| ResourceRef::new(ResourceKind::Secret, n.clone())),
        );
        out
    }
}

#[async_trait]
impl Environment for SimEnvironment {
    async fn observe(&self) -> Result<HealthReport, EnvError> {
        Ok(self.cluster.health())
    }

    async fn read(&self, command: &ReadCommand) -> Result<String, EnvError> {
        self.cluster.apply_read(command.command())
    }

    async fn write(&mut self, command: &WriteCommand) -> Result<String, EnvError> {
        self.write_now(command)
    }

    /// Exact footprint: the write runs on a copy and every top-level resource that differs
    /// (or appears) is reported, plus the resource the command names.
    async fn footprint(&self, command: &WriteCommand) -> Result<Vec<ResourceRef>, EnvError> {
        let mut copy = self.clone();
        let mut out = Vec::new();
        if let Some(t) = command.command().target()
            && let Ok(h) = self.holder(&t)
        {
            out.push(h);
        }
        if copy.write_now(command).is_ok() {
            let mut all = self.top_level();
            for r in copy.top_level() {
                if !all.contains(&r) {
                    all.push(r);
                }
            }
            for r in all {
                if self.manifest(&r)? != copy.manifest(&r)? && !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        Ok(out)
    }

    async fn snapshot(&self, resource: &ResourceRef) -> Result<ResourceSnapshot, EnvError> {
        let holder = match self.holder(resource) {
            Ok(h) => h,
            Err(_) if matches!(resource.kind, ResourceKind::Pod | ResourceKind::ReplicaSet) => {
                return Err(EnvError::NotFound {
                    what: resource.to_string(),
                });
            }
            Err(e) => return Err(e),
        };
        Ok(ResourceSnapshot {
            manifest: self.manifest(&holder)?,
            resource: holder,
        })
    }

    async fn restore(&mut self, snapshot: &ResourceSnapshot) -> Result<(), EnvError> {
        let r = &snapshot.resource;
        let before = self.cluster.audit_view(r);
        let bad = |e: serde_json::Error| EnvError::Invalid {
            message: format!("snapshot of {r} does not decode: {e}"),
        };
        let c = &mut self.cluster;
        macro_rules! put {
            ($map:expr) => {
                match &snapshot.manifest {
                    Some(m) => {
                        $map.insert(
                            r.name.clone(),
                            serde_json::from_value(m.clone()).map_err(bad)?,
                        );
                    }
                    None => {
                        $map.remove(&r.name);
                    }
                }
            };
        }
        match r.kind {
            ResourceKind::Node => put!(c.nodes),
            ResourceKind::Deployment => match &snapshot.manifest {
                Some(m) => {
                    let spec: DeploymentSpec = serde_json::from_value(m.clone()).map_err(bad)?;
                    match c.deployments.get_mut(&r.name) {
                        Some(d) => d.set_spec(spec),
                        None => {
                            c.deployments
                                .insert(r.name.clone(), Deployment::from_spec(spec));
                        }
                    }
                }
                None => {
                    c.deployments.remove(&r.name);
                }
            },
            ResourceKind::Service => put!(c.services),
            ResourceKind::ConfigMap => put!(c.config_maps),
            ResourceKind::Secret => put!(c.secrets),
            ResourceKind::Pod | ResourceKind::ReplicaSet => {
                return Err(EnvError::Invalid {
                    message: format!("{r} is restored through its deployment"),
                });
            }
        }
        c.reconcile();
        self.cluster.record_change(r, before, audit::AGENT_USER);
        Ok(())
    }

    async fn settle(&mut self, max_wait_s: u64) -> Result<(), EnvError> {
        self.cluster.settle(max_wait_s);
        Ok(())
    }

    /// Exact, by trial on a copy ([`SimEnvironment::trial`]).
    async fn irreversible(&self, command: &WriteCommand) -> Result<Option<String>, EnvError> {
        Ok(self
            .trial(std::slice::from_ref(command))
            .await?
            .map(|(_, why)| why))
    }

    /// Exact, by trial on a copy: every prefix of the plan (a transaction can abort after any
    /// command), undone, must leave the system as healthy as before.
    async fn irreversible_plan(
        &self,
        commands: &[WriteCommand],
    ) -> Result<Vec<(String, String)>, EnvError> {
        Ok(self
            .trial(commands)
            .await?
            .and_then(|(k, why)| commands.get(k).map(|c| (c.text().to_string(), why)))
            .into_iter()
            .collect())
    }

    async fn state_hash(&self) -> Result<u64, EnvError> {
        Ok(self.cluster.state_hash())
    }

    async fn service_graph(&self) -> Result<ServiceGraph, EnvError> {
        Ok(self.cluster.service_graph())
    }

    async fn dry_run(&self, commands: &[WriteCommand]) -> Result<Option<HealthReport>, EnvError> {
        let mut copy = self.clone();
        for c in commands {
            copy.write_now(c)?;
        }
        copy.cluster.settle(DRY_RUN_SETTLE_S);
        Ok(Some(copy.cluster.health()))
    }
}
