//! The contract the reasoning role writes for a tool: what it is for, what it takes, what it
//! returns and which sanity checks its output must pass.

use rca_core::TimeRange;
use rca_core::source::Value;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind of a tool parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// The start of the time window, in epoch milliseconds (filled from the task's window).
    WindowStart,
    /// The end of the time window (exclusive), in epoch milliseconds.
    WindowEnd,
    /// A whole number.
    Integer,
    /// A number.
    Float,
    /// Text.
    Text,
}

/// One parameter of a tool; the `i`-th parameter is `$i+1` in the SQL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ParamSpec {
    /// Its name (an identifier).
    pub name: String,
    /// Its kind.
    pub kind: ParamKind,
    /// What it means.
    #[serde(default)]
    pub description: String,
    /// The value used when a call does not give one (required for non-window parameters, so
    /// the tool can be tried while it is generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// A sanity check on a tool's output: a SQL boolean expression over the output columns that
/// must hold on every row (it runs as an assertion query).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SanityCheck {
    /// What it checks, in words.
    #[serde(default)]
    pub description: String,
    /// The boolean expression, e.g. `errors <= total`.
    pub assertion: String,
}

/// The reasoning role's specification of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolContract {
    /// The tool's name (lower-case identifier).
    pub name: String,
    /// What it computes and when to use it.
    pub purpose: String,
    /// Its parameters, in `$1`, `$2`, ... order.
    #[serde(default)]
    pub parameters: Vec<ParamSpec>,
    /// Columns its output must have.
    pub output_columns: Vec<String>,
    /// Checks its output must pass.
    #[serde(default)]
    pub sanity_checks: Vec<SanityCheck>,
}

/// Why arguments could not be bound to a contract's parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument `{param}`: {message}")]
pub struct BindError {
    /// The parameter.
    pub param: String,
    /// What is wrong.
    pub message: String,
}

impl ToolContract {
    /// Problems that make the contract unusable (empty when it is fine). Each is a sentence
    /// the reasoning role can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !is_identifier(&self.name) {
            out.push(format!(
                "the name `{}` must be a lower-case identifier (letters, digits, `_`)",
                self.name
            ));
        }
        if self.purpose.trim().is_empty() {
            out.push("the purpose is empty".to_string());
        }
        if self.output_columns.is_empty() {
            out.push("no output columns are named".to_string());
        }
        for c in &self.output_columns {
            if c.trim().is_empty() {
                out.push("an output column name is empty".to_string());
            }
        }
        for (i, p) in self.parameters.iter().enumerate() {
            if !is_identifier(&p.name) {
                out.push(format!(
                    "parameter {} has an invalid name `{}`",
                    i + 1,
                    p.name
                ));
            }
            let windowed = matches!(p.kind, ParamKind::WindowStart | ParamKind::WindowEnd);
            if !windowed && p.default.is_none() {
                out.push(format!(
                    "parameter `{}` needs a default so the tool can be tried",
                    p.name
                ));
            }
        }
        for c in &self.sanity_checks {
            if c.assertion.trim().is_empty() || c.assertion.contains(';') {
                out.push(format!(
                    "sanity check `{}` must be one boolean SQL expression",
                    c.description
                ));
            }
        }
        out
    }

    /// The text that selection compares task descriptions with.
    pub fn description_text(&self) -> String {
        format!(
            "{}: {} (returns {})",
            self.name.replace('_', " "),
            self.purpose,
            self.output_columns.join(", ")
        )
    }

    /// Binds call arguments (a JSON object) to the parameters in order. Window parameters
    /// come from the argument of their name if given, else from `window`; other parameters
    /// from their argument, else their default.
    pub fn bind(
        &self,
        args: &serde_json::Value,
        window: Option<TimeRange>,
    ) -> Result<Vec<Value>, BindError> {
        let object = match args {
            serde_json::Value::Object(m) => Some(m),
            serde_json::Value::Null => None,
            _ => {
                return Err(BindError {
                    param: String::new(),
                    message: "arguments must be a JSON object".to_string(),
                });
            }
        };
        self.parameters
            .iter()
            .map(|p| {
                let given = object.and_then(|m| m.get(&p.name)).filter(|v| !v.is_null());
                let err = |message: String| BindError {
                    param: p.name.clone(),
                    message,
                };
                match p.kind {
                    ParamKind::WindowStart | ParamKind::WindowEnd => {
                        if let Some(v) = given {
                            return json_to_millis(v).map(Value::Int).ok_or_else(|| {
                                err(format!("expected epoch milliseconds or RFC 3339, got {v}"))
                            });
                        }
                        let w = window.ok_or_else(|| {
                            err("no value given and no incident window known".to_string())
                        })?;
                        Ok(Value::Int(if p.kind == ParamKind::WindowStart {
                            w.start.millis()
                        } else {
                            w.end.millis()
                        }))
                    }
                    kind => {
                        let v = given
                            .or(p.default.as_ref())
                            .ok_or_else(|| err("required and not given".to_string()))?;
                        json_to_value(kind, v)
                            .ok_or_else(|| err(format!("expected {}, got {v}", kind_word(kind))))
                    }
                }
            })
            .collect()
    }

    /// A JSON schema of the arguments object, for a model calling the tool.
    pub fn args_schema(&self) -> serde_json::Value {
        let mut props = serde_json::Map::new();
        for p in &self.parameters {
            let ty = match p.kind {
                ParamKind::WindowStart | ParamKind::WindowEnd | ParamKind::Integer => "integer",
                ParamKind::Float => "number",
                ParamKind::Text => "string",
            };
            let mut prop = serde_json::json!({"type": ty, "description": p.description});
            if let Some(d) = &p.default {
                prop["default"] = d.clone();
            }
            props.insert(p.name.clone(), prop);
        }
        serde_json::json!({"type": "object", "properties": props})
    }
}

