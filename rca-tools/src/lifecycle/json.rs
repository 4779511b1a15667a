//! Reading a model's answer: the object it holds comes from `rca_llm::json::repair` (fences,
//! prose and common JSON slips handled there); this module adds the fenced code blocks with
//! their language tags, which the coding role's SQL arrives in.

/// The first JSON object in `text`, repaired by [`rca_llm::json::repair`] when needed.
pub(crate) fn json_object(text: &str) -> Option<serde_json::Value> {
    rca_llm::json::repair(text)
        .ok()
        .map(|r| r.value)
        .filter(serde_json::Value::is_object)
}

/// The language tag of each fence with its body, e.g. `("sql", "SELECT 1")`.
pub fn fenced_blocks_with_lang(text: &str) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let line_end = after.find('\n').unwrap_or(after.len());
        let lang = after[..line_end].trim().to_ascii_lowercase();
        let body = after.get(line_end + 1..).unwrap_or("");
        match body.find("```") {
            Some(close) => {
                out.push((lang, &body[..close]));
                rest = &body[close + 3..];
            }
            None => {
                out.push((lang, body));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_objects_in_fences_and_prose() {
        let fenced = "Here you go:\n```json\n{\"a\": 1}\n```\nanything else?";
        assert_eq!(json_object(fenced), Some(serde_json::json!({"a": 1})));
        let prose = "The contract is {\"b\": \"}{\", \"c\": [1]} -- done";
        assert_eq!(
            json_object(prose),
            Some(serde_json::json!({"b": "}{", "c": [1]}))
        );
        let escaped = r#"{"s": "say \"hi\" {"}"#;
        assert_eq!(json_object(escaped).unwrap()["s"], "say \"hi\" {");
        assert_eq!(json_object("no object here"), None);
        assert_eq!(json_object("[1, 2]"), None);
    }

    #[test]
    fn fences_with_languages() {
        let t = "a\n```sql\nSELECT 1\n```\nb\n```\nx\n```";
        let blocks = fenced_blocks_with_lang(t);
        assert_eq!(blocks[0], ("sql".to_string(), "SELECT 1\n"));
        assert_eq!(blocks[1], (String::new(), "x\n"));
        assert_eq!(fenced_blocks_with_lang("```\nopen")[0].1, "open");
    }
}
