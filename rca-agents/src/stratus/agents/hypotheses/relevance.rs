//! How close each object is to the symptoms.

use std::collections::BTreeMap;

use serde_json::Value;

use super::shapes::address;
use crate::stratus::agents::diagnosis::str_of;
use crate::stratus::agents::observed::Observed;

/// How close each object is to the symptoms: 0 for the localised root service, what backs
/// it, deployments whose pods fail and NotReady nodes; 1 for the other suspects and what the
/// rank-0 deployments reference; 2 for what the failing routes reach; absent: 3.
pub(super) fn relevance_map(o: &Observed) -> BTreeMap<String, u8> {
    let mut rank: BTreeMap<String, u8> = BTreeMap::new();
    let put = |rank: &mut BTreeMap<String, u8>, k: String, r: u8| {
        let e = rank.entry(k).or_insert(r);
        *e = (*e).min(r);
    };
    let suspects = o.localise();
    let mut level0: Vec<&Value> = Vec::new();
    for (i, s) in suspects.iter().enumerate() {
        let r = u8::from(i > 0);
        put(&mut rank, format!("service/{s}"), r);
        if let Some(svc) = o.service(s) {
            for d in o.backing(svc) {
                put(&mut rank, format!("deployment/{}", str_of(d, "name")), r);
                if r == 0 {
                    level0.push(d);
                }
            }
        }
    }
    for d in &o.deployments {
        if !o.broken_pods(str_of(d, "name")).is_empty() {
            put(&mut rank, format!("deployment/{}", str_of(d, "name")), 0);
            level0.push(d);
        }
    }
    for n in &o.nodes {
        if n.get("ready") == Some(&Value::Bool(false)) {
            put(&mut rank, format!("node/{}", str_of(n, "name")), 0);
        }
    }
    let around = |rank: &mut BTreeMap<String, u8>, d: &Value, r: u8| {
        let mut add = |k: String| {
            let e = rank.entry(k).or_insert(r);
            *e = (*e).min(r);
        };
        for m in o.mounted_maps(d) {
            add(format!("configmap/{m}"));
        }
        for s in o.mounted_secrets(d) {
            add(format!("secret/{s}"));
        }
        for s in o.selecting(d) {
            add(format!("service/{}", str_of(s, "name")));
        }
        for p in o.pods_of(str_of(d, "name")) {
            if let Some(n) = p.get("node").and_then(Value::as_str) {
                add(format!("node/{n}"));
            }
        }
        if let Some(env) = d.pointer("/template/env").and_then(Value::as_object) {
            for v in env.values().filter_map(Value::as_str) {
                if let Some((host, _)) = address(v) {
                    add(format!("service/{host}"));
                }
            }
        }
    };
    for d in level0 {
        around(&mut rank, d, 1);
    }
    if !o.health.failed_probes.is_empty() || !o.health.sla_violations.is_empty() {
        for s in o.reachable() {
            put(&mut rank, format!("service/{s}"), 2);
            if let Some(svc) = o.service(&s) {
                for d in o.backing(svc) {
                    put(&mut rank, format!("deployment/{}", str_of(d, "name")), 2);
                    around(&mut rank, d, 2);
                }
            }
        }
    }
    rank
}
