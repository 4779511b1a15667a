//! The cluster's change history (an audit trail): every write to a top-level object, by whom,
//! when, and its manifest before and after. `history [KIND/NAME]` reads it, as an SRE reads
//! `kubectl rollout history`, an audit log or a GitOps repository's log.
//!
//! Secrets appear with their keys only (never their values). Writes made under
//! [`AGENT_USER`] are the agents' own; diagnosis tells them apart from the incident's.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::model::Cluster;
use crate::stratus::command::{Command, ResourceKind, ResourceRef};

/// The identity STRATUS writes under. An environment records the agents' writes (and undo's
/// restores) under it, so diagnosis can tell its own changes from the ones before the incident.
pub const AGENT_USER: &str = "stratus";

/// The identity the simulator records for writes made outside the agents (a scenario's
/// fault lines, a reference fix).
pub const OPERATOR_USER: &str = "operator";

/// Most changes kept; past it the oldest are dropped.
pub const MAX_CHANGES: usize = 1000;

/// What a change did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeVerb {
    /// The object did not exist before.
    Created,
    /// The object's manifest changed.
    Updated,
    /// The object was deleted.
    Deleted,
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Simulated second of the write.
    pub at: u64,
    /// Who wrote.
    pub user: String,
    /// The object (`configmap/x`).
    pub object: String,
    /// What happened.
    pub verb: ChangeVerb,
    /// The manifest before (absent when created).
    pub before: Option<Value>,
    /// The manifest after (absent when deleted).
    pub after: Option<Value>,
}

impl Cluster {
    /// An object's manifest as the history shows it: what `apply -f` takes back for config
    /// maps, services and deployments (`replicas` and `template`; a rollback that brings an
    /// earlier template back is a change of the template, not of a revision number); a
    /// node's schedulability; a secret's key names.
    pub fn audit_view(&self, r: &ResourceRef) -> Option<Value> {
        match r.kind {
            ResourceKind::Node => self
                .nodes
                .get(&r.name)
                .map(|n| json!({"name": n.name, "unschedulable": n.unschedulable})),
            ResourceKind::Deployment => self.deployments.get(&r.name).and_then(|d| {
                serde_json::to_value(&d.template)
                    .ok()
                    .map(|t| json!({"name": d.name, "replicas": d.replicas, "template": t}))
            }),
            ResourceKind::Service => self
                .services
                .get(&r.name)
                .and_then(|s| serde_json::to_value(s).ok()),
            ResourceKind::ConfigMap => self
                .config_maps
                .get(&r.name)
                .and_then(|c| serde_json::to_value(c).ok()),
            ResourceKind::Secret => self.secrets.get(&r.name).map(|s| {
                let keys: Vec<&String> = s.data.keys().collect();
                json!({"name": s.name, "keys": keys, "created": s.created})
            }),
            ResourceKind::Pod | ResourceKind::ReplicaSet => None,
        }
    }

    /// The top-level object a write changes, if any (deleting a pod changes none: its
    /// controller replaces it).
    pub fn write_target(cmd: &Command) -> Option<ResourceRef> {
        cmd.target()
            .filter(|t| !matches!(t.kind, ResourceKind::Pod | ResourceKind::ReplicaSet))
    }

    /// Records the change of `object` from `before` to its current manifest, if it changed.
    pub fn record_change(&mut self, object: &ResourceRef, before: Option<Value>, user: &str) {
        let after = self.audit_view(object);
        if before == after {
            return;
        }
        let verb = match (&before, &after) {
            (None, _) => ChangeVerb::Created,
            (_, None) => ChangeVerb::Deleted,
            _ => ChangeVerb::Updated,
        };
        if self.changes.len() >= MAX_CHANGES {
            self.changes.remove(0);
        }
        self.changes.push(Change {
            at: self.clock,
            user: user.to_string(),
            object: object.to_string(),
            verb,
            before,
            after,
        });
    }

    /// The history of one object, or of every object, oldest first.
    pub fn history(&self, object: Option<&ResourceRef>) -> Vec<&Change> {
        let name = object.map(ToString::to_string);
        self.changes
            .iter()
            .filter(|c| name.as_ref().is_none_or(|n| &c.object == n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stratus::sim::scenarios::scenario;

    #[test]
    fn writes_are_recorded_with_who_and_what_and_secrets_keep_their_values_out() {
        let s = scenario("wrong-target-port").unwrap();
        let mut c = s.healthy().unwrap();
        assert!(c.changes.is_empty());
        let cmd = Command::parse("patch service catalog -p '{\"targetPort\": 1}'").unwrap();
        c.apply_write_by(&cmd, AGENT_USER).unwrap();
        let h = c.history(None);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].user, AGENT_USER);
        assert_eq!(h[0].verb, ChangeVerb::Updated);
        assert_eq!(h[0].after.as_ref().unwrap()["targetPort"], 1);
        // A write that changes nothing is not a change.
        c.apply_write_by(&cmd, AGENT_USER).unwrap();
        assert_eq!(c.history(None).len(), 1);
        for sec in c.secrets.clone().keys() {
            let r = ResourceRef::new(ResourceKind::Secret, sec.clone());
            let v = c.audit_view(&r).unwrap().to_string();
            for value in c.secrets[sec].data.values() {
                assert!(!v.contains(value.as_str()), "{v}");
            }
        }
    }
}
