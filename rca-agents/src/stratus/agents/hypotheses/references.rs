//! Relations that do not resolve: selectors, target ports, mounts, addresses, images,
//! replicas behind a service, and credentials a newer secret holds.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::shapes::{address, apply, bare_ports, edit_distance, patch, tokens};
use super::{Builder, Family};
use crate::stratus::agents::diagnosis::{FaultKind, str_of};
use crate::stratus::agents::observed::strings_at;

impl Builder<'_> {
    pub(super) fn references(&mut self) {
        let o = self.o;
        // Services: selection, replicas behind them, target ports.
        for s in &o.services {
            let name = str_of(s, "name");
            if o.demand(s) <= 0.0 {
                continue;
            }
            let backing = o.backing(s);
            if backing.is_empty() {
                if let Some(fix) = self.best_selector(s) {
                    self.push(
                        Family::Reference,
                        FaultKind::SelectorMismatch,
                        format!("service/{name}"),
                        format!("service {name} has load and selects no deployment's pods"),
                        vec![fix],
                    );
                }
                continue;
            }
            for d in &backing {
                let dep = str_of(d, "name");
                if d.get("replicas") == Some(&Value::from(0)) {
                    self.push(
                        Family::Reference,
                        FaultKind::ScaledToZero,
                        format!("deployment/{dep}"),
                        format!("service {name} has load; deployment {dep} has 0 replicas"),
                        vec![format!("scale deployment {dep} --replicas=1")],
                    );
                }
            }
            let codes = o.error_codes(s);
            let has_endpoints = s
                .get("endpoints")
                .and_then(Value::as_array)
                .is_some_and(|e| !e.is_empty());
            // Ready endpoints that refuse connections answer 503 through the service (its
            // proxy cannot connect): the port it sends to is the suspect, not the process.
            if !codes.iter().any(|c| c == "503") || !has_endpoints {
                continue;
            }
            let target = s.get("targetPort").and_then(Value::as_u64).unwrap_or(0);
            let mut ports: Vec<u64> = Vec::new();
            for d in &backing {
                let dep = str_of(d, "name");
                for line in o.logs.get(dep).into_iter().flatten() {
                    ports.extend(bare_ports(line).into_iter().map(u64::from));
                }
            }
            for d in &backing {
                if let Some(p) = d
                    .pointer("/template/container_port")
                    .and_then(Value::as_u64)
                {
                    ports.push(p);
                }
            }
            // Then any number the process states that could be a port: the wording of the
            // line is the process's own, the number is what matters.
            for d in &backing {
                let dep = str_of(d, "name");
                for line in o.logs.get(dep).into_iter().flatten() {
                    ports.extend(
                        tokens(line)
                            .into_iter()
                            .filter_map(|t| t.parse::<u16>().ok())
                            .filter(|p| *p > 0)
                            .map(u64::from),
                    );
                }
            }
            let mut seen = BTreeSet::new();
            for p in ports {
                if p == target || !seen.insert(p) {
                    continue;
                }
                if let Some(fix) = patch("service", name, &json!({"targetPort": p})) {
                    self.push(
                        Family::Reference,
                        FaultKind::WrongTargetPort,
                        format!("service/{name}"),
                        format!(
                            "service {name} fails requests ({}) sending to port {target}; its pods state port {p}",
                            codes.join(", ")
                        ),
                        vec![fix],
                    );
                }
            }
        }
        // Deployments: mounts, addresses, images.
        for d in &o.deployments {
            let dep = str_of(d, "name");
            let component = format!("deployment/{dep}");
            for m in o.mounted_maps(d) {
                if o.config_map(&m).is_some() {
                    continue;
                }
                let data = self
                    .last_manifest(&format!("configmap/{m}"))
                    .and_then(|v| v.get("data").cloned())
                    .unwrap_or_else(|| json!({}));
                if let Some(fix) = apply(&json!({"kind": "ConfigMap", "name": m, "data": data})) {
                    self.push(
                        Family::Reference,
                        FaultKind::MissingConfig,
                        format!("configmap/{m}"),
                        format!("{dep} mounts config map {m}, which does not exist"),
                        vec![fix],
                    );
                }
            }
            let mounted = o.mounted_secrets(d);
            for m in &mounted {
                if o.secret(m).is_some() {
                    continue;
                }
                // Another secret holding the keys the missing one held.
                let keys: BTreeSet<String> = self
                    .last_manifest(&format!("secret/{m}"))
                    .map(|v| strings_at(&v, "/keys").into_iter().collect())
                    .unwrap_or_default();
                let replacement = o
                    .secrets
                    .iter()
                    .filter(|s| !mounted.iter().any(|x| x == str_of(s, "name")))
                    .filter(|s| {
                        let have: BTreeSet<String> = strings_at(s, "/keys").into_iter().collect();
                        !keys.is_empty() && keys.is_subset(&have)
                    })
                    .max_by_key(|s| s.get("created").and_then(Value::as_u64).unwrap_or(0));
                let fix = match replacement {
                    Some(r) => {
                        let list: Vec<&str> = mounted
                            .iter()
                            .map(|x| {
                                if x == m {
                                    str_of(r, "name")
                                } else {
                                    x.as_str()
                                }
                            })
                            .collect();
                        patch("deployment", dep, &json!({"template": {"secrets": list}}))
                    }
                    None => apply(&json!({"kind": "Secret", "name": m, "data": {}})),
                };
                self.push(
                    Family::Reference,
                    FaultKind::MissingConfig,
                    format!("secret/{m}"),
                    format!("{dep} mounts secret {m}, which does not exist"),
                    fix.into_iter().collect(),
                );
            }
            if self.relevance(&component) <= 2 {
                self.addresses(d);
            }
            let unpullable = o
                .pods_of(dep)
                .iter()
                .any(|p| str_of(p, "reason") == "ImagePullBackOff");
            if unpullable {
                let current = d
                    .pointer("/template/image")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let older = d
                    .get("history")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .rev()
                    .filter_map(|h| h.get("image").and_then(Value::as_str))
                    .find(|i| *i != current);
                if let Some(img) = older {
                    self.push(
                        Family::Reference,
                        FaultKind::BadImage,
                        component.clone(),
                        format!("image {current} of {dep} cannot be pulled; {img} ran before"),
                        vec![format!("set image deployment/{dep} {dep}={img}")],
                    );
                }
            }
        }
    }

    /// Addresses in a deployment's environment that name no service port: the service
    /// closest by name (never the deployment's own), at its port.
    fn addresses(&mut self, d: &Value) {
        let o = self.o;
        let dep = str_of(d, "name");
        let own: Vec<&str> = o.selecting(d).iter().map(|s| str_of(s, "name")).collect();
        let Some(env) = d.pointer("/template/env").and_then(Value::as_object) else {
            return;
        };
        for (var, v) in env {
            let Some((host, port)) = v.as_str().and_then(address) else {
                continue;
            };
            let resolves = o
                .service(host)
                .is_some_and(|s| s.get("port").and_then(Value::as_u64) == Some(u64::from(port)));
            if resolves {
                continue;
            }
            let target = o
                .services
                .iter()
                .filter(|s| !own.contains(&str_of(s, "name")))
                .min_by_key(|s| edit_distance(str_of(s, "name"), host));
            let Some(t) = target else { continue };
            let fixed = format!(
                "{}:{}",
                str_of(t, "name"),
                t.get("port").and_then(Value::as_u64).unwrap_or(0)
            );
            self.push(
                Family::Reference,
                FaultKind::WrongEnv,
                format!("deployment/{dep}"),
                format!("{var}={host}:{port} in {dep} names no service port; closest: {fixed}"),
                vec![format!("set env deployment/{dep} {var}={fixed}")],
            );
        }
    }

    /// The selector patch that makes a service select the deployment whose pod labels
    /// agree with most of it (then the closest name): pairs that agree stay, values that
    /// differ are corrected, keys its pods do not carry are dropped.
    fn best_selector(&self, s: &Value) -> Option<String> {
        let name = str_of(s, "name");
        let sel = s.get("selector").and_then(Value::as_object)?;
        let best = self
            .o
            .deployments
            .iter()
            .filter_map(|d| {
                let labels = d.pointer("/template/labels").and_then(Value::as_object)?;
                let agree = sel
                    .iter()
                    .filter(|(k, v)| labels.get(*k) == Some(*v))
                    .count();
                let distance: usize = sel
                    .iter()
                    .map(|(k, v)| {
                        edit_distance(
                            v.as_str().unwrap_or(""),
                            labels.get(k).and_then(Value::as_str).unwrap_or(""),
                        )
                    })
                    .sum();
                Some((
                    agree,
                    edit_distance(str_of(d, "name"), name),
                    distance,
                    labels,
                ))
            })
            .min_by_key(|(agree, by_name, distance, _)| {
                (std::cmp::Reverse(*agree), *by_name, *distance)
            })?;
        let labels = best.3;
        let new: serde_json::Map<String, Value> = sel
            .keys()
            .map(|k| (k.clone(), labels.get(k).cloned().unwrap_or(Value::Null)))
            .collect();
        if new.values().all(Value::is_null) {
            return None;
        }
        patch("service", name, &json!({"selector": new}))
    }

    /// The manifest an object last had in the history (after its last change, or before
    /// its deletion).
    fn last_manifest(&self, object: &str) -> Option<Value> {
        self.o
            .history
            .iter()
            .rev()
            .filter(|c| str_of(c, "object") == object)
            .find_map(|c| {
                c.get("after")
                    .filter(|v| !v.is_null())
                    .or_else(|| c.get("before").filter(|v| !v.is_null()))
                    .cloned()
            })
    }

    pub(super) fn credentials(&mut self) {
        let o = self.o;
        for s in &o.services {
            if !o.error_codes(s).iter().any(|c| c == "401") {
                continue;
            }
            for d in o.backing(s) {
                let dep = str_of(d, "name");
                let mounted = o.mounted_secrets(d);
                let keys_of = |n: &str| -> BTreeSet<String> {
                    o.secret(n)
                        .map(|s| strings_at(s, "/keys").into_iter().collect())
                        .unwrap_or_default()
                };
                let logged: BTreeSet<&str> = o
                    .logs
                    .get(dep)
                    .into_iter()
                    .flatten()
                    .flat_map(|l| tokens(l))
                    .collect();
                let mut candidates: Vec<&Value> = o
                    .secrets
                    .iter()
                    .filter(|x| !mounted.iter().any(|m| m == str_of(x, "name")))
                    .collect();
                candidates.sort_by_key(|x| {
                    std::cmp::Reverse(x.get("created").and_then(Value::as_u64).unwrap_or(0))
                });
                for c in candidates {
                    let cname = str_of(c, "name");
                    let have = keys_of(cname);
                    // Which mounted secret it replaces: one with the same keys, else (when
                    // the logs name a key it holds) one without that key, else none.
                    let same = mounted
                        .iter()
                        .find(|m| !keys_of(m).is_empty() && keys_of(m).is_subset(&have));
                    let named: Vec<&str> = have
                        .iter()
                        .map(String::as_str)
                        .filter(|k| logged.contains(k))
                        .collect();
                    let list: Vec<String> = match same {
                        Some(m) => mounted
                            .iter()
                            .map(|x| if x == m { cname.to_string() } else { x.clone() })
                            .collect(),
                        None if !named.is_empty() => {
                            let lacking = mounted
                                .iter()
                                .find(|m| !named.iter().any(|k| keys_of(m).contains(*k)));
                            match lacking {
                                Some(m) => mounted
                                    .iter()
                                    .map(|x| if x == m { cname.to_string() } else { x.clone() })
                                    .collect(),
                                None => {
                                    let mut l = mounted.clone();
                                    l.push(cname.to_string());
                                    l
                                }
                            }
                        }
                        None => continue,
                    };
                    if let Some(fix) =
                        patch("deployment", dep, &json!({"template": {"secrets": list}}))
                    {
                        self.push(
                            Family::Credential,
                            FaultKind::RevokedSecret,
                            format!("deployment/{dep}"),
                            format!(
                                "{} is rejected upstream (401); secret {cname} (newer, not mounted) holds the keys it needs",
                                str_of(s, "name")
                            ),
                            vec![fix],
                        );
                    }
                }
            }
        }
    }
}
