//! Kubernetes-style manifests for the simulated cluster: what a scenario file holds.
//!
//! A manifest has `kind`, `metadata.name` and the fields of `spec` (and `status` for nodes)
//! that the simulator models, spelled as Kubernetes spells them:
//!
//! - `Node`: `spec.unschedulable`, `status.ready`, `status.allocatable.{cpu, memory}`;
//! - `Deployment`: `spec.replicas`, `spec.selector.matchLabels`, `spec.template.metadata.labels`,
//!   `spec.template.spec.nodeSelector` (`kubernetes.io/hostname`), one container with `name`
//!   (the deployment's name), `image`, `ports[0].containerPort`, `env[].{name, value}` and
//!   `resources.limits.{cpu, memory}`, and `volumes[]` (`configMap.name`, `secret.secretName`,
//!   `emptyDir`: data that lives and dies with the pod);
//! - `Service`: `spec.selector`, `spec.ports[0].{port, targetPort}`;
//! - `ConfigMap`: `data`; `Secret`: `stringData` (created in file order).
//!
//! Anything else is an error naming the field, so a typo does not silently change a scenario.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{Cluster, ConfigMap, Deployment, Node, PodTemplate, Resources, Secret, Service};

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// The object's name.
    pub name: String,
    /// Labels (kept for the reader; the simulator selects by the template's labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// One object of a scenario's cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Manifest {
    /// A node.
    Node(NodeManifest),
    /// A deployment.
    Deployment(DeploymentManifest),
    /// A service.
    Service(ServiceManifest),
    /// A config map.
    ConfigMap(ConfigMapManifest),
    /// A secret.
    Secret(SecretManifest),
}

/// `kind: Node`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeManifest {
    /// Ignored (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its name.
    pub metadata: Metadata,
    /// `spec`.
    #[serde(default)]
    pub spec: NodeSpec,
    /// `status`.
    pub status: NodeStatus,
}

/// A node's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSpec {
    /// Cordoned.
    #[serde(default)]
    pub unschedulable: bool,
}

/// A node's `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeStatus {
    /// Its kubelet reports Ready.
    #[serde(default = "yes")]
    pub ready: bool,
    /// Allocatable resources.
    pub allocatable: Quantities,
}

fn yes() -> bool {
    true
}

/// `cpu` and `memory` as Kubernetes quantities (`500m`, `2`, `256Mi`, `8Gi`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantities {
    /// CPU.
    pub cpu: String,
    /// Memory.
    pub memory: String,
}

/// `kind: Deployment`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentManifest {
    /// Ignored (`apps/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its name.
    pub metadata: Metadata,
    /// `spec`.
    pub spec: DeploymentSpecManifest,
}

/// A deployment's `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentSpecManifest {
    /// Desired replicas.
    pub replicas: u32,
    /// `selector.matchLabels`.
    pub selector: LabelSelector,
    /// The pod template.
    pub template: PodTemplateManifest,
}

/// `selector`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels a pod must carry.
    pub match_labels: BTreeMap<String, String>,
}

/// `template`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTemplateManifest {
    /// `metadata.labels`.
    pub metadata: TemplateMetadata,
    /// The pod spec.
    pub spec: PodSpecManifest,
}

/// A template's `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateMetadata {
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
}

/// A pod `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSpecManifest {
    /// `kubernetes.io/hostname: NODE` pins the pod to a node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Exactly one container.
    pub containers: Vec<ContainerManifest>,
    /// Volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeManifest>,
}

/// A container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerManifest {
    /// Its name (the deployment's name).
    pub name: String,
    /// Its image.
    pub image: String,
    /// `containerPort`s (the first is used).
    pub ports: Vec<ContainerPort>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// `limits` (requests equal limits).
    pub resources: ResourceLimits,
}

/// A container port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerPort {
    /// The port.
    pub container_port: u16,
}

/// An environment variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// `resources`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// `limits`.
    pub limits: Quantities,
}

/// A volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeManifest {
    /// Its name.
    pub name: String,
    /// A config map volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapRef>,
    /// A secret volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretRef>,
    /// Pod-local storage: lost with the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<BTreeMap<String, String>>,
}

/// `configMap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapRef {
    /// The config map.
    pub name: String,
}

