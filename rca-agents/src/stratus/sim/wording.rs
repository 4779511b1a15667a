//! How a simulated process words its log lines. A scenario's author may write each line an
//! image logs (`images.<image>.logs` in the scenario file); a line left out keeps its
//! default. Placeholders in braces are filled in (`{key}`, `{port}`, ...); each line accepts
//! only its own, so a misspelt placeholder is an error when the file is read, not a line
//! printed with braces in it.

use serde::{Deserialize, Serialize};

/// What a process logs, by occasion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLine {
    /// The container starts: `{name}`, `{image}`.
    Starting,
    /// The process listens: `{port}`.
    Listening,
    /// Memory in use while climbing to the limit: `{mi}`.
    Heap,
    /// The process is killed at its memory limit.
    Killed,
    /// A config key the process needs is missing: `{key}`, `{expected}`.
    MissingKey,
    /// The process exits right after start (a build that crashes).
    Crash,
    /// A config value the process rejects: `{key}`, `{value}`, `{expected}`.
    InvalidValue,
    /// The process is not ready yet.
    Warming,
    /// A dependency address does not answer: `{addr}`, `{var}`.
    DialRefused,
    /// A dependency variable is not set: `{var}`.
    DependencyUnset,
    /// The upstream rejects the mounted credential: `{secret}`.
    CredentialRejected,
    /// No mounted secret holds the credential key: `{key}`.
    CredentialMissing,
    /// Request workers hang.
    Hung,
    /// Requests fail in the handler.
    RequestErrors,
    /// The CPU limit throttles the process.
    CpuSaturated,
}

impl LogLine {
    /// Every occasion.
    pub const ALL: [LogLine; 15] = [
        LogLine::Starting,
        LogLine::Listening,
        LogLine::Heap,
        LogLine::Killed,
        LogLine::MissingKey,
        LogLine::Crash,
        LogLine::InvalidValue,
        LogLine::Warming,
        LogLine::DialRefused,
        LogLine::DependencyUnset,
        LogLine::CredentialRejected,
        LogLine::CredentialMissing,
        LogLine::Hung,
        LogLine::RequestErrors,
        LogLine::CpuSaturated,
    ];

    /// Its field name in a scenario file.
    pub fn field(self) -> &'static str {
        match self {
            LogLine::Starting => "starting",
            LogLine::Listening => "listening",
            LogLine::Heap => "heap",
            LogLine::Killed => "killed",
            LogLine::MissingKey => "missingKey",
            LogLine::Crash => "crash",
            LogLine::InvalidValue => "invalidValue",
            LogLine::Warming => "warming",
            LogLine::DialRefused => "dialRefused",
            LogLine::DependencyUnset => "dependencyUnset",
            LogLine::CredentialRejected => "credentialRejected",
            LogLine::CredentialMissing => "credentialMissing",
            LogLine::Hung => "hung",
            LogLine::RequestErrors => "requestErrors",
            LogLine::CpuSaturated => "cpuSaturated",
        }
    }

    /// The placeholders it accepts.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            LogLine::Starting => &["name", "image"],
            LogLine::Listening => &["port"],
            LogLine::Heap => &["mi"],
            LogLine::MissingKey => &["key", "expected"],
            LogLine::InvalidValue => &["key", "value", "expected"],
            LogLine::DialRefused => &["addr", "var"],
            LogLine::DependencyUnset => &["var"],
            LogLine::CredentialRejected => &["secret"],
            LogLine::CredentialMissing => &["key"],
            LogLine::Killed
            | LogLine::Crash
            | LogLine::Warming
            | LogLine::Hung
            | LogLine::RequestErrors
            | LogLine::CpuSaturated => &[],
        }
    }

    /// The line when the scenario does not word it.
    pub fn default_text(self) -> &'static str {
        match self {
            LogLine::Starting => "starting {name} ({image})",
            LogLine::Listening => "listening on :{port}",
            LogLine::Heap => "heap in use: {mi}Mi",
            LogLine::Killed => "Killed",
            LogLine::MissingKey => "fatal: config key `{key}` is missing; expected {expected}",
            LogLine::Crash => {
                "panic: runtime error: invalid memory address or nil pointer dereference"
            }
            LogLine::InvalidValue => {
                "error: config key `{key}` has value \"{value}\", which is not valid: expected {expected}; answering with built-in defaults"
            }
            LogLine::Warming => "warming caches",
            LogLine::DialRefused => "error: dial {addr} ({var}): connection refused",
            LogLine::DependencyUnset => "error: {var} is not set",
            LogLine::CredentialRejected => {
                "error: upstream rejected the credential mounted from secret {secret}: 401 Unauthorized"
            }
            LogLine::CredentialMissing => {
                "error: no mounted secret holds credential key `{key}`; upstream answers 401 Unauthorized"
            }
            LogLine::Hung => "warn: request workers blocked; no request completed in the last 300s",
            LogLine::RequestErrors => "error: unhandled exception in request handler (500)",
            LogLine::CpuSaturated => "warn: request queue growing; worker CPU saturated",
        }
    }
}

