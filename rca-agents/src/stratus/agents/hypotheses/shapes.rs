//! Shapes, not phrases: what a value or a log line looks like (an address, a port stated on
//! its own, a token set apart in quotes, a number), and the command lines fixes are written as.

use serde_json::Value;

/// Levenshtein distance.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `apply -f '<manifest>'`, unless the manifest cannot be quoted on one command line.
pub(super) fn apply(manifest: &Value) -> Option<String> {
    let text = manifest.to_string();
    (!text.contains('\'')).then(|| format!("apply -f '{text}'"))
}

pub(super) fn patch(kind: &str, name: &str, body: &Value) -> Option<String> {
    let text = body.to_string();
    (!text.contains('\'')).then(|| format!("patch {kind} {name} -p '{text}'"))
}

/// `host:port` of an address-shaped value (a DNS name, a colon, a port number).
pub(super) fn address(v: &str) -> Option<(&str, u16)> {
    let (host, port) = v.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let dns = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && host
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    dns.then_some((host, port))
}

/// Port numbers a log line states on their own (`:8080`, not `host:8080`).
pub(super) fn bare_ports(line: &str) -> Vec<u16> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    for (i, c) in b.iter().enumerate() {
        if *c != b':' {
            continue;
        }
        let attached = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if attached {
            continue;
        }
        let digits: String = line[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(p) = digits.parse::<u16>()
            && p > 0
        {
            out.push(p);
        }
    }
    out
}

/// The word-like tokens of a log line (letters, digits, `_`, `-`, `.`).
pub(super) fn tokens(line: &str) -> Vec<&str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map(|t| t.trim_matches('.'))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Tokens a log line sets apart in quotes or backticks.
pub(super) fn quoted_tokens(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for q in ['`', '"', '\''] {
        let parts: Vec<&str> = line.split(q).collect();
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() && !p.is_empty() && !p.contains(' ') {
                out.push(*p);
            }
        }
    }
    out
}

pub(super) fn is_number(t: &str) -> bool {
    !t.is_empty() && t.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_not_phrases() {
        assert_eq!(address("db:5432"), Some(("db", 5432)));
        assert_eq!(address("http://x:1"), None);
        assert_eq!(address("plain"), None);
        assert_eq!(bare_ports("bound :7071 and dial db:5432"), vec![7071]);
        assert_eq!(
            quoted_tokens("key `rate` has \"x\" and 'y'"),
            vec!["rate", "x", "y"]
        );
        assert!(tokens("a.b=3, c_d").contains(&"c_d"));
        assert!(is_number("0.85") && !is_number("85%"));
        assert_eq!(edit_distance("carts", "cart"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