/// `secret`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The secret.
    pub secret_name: String,
}

/// `kind: Service`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceManifest {
    /// Ignored (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its name.
    pub metadata: Metadata,
    /// `spec`.
    pub spec: ServiceSpecManifest,
}

/// A service's `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSpecManifest {
    /// Label selector.
    pub selector: BTreeMap<String, String>,
    /// Ports (the first is used).
    pub ports: Vec<ServicePort>,
}

/// A service port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicePort {
    /// The port clients call.
    pub port: u16,
    /// The container port.
    pub target_port: u16,
}

/// `kind: ConfigMap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapManifest {
    /// Ignored (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its name.
    pub metadata: Metadata,
    /// Its data.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

/// `kind: Secret`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretManifest {
    /// Ignored (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its name.
    pub metadata: Metadata,
    /// Its data, in clear.
    #[serde(default)]
    pub string_data: BTreeMap<String, String>,
}

/// Parses a CPU quantity into millicores (`500m`, `2`, `0.5`).
pub fn cpu_milli(q: &str) -> Result<u32, String> {
    let q = q.trim();
    let value = match q.strip_suffix('m') {
        Some(m) => m
            .parse::<f64>()
            .map_err(|_| format!("bad cpu quantity `{q}`"))?,
        None => {
            q.parse::<f64>()
                .map_err(|_| format!("bad cpu quantity `{q}`"))?
                * 1000.0
        }
    };
    if !(value.is_finite() && value >= 0.0 && value <= f64::from(u32::MAX)) {
        return Err(format!("cpu quantity `{q}` is out of range"));
    }
    Ok(value.round() as u32)
}

/// Parses a memory quantity into MiB (`256Mi`, `8Gi`, `512Ki`). A unit is required: a bare
/// number (bytes, to Kubernetes) is far more often a slip than a limit of a few bytes.
pub fn memory_mi(q: &str) -> Result<u32, String> {
    let q = q.trim();
    let (num, factor) = if let Some(n) = q.strip_suffix("Gi") {
        (n, 1024.0)
    } else if let Some(n) = q.strip_suffix("Mi") {
        (n, 1.0)
    } else if let Some(n) = q.strip_suffix("Ki") {
        (n, 1.0 / 1024.0)
    } else {
        return Err(format!("memory quantity `{q}` needs a unit (Ki, Mi or Gi)"));
    };
    let value = num
        .parse::<f64>()
        .map_err(|_| format!("bad memory quantity `{q}`"))?
        * factor;
    if !(value.is_finite() && value >= 0.0 && value <= f64::from(u32::MAX)) {
        return Err(format!("memory quantity `{q}` is out of range"));
    }
    Ok(value.ceil() as u32)
}

const HOSTNAME: &str = "kubernetes.io/hostname";

fn template_of(name: &str, spec: &PodTemplateManifest) -> Result<(PodTemplate, bool), String> {
    let [c] = spec.spec.containers.as_slice() else {
        return Err(format!(
            "deployment {name}: the simulator models exactly one container, found {}",
            spec.spec.containers.len()
        ));
    };
    if c.name != name {
        return Err(format!(
            "deployment {name}: its container must be named `{name}`, not `{}`",
            c.name
        ));
    }
    let port = c
        .ports
        .first()
        .ok_or_else(|| format!("deployment {name}: the container declares no port"))?;
    let mut config_maps = Vec::new();
    let mut secrets = Vec::new();
    let mut stateful = false;
    for v in &spec.spec.volumes {
        match (&v.config_map, &v.secret, &v.empty_dir) {
            (Some(cm), None, None) => config_maps.push(cm.name.clone()),
            (None, Some(s), None) => secrets.push(s.secret_name.clone()),
            (None, None, Some(_)) => stateful = true,
            _ => {
                return Err(format!(
                    "deployment {name}: volume {} must have exactly one of configMap, secret, emptyDir",
                    v.name
                ));
            }
        }
    }
    let node_selector = match spec.spec.node_selector.iter().next() {
        None => None,
        Some((k, v)) if k == HOSTNAME && spec.spec.node_selector.len() == 1 => Some(v.clone()),
        Some(_) => {
            return Err(format!(
                "deployment {name}: nodeSelector supports only `{HOSTNAME}`"
            ));
        }
    };
    let template = PodTemplate {
        labels: spec.metadata.labels.clone(),
        image: c.image.clone(),
        container_port: port.container_port,
        env: c
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        config_maps,
        secrets,
        resources: Resources {
            cpu_milli: cpu_milli(&c.resources.limits.cpu).map_err(|e| format!("{name}: {e}"))?,
            memory_mi: memory_mi(&c.resources.limits.memory).map_err(|e| format!("{name}: {e}"))?,
        },
        node_selector,
    };
    Ok((template, stateful))
}