fn kind_word(kind: ParamKind) -> &'static str {
    match kind {
        ParamKind::Integer | ParamKind::WindowStart | ParamKind::WindowEnd => "an integer",
        ParamKind::Float => "a number",
        ParamKind::Text => "text",
    }
}

fn json_to_millis(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s
            .trim()
            .parse::<i64>()
            .ok()
            .or_else(|| rca_core::Timestamp::parse_rfc3339(s).map(|t| t.millis())),
        _ => None,
    }
}

fn json_to_value(kind: ParamKind, v: &serde_json::Value) -> Option<Value> {
    match kind {
        ParamKind::Integer | ParamKind::WindowStart | ParamKind::WindowEnd => {
            json_to_millis(v).map(Value::Int)
        }
        ParamKind::Float => match v {
            serde_json::Value::Number(n) => n.as_f64().map(Value::Float),
            serde_json::Value::String(s) => s.trim().parse().ok().map(Value::Float),
            _ => None,
        },
        ParamKind::Text => match v {
            serde_json::Value::String(s) => Some(Value::Text(s.clone())),
            serde_json::Value::Number(n) => Some(Value::Text(n.to_string())),
            serde_json::Value::Bool(b) => Some(Value::Text(b.to_string())),
            _ => None,
        },
    }
}

pub(crate) use crate::lifecycle_identifier as is_identifier;

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::Timestamp;

    pub(crate) fn sample() -> ToolContract {
        ToolContract {
            name: "errors_per_component".into(),
            purpose: "Counts error lines per component in the window.".into(),
            parameters: vec![
                ParamSpec {
                    name: "start".into(),
                    kind: ParamKind::WindowStart,
                    description: String::new(),
                    default: None,
                },
                ParamSpec {
                    name: "end".into(),
                    kind: ParamKind::WindowEnd,
                    description: String::new(),
                    default: None,
                },
                ParamSpec {
                    name: "top".into(),
                    kind: ParamKind::Integer,
                    description: String::new(),
                    default: Some(serde_json::json!(10)),
                },
            ],
            output_columns: vec!["component".into(), "errors".into()],
            sanity_checks: vec![SanityCheck {
                description: "non-negative".into(),
                assertion: "errors >= 0".into(),
            }],
        }
    }

    #[test]
    fn binds_window_and_defaults_in_order() {
        let c = sample();
        let w = TimeRange::new(Timestamp(100), Timestamp(200));
        let v = c.bind(&serde_json::json!({}), Some(w)).unwrap();
        assert_eq!(v, vec![Value::Int(100), Value::Int(200), Value::Int(10)]);
        let v = c
            .bind(
                &serde_json::json!({"start": "1970-01-01T00:00:01Z", "top": 3}),
                Some(w),
            )
            .unwrap();
        assert_eq!(v, vec![Value::Int(1000), Value::Int(200), Value::Int(3)]);
        let e = c
            .bind(&serde_json::json!({"top": "many"}), Some(w))
            .unwrap_err();
        assert_eq!(e.param, "top");
        assert!(c.bind(&serde_json::json!({}), None).is_err());
        assert!(c.bind(&serde_json::json!([1]), Some(w)).is_err());
    }

    #[test]
    fn problems_name_what_to_fix() {
        assert!(sample().problems().is_empty());
        let mut bad = sample();
        bad.name = "Bad Name".into();
        bad.output_columns.clear();
        bad.parameters[2].default = None;
        bad.sanity_checks[0].assertion = "1=1; DROP TABLE logs".into();
        let p = bad.problems();
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(is_identifier("p95_latency") && !is_identifier("9x") && !is_identifier(""));
    }

    #[test]
    fn schema_lists_parameters() {
        let s = sample().args_schema();
        assert_eq!(s["properties"]["top"]["default"], 10);
        assert_eq!(s["properties"]["start"]["type"], "integer");
    }
}
