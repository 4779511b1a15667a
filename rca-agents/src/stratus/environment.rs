//! The [`Environment`] trait: what STRATUS needs from a system it mitigates, and the
//! read-only handle that detection and diagnosis agents get.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

use super::command::{ResourceRef, Reversibility};
use super::confinement::{ReadCommand, WriteCommand, confine_read};
use super::error::{EnvError, StratusError};
use super::severity::HealthReport;

/// A resource's saved state: its manifest as JSON, or `None` when it did not exist (restoring
/// such a snapshot deletes the resource).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSnapshot {
    /// The resource.
    pub resource: ResourceRef,
    /// Its manifest, or `None` if absent.
    pub manifest: Option<serde_json::Value>,
}

/// The service call graph (caller -> callee), used to bootstrap diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceGraph {
    /// Every service.
    pub services: Vec<String>,
    /// Entry services (those receiving user traffic).
    pub entries: Vec<String>,
    /// Edges `(caller, callee)`.
    pub edges: Vec<(String, String)>,
}

impl ServiceGraph {
    /// Services that `service` calls.
    pub fn callees(&self, service: &str) -> Vec<&str> {
        self.edges
            .iter()
            .filter(|(a, _)| a == service)
            .map(|(_, b)| b.as_str())
            .collect()
    }

    /// Distance from the nearest entry (entries are 0); unreachable services get `usize::MAX`.
    pub fn depth(&self, service: &str) -> usize {
        let mut frontier: Vec<&str> = self.entries.iter().map(String::as_str).collect();
        let mut seen: Vec<&str> = frontier.clone();
        for d in 0..=self.services.len() {
            if frontier.contains(&service) {
                return d;
            }
            let mut next = Vec::new();
            for s in &frontier {
                for c in self.callees(s) {
                    if !seen.contains(&c) {
                        seen.push(c);
                        next.push(c);
                    }
                }
            }
            frontier = next;
        }
        usize::MAX
    }
}