/// Builds the cluster's objects from manifests (registry and routes are added by the caller).
pub fn cluster_from(manifests: &[Manifest]) -> Result<Cluster, String> {
    let mut c = Cluster::default();
    let mut created = 0u32;
    let mut seen = std::collections::BTreeSet::new();
    for m in manifests {
        let (kind, name) = match m {
            Manifest::Node(n) => ("Node", &n.metadata.name),
            Manifest::Deployment(d) => ("Deployment", &d.metadata.name),
            Manifest::Service(s) => ("Service", &s.metadata.name),
            Manifest::ConfigMap(x) => ("ConfigMap", &x.metadata.name),
            Manifest::Secret(x) => ("Secret", &x.metadata.name),
        };
        if name.is_empty() {
            return Err(format!("a {kind} has an empty name"));
        }
        if !seen.insert((kind, name.clone())) {
            return Err(format!("{kind} {name} is declared twice"));
        }
        match m {
            Manifest::Node(n) => {
                c.nodes.insert(
                    name.clone(),
                    Node {
                        name: name.clone(),
                        ready: n.status.ready,
                        unschedulable: n.spec.unschedulable,
                        cpu_milli: cpu_milli(&n.status.allocatable.cpu)
                            .map_err(|e| format!("node {name}: {e}"))?,
                        memory_mi: memory_mi(&n.status.allocatable.memory)
                            .map_err(|e| format!("node {name}: {e}"))?,
                    },
                );
            }
            Manifest::Deployment(d) => {
                let (template, stateful) = template_of(name, &d.spec.template)?;
                let mut dep = Deployment::new(name, d.spec.replicas, template);
                dep.selector = d.spec.selector.match_labels.clone();
                dep.stateful = stateful;
                c.deployments.insert(name.clone(), dep);
            }
            Manifest::Service(s) => {
                let p = s
                    .spec
                    .ports
                    .first()
                    .ok_or_else(|| format!("service {name} declares no port"))?;
                c.services.insert(
                    name.clone(),
                    Service {
                        name: name.clone(),
                        selector: s.spec.selector.clone(),
                        port: p.port,
                        target_port: p.target_port,
                    },
                );
            }
            Manifest::ConfigMap(x) => {
                c.config_maps.insert(
                    name.clone(),
                    ConfigMap {
                        name: name.clone(),
                        data: x.data.clone(),
                    },
                );
            }
            Manifest::Secret(x) => {
                created += 1;
                c.secrets.insert(
                    name.clone(),
                    Secret {
                        name: name.clone(),
                        data: x.string_data.clone(),
                        created,
                    },
                );
            }
        }
    }
    Ok(c)
}

fn quantities(cpu: u32, memory: u32) -> Quantities {
    Quantities {
        cpu: format!("{cpu}m"),
        memory: format!("{memory}Mi"),
    }
}

fn meta(name: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        labels: BTreeMap::new(),
    }
}

