//! Redaction of secrets and personal data before text reaches a prompt or a file.
//!
//! A [`Redactor`] replaces API keys, bearer and basic credentials, JWTs, passwords in URLs and
//! in `key=value` / `"key": "value"` pairs, private keys and e-mail addresses with
//! `[REDACTED:<kind>]`. Redaction is deterministic, so everything downstream (the evidence
//! filter, snapshot keys, record/replay) sees the same redacted text. [`RedactingModel`] wraps
//! any [`ChatModel`] so no prompt leaves the process unredacted.

use std::borrow::Cow;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{Capabilities, ChatModel, ChatStream, CompletionRequest, CompletionResponse};
use regex::Regex;

/// A pattern could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid redaction pattern `{name}`: {message}")]
pub struct RedactError {
    /// The pattern's name.
    pub name: String,
    /// The regex compiler's message.
    pub message: String,
}

/// One redaction rule: a regex, and which capture group holds the secret (0: the whole match).
#[derive(Debug, Clone)]
pub struct RedactionRule {
    name: String,
    regex: Regex,
    group: usize,
}

impl RedactionRule {
    /// A rule named `name` (shown in the replacement) that redacts capture `group` of `pattern`.
    pub fn new(name: &str, pattern: &str, group: usize) -> Result<Self, RedactError> {
        let regex = Regex::new(pattern).map_err(|e| RedactError {
            name: name.to_string(),
            message: e.to_string(),
        })?;
        if group > regex.captures_len().saturating_sub(1) {
            return Err(RedactError {
                name: name.to_string(),
                message: format!("the pattern has no capture group {group}"),
            });
        }
        Ok(RedactionRule {
            name: name.to_string(),
            regex,
            group,
        })
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The built-in rules, in the order they apply: `(name, pattern, group)`.
pub const BUILTIN_RULES: &[(&str, &str, usize)] = &[
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        0,
    ),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        0,
    ),
    (
        "bearer",
        r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})",
        1,
    ),
    (
        "url-password",
        r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@]+:([^@\s/]+)@",
        1,
    ),
    (
        "api-key",
        r"\b(?:sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{16,})",
        0,
    ),
    (
        "secret-value",
        r#"(?i)["']?\b(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|token|access[_-]?token|refresh[_-]?token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token|credentials?)\b["']?\s*[=:]\s*["']?([^\s"'&,;}\]]+)"#,
        1,
    ),
    (
        "email",
        r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
        0,
    ),
];

/// Replaces secrets and personal data in text. On by default everywhere text is persisted or
/// sent to a model.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<RedactionRule>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::builtin()
    }
}

impl Redactor {
    /// The built-in rules.
    pub fn builtin() -> Self {
        let rules = BUILTIN_RULES
            .iter()
            .filter_map(|(name, pattern, group)| RedactionRule::new(name, pattern, *group).ok())
            .collect();
        Redactor { rules }
    }

    /// No rules at all (redaction off).
    pub fn disabled() -> Self {
        Redactor { rules: Vec::new() }
    }

    /// Adds a rule after the others.
    pub fn with_rule(mut self, rule: RedactionRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Drops the rule of that name (to keep, say, e-mail addresses).
    pub fn without(mut self, name: &str) -> Self {
        self.rules.retain(|r| r.name != name);
        self
    }

    /// Names of the active rules.
    pub fn rule_names(&self) -> Vec<&str> {
        self.rules.iter().map(|r| r.name.as_str()).collect()
    }

    /// The text with every match replaced by `[REDACTED:<rule>]`; borrowed when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut current: Cow<'a, str> = Cow::Borrowed(text);
        for rule in &self.rules {
            if !rule.regex.is_match(&current) {
                continue;
            }
            let mut out = String::with_capacity(current.len());
            let mut last = 0;
            for caps in rule.regex.captures_iter(&current) {
                let Some(m) = caps.get(rule.group) else {
                    continue;
                };
                if m.as_str().starts_with("[REDACTED") {
                    continue;
                }
                out.push_str(&current[last..m.start()]);
                out.push_str("[REDACTED:");
                out.push_str(&rule.name);
                out.push(']');
                last = m.end();
            }
            out.push_str(&current[last..]);
            current = Cow::Owned(out);
        }
        current
    }