/// An image's own wording of its log lines (each optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)]
pub struct LogWording {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warming: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dial_refused: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency_unset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_rejected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_missing: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hung: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_errors: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_saturated: Option<String>,
}

impl LogWording {
    /// The scenario's wording of `line`, if it gives one.
    pub fn get(&self, line: LogLine) -> Option<&String> {
        match line {
            LogLine::Starting => self.starting.as_ref(),
            LogLine::Listening => self.listening.as_ref(),
            LogLine::Heap => self.heap.as_ref(),
            LogLine::Killed => self.killed.as_ref(),
            LogLine::MissingKey => self.missing_key.as_ref(),
            LogLine::Crash => self.crash.as_ref(),
            LogLine::InvalidValue => self.invalid_value.as_ref(),
            LogLine::Warming => self.warming.as_ref(),
            LogLine::DialRefused => self.dial_refused.as_ref(),
            LogLine::DependencyUnset => self.dependency_unset.as_ref(),
            LogLine::CredentialRejected => self.credential_rejected.as_ref(),
            LogLine::CredentialMissing => self.credential_missing.as_ref(),
            LogLine::Hung => self.hung.as_ref(),
            LogLine::RequestErrors => self.request_errors.as_ref(),
            LogLine::CpuSaturated => self.cpu_saturated.as_ref(),
        }
    }

    /// Sets the wording of `line`.
    pub fn set(&mut self, line: LogLine, text: Option<String>) {
        let slot = match line {
            LogLine::Starting => &mut self.starting,
            LogLine::Listening => &mut self.listening,
            LogLine::Heap => &mut self.heap,
            LogLine::Killed => &mut self.killed,
            LogLine::MissingKey => &mut self.missing_key,
            LogLine::Crash => &mut self.crash,
            LogLine::InvalidValue => &mut self.invalid_value,
            LogLine::Warming => &mut self.warming,
            LogLine::DialRefused => &mut self.dial_refused,
            LogLine::DependencyUnset => &mut self.dependency_unset,
            LogLine::CredentialRejected => &mut self.credential_rejected,
            LogLine::CredentialMissing => &mut self.credential_missing,
            LogLine::Hung => &mut self.hung,
            LogLine::RequestErrors => &mut self.request_errors,
            LogLine::CpuSaturated => &mut self.cpu_saturated,
        };
        *slot = text;
    }

    /// The line for `line` with its placeholders filled from `vars`.
    pub fn render(&self, line: LogLine, vars: &[(&str, &str)]) -> String {
        let template = self.get(line).map_or(line.default_text(), String::as_str);
        let mut out = String::with_capacity(template.len() + 16);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) => {
                    let name = &after[..close];
                    match vars.iter().find(|(k, _)| *k == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str(&rest[open..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Checks every line the scenario words: each placeholder is one its line accepts.
    pub fn validate(&self) -> Result<(), String> {
        for line in LogLine::ALL {
            let Some(text) = self.get(line) else {
                continue;
            };
            let mut rest = text.as_str();
            while let Some(open) = rest.find('{') {
                let after = &rest[open + 1..];
                let Some(close) = after.find('}') else {
                    break;
                };
                let name = &after[..close];
                if !line.placeholders().contains(&name) {
                    return Err(format!(
                        "logs.{}: unknown placeholder {{{name}}} (it accepts: {})",
                        line.field(),
                        if line.placeholders().is_empty() {
                            "none".to_string()
                        } else {
                            line.placeholders()
                                .iter()
                                .map(|p| format!("{{{p}}}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ));
                }
                rest = &after[close + 1..];
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_the_authors_or_the_default_and_placeholders_are_checked() {
        let mut w = LogWording::default();
        assert_eq!(
            w.render(LogLine::Listening, &[("port", "80")]),
            "listening on :80"
        );
        w.set(LogLine::Listening, Some("bound to {port}, ready".into()));
        assert_eq!(
            w.render(LogLine::Listening, &[("port", "80")]),
            "bound to 80, ready"
        );
        assert!(w.validate().is_ok());
        w.set(LogLine::Listening, Some("bound to {prot}".into()));
        let e = w.validate().unwrap_err();
        assert!(e.contains("{prot}") && e.contains("{port}"), "{e}");
        for line in LogLine::ALL {
            let mut d = LogWording::default();
            d.set(line, Some(line.default_text().to_string()));
            assert!(d.validate().is_ok(), "{}", line.field());
        }
    }
}
