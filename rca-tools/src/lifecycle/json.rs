//! Reading JSON out of a model's answer: code fences stripped, prose around the object
//! tolerated. (Full JSON repair is a separate concern of rca-llm; this only finds a
//! well-formed object inside surrounding text.)

/// The first well-formed JSON object in `text`: looks inside code fences first, then scans
/// the text for balanced `{...}` spans and returns the first that parses.
pub fn extract_json_object(text: &str) -> Option<serde_json::Value> {
    for block in fenced_blocks(text) {
        if let Some(v) = scan_objects(block) {
            return Some(v);
        }
    }
    scan_objects(text)
}

/// The bodies of Markdown code fences (```` ```lang ... ``` ````) in order.
pub fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // Skip the info string (`json`, `sql`) up to the end of the line.
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let body = &after[body_start..];
        match body.find("```") {
            Some(close) => {
                out.push(&body[..close]);
                rest = &body[close + 3..];
            }
            None => {
                out.push(body);
                break;
            }
        }
    }
    out
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

fn scan_objects(text: &str) -> Option<serde_json::Value> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        if let Some(close) = balanced_end(bytes, open)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text[open..=close])
            && v.is_object()
        {
            return Some(v);
        }
        start = open + 1;
    }
    None
}

/// Index of the `}` closing the `{` at `open`, honouring JSON strings and escapes.
fn balanced_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_objects_in_fences_and_prose() {
        let fenced = "Here you go:\n```json\n{\"a\": 1}\n```\nanything else?";
        assert_eq!(
            extract_json_object(fenced),
            Some(serde_json::json!({"a": 1}))
        );
        let prose = "Sure! {not json} The contract is {\"b\": \"}{\", \"c\": [1]} -- done";
        assert_eq!(
            extract_json_object(prose),
            Some(serde_json::json!({"b": "}{", "c": [1]}))
        );
        let escaped = r#"{"s": "say \"hi\" {"}"#;
        assert_eq!(extract_json_object(escaped).unwrap()["s"], "say \"hi\" {");
        assert_eq!(extract_json_object("no object here"), None);
        assert_eq!(extract_json_object("{\"unclosed\": 1"), None);
    }

    #[test]
    fn fences_with_languages() {
        let t = "a\n```sql\nSELECT 1\n```\nb\n```\nx\n```";
        let blocks = fenced_blocks_with_lang(t);
        assert_eq!(blocks[0], ("sql".to_string(), "SELECT 1\n"));
        assert_eq!(blocks[1], (String::new(), "x\n"));
        assert_eq!(fenced_blocks("```\nopen"), vec!["open"]);
    }
}
