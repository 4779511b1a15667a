//! Fault scenarios modelled on AIOpsLab and ITBench mitigation problems, on a small shop
//! application, with their termination oracles.

use std::collections::BTreeMap;

use super::model::{
    Cluster, ConfigMap, Deployment, ImageProfile, Node, PodTemplate, Resources, Route, Secret,
    Service,
};
use crate::stratus::error::StratusError;
pub use crate::stratus::oracle::{OracleVerdict, oracle};

/// A fault scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name (`rca mitigate --scenario NAME`).
    pub name: &'static str,
    /// What is broken.
    pub summary: &'static str,
    /// Components the fault involves (wrong-fix generators avoid them).
    pub involved: &'static [&'static str],
    build: fn(&mut Cluster),
    fix: fn(&Cluster) -> Vec<String>,
}

impl Scenario {
    /// The faulty cluster (reconciled).
    pub fn build(&self) -> Cluster {
        let mut c = base_cluster();
        (self.build)(&mut c);
        c.reconcile();
        c
    }

    /// A known-good fix for the faulty state, as commands (the benchmark's "right fix").
    pub fn fix(&self, cluster: &Cluster) -> Vec<String> {
        (self.fix)(cluster)
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct App {
    name: &'static str,
    image: &'static str,
    port: u16,
    replicas: u32,
    cpu: u32,
    mem: u32,
    env: &'static [(&'static str, &'static str)],
    config_maps: &'static [&'static str],
    secrets: &'static [&'static str],
    profile: ImageProfile,
}

fn profile(port: u16, mem: u32, cpu: u32, rps: f64, latency: f64) -> ImageProfile {
    ImageProfile {
        listen_port: port,
        memory_mi: mem,
        cpu_milli: cpu,
        rps_per_pod: rps,
        latency_ms: latency,
        error_rate: 0.0,
        crashes: false,
        dependency_env: Vec::new(),
        required_config_keys: Vec::new(),
        credential_key: None,
    }
}

fn deps(mut p: ImageProfile, vars: &[&str]) -> ImageProfile {
    p.dependency_env = vars.iter().map(|v| v.to_string()).collect();
    p
}

