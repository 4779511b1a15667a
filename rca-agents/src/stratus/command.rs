//! A kubectl-like command language and its parser.
//!
//! The parser accepts a subset of kubectl syntax (an optional leading `kubectl`, `-n default`,
//! `kind/name` or `kind name`) and turns it into a [`Command`]. Whether a command may run at
//! all, and by whom, is decided by [`crate::stratus::confinement`], not here: the parser
//! also recognises verbs that confinement always refuses (`exec`, `delete deployment`, ...), so
//! the refusal can say why.

use serde::{Deserialize, Serialize};

use super::error::StratusError;

/// The kinds of resource the language knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    /// A node.
    Node,
    /// A deployment.
    Deployment,
    /// A replica set (owned by a deployment).
    ReplicaSet,
    /// A pod (owned by a replica set).
    Pod,
    /// A service.
    Service,
    /// A config map.
    ConfigMap,
    /// A secret.
    Secret,
}

impl ResourceKind {
    /// Reads a kind as kubectl spells it (singular, plural or short name).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "node" | "nodes" | "no" => ResourceKind::Node,
            "deployment" | "deployments" | "deploy" => ResourceKind::Deployment,
            "replicaset" | "replicasets" | "rs" => ResourceKind::ReplicaSet,
            "pod" | "pods" | "po" => ResourceKind::Pod,
            "service" | "services" | "svc" => ResourceKind::Service,
            "configmap" | "configmaps" | "cm" => ResourceKind::ConfigMap,
            "secret" | "secrets" => ResourceKind::Secret,
            _ => return None,
        })
    }

    /// The kubectl singular name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ResourceKind::Node => "node",
            ResourceKind::Deployment => "deployment",
            ResourceKind::ReplicaSet => "replicaset",
            ResourceKind::Pod => "pod",
            ResourceKind::Service => "service",
            ResourceKind::ConfigMap => "configmap",
            ResourceKind::Secret => "secret",
        }
    }
}

/// A resource named by kind and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceRef {
    /// Its kind.
    pub kind: ResourceKind,
    /// Its name.
    pub name: String,
}

impl ResourceRef {
    /// A reference.
    pub fn new(kind: ResourceKind, name: impl Into<String>) -> Self {
        ResourceRef {
            kind,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.as_str(), self.name)
    }
}

/// How `get` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputFormat {
    /// A kubectl-like table.
    Table,
    /// JSON.
    Json,
}

/// A parsed command. Construct with [`Command::parse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// `get KIND [NAME] [-o json]`
    Get {
        /// What to list.
        kind: ResourceKind,
        /// One resource, or all.
        name: Option<String>,
        /// Table or JSON.
        output: OutputFormat,
    },
    /// `describe KIND NAME`
    Describe {
        /// The resource.
        target: ResourceRef,
    },
    /// `logs POD` or `logs deployment/NAME` `[--tail=N]`
    Logs {
        /// A pod, or a deployment (its first pod).
        target: ResourceRef,
        /// Lines from the end.
        tail: Option<usize>,
    },
    /// `history [KIND/NAME]`: the recorded changes of one object, or of all (JSON).
    History {
        /// One object, or all.
        target: Option<ResourceRef>,
    },
    /// `scale deployment NAME --replicas=N`
    Scale {
        /// The deployment.
        deployment: String,
        /// The new replica count.
        replicas: u32,
    },
    /// `set image deployment/NAME CONTAINER=IMAGE`
    SetImage {
        /// The deployment.
        deployment: String,
        /// The container.
        container: String,
        /// The new image.
        image: String,
    },
    /// `set env deployment/NAME KEY=VALUE ... KEY-`
    SetEnv {
        /// The deployment.
        deployment: String,
        /// Variables to set (`Some`) or remove (`None`).
        vars: Vec<(String, Option<String>)>,
    },
    /// `set resources deployment/NAME --limits=cpu=500m,memory=256Mi`
    SetResources {
        /// The deployment.
        deployment: String,
        /// New CPU limit in millicores.
        cpu_milli: Option<u32>,
        /// New memory limit in MiB.
        memory_mi: Option<u32>,
    },
    /// `patch KIND NAME -p JSON` (a JSON merge patch)
    Patch {
        /// The resource.
        target: ResourceRef,
        /// The merge patch.
        patch: serde_json::Value,
    },
    /// `apply -f JSON` (the manifest inline)
    Apply {
        /// The manifest.
        manifest: serde_json::Value,
    },
    /// `rollout undo deployment/NAME [--to-revision=N]`
    RolloutUndo {
        /// The deployment.
        deployment: String,
        /// The revision to go back to (the previous one by default).
        to_revision: Option<u32>,
    },
    /// `delete KIND NAME`
    Delete {
        /// The resource.
        target: ResourceRef,
    },
    /// `cordon NODE`
    Cordon {
        /// The node.
        node: String,
    },
    /// `uncordon NODE`
    Uncordon {
        /// The node.
        node: String,
    },
    /// `drain NODE`
    Drain {
        /// The node.
        node: String,
    },
    /// A verb the language recognises only to refuse it (`exec`, `port-forward`, ...).
    Forbidden {
        /// The verb.
        verb: String,
        /// The full text.
        text: String,
    },
}