/// A system STRATUS can observe and mitigate: a simulated cluster, or a real one behind
/// kubectl or kube-rs (see `docs/guides/stratus.md`).
///
/// Reads take `&self`; writes and restores take `&mut self`, so a caller that shares the
/// environment behind a readers-writer lock can write only while it holds the write guard
/// (writer exclusivity, TNR assumption A1).
///
/// A minimal implementation: one deployment whose replica count is the whole state.
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use rca_agents::stratus::{Command, EnvError, Environment, HealthReport, ReadCommand,
///     ResourceKind, ResourceRef, ResourceSnapshot, ServiceGraph, Tnr, TnrConfig, WriteCommand};
/// use rca_agents::stratus::severity::Alert;
///
/// struct OneDeployment { replicas: u32 }
///
/// #[async_trait]
/// impl Environment for OneDeployment {
///     async fn observe(&self) -> Result<HealthReport, EnvError> {
///         let mut h = HealthReport::default();
///         h.capacity_loss = 3u32.saturating_sub(self.replicas);
///         if self.replicas == 0 {
///             h.alerts.push(Alert { name: "NoEndpoints".into(), component: "service/web".into(),
///                 reason: String::new(), message: String::new() });
///         }
///         Ok(h)
///     }
///     async fn read(&self, _: &ReadCommand) -> Result<String, EnvError> {
///         Ok(format!("replicas: {}", self.replicas))
///     }
///     async fn write(&mut self, c: &WriteCommand) -> Result<String, EnvError> {
///         match c.command() {
///             Command::Scale { replicas, .. } => { self.replicas = *replicas; Ok("scaled".into()) }
///             _ => Err(EnvError::Invalid { message: "only scale".into() }),
///         }
///     }
///     async fn footprint(&self, _: &WriteCommand) -> Result<Vec<ResourceRef>, EnvError> {
///         Ok(vec![ResourceRef::new(ResourceKind::Deployment, "web")])
///     }
///     async fn snapshot(&self, r: &ResourceRef) -> Result<ResourceSnapshot, EnvError> {
///         Ok(ResourceSnapshot { resource: r.clone(), manifest: Some(self.replicas.into()) })
///     }
///     async fn restore(&mut self, s: &ResourceSnapshot) -> Result<(), EnvError> {
///         self.replicas = s.manifest.as_ref().and_then(|m| m.as_u64()).unwrap_or(0) as u32;
///         Ok(())
///     }
///     async fn state_hash(&self) -> Result<u64, EnvError> { Ok(u64::from(self.replicas)) }
///     async fn service_graph(&self) -> Result<ServiceGraph, EnvError> { Ok(ServiceGraph::default()) }
/// }
///
/// # futures::executor::block_on(async {
/// let env = Arc::new(tokio::sync::RwLock::new(OneDeployment { replicas: 1 }));
/// let tnr = Tnr::new(env.clone(), TnrConfig::default()).await.unwrap();
/// // Scaling to zero raises severity: aborted and undone.
/// let r = tnr.run_text(&["scale deployment web --replicas=0".into()]).await.unwrap();
/// assert!(!r.committed());
/// assert_eq!(env.read().await.replicas, 1);
/// // Scaling up lowers it: committed.
/// let r = tnr.run_text(&["scale deployment web --replicas=3".into()]).await.unwrap();
/// assert!(r.committed());
/// # });
/// ```
#[async_trait]
pub trait Environment: Send + Sync {
    /// The current health: alerts, SLA violations, capacity loss, crash.
    async fn observe(&self) -> Result<HealthReport, EnvError>;

    /// Runs a read-only command and returns its output.
    async fn read(&self, command: &ReadCommand) -> Result<String, EnvError>;

    /// Runs a write command and returns its output.
    async fn write(&mut self, command: &WriteCommand) -> Result<String, EnvError>;

    /// The resources a write may change: each is snapshotted before the write runs, and
    /// restoring those snapshots must undo it exactly.
    async fn footprint(&self, command: &WriteCommand) -> Result<Vec<ResourceRef>, EnvError>;

    /// Saves one resource's state.
    async fn snapshot(&self, resource: &ResourceRef) -> Result<ResourceSnapshot, EnvError>;

    /// Puts a saved state back (re-applies the manifest, or deletes the resource if it did not
    /// exist).
    async fn restore(&mut self, snapshot: &ResourceSnapshot) -> Result<(), EnvError>;

    /// A hash of the whole observable state, to check that undo was faithful.
    async fn state_hash(&self) -> Result<u64, EnvError>;

    /// The service call graph.
    async fn service_graph(&self) -> Result<ServiceGraph, EnvError>;

    /// Lets the system converge after writes (rollouts, restarts, readiness), waiting at most
    /// `max_wait_s` seconds (simulated or real). The default has nothing to wait for.
    async fn settle(&mut self, _max_wait_s: u64) -> Result<(), EnvError> {
        Ok(())
    }

    /// Whether `command` would destroy what no snapshot can bring back, and what. The
    /// default follows the command's declared [`Reversibility`]: deleting pods is
    /// irreversible (their local data goes with them); commands that only replace pods pass.
    /// An environment whose pods keep data (`emptyDir`) must override this and answer
    /// exactly, as the simulator does; so must every wrapper of an environment (forward it).
    async fn irreversible(&self, command: &WriteCommand) -> Result<Option<String>, EnvError> {
        Ok(match command.command().reversibility() {
            Reversibility::DeletesPods | Reversibility::DeletesObject => {
                Some("it deletes pods or objects, and whatever they held".into())
            }
            Reversibility::Reversible | Reversibility::ReplacesPods => None,
        })
    }

    /// The irreversible commands of a whole plan, as (command, what it would destroy). A
    /// command can be harmless alone and irreversible after the ones before it (pods that no
    /// node takes back once an earlier command used the room), so an environment that can
    /// judge a plan as a whole should. The default asks [`Environment::irreversible`] of each
    /// command on the current state.
    async fn irreversible_plan(
        &self,
        commands: &[WriteCommand],
    ) -> Result<Vec<(String, String)>, EnvError> {
        let mut out = Vec::new();
        for c in commands {
            if let Some(reason) = self.irreversible(c).await? {
                out.push((c.text().to_string(), reason));
            }
        }
        Ok(out)
    }

    /// Predicts the health after running `commands` against a copy of the state, without
    /// touching the real one; `None` when the environment cannot dry-run.
    async fn dry_run(&self, _commands: &[WriteCommand]) -> Result<Option<HealthReport>, EnvError> {
        Ok(None)
    }
}

fn _object_safe(_: &dyn Environment) {}

/// What a read-only agent may do: run read commands and observe. There is no write method,
/// so no read-only agent can change state.
#[async_trait]
pub trait ReadAccess: Send + Sync {
    /// Runs a confined read command.
    async fn run(&self, command: &ReadCommand) -> Result<String, StratusError>;
    /// The current health.
    async fn observe(&self) -> Result<HealthReport, StratusError>;
    /// The service call graph.
    async fn service_graph(&self) -> Result<ServiceGraph, StratusError>;

    /// Parses, confines and runs a command line; a write is refused.
    async fn run_text(&self, text: &str) -> Result<String, StratusError> {
        let cmd = confine_read(text)?;
        self.run(&cmd).await
    }
}

/// A read-only view of a shared environment. Every call takes the read lock, so it sees only
/// states between transactions (the visible states).
pub struct ReadHandle<E: Environment> {
    env: Arc<RwLock<E>>,
}

impl<E: Environment> Clone for ReadHandle<E> {
    fn clone(&self) -> Self {
        ReadHandle {
            env: Arc::clone(&self.env),
        }
    }
}

impl<E: Environment> ReadHandle<E> {
    /// A read-only handle on a shared environment.
    pub fn new(env: Arc<RwLock<E>>) -> Self {
        ReadHandle { env }
    }
}

#[async_trait]
impl<E: Environment> ReadAccess for ReadHandle<E> {
    async fn run(&self, command: &ReadCommand) -> Result<String, StratusError> {
        Ok(self.env.read().await.read(command).await?)
    }

    async fn observe(&self) -> Result<HealthReport, StratusError> {
        Ok(self.env.read().await.observe().await?)
    }

    async fn service_graph(&self) -> Result<ServiceGraph, StratusError> {
        Ok(self.env.read().await.service_graph().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_depth_and_callees() {
        let g = ServiceGraph {
            services: vec!["a".into(), "b".into(), "c".into(), "z".into()],
            entries: vec!["a".into()],
            edges: vec![("a".into(), "b".into()), ("b".into(), "c".into())],
        };
        assert_eq!(g.depth("a"), 0);
        assert_eq!(g.depth("c"), 2);
        assert_eq!(g.depth("z"), usize::MAX);
        assert_eq!(g.callees("a"), vec!["b"]);
    }
}