/// The healthy shop: three nodes, seven deployments, two user routes.
pub fn base_cluster() -> Cluster {
    let mut c = Cluster::default();
    for n in ["node-1", "node-2", "node-3"] {
        c.nodes.insert(
            n.into(),
            Node {
                name: n.into(),
                ready: true,
                unschedulable: false,
                cpu_milli: 4000,
                memory_mi: 8192,
            },
        );
    }
    let mut cart_profile = deps(profile(7070, 150, 250, 200.0, 10.0), &["CACHE_ADDR"]);
    cart_profile.required_config_keys = vec!["max_items".into()];
    let mut catalog_profile = deps(profile(3550, 200, 250, 150.0, 15.0), &["DB_ADDR"]);
    catalog_profile.required_config_keys = vec!["page_size".into()];
    let mut payments_profile = profile(50051, 180, 250, 60.0, 40.0);
    payments_profile.credential_key = Some("api-key".into());
    let apps = [
        App {
            name: "frontend",
            image: "shop/frontend:1.4.2",
            port: 8080,
            replicas: 3,
            cpu: 500,
            mem: 256,
            env: &[("CATALOG_ADDR", "catalog:3550"), ("CART_ADDR", "cart:7070")],
            config_maps: &[],
            secrets: &[],
            profile: deps(
                profile(8080, 200, 400, 120.0, 20.0),
                &["CATALOG_ADDR", "CART_ADDR"],
            ),
        },
        App {
            name: "checkout",
            image: "shop/checkout:3.0.1",
            port: 5050,
            replicas: 2,
            cpu: 300,
            mem: 256,
            env: &[
                ("CART_ADDR", "cart:7070"),
                ("PAYMENTS_ADDR", "payments:50051"),
            ],
            config_maps: &[],
            secrets: &[],
            profile: deps(
                profile(5050, 150, 250, 60.0, 30.0),
                &["CART_ADDR", "PAYMENTS_ADDR"],
            ),
        },
        App {
            name: "cart",
            image: "shop/cart:2.2.0",
            port: 7070,
            replicas: 2,
            cpu: 300,
            mem: 256,
            env: &[("CACHE_ADDR", "cache:6379")],
            config_maps: &["cart-config"],
            secrets: &[],
            profile: cart_profile,
        },
        App {
            name: "catalog",
            image: "shop/catalog:2.0.3",
            port: 3550,
            replicas: 2,
            cpu: 300,
            mem: 256,
            env: &[("DB_ADDR", "db:5432")],
            config_maps: &["catalog-config"],
            secrets: &[],
            profile: catalog_profile,
        },
        App {
            name: "payments",
            image: "shop/payments:1.9.0",
            port: 50051,
            replicas: 2,
            cpu: 300,
            mem: 256,
            env: &[],
            config_maps: &[],
            secrets: &["payments-key"],
            profile: payments_profile,
        },
        App {
            name: "cache",
            image: "redis:7.2",
            port: 6379,
            replicas: 1,
            cpu: 250,
            mem: 512,
            env: &[],
            config_maps: &[],
            secrets: &[],
            profile: profile(6379, 300, 200, 600.0, 2.0),
        },
        App {
            name: "db",
            image: "postgres:16.2",
            port: 5432,
            replicas: 1,
            cpu: 500,
            mem: 1024,
            env: &[],
            config_maps: &[],
            secrets: &[],
            profile: profile(5432, 700, 400, 400.0, 5.0),
        },
    ];
    for a in apps {
        let template = PodTemplate {
            labels: map(&[("app", a.name)]),
            image: a.image.into(),
            container_port: a.port,
            env: map(a.env),
            config_maps: a.config_maps.iter().map(|s| s.to_string()).collect(),
            secrets: a.secrets.iter().map(|s| s.to_string()).collect(),
            resources: Resources {
                cpu_milli: a.cpu,
                memory_mi: a.mem,
            },
            node_selector: (a.name == "db").then(|| "node-3".to_string()),
        };
        let mut d = Deployment::new(a.name, a.replicas, template);
        d.stateful = a.name == "db";
        c.deployments.insert(a.name.into(), d);
        c.services.insert(
            a.name.into(),
            Service {
                name: a.name.into(),
                selector: map(&[("app", a.name)]),
                port: a.port,
                target_port: a.port,
            },
        );
        c.registry.insert(a.image.into(), a.profile);
    }
    // Older and newer builds that exist in the registry.
    let mut frontend_old = profile(8080, 200, 400, 120.0, 20.0);
    frontend_old.dependency_env = vec!["CATALOG_ADDR".into(), "CART_ADDR".into()];
    c.registry
        .insert("shop/frontend:1.4.1".into(), frontend_old);
    let mut catalog_bad = deps(profile(3550, 200, 250, 150.0, 15.0), &["DB_ADDR"]);
    catalog_bad.required_config_keys = vec!["page_size".into()];
    catalog_bad.error_rate = 0.4;
    c.registry.insert("shop/catalog:2.1.0".into(), catalog_bad);
    c.config_maps.insert(
        "cart-config".into(),
        ConfigMap {
            name: "cart-config".into(),
            data: map(&[("max_items", "50")]),
        },
    );
    c.config_maps.insert(
        "catalog-config".into(),
        ConfigMap {
            name: "catalog-config".into(),
            data: map(&[("page_size", "24")]),
        },
    );
    c.secrets.insert(
        "payments-key".into(),
        Secret {
            name: "payments-key".into(),
            data: map(&[("api-key", "pk_live_0001")]),
            revoked: false,
            created: 1,
        },
    );
    c.routes = vec![
        Route {
            name: "web".into(),
            service: "frontend".into(),
            rps: 200.0,
            slo_success: 0.99,
            slo_latency_ms: 300.0,
        },
        Route {
            name: "checkout".into(),
            service: "checkout".into(),
            rps: 60.0,
            slo_success: 0.99,
            slo_latency_ms: 400.0,
        },
    ];
    c.reconcile();
    c
}