/// What a write can take away, declared per verb. Whether a given command on a given system
/// is irreversible is the environment's call ([`crate::stratus::Environment::irreversible`]),
/// starting from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reversibility {
    /// Re-applying the snapshots of its footprint restores everything it changed.
    Reversible,
    /// It replaces pods (a new template, a new replica count): pod-local data of the pods it
    /// replaces is lost, wherever pods keep any.
    ReplacesPods,
    /// Its purpose is deleting pods (`delete pod`, `drain`): their local data is gone, and
    /// nothing can bring those pods back. Irreversible unless the environment knows the pods
    /// hold nothing.
    DeletesPods,
    /// It deletes an object outright (refused by confinement for agents).
    DeletesObject,
}

impl Command {
    /// What this command can take away.
    pub fn reversibility(&self) -> Reversibility {
        match self {
            Command::Delete { target } if target.kind == ResourceKind::Pod => {
                Reversibility::DeletesPods
            }
            Command::Delete { .. } => Reversibility::DeletesObject,
            Command::Drain { .. } => Reversibility::DeletesPods,
            Command::Scale { .. }
            | Command::SetImage { .. }
            | Command::SetEnv { .. }
            | Command::SetResources { .. }
            | Command::RolloutUndo { .. } => Reversibility::ReplacesPods,
            Command::Patch { target, .. } if target.kind == ResourceKind::Deployment => {
                Reversibility::ReplacesPods
            }
            Command::Apply { manifest }
                if manifest.get("kind").and_then(|k| k.as_str()) == Some("Deployment") =>
            {
                Reversibility::ReplacesPods
            }
            _ => Reversibility::Reversible,
        }
    }
}

/// Splits a command line into words, honouring single and double quotes.
pub fn tokenize(input: &str) -> Result<Vec<String>, StratusError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in input.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(StratusError::Parse {
            input: input.to_string(),
            message: "unterminated quote".into(),
        });
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

struct Args {
    input: String,
    positional: Vec<String>,
    flags: Vec<(String, Option<String>)>,
}

impl Args {
    fn err(&self, message: impl Into<String>) -> StratusError {
        StratusError::Parse {
            input: self.input.clone(),
            message: message.into(),
        }
    }

    fn flag(&self, names: &[&str]) -> Option<Option<&str>> {
        self.flags
            .iter()
            .find(|(k, _)| names.contains(&k.as_str()))
            .map(|(_, v)| v.as_deref())
    }

    fn flag_value(&self, names: &[&str]) -> Result<Option<&str>, StratusError> {
        match self.flag(names) {
            None => Ok(None),
            Some(Some(v)) => Ok(Some(v)),
            Some(None) => Err(self.err(format!("flag {} needs a value", names[0]))),
        }
    }

    /// A resource from `kind name` or `kind/name` at positional index `i`; returns it and the
    /// index after it.
    fn resource(&self, i: usize) -> Result<(ResourceRef, usize), StratusError> {
        let first = self
            .positional
            .get(i)
            .ok_or_else(|| self.err("missing resource"))?;
        if let Some((k, n)) = first.split_once('/') {
            let kind =
                ResourceKind::parse(k).ok_or_else(|| self.err(format!("unknown kind `{k}`")))?;
            if n.is_empty() {
                return Err(self.err("empty resource name"));
            }
            return Ok((ResourceRef::new(kind, n), i + 1));
        }
        let kind = ResourceKind::parse(first)
            .ok_or_else(|| self.err(format!("unknown kind `{first}`")))?;
        let name = self
            .positional
            .get(i + 1)
            .ok_or_else(|| self.err(format!("missing {} name", kind.as_str())))?;
        Ok((ResourceRef::new(kind, name.clone()), i + 2))
    }

