//! Confinement: every command is read-only, a write, or refused.
//!
//! [`ReadCommand`] and [`WriteCommand`] can only be built by [`confine`], so holding one is
//! proof that the check ran. A read-only agent holds a [`crate::stratus::ReadHandle`], whose
//! methods accept only [`ReadCommand`]s: it has no way to run a write, whatever a model asks
//! for. Writes run only inside a transaction (see [`crate::stratus::transaction`]).

use serde::{Deserialize, Serialize};

use super::command::{Command, ResourceKind};
use super::error::StratusError;

/// A command confinement classified as read-only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadCommand {
    command: Command,
    text: String,
}

/// A command confinement classified as a write allowed inside a transaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteCommand {
    command: Command,
    text: String,
}

macro_rules! accessors {
    ($t:ty) => {
        impl $t {
            /// The parsed command.
            pub fn command(&self) -> &Command {
                &self.command
            }
            /// The command as written.
            pub fn text(&self) -> &str {
                &self.text
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.text)
            }
        }
    };
}
accessors!(ReadCommand);
accessors!(WriteCommand);

/// The class of a command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Confined {
    /// Safe for any agent.
    Read(ReadCommand),
    /// Changes state: only inside a transaction.
    Write(WriteCommand),
    /// Never runs.
    Refused {
        /// The command as written.
        text: String,
        /// Why.
        reason: String,
    },
}

/// The class name, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandClass {
    /// Read-only.
    ReadOnly,
    /// A write.
    Write,
    /// Refused.
    Refused,
}

impl Confined {
    /// Its class.
    pub fn class(&self) -> CommandClass {
        match self {
            Confined::Read(_) => CommandClass::ReadOnly,
            Confined::Write(_) => CommandClass::Write,
            Confined::Refused { .. } => CommandClass::Refused,
        }
    }
}

/// Classifies a parsed command.
pub fn classify(command: Command, text: &str) -> Confined {
    let text = text.trim().to_string();
    let refuse = |reason: &str| Confined::Refused {
        text: text.clone(),
        reason: reason.to_string(),
    };
    match &command {
        Command::Get { .. }
        | Command::Describe { .. }
        | Command::Logs { .. }
        | Command::History { .. } => Confined::Read(ReadCommand { command, text }),
        Command::Forbidden { verb, .. } => refuse(&format!(
            "`{verb}` is outside the mitigation language (no shells, no ad-hoc creation)"
        )),
        Command::Delete { target } if target.kind != ResourceKind::Pod => refuse(&format!(
            "only pods may be deleted (their controller recreates them); deleting a {} is not undoable by re-applying it safely",
            target.kind.as_str()
        )),
        Command::Patch { target, .. }
            if matches!(target.kind, ResourceKind::Pod | ResourceKind::ReplicaSet) =>
        {
            refuse("pods and replica sets are owned by their deployment: patch the deployment")
        }
        Command::Apply { manifest } => match manifest
            .get("kind")
            .and_then(|k| k.as_str())
            .and_then(ResourceKind::parse)
        {
            Some(
                ResourceKind::ConfigMap
                | ResourceKind::Secret
                | ResourceKind::Service
                | ResourceKind::Deployment,
            ) if manifest.get("name").and_then(|n| n.as_str()).is_some() => {
                Confined::Write(WriteCommand { command, text })
            }
            _ => refuse(
                "apply takes a manifest with `kind` (ConfigMap, Secret, Service, Deployment) and `name`",
            ),
        },
        _ => Confined::Write(WriteCommand { command, text }),
    }
}

/// Parses and classifies a command line.
pub fn confine(text: &str) -> Result<Confined, StratusError> {
    let command = Command::parse(text)?;
    Ok(classify(command, text))
}

/// Parses a command line that must be read-only; a write or a refused command is an error.
pub fn confine_read(text: &str) -> Result<ReadCommand, StratusError> {
    match confine(text)? {
        Confined::Read(r) => Ok(r),
        Confined::Write(w) => Err(StratusError::Refused {
            command: w.text,
            reason: "this agent is read-only; writes run only in a mitigation transaction".into(),
        }),
        Confined::Refused { text, reason } => Err(StratusError::Refused {
            command: text,
            reason,
        }),
    }
}

/// Parses a command line that must be a write; a read or a refused command is an error.
pub fn confine_write(text: &str) -> Result<WriteCommand, StratusError> {
    match confine(text)? {
        Confined::Write(w) => Ok(w),
        Confined::Read(r) => Err(StratusError::Refused {
            command: r.text,
            reason: "a transaction holds writes only; run reads outside it".into(),
        }),
        Confined::Refused { text, reason } => Err(StratusError::Refused {
            command: text,
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let class = |t: &str| confine(t).unwrap().class();
        assert_eq!(class("get pods"), CommandClass::ReadOnly);
        assert_eq!(
            class("logs deployment/web --tail=5"),
            CommandClass::ReadOnly
        );
        assert_eq!(class("describe node n1"), CommandClass::ReadOnly);
        assert_eq!(class("scale deploy web --replicas=2"), CommandClass::Write);
        assert_eq!(class("delete pod web-1"), CommandClass::Write);
        assert_eq!(class("drain n1"), CommandClass::Write);
        assert_eq!(class("delete deployment web"), CommandClass::Refused);
        assert_eq!(class("delete node n1"), CommandClass::Refused);
        assert_eq!(class("exec web-1 -- rm -rf /"), CommandClass::Refused);
        assert_eq!(
            class(r#"patch pod web-1 -p '{"a":1}'"#),
            CommandClass::Refused
        );
        assert_eq!(
            class(r#"apply -f '{"kind":"Namespace","name":"x"}'"#),
            CommandClass::Refused
        );
        assert_eq!(
            class(r#"apply -f '{"kind":"ConfigMap","name":"x","data":{}}'"#),
            CommandClass::Write
        );
    }

    #[test]
    fn read_only_parse_refuses_writes() {
        assert!(confine_read("get svc").is_ok());
        let e = confine_read("scale deploy web --replicas=0").unwrap_err();
        assert!(matches!(e, StratusError::Refused { .. }));
        assert!(confine_write("get svc").is_err());
        assert!(confine_write("cordon n1").is_ok());
    }
}