fn with_deploy(c: &mut Cluster, name: &str, f: impl FnOnce(&mut Deployment)) {
    if let Some(d) = c.deployments.get_mut(name) {
        f(d);
    }
}

fn retemplate(c: &mut Cluster, name: &str, f: impl FnOnce(&mut PodTemplate)) {
    with_deploy(c, name, |d| {
        let mut t = d.template.clone();
        f(&mut t);
        d.roll_to(t);
    });
}

fn first_pod(c: &Cluster, deployment: &str) -> String {
    c.deployments
        .get(deployment)
        .and_then(|d| d.pods.first())
        .map(|p| p.name.clone())
        .unwrap_or_default()
}

/// Every scenario.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "wrong-target-port",
        summary: "service catalog sends traffic to port 3551; the pods listen on 3550",
        involved: &["catalog"],
        build: |c| {
            if let Some(s) = c.services.get_mut("catalog") {
                s.target_port = 3551;
            }
        },
        fix: |_| vec![r#"patch service catalog -p '{"targetPort": 3550}'"#.into()],
    },
    Scenario {
        name: "bad-image",
        summary: "frontend was updated to an image tag that does not exist (ImagePullBackOff)",
        involved: &["frontend"],
        build: |c| retemplate(c, "frontend", |t| t.image = "shop/frontend:1.4.3".into()),
        fix: |_| vec!["rollout undo deployment/frontend".into()],
    },
    Scenario {
        name: "scaled-to-zero",
        summary: "cart was scaled to zero replicas",
        involved: &["cart"],
        build: |c| with_deploy(c, "cart", |d| d.replicas = 0),
        fix: |_| vec!["scale deployment cart --replicas=2".into()],
    },
    Scenario {
        name: "wrong-env-value",
        summary: "cart's CACHE_ADDR points at port 6380; the cache listens on 6379",
        involved: &["cart", "cache"],
        build: |c| {
            retemplate(c, "cart", |t| {
                t.env.insert("CACHE_ADDR".into(), "cache:6380".into());
            })
        },
        fix: |_| vec!["set env deployment/cart CACHE_ADDR=cache:6379".into()],
    },
    Scenario {
        name: "missing-config-map",
        summary: "config map catalog-config was deleted (CreateContainerConfigError)",
        involved: &["catalog"],
        build: |c| {
            c.config_maps.remove("catalog-config");
        },
        fix: |_| {
            vec![r#"apply -f '{"kind": "ConfigMap", "name": "catalog-config", "data": {"page_size": "24"}}'"#.into()]
        },
    },
    Scenario {
        name: "oom-crash-loop",
        summary: "payments' memory limit (64Mi) is below what it needs: OOMKilled crash loop",
        involved: &["payments", "checkout"],
        build: |c| retemplate(c, "payments", |t| t.resources.memory_mi = 64),
        fix: |_| vec!["set resources deployment/payments --limits=memory=256Mi".into()],
    },
    Scenario {
        name: "node-not-ready",
        summary: "node-2's kubelet stopped reporting: its pods are unknown",
        involved: &["node-2"],
        build: |c| {
            if let Some(n) = c.nodes.get_mut("node-2") {
                n.ready = false;
            }
        },
        fix: |_| vec!["cordon node-2".into(), "drain node-2".into()],
    },
    Scenario {
        name: "selector-mismatch",
        summary: "service cart selects app=carts; the pods are labelled app=cart",
        involved: &["cart"],
        build: |c| {
            if let Some(s) = c.services.get_mut("cart") {
                s.selector = map(&[("app", "carts")]);
            }
        },
        fix: |_| vec![r#"patch service cart -p '{"selector": {"app": "cart"}}'"#.into()],
    },
    Scenario {
        name: "revoked-secret",
        summary: "the credential in secret payments-key was revoked; a rotated payments-key-v2 exists",
        involved: &["payments", "checkout"],
        build: |c| {
            if let Some(s) = c.secrets.get_mut("payments-key") {
                s.revoked = true;
            }
            c.secrets.insert(
                "payments-key-v2".into(),
                Secret {
                    name: "payments-key-v2".into(),
                    data: map(&[("api-key", "pk_live_0002")]),
                    revoked: false,
                    created: 2,
                },
            );
        },
        fix: |_| {
            vec![
                r#"patch deployment payments -p '{"template": {"secrets": ["payments-key-v2"]}}'"#
                    .into(),
            ]
        },
    },
    Scenario {
        name: "cpu-throttling",
        summary: "frontend's CPU limit (150m) throttles it below the offered load",
        involved: &["frontend"],
        build: |c| retemplate(c, "frontend", |t| t.resources.cpu_milli = 150),
        fix: |_| vec!["set resources deployment/frontend --limits=cpu=500m".into()],
    },
    Scenario {
        name: "bad-rollout",
        summary: "catalog was rolled out to build 2.1.0, which fails 40% of requests",
        involved: &["catalog"],
        build: |c| retemplate(c, "catalog", |t| t.image = "shop/catalog:2.1.0".into()),
        fix: |_| vec!["rollout undo deployment/catalog".into()],
    },
    Scenario {
        name: "stuck-pod",
        summary: "the only cache pod hangs: it passes its TCP readiness check but answers nothing",
        involved: &["cache"],
        build: |c| {
            with_deploy(c, "cache", |d| {
                if let Some(p) = d.pods.first_mut() {
                    p.stuck = true;
                }
            })
        },
        fix: |c| vec![format!("delete pod {}", first_pod(c, "cache"))],
    },
    Scenario {
        name: "cordoned-nodes",
        summary: "node-1 and node-2 were drained for maintenance and left cordoned: pods are pending",
        involved: &["node-1", "node-2"],
        build: |c| {
            for n in ["node-1", "node-2"] {
                if let Some(node) = c.nodes.get_mut(n) {
                    node.unschedulable = true;
                }
                for d in c.deployments.values_mut() {
                    let victims: Vec<String> = d
                        .pods
                        .iter()
                        .filter(|p| p.node.as_deref() == Some(n))
                        .map(|p| p.name.clone())
                        .collect();
                    for v in victims {
                        d.delete_pod(&v);
                    }
                }
            }
        },
        fix: |_| vec!["uncordon node-1".into(), "uncordon node-2".into()],
    },
];

/// The scenario named `name`.
pub fn scenario(name: &str) -> Result<&'static Scenario, StratusError> {
    SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| StratusError::UnknownScenario {
            name: name.to_string(),
            known: SCENARIOS
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stratus::command::Command;
    use crate::stratus::severity::SeverityWeights;

    #[test]
    fn base_is_healthy() {
        let c = base_cluster();
        let h = c.health();
        assert!(oracle(&h).passed(), "{:#?}", oracle(&h).remaining);
        assert_eq!(SeverityWeights::default().mu(&h), 0.0);
    }

    #[test]
    fn every_scenario_is_broken_not_crashed_and_fixed_by_its_fix() {
        assert!(SCENARIOS.len() >= 12);
        for s in SCENARIOS {
            let mut c = s.build();
            let h0 = c.health();
            let mu0 = SeverityWeights::default().mu(&h0);
            assert!(!h0.crashed, "{}", s.name);
            assert!(mu0 > 0.0 && mu0.is_finite(), "{}: mu0 = {mu0}", s.name);
            assert!(!oracle(&h0).passed(), "{}", s.name);
            for cmd in s.fix(&c) {
                c.apply_write(&Command::parse(&cmd).unwrap()).unwrap();
            }
            let h = c.health();
            assert!(
                oracle(&h).passed(),
                "{}: {:#?}",
                s.name,
                oracle(&h).remaining
            );
        }
    }

    #[test]
    fn stateful_eviction_crashes() {
        let mut c = base_cluster();
        let db = first_pod(&c, "db");
        c.apply_write(&Command::parse(&format!("delete pod {db}")).unwrap())
            .unwrap();
        assert!(c.health().crashed);
    }
}
