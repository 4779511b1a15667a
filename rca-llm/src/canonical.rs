//! Canonical request form: a stable serialisation of a [`CompletionRequest`], a fixed hash of
//! it (the cassette key), a text similarity and a structural diff for replay misses.

use std::collections::{BTreeMap, BTreeSet};

use rca_core::llm::CompletionRequest;
use serde_json::Value;

/// The canonical text of a request: its JSON form with object keys sorted at every depth and
/// no insignificant whitespace. Two requests are the same for record/replay exactly when their
/// canonical texts are equal.
pub fn canonical_json(request: &CompletionRequest) -> String {
    // Serialising our own plain data types to a `Value` cannot fail; fall back to the Debug
    // form rather than panic should that ever change.
    match serde_json::to_value(request) {
        Ok(v) => canonical_value(&v),
        Err(_) => format!("{request:?}"),
    }
}

/// Writes a JSON value with sorted object keys (independent of serde_json's map order).
pub fn canonical_value(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// FNV-1a, 128 bits: a fixed, documented algorithm, so keys stay stable across Rust versions
/// and platforms (unlike `std`'s `DefaultHasher`).
pub fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for b in bytes {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// The cassette key of a request: `req-` and the FNV-1a-128 hash of its canonical JSON in hex.
pub fn request_key(request: &CompletionRequest) -> String {
    format!("req-{:032x}", fnv1a_128(canonical_json(request).as_bytes()))
}

/// Similarity of two texts in `[0, 1]`: the cosine of their word-count vectors (words are runs
/// of alphanumeric characters, lower-cased). Linear in the texts' length, so it scales to long
/// prompts.
pub fn text_similarity(a: &str, b: &str) -> f64 {
    let bag = |s: &str| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for w in s
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            *m.entry(w.to_lowercase()).or_default() += 1.0;
        }
        m
    };
    let (x, y) = (bag(a), bag(b));
    if x.is_empty() && y.is_empty() {
        return 1.0;
    }
    let dot: f64 = x.iter().filter_map(|(k, v)| y.get(k).map(|w| v * w)).sum();
    let norm = |m: &BTreeMap<String, f64>| m.values().map(|v| v * v).sum::<f64>().sqrt();
    let d = norm(&x) * norm(&y);
    if d == 0.0 { 0.0 } else { dot / d }
}

/// One place where two JSON values differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Where, as a path like `messages[2].content`.
    pub path: String,
    /// The value on the left (recorded) side, `None` when absent.
    pub left: Option<String>,
    /// The value on the right (requested) side, `None` when absent.
    pub right: Option<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| match v {
            Some(s) => clip(s, 160),
            None => "(absent)".to_string(),
        };
        write!(
            f,
            "{}: recorded {} / requested {}",
            self.path,
            show(&self.left),
            show(&self.right)
        )
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}... ({} chars)", s.chars().count())
}

/// The places where `left` and `right` differ, depth first, at most `limit` of them.
pub fn json_diff(left: &Value, right: &Value, limit: usize) -> Vec<Difference> {
    let mut out = Vec::new();
    diff_at(String::new(), Some(left), Some(right), limit, &mut out);
    out
}

fn diff_at(
    path: String,
    left: Option<&Value>,
    right: Option<&Value>,
    limit: usize,
    out: &mut Vec<Difference>,
) {
    if out.len() >= limit || left == right {
        return;
    }
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (left, right) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                diff_at(join(k), a.get(k), b.get(k), limit, out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                diff_at(format!("{path}[{i}]"), a.get(i), b.get(i), limit, out);
            }
        }
        _ => {
            let show = |v: Option<&Value>| {
                v.map(|v| match v {
                    Value::String(s) => format!("{s:?}"),
                    other => canonical_value(other),
                })
            };
            out.push(Difference {
                path: if path.is_empty() {
                    "(root)".into()
                } else {
                    path
                },
                left: show(left),
                right: show(right),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use rca_core::llm::Message;
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_form_sorts_keys_and_key_is_stable() {
        let a = json!({"b": 1, "a": {"d": [1, 2], "c": "x"}});
        assert_eq!(canonical_value(&a), r#"{"a":{"c":"x","d":[1,2]},"b":1}"#);
        let req = CompletionRequest::new(vec![Message::user("hello")]).with_seed(3);
        // A fixed algorithm over a fixed text: this value must never change, or every
        // recorded cassette stops matching.
        assert_eq!(
            canonical_json(&req),
            r#"{"messages":[{"content":"hello","role":"user"}],"n":1,"response_format":{"type":"text"},"seed":3,"tool_choice":"auto"}"#
        );
        assert_eq!(request_key(&req), request_key(&req.clone()));
        assert_ne!(request_key(&req), request_key(&req.clone().with_seed(4)));
        assert_eq!(fnv1a_128(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
    }

    #[test]
    fn similarity_and_diff() {
        assert!((text_similarity("a b c", "a b c") - 1.0).abs() < 1e-9);
        assert!(text_similarity("disk full on node", "disk full on host") > 0.7);
        assert_eq!(text_similarity("alpha", "beta"), 0.0);
        let d = json_diff(
            &json!({"messages": [{"content": "x"}], "n": 1}),
            &json!({"messages": [{"content": "y"}, {"content": "z"}], "n": 1}),
            10,
        );
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].path, "messages[0].content");
        assert_eq!(d[0].left.as_deref(), Some("\"x\""));
        assert_eq!(d[1].path, "messages[1]");
        assert_eq!(d[1].left, None);
        assert!(d[1].to_string().contains("(absent)"));
    }
}