    /// Redacts every string inside a JSON value, in place.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.redact_json(v)),
            _ => {}
        }
    }

    /// Redacts every message of a request, in place.
    pub fn redact_request(&self, request: &mut CompletionRequest) {
        for m in &mut request.messages {
            if let Cow::Owned(r) = self.redact(&m.content) {
                m.content = r;
            }
            for call in &mut m.tool_calls {
                if let Cow::Owned(r) = self.redact(&call.arguments) {
                    call.arguments = r;
                }
            }
        }
    }
}

/// Wraps a model so every request is redacted before it is sent.
#[derive(Debug, Clone)]
pub struct RedactingModel<M> {
    inner: M,
    redactor: Redactor,
}

impl<M> RedactingModel<M> {
    /// Wraps `inner` with the given redactor.
    pub fn new(inner: M, redactor: Redactor) -> Self {
        RedactingModel { inner, redactor }
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RedactingModel<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn complete(
        &self,
        mut request: CompletionRequest,
    ) -> Result<CompletionResponse, LlmError> {
        self.redactor.redact_request(&mut request);
        self.inner.complete(request).await
    }
    async fn stream(&self, mut request: CompletionRequest) -> Result<ChatStream, LlmError> {
        self.redactor.redact_request(&mut request);
        self.inner.stream(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScriptedModel;
    use rca_core::Message;

    fn r(text: &str) -> String {
        Redactor::default().redact(text).into_owned()
    }

    #[test]
    fn realistic_log_lines() {
        let cases = [
            (
                "2023-01-29 10:01:02 INFO auth: login ok user=alice@example.com from 10.0.0.4",
                "2023-01-29 10:01:02 INFO auth: login ok user=[REDACTED:email] from 10.0.0.4",
            ),
            (
                "GET /api/orders Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "GET /api/orders Authorization: Bearer [REDACTED:jwt]",
            ),
            (
                "connecting to postgres://app:s3cr3t-P4ss@db.internal:5432/orders",
                "connecting to postgres://app:[REDACTED:url-password]@db.internal:5432/orders",
            ),
            (
                "config loaded: db.password=hunter2 timeout=30s api_key: abcdef123456",
                "config loaded: db.password=[REDACTED:secret-value] timeout=30s api_key: [REDACTED:secret-value]",
            ),
            (
                r#"{"user": "bob", "password": "pa55word!", "retries": 3}"#,
                r#"{"user": "bob", "password": "[REDACTED:secret-value]", "retries": 3}"#,
            ),
            (
                "using key AKIAIOSFODNN7EXAMPLE and sk-proj-abcdefghijklmnop1234",
                "using key [REDACTED:api-key] and [REDACTED:api-key]",
            ),
            (
                "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='",
                "curl -H 'Authorization: Basic [REDACTED:bearer]'",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "input: {input}");
        }
        let key = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(r(key), "key:\n[REDACTED:private-key]\nafter");
    }

    #[test]
    fn leaves_ordinary_lines_alone_and_is_idempotent() {
        let line = "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating";
        assert!(matches!(Redactor::default().redact(line), Cow::Borrowed(_)));
        let once = r("token=abc123 mail me at x.y@corp.io");
        assert_eq!(r(&once), once);
    }

    #[test]
    fn configurable() {
        let red = Redactor::default()
            .without("email")
            .with_rule(RedactionRule::new("employee-id", r"\bEMP-\d{6}\b", 0).unwrap());
        assert_eq!(
            red.redact("EMP-123456 wrote to a@b.com").into_owned(),
            "[REDACTED:employee-id] wrote to a@b.com"
        );
        assert!(RedactionRule::new("bad", "(", 0).is_err());
        assert!(RedactionRule::new("bad-group", "a", 1).is_err());
        assert_eq!(Redactor::disabled().redact("password=x"), "password=x");
        let mut v = serde_json::json!({"a": ["token=zzz9"], "b": 1});
        red.redact_json(&mut v);
        assert_eq!(v["a"][0], "token=[REDACTED:secret-value]");
    }

    #[tokio::test]
    async fn redacting_model_never_sends_secrets() {
        let scripted = ScriptedModel::from_texts("scripted-redaction-test", ["ok"]);
        let model = RedactingModel::new(scripted.clone(), Redactor::default());
        model
            .complete(CompletionRequest::new(vec![Message::user(
                "password=hunter2",
            )]))
            .await
            .unwrap();
        assert_eq!(
            scripted.requests()[0].messages[0].content,
            "password=[REDACTED:secret-value]"
        );
    }
}