    fn deployment(&self, i: usize) -> Result<(String, usize), StratusError> {
        let (r, next) = self.resource(i)?;
        if r.kind != ResourceKind::Deployment {
            return Err(self.err(format!("expected a deployment, got {}", r.kind.as_str())));
        }
        Ok((r.name, next))
    }

    fn positional(&self, i: usize, what: &str) -> Result<&str, StratusError> {
        self.positional
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| self.err(format!("missing {what}")))
    }
}

/// Flags that take a value when written as `--flag value` rather than `--flag=value`.
const VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "-o",
    "--output",
    "-p",
    "--patch",
    "-f",
    "--filename",
    "--replicas",
    "--tail",
    "--limits",
    "--to-revision",
    "-c",
    "--container",
];

fn split_args(input: &str, words: Vec<String>) -> Result<Args, StratusError> {
    let mut positional = Vec::new();
    let mut flags = Vec::new();
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        if w.starts_with('-') && w.len() > 1 && w != "-" {
            if let Some((k, v)) = w.split_once('=') {
                flags.push((k.to_string(), Some(v.to_string())));
            } else if VALUE_FLAGS.contains(&w.as_str()) {
                let v = it.next().ok_or_else(|| StratusError::Parse {
                    input: input.to_string(),
                    message: format!("flag {w} needs a value"),
                })?;
                flags.push((w, Some(v)));
            } else {
                flags.push((w, None));
            }
        } else {
            positional.push(w);
        }
    }
    Ok(Args {
        input: input.to_string(),
        positional,
        flags,
    })
}

fn parse_quantity_cpu(s: &str) -> Option<u32> {
    crate::stratus::sim::manifest::cpu_milli(s).ok()
}

fn parse_quantity_memory(s: &str) -> Option<u32> {
    crate::stratus::sim::manifest::memory_mi(s).ok()
}

