//! Changes made before the incident by others than the agents, put back.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::MAX_REVERTS_PER_OBJECT;
use super::shapes::apply;
use super::{Builder, Family};
use crate::stratus::agents::diagnosis::{FaultKind, str_of};
use crate::stratus::sim::audit::AGENT_USER;

impl Builder<'_> {
    /// Changes made before the incident by others than the agents: put back the manifest
    /// the object had before its latest such change (and before its earliest one).
    /// Deployments close to the symptoms whose template has an earlier revision (their own
    /// rollout history, kept with or without an audit trail): roll back to it.
    pub(super) fn rollbacks(&mut self) {
        let o = self.o;
        for d in &o.deployments {
            let dep = str_of(d, "name");
            let component = format!("deployment/{dep}");
            if self.relevance(&component) > 1 {
                continue;
            }
            let Some(previous) = d
                .get("history")
                .and_then(Value::as_array)
                .and_then(|h| h.last())
            else {
                continue;
            };
            let revision = d.get("revision").and_then(Value::as_u64).unwrap_or(0);
            let image = d
                .pointer("/template/image")
                .and_then(Value::as_str)
                .unwrap_or("");
            self.push(
                Family::Changed,
                FaultKind::BadRollout,
                component,
                format!(
                    "{dep} runs revision {revision} ({image}); revision {} ({}) ran before",
                    previous
                        .get("revision")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    str_of(previous, "image")
                ),
                vec![format!("rollout undo deployment/{dep}")],
            );
        }
    }

    pub(super) fn changed(&mut self) {
        let o = self.o;
        let mut by_object: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for c in &o.history {
            by_object
                .entry(str_of(c, "object").to_string())
                .or_default()
                .push(c);
        }
        for (object, changes) in by_object {
            let current = changes
                .last()
                .and_then(|c| c.get("after"))
                .cloned()
                .unwrap_or(Value::Null);
            let theirs: Vec<&&Value> = changes
                .iter()
                .filter(|c| str_of(c, "user") != AGENT_USER)
                .collect();
            let mut targets: Vec<(&Value, u64)> = Vec::new();
            for c in theirs.iter().rev().chain(theirs.first()) {
                let Some(before) = c.get("before").filter(|b| !b.is_null()) else {
                    continue;
                };
                let at = c.get("at").and_then(Value::as_u64).unwrap_or(0);
                if *before != current && !targets.iter().any(|(t, _)| *t == before) {
                    targets.push((before, at));
                }
                if targets.len() >= MAX_REVERTS_PER_OBJECT {
                    break;
                }
            }
            let (kind, name) = object.split_once('/').unwrap_or(("", ""));
            for (before, at) in targets {
                let fix = match kind {
                    "configmap" => apply(&json!({"kind": "ConfigMap", "name": name,
                        "data": before.get("data").cloned().unwrap_or(json!({}))})),
                    "service" => {
                        let mut m = before.clone();
                        if let Some(obj) = m.as_object_mut() {
                            obj.insert("kind".into(), json!("Service"));
                        }
                        apply(&m)
                    }
                    "deployment" => apply(&json!({"kind": "Deployment", "name": name,
                        "replicas": before.get("replicas").cloned().unwrap_or(json!(1)),
                        "template": before.get("template").cloned().unwrap_or(Value::Null)})),
                    "node" => match before.get("unschedulable").and_then(Value::as_bool) {
                        Some(true) => Some(format!("cordon {name}")),
                        Some(false) => Some(format!("uncordon {name}")),
                        None => None,
                    },
                    _ => None,
                };
                let what = describe_change(before, &current);
                let age = self.now.saturating_sub(at);
                if let Some(h) = self.push(
                    Family::Changed,
                    FaultKind::RecentChange,
                    object.clone(),
                    format!("{object} was changed {age} s ago ({what}); put back as it was"),
                    fix.into_iter().collect(),
                ) {
                    h.age_s = age;
                }
            }
        }
    }
}

/// Which top-level fields differ between two manifests.
fn describe_change(before: &Value, after: &Value) -> String {
    match (before.as_object(), after.as_object()) {
        (Some(b), Some(a)) => {
            let mut fields: Vec<&str> = b
                .keys()
                .chain(a.keys())
                .filter(|k| b.get(*k) != a.get(*k))
                .map(String::as_str)
                .collect();
            fields.dedup();
            if fields.contains(&"template")
                && let (Some(bt), Some(at)) = (
                    b.get("template").and_then(Value::as_object),
                    a.get("template").and_then(Value::as_object),
                )
            {
                let inner: Vec<&str> = bt
                    .keys()
                    .filter(|k| bt.get(*k) != at.get(*k))
                    .map(String::as_str)
                    .collect();
                return format!("{} changed", inner.join(", "));
            }
            format!("{} changed", fields.join(", "))
        }
        (Some(_), None) => "deleted".into(),
        _ => "changed".into(),
    }
}
