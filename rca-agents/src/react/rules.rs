//! Error rules: mistakes of the model are returned to it as observations with advice, never
//! as crashes (RCAgent 3.3.2).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which rules are on, and their thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRules {
    /// Master switch for the advisory rules (repeated call, trivial expert input, premature
    /// finalize). Unknown tools and invalid arguments always produce an observation; with the
    /// rules off it carries the bare error without advice or schema.
    pub enabled: bool,
    /// Refuse a stateless tool called again with the same arguments.
    pub repeated_call: bool,
    /// Tools that are expert agents (they analyse text they are given).
    pub expert_tools: Vec<String>,
    /// Fewer characters of input than this to an expert tool is trivial.
    pub min_expert_input_chars: usize,
    /// Successful investigative tool calls needed before `finalize` is accepted.
    pub min_observations: usize,
    /// Pieces of evidence the tools must have established (in `ToolOutput::evidence`) before
    /// `finalize` is accepted. Leave at 0 when your tools report no evidence.
    pub min_evidence: usize,
}

impl Default for ErrorRules {
    fn default() -> Self {
        ErrorRules {
            enabled: true,
            repeated_call: true,
            expert_tools: Vec::new(),
            min_expert_input_chars: 64,
            min_observations: 1,
            min_evidence: 0,
        }
    }
}

impl ErrorRules {
    /// All advisory rules off.
    pub fn disabled() -> Self {
        ErrorRules {
            enabled: false,
            ..Self::default()
        }
    }
}

/// A mistake the controller caught.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Violation {
    /// The model output could not be read as a turn.
    InvalidTurn {
        /// Why.
        message: String,
    },
    /// No tool of that name.
    UnknownTool {
        /// The name used.
        name: String,
        /// The tools that exist, with one-line descriptions.
        available: Vec<String>,
    },
    /// Arguments that do not fit the schema.
    InvalidArgs {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
        /// The schema as JSON text.
        schema: String,
    },
    /// A stateless tool called again with the same arguments.
    RepeatedCall {
        /// The tool.
        tool: String,
    },
    /// Too little input for an expert tool.
    TrivialExpertInput {
        /// The tool.
        tool: String,
        /// Characters given.
        chars: usize,
        /// Characters needed.
        min: usize,
    },
    /// `finalize` before enough investigation.
    PrematureFinalize {
        /// Successful investigative calls so far.
        observations: usize,
        /// Evidence established so far.
        evidence: usize,
        /// Calls needed.
        need_observations: usize,
        /// Evidence needed.
        need_evidence: usize,
    },
}

impl Violation {
    /// Whether one of the advisory rules caught it (a repeated call, trivial expert input, a
    /// premature finalize), as opposed to output that is no valid action at all.
    pub fn is_advisory(&self) -> bool {
        matches!(
            self,
            Violation::RepeatedCall { .. }
                | Violation::TrivialExpertInput { .. }
                | Violation::PrematureFinalize { .. }
        )
    }

    /// What to tell the model, with advice when `advise` is set.
    pub fn observation(&self, advise: bool) -> String {
        let advice = match self {
            Violation::InvalidTurn { .. } => {
                "Answer with exactly one JSON object of the form {\"thought\": \"...\", \
                 \"action\": {\"name\": \"<tool>\", \"args\": {...}}} and nothing else."
                    .to_string()
            }
            Violation::UnknownTool { available, .. } => {
                format!("Use one of these tools: {}.", available.join("; "))
            }
            Violation::InvalidArgs { schema, .. } => {
                format!("Call it again with arguments that follow its JSON schema: {schema}")
            }
            Violation::RepeatedCall { .. } => "This tool returns the same result for the same \
                 arguments; the earlier observation still holds. Use other arguments or another \
                 tool."
                .to_string(),
            Violation::TrivialExpertInput { min, .. } => format!(
                "Expert tools analyse content: pass them the text to analyse (at least {min} \
                 characters), for example a snapshot key of an earlier observation."
            ),
            Violation::PrematureFinalize {
                need_observations,
                need_evidence,
                ..
            } => format!(
                "Investigate further before finalizing: make at least {need_observations} \
                 successful tool call(s) and establish at least {need_evidence} piece(s) of \
                 evidence that support the root cause."
            ),
        };
        if advise {
            format!("Error: {self}. Advice: {advice}")
        } else {
            format!("Error: {self}.")
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::InvalidTurn { message } => {
                write!(f, "the output is not a valid turn ({message})")
            }
            Violation::UnknownTool { name, .. } => write!(f, "there is no tool named `{name}`"),
            Violation::InvalidArgs { tool, message, .. } => {
                write!(f, "invalid arguments for `{tool}`: {message}")
            }
            Violation::RepeatedCall { tool } => {
                write!(f, "`{tool}` was already called with these arguments")
            }
            Violation::TrivialExpertInput { tool, chars, .. } => {
                write!(f, "`{tool}` got only {chars} characters of input")
            }
            Violation::PrematureFinalize {
                observations,
                evidence,
                ..
            } => write!(
                f,
                "finalize after only {observations} successful tool call(s) and {evidence} \
                 piece(s) of evidence"
            ),
        }
    }
}

/// Characters of text in the string values of `args` (the input an expert tool would analyse).
pub fn input_chars(args: &serde_json::Value) -> usize {
    match args {
        serde_json::Value::String(s) => s.chars().count(),
        serde_json::Value::Array(items) => items.iter().map(input_chars).sum(),
        serde_json::Value::Object(map) => map.values().map(input_chars).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_carry_advice_only_when_asked() {
        let v = Violation::UnknownTool {
            name: "grep".into(),
            available: vec!["logs: read logs".into()],
        };
        let with = v.observation(true);
        assert!(with.contains("grep") && with.contains("logs: read logs"));
        let without = v.observation(false);
        assert!(without.contains("grep") && !without.contains("Advice"));
        let p = Violation::PrematureFinalize {
            observations: 0,
            evidence: 0,
            need_observations: 1,
            need_evidence: 2,
        };
        assert!(p.observation(true).contains("at least 2 piece"));
        assert_eq!(
            input_chars(&serde_json::json!({"a": "abc", "b": ["de", 5]})),
            5
        );
    }
}