impl Command {
    /// Parses one command line.
    pub fn parse(input: &str) -> Result<Command, StratusError> {
        let mut words = tokenize(input)?;
        if words.first().map(String::as_str) == Some("kubectl") {
            words.remove(0);
        }
        let a = split_args(input, words)?;
        if let Some(ns) = a.flag_value(&["-n", "--namespace"])?
            && ns != "default"
        {
            return Err(a.err(format!("namespace `{ns}` does not exist (only `default`)")));
        }
        if a.flag(&["-A", "--all-namespaces", "--all"]).is_some() {
            return Err(a.err("--all / --all-namespaces are not supported"));
        }
        let verb = a.positional(0, "verb")?.to_string();
        let cmd = match verb.as_str() {
            "get" => {
                let kind_word = a.positional(1, "kind")?;
                let (kind, name) = if kind_word.contains('/') {
                    let (r, _) = a.resource(1)?;
                    (r.kind, Some(r.name))
                } else {
                    let kind = ResourceKind::parse(kind_word)
                        .ok_or_else(|| a.err(format!("unknown kind `{kind_word}`")))?;
                    (kind, a.positional.get(2).cloned())
                };
                let output = match a.flag_value(&["-o", "--output"])? {
                    None | Some("wide") => OutputFormat::Table,
                    Some("json") => OutputFormat::Json,
                    Some(o) => return Err(a.err(format!("unsupported output `{o}`"))),
                };
                Command::Get { kind, name, output }
            }
            "describe" => Command::Describe {
                target: a.resource(1)?.0,
            },
            "logs" => {
                let word = a.positional(1, "pod")?;
                let target = if word.contains('/') {
                    a.resource(1)?.0
                } else {
                    ResourceRef::new(ResourceKind::Pod, word)
                };
                let tail = match a.flag_value(&["--tail"])? {
                    None => None,
                    Some(t) => Some(t.parse().map_err(|_| a.err("--tail needs a number"))?),
                };
                Command::Logs { target, tail }
            }
            "history" => Command::History {
                target: match a.positional.get(1) {
                    Some(_) => Some(a.resource(1)?.0),
                    None => None,
                },
            },
            "scale" => {
                let (deployment, _) = a.deployment(1)?;
                let r = a
                    .flag_value(&["--replicas"])?
                    .ok_or_else(|| a.err("scale needs --replicas=N"))?;
                let replicas = r
                    .parse()
                    .map_err(|_| a.err(format!("--replicas must be a number, got `{r}`")))?;
                Command::Scale {
                    deployment,
                    replicas,
                }
            }
            "set" => {
                let what = a.positional(1, "what to set (image, env, resources)")?;
                let (deployment, next) = a.deployment(2)?;
                match what {
                    "image" => {
                        let spec = a.positional(next, "CONTAINER=IMAGE")?;
                        let (container, image) = spec
                            .split_once('=')
                            .filter(|(c, i)| !c.is_empty() && !i.is_empty())
                            .ok_or_else(|| a.err("expected CONTAINER=IMAGE"))?;
                        Command::SetImage {
                            deployment,
                            container: container.to_string(),
                            image: image.to_string(),
                        }
                    }
                    "env" => {
                        let mut vars = Vec::new();
                        for w in &a.positional[next..] {
                            if let Some((k, v)) = w.split_once('=') {
                                vars.push((k.to_string(), Some(v.to_string())));
                            } else if let Some(k) = w.strip_suffix('-') {
                                vars.push((k.to_string(), None));
                            } else {
                                return Err(a.err(format!("expected KEY=VALUE or KEY-, got `{w}`")));
                            }
                        }
                        if vars.is_empty() {
                            return Err(a.err("set env needs at least one KEY=VALUE"));
                        }
                        Command::SetEnv { deployment, vars }
                    }
                    "resources" => {
                        let limits = a.flag_value(&["--limits"])?.ok_or_else(|| {
                            a.err("set resources needs --limits=cpu=..,memory=..")
                        })?;
                        let (mut cpu_milli, mut memory_mi) = (None, None);
                        for part in limits.split(',') {
                            match part.split_once('=') {
                                Some(("cpu", v)) => {
                                    cpu_milli = Some(
                                        parse_quantity_cpu(v)
                                            .ok_or_else(|| a.err(format!("bad cpu `{v}`")))?,
                                    )
                                }
                                Some(("memory", v)) => {
                                    memory_mi = Some(parse_quantity_memory(v).ok_or_else(|| {
                                        a.err(format!("bad memory `{v}` (use Mi or Gi)"))
                                    })?)
                                }
                                _ => return Err(a.err(format!("bad limit `{part}`"))),
                            }
                        }
                        Command::SetResources {
                            deployment,
                            cpu_milli,
                            memory_mi,
                        }
                    }
                    other => return Err(a.err(format!("cannot set `{other}`"))),
                }
            }
            "patch" => {
                let (target, _) = a.resource(1)?;
                let p = a
                    .flag_value(&["-p", "--patch"])?
                    .ok_or_else(|| a.err("patch needs -p JSON"))?;
                let patch: serde_json::Value = serde_json::from_str(p)
                    .map_err(|e| a.err(format!("patch is not JSON: {e}")))?;
                if !patch.is_object() {
                    return Err(a.err("patch must be a JSON object"));
                }
                Command::Patch { target, patch }
            }
            "apply" => {
                let m = a
                    .flag_value(&["-f", "--filename"])?
                    .or_else(|| a.positional.get(1).map(String::as_str))
                    .ok_or_else(|| a.err("apply needs -f MANIFEST (JSON, inline)"))?;
                let manifest: serde_json::Value = serde_json::from_str(m)
                    .map_err(|e| a.err(format!("manifest is not inline JSON: {e}")))?;
                Command::Apply { manifest }
            }
            "rollout" => {
                let sub = a.positional(1, "rollout subcommand")?;
                if sub != "undo" {
                    return Err(a.err(format!("unsupported rollout subcommand `{sub}`")));
                }
                let (deployment, _) = a.deployment(2)?;
                let to_revision = match a.flag_value(&["--to-revision"])? {
                    None => None,
                    Some(r) => Some(
                        r.parse()
                            .map_err(|_| a.err("--to-revision needs a number"))?,
                    ),
                };
                Command::RolloutUndo {
                    deployment,
                    to_revision,
                }
            }
            "delete" => Command::Delete {
                target: a.resource(1)?.0,
            },
            "cordon" => Command::Cordon {
                node: node_arg(&a)?,
            },
            "uncordon" => Command::Uncordon {
                node: node_arg(&a)?,
            },
            "drain" => Command::Drain {
                node: node_arg(&a)?,
            },
            "exec" | "port-forward" | "proxy" | "cp" | "run" | "create" | "replace" | "edit"
            | "label" | "annotate" | "taint" | "auth" | "certificate" | "debug" | "attach" => {
                Command::Forbidden {
                    verb,
                    text: input.to_string(),
                }
            }
            other => return Err(a.err(format!("unknown verb `{other}`"))),
        };
        Ok(cmd)
    }