/// The manifests of a cluster's objects (the inverse of [`cluster_from`] on its specs):
/// nodes, deployments, services, config maps, then secrets oldest first.
pub fn manifests_of(c: &Cluster) -> Vec<Manifest> {
    let mut out = Vec::new();
    for n in c.nodes.values() {
        out.push(Manifest::Node(NodeManifest {
            api_version: Some("v1".into()),
            metadata: meta(&n.name),
            spec: NodeSpec {
                unschedulable: n.unschedulable,
            },
            status: NodeStatus {
                ready: n.ready,
                allocatable: quantities(n.cpu_milli, n.memory_mi),
            },
        }));
    }
    for d in c.deployments.values() {
        let t = &d.template;
        let mut volumes: Vec<VolumeManifest> = t
            .config_maps
            .iter()
            .map(|cm| VolumeManifest {
                name: cm.clone(),
                config_map: Some(ConfigMapRef { name: cm.clone() }),
                secret: None,
                empty_dir: None,
            })
            .collect();
        volumes.extend(t.secrets.iter().map(|s| VolumeManifest {
            name: s.clone(),
            config_map: None,
            secret: Some(SecretRef {
                secret_name: s.clone(),
            }),
            empty_dir: None,
        }));
        if d.stateful {
            volumes.push(VolumeManifest {
                name: "data".into(),
                config_map: None,
                secret: None,
                empty_dir: Some(BTreeMap::new()),
            });
        }
        out.push(Manifest::Deployment(DeploymentManifest {
            api_version: Some("apps/v1".into()),
            metadata: meta(&d.name),
            spec: DeploymentSpecManifest {
                replicas: d.replicas,
                selector: LabelSelector {
                    match_labels: d.selector.clone(),
                },
                template: PodTemplateManifest {
                    metadata: TemplateMetadata {
                        labels: t.labels.clone(),
                    },
                    spec: PodSpecManifest {
                        node_selector: t
                            .node_selector
                            .iter()
                            .map(|n| (HOSTNAME.to_string(), n.clone()))
                            .collect(),
                        containers: vec![ContainerManifest {
                            name: d.name.clone(),
                            image: t.image.clone(),
                            ports: vec![ContainerPort {
                                container_port: t.container_port,
                            }],
                            env: t
                                .env
                                .iter()
                                .map(|(k, v)| EnvVar {
                                    name: k.clone(),
                                    value: v.clone(),
                                })
                                .collect(),
                            resources: ResourceLimits {
                                limits: quantities(t.resources.cpu_milli, t.resources.memory_mi),
                            },
                        }],
                        volumes,
                    },
                },
            },
        }));
    }
    for s in c.services.values() {
        out.push(Manifest::Service(ServiceManifest {
            api_version: Some("v1".into()),
            metadata: meta(&s.name),
            spec: ServiceSpecManifest {
                selector: s.selector.clone(),
                ports: vec![ServicePort {
                    port: s.port,
                    target_port: s.target_port,
                }],
            },
        }));
    }
    for m in c.config_maps.values() {
        out.push(Manifest::ConfigMap(ConfigMapManifest {
            api_version: Some("v1".into()),
            metadata: meta(&m.name),
            data: m.data.clone(),
        }));
    }
    let mut secrets: Vec<&Secret> = c.secrets.values().collect();
    secrets.sort_by_key(|s| s.created);
    for s in secrets {
        out.push(Manifest::Secret(SecretManifest {
            api_version: Some("v1".into()),
            metadata: meta(&s.name),
            string_data: s.data.clone(),
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        assert_eq!(cpu_milli("500m").unwrap(), 500);
        assert_eq!(cpu_milli("2").unwrap(), 2000);
        assert_eq!(cpu_milli("0.25").unwrap(), 250);
        assert!(cpu_milli("lots").is_err());
        assert!(cpu_milli("-1").is_err());
        assert_eq!(memory_mi("256Mi").unwrap(), 256);
        assert_eq!(memory_mi("8Gi").unwrap(), 8192);
        assert_eq!(memory_mi("2048Ki").unwrap(), 2);
        assert!(memory_mi("512").is_err());
        assert!(memory_mi("1e400Mi").is_err());
    }

    #[test]
    fn unknown_fields_and_bad_shapes_are_errors() {
        let bad = r#"[{"kind": "Service", "metadata": {"name": "a"}, "spec": {"selector": {}, "ports": [{"port": 1, "targetPort": 1}], "typo": 1}}]"#;
        assert!(serde_json::from_str::<Vec<Manifest>>(bad).is_err());
        let two = r#"[{"kind": "ConfigMap", "metadata": {"name": "a"}}, {"kind": "ConfigMap", "metadata": {"name": "a"}}]"#;
        let m: Vec<Manifest> = serde_json::from_str(two).unwrap();
        assert!(cluster_from(&m).unwrap_err().contains("declared twice"));
    }
}
