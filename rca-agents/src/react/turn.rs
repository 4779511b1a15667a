//! Reading a model turn: `{"thought": "...", "action": {"name": "...", "args": {...}}}`.

use rca_core::trajectory::Action;

/// The expected shape, shown to the model and to JSON regeneration.
pub const TURN_SHAPE: &str =
    r#"{"thought": "<your reasoning>", "action": {"name": "<tool name>", "args": {<arguments>}}}"#;

/// A parsed turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The reasoning.
    pub thought: String,
    /// The tool call.
    pub action: Action,
}

/// Reads a turn from a JSON value. Missing `args` (or `null`) means `{}`; a missing thought is
/// empty. Anything else out of shape is an error naming the problem.
pub fn parse_turn(value: &serde_json::Value) -> Result<Turn, String> {
    let obj = value
        .as_object()
        .ok_or_else(|| "the turn must be a JSON object".to_string())?;
    let thought = match obj.get("thought") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let action = obj
        .get("action")
        .ok_or_else(|| "the turn has no `action`".to_string())?;
    let action = action
        .as_object()
        .ok_or_else(|| "`action` must be an object with `name` and `args`".to_string())?;
    let name = action
        .get("name")
        .and_then(|n| n.as_str())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "`action.name` must be a non-empty string".to_string())?;
    let args = match action.get("args") {
        None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
        Some(a @ serde_json::Value::Object(_)) => a.clone(),
        Some(_) => return Err("`action.args` must be an object".to_string()),
    };
    Ok(Turn {
        thought,
        action: Action {
            name: name.to_string(),
            args,
        },
    })
}

/// The canonical JSON text of a turn (what is kept in the conversation).
pub fn render_turn(turn: &Turn) -> String {
    serde_json::json!({
        "thought": turn.thought,
        "action": {"name": turn.action.name, "args": turn.action.args},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_turns_and_names_problems() {
        let t =
            parse_turn(&json!({"thought": "t", "action": {"name": " logs ", "args": {"q": 1}}}))
                .unwrap();
        assert_eq!(t.action.name, "logs");
        assert_eq!(t.action.args, json!({"q": 1}));
        let t = parse_turn(&json!({"action": {"name": "x"}})).unwrap();
        assert_eq!(t.action.args, json!({}));
        assert!(parse_turn(&json!([1])).unwrap_err().contains("object"));
        assert!(
            parse_turn(&json!({"thought": "t"}))
                .unwrap_err()
                .contains("action")
        );
        assert!(parse_turn(&json!({"action": {"name": ""}})).is_err());
        assert!(parse_turn(&json!({"action": {"name": "x", "args": [1]}})).is_err());
        let back = parse_turn(&serde_json::from_str(&render_turn(&t)).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