    /// The resource a write names (the start of its footprint), if any.
    pub fn target(&self) -> Option<ResourceRef> {
        use ResourceKind::*;
        match self {
            Command::Scale { deployment, .. }
            | Command::SetImage { deployment, .. }
            | Command::SetEnv { deployment, .. }
            | Command::SetResources { deployment, .. }
            | Command::RolloutUndo { deployment, .. } => {
                Some(ResourceRef::new(Deployment, deployment.clone()))
            }
            Command::Patch { target, .. }
            | Command::Delete { target }
            | Command::Describe { target }
            | Command::Logs { target, .. } => Some(target.clone()),
            Command::Cordon { node } | Command::Uncordon { node } | Command::Drain { node } => {
                Some(ResourceRef::new(Node, node.clone()))
            }
            Command::Get { kind, name, .. } => {
                name.as_ref().map(|n| ResourceRef::new(*kind, n.clone()))
            }
            Command::History { target } => target.clone(),
            Command::Apply { manifest } => {
                let kind = manifest
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .and_then(ResourceKind::parse)?;
                let name = manifest.get("name").and_then(|n| n.as_str())?;
                Some(ResourceRef::new(kind, name))
            }
            Command::Forbidden { .. } => None,
        }
    }
}

fn node_arg(a: &Args) -> Result<String, StratusError> {
    let w = a.positional(1, "node name")?;
    match w.split_once('/') {
        Some((k, n)) if ResourceKind::parse(k) == Some(ResourceKind::Node) => Ok(n.to_string()),
        Some(_) => Err(a.err("expected a node")),
        None => Ok(w.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_reads_and_writes() {
        assert_eq!(
            Command::parse("kubectl get pods -o json").unwrap(),
            Command::Get {
                kind: ResourceKind::Pod,
                name: None,
                output: OutputFormat::Json
            }
        );
        assert_eq!(
            Command::parse("get deploy/cart").unwrap(),
            Command::Get {
                kind: ResourceKind::Deployment,
                name: Some("cart".into()),
                output: OutputFormat::Table
            }
        );
        assert_eq!(
            Command::parse("scale deployment/cart --replicas 3").unwrap(),
            Command::Scale {
                deployment: "cart".into(),
                replicas: 3
            }
        );
        assert_eq!(
            Command::parse("set env deployment cart A=1 B-").unwrap(),
            Command::SetEnv {
                deployment: "cart".into(),
                vars: vec![("A".into(), Some("1".into())), ("B".into(), None)]
            }
        );
        assert_eq!(
            Command::parse("set resources deploy/x --limits=cpu=1.5,memory=1Gi").unwrap(),
            Command::SetResources {
                deployment: "x".into(),
                cpu_milli: Some(1500),
                memory_mi: Some(1024)
            }
        );
        let p = Command::parse(r#"patch svc web -p '{"targetPort": 8080}'"#).unwrap();
        assert!(
            matches!(p, Command::Patch { ref target, .. } if target.kind == ResourceKind::Service)
        );
        assert!(matches!(
            Command::parse("exec -it pod/x -- sh").unwrap(),
            Command::Forbidden { .. }
        ));
        assert_eq!(
            Command::parse("rollout undo deployment/web --to-revision=2").unwrap(),
            Command::RolloutUndo {
                deployment: "web".into(),
                to_revision: Some(2)
            }
        );
    }

    #[test]
    fn rejects_bad_syntax_with_reasons() {
        for bad in [
            "",
            "get",
            "frobnicate pods",
            "scale deployment x",
            "scale deployment x --replicas=lots",
            "set image deployment/x nope",
            "patch svc x -p '{'",
            "get pods -n kube-system",
            "get pods 'unterminated",
            "set resources deploy/x --limits=memory=12",
        ] {
            let e = Command::parse(bad).unwrap_err();
            assert!(matches!(e, StratusError::Parse { .. }), "{bad}: {e:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(input in ".{0,80}") {
            let _ = Command::parse(&input);
            let _ = crate::stratus::confinement::confine(&input);
        }

        #[test]
        fn kubectl_like_words_never_panic(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "get", "set", "image", "env", "resources", "patch", "apply", "-f", "-p", "rollout",
                    "undo", "delete", "pod", "deploy/x", "svc", "x", "--replicas=3", "--replicas",
                    "-o", "json", "A=1", "B-", "'{\"a\":1}'", "\"", "--limits=cpu=1", "node/n",
                    "drain", "cordon", "scale", "logs", "--tail", "5", "-n", "default",
                ]),
                0..8,
            )
        ) {
            let _ = Command::parse(&words.join(" "));
        }
    }
}
