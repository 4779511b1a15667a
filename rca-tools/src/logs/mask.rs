//! Generic variable masking and tokenisation.
//!
//! A line is split into whitespace-separated tokens; each token is split again at punctuation
//! that separates a key from a value or a host from a port (`= : , ; ( ) [ ] { } " ' |`).
//! A segment between those delimiters is a variable when it carries a digit (numbers, hex
//! with digits, IPs, ports, UUIDs, timestamps, durations, sizes, ids such as `job_42`), when it
//! is a path or URL (contains `/` next to a letter or digit), or when it is a long run of hex
//! digits. A token whose every segment is a variable becomes the single wildcard `<*>` (so
//! `10.0.0.1:80`, `12:00:01` and `0x1F` all read as one parameter); a token with a constant
//! part keeps it (`size=<*>`, `(uid=<*>)`). The rules name no system, service or word: they
//! hold for any log.

use std::hash::Hasher;

use rustc_hash::FxHasher;

/// The wildcard that marks a parameter in a template.
pub const WILDCARD: &str = "<*>";

/// The hash of a wildcard token (a value no [`FxHasher`] output is expected to collide with in
/// practice; collisions would only merge two templates, never panic).
pub(crate) const WILDCARD_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// Which generic masking rules apply beyond the base ones (digits, paths, hex, hosts,
/// dates). Each is a mechanism that holds for any log; the miner's configuration turns them
/// on, and the defaults are chosen by leave-one-system-out cross-validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct MaskRules {
    /// Adjacent all-variable tokens read as one parameter (`lifetime <1 sec` and
    /// `lifetime 00:02` both read `lifetime <*>`): a value may be written in one token or
    /// several.
    pub collapse_wildcards: bool,
    /// The value of a `key=value` pair is a parameter even when it is a word
    /// (`user=root` reads `user=<*>`).
    pub key_values: bool,
    /// A host or dotted name followed by a port (`db.internal:5432`) is one parameter even
    /// when the name is not a known host name.
    pub endpoints: bool,
    /// A word of two or more letters ending in one digit (`eth0`, `ssh2`) is a name, not a
    /// value: it stays a constant unless the family rule finds it varying.
    pub numbered_names: bool,
}

/// Whether a segment is a numbered name: two or more ASCII letters and one final digit.
fn is_numbered_name(seg: &[u8]) -> bool {
    match seg {
        [letters @ .., last] if last.is_ascii_digit() => {
            letters.len() >= 2 && letters.iter().all(u8::is_ascii_alphabetic)
        }
        _ => false,
    }
}

/// How a token was masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// No variable part: a constant word.
    Word,
    /// Some segments masked, some kept (`size=<*>`).
    Partial,
    /// Entirely variable: reads as `<*>`.
    Wild,
}

/// One token of a line: its byte span, masked hash and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub start: u32,
    pub end: u32,
    pub hash: u64,
    pub kind: TokenKind,
}

#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)
}

#[inline]
fn is_delim(b: u8) -> bool {
    matches!(
        b,
        b'=' | b':' | b',' | b';' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'"' | b'\'' | b'|'
    )
}

/// Day and month abbreviations: parts of timestamps written in words.
const DATE_WORDS: [&[u8]; 19] = [
    b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun", b"Jan", b"Feb", b"Mar", b"Apr", b"May",
    b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Units that follow a number (`93.0 B`, `5.2 KB`, `12 ms`, `3 min`, `2 hours`): a unit
/// right after a parameter is part of it, so one duration or size written with different
/// units, or in several parts (`2 min 5 s`), reads as one value.
const UNIT_WORDS: [&[u8]; 30] = [
    b"B", b"KB", b"MB", b"GB", b"TB", b"KiB", b"MiB", b"GiB", b"TiB", b"byte", b"bytes", b"ms",
    b"us", b"ns", b"s", b"sec", b"secs", b"second", b"seconds", b"min", b"mins", b"minute",
    b"minutes", b"h", b"hr", b"hrs", b"hour", b"hours", b"day", b"days",
];

/// Tokens that join the items of a list (`a -> b`, `a | b`, `a + b`): between two values they
/// make one value of them.
const SEPARATORS: [&[u8]; 12] = [
    b"->", b"=>", b"<-", b"<->", b"-->", b"|", b"||", b"/", b"+", b"&", b",", b";",
];

/// Whether a token hash is that of a list separator (the hash [`tokenize`] gives it).
pub(crate) fn is_separator_hash(hash: u64) -> bool {
    static HASHES: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    HASHES
        .get_or_init(|| {
            SEPARATORS
                .iter()
                .map(|s| mask_token(s, 0, s.len(), MaskRules::default()).hash)
                .collect()
        })
        .contains(&hash)
}

/// Whether one delimiter-free segment is a path or URL (a `/` next to a letter or digit).
#[inline]
fn segment_is_path(seg: &[u8]) -> bool {
    seg.windows(2).any(|w| {
        (w[0] == b'/' && w[1].is_ascii_alphanumeric())
            || (w[1] == b'/' && w[0].is_ascii_alphanumeric())
    })
}

/// Common top-level domains: a dotted name ending in one of them is a host name.
const TLDS: [&[u8]; 36] = [
    b"com", b"net", b"org", b"edu", b"gov", b"mil", b"int", b"info", b"biz", b"io", b"co", b"us",
    b"uk", b"de", b"fr", b"jp", b"cn", b"hk", b"tw", b"kr", b"ru", b"pl", b"nl", b"br", b"au",
    b"ca", b"in", b"it", b"es", b"se", b"ch", b"at", b"be", b"dk", b"eu", b"local",
];

/// Whether a segment is a host name: dotted labels of letters, digits and `-`, ending in a
/// common top-level domain.
fn segment_is_host(seg: &[u8]) -> bool {
    let Some(dot) = seg.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    dot > 0
        && TLDS.iter().any(|t| seg[dot + 1..].eq_ignore_ascii_case(t))
        && seg
            .split(|&b| b == b'.')
            .all(|l| !l.is_empty() && l.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-'))
}

/// Whether one delimiter-free segment is a variable.
#[inline]
fn segment_is_variable(seg: &[u8]) -> bool {
    if seg.len() == 3 && DATE_WORDS.contains(&seg) {
        return true;
    }
    if segment_is_host(seg) {
        return true;
    }
    let mut hex = 0usize;
    let mut slash_next_to_alnum = false;
    let mut prev_alnum = false;
    let mut prev_slash = false;
    for &b in seg {
        if b.is_ascii_digit() {
            return true;
        }
        let alnum = b.is_ascii_alphanumeric();
        if b == b'/' && prev_alnum || alnum && prev_slash {
            slash_next_to_alnum = true;
        }
        if b.is_ascii_hexdigit() {
            hex += 1;
        }
        prev_alnum = alnum;
        prev_slash = b == b'/';
    }
    slash_next_to_alnum || (hex == seg.len() && hex >= 8)
}

/// Tokenises and masks `line` into `out` (cleared first) with the base rules. At most
/// `max_tokens` tokens are kept; the rest of the line folds into the last token, so a
/// pathological line stays bounded.
pub(crate) fn tokenize(line: &str, max_tokens: usize, out: &mut Vec<Token>) {
    tokenize_with(line, max_tokens, MaskRules::default(), out);
}

/// [`tokenize`] with extra masking rules.
pub(crate) fn tokenize_with(line: &str, max_tokens: usize, rules: MaskRules, out: &mut Vec<Token>) {
    out.clear();
    let bytes = line.as_bytes();
    let n = bytes.len().min(u32::MAX as usize);
    let mut i = 0;
    while i < n {
        while i < n && is_space(bytes[i]) {
            i += 1;
        }
        if i >= n {
            break;
        }
        let start = i;
        let last = out.len() + 1 >= max_tokens.max(1);
        while i < n && (last || !is_space(bytes[i])) {
            i += 1;
        }
        let mut end = i;
        while last && end > start && is_space(bytes[end - 1]) {
            end -= 1;
        }
        let mut t = mask_token(bytes, start, end, rules);
        if t.kind == TokenKind::Word
            && out
                .last()
                .is_some_and(|p: &Token| p.kind == TokenKind::Wild)
            && UNIT_WORDS.contains(&trim_delims(&bytes[start..end]))
        {
            t.kind = TokenKind::Wild;
            t.hash = WILDCARD_HASH;
        }
        if rules.collapse_wildcards && t.kind == TokenKind::Wild {
            // A list of values joined by a separator (`a -> b -> c`, `a | b`) is one value.
            if let [.., before, sep] = out.as_slice()
                && before.kind == TokenKind::Wild
                && sep.kind == TokenKind::Word
                && SEPARATORS.contains(&&bytes[sep.start as usize..sep.end as usize])
            {
                out.pop();
            }
            if let Some(prev) = out.last_mut()
                && prev.kind == TokenKind::Wild
            {
                prev.end = t.end;
                continue;
            }
        }
        out.push(t);
    }
}

fn trim_delims(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., last] = b {
        if !is_delim(*last) {
            break;
        }
        b = rest;
    }
    b
}

/// Whether a token is a run of hex groups joined by `:` or `-` (MAC addresses, hex dumps).
fn is_hex_groups(tok: &[u8]) -> bool {
    let groups = tok.split(|&b| b == b':' || b == b'-');
    let mut n = 0;
    for g in groups {
        if g.is_empty() || !g.iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        n += 1;
    }
    n >= 4
}

/// Whether a constant token looks like a value rather than vocabulary: a dotted name
/// (`a.b.c`) or an identifier with `_` or inner capitals (`camelCase`). Plain words
/// (`opened`, `Started`), quoted words and `key=value` pairs are not.
pub(crate) fn is_value_like(token: &str) -> bool {
    let b = token.as_bytes();
    let dotted = b
        .windows(3)
        .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b'.' && w[2].is_ascii_alphanumeric());
    let inner_capital = b
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let underscore = b
        .windows(2)
        .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b'_');
    dotted || inner_capital || underscore
}

/// Whether a token is an endpoint: a name of letters, digits, `.`, `-` and `_` holding a dot
/// or a letter, then `:` and a port number (`db.internal:5432`, `localhost:8080`).
fn is_endpoint(tok: &[u8]) -> bool {
    let tok = trim_delims(tok);
    let tok = tok.strip_prefix(b"/").unwrap_or(tok);
    let Some(colon) = tok.iter().rposition(|&b| b == b':') else {
        return false;
    };
    let (name, port) = (&tok[..colon], &tok[colon + 1..]);
    !name.is_empty()
        && (1..=5).contains(&port.len())
        && port.iter().all(u8::is_ascii_digit)
        && name.iter().any(u8::is_ascii_alphabetic)
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Whether a token is an empty value: a bracket or quote pair with nothing inside (`()`,
/// `[]`, `""`), possibly followed by `,` or `;`: the place of a parameter that was empty.
pub(crate) fn is_empty_value(tok: &[u8]) -> bool {
    let tok = match tok {
        [rest @ .., b',' | b';'] => rest,
        t => t,
    };
    matches!(tok, b"()" | b"[]" | b"{}" | b"<>" | b"\"\"" | b"''")
}

fn mask_token(bytes: &[u8], start: usize, end: usize, rules: MaskRules) -> Token {
    let tok = &bytes[start..end];
    if segment_is_path(tok)
        || (rules.collapse_wildcards && is_empty_value(tok))
        || is_hex_groups(trim_delims(tok))
        || (rules.endpoints && is_endpoint(tok))
    {
        return Token {
            start: start as u32,
            end: end as u32,
            hash: WILDCARD_HASH,
            kind: TokenKind::Wild,
        };
    }
    let mut h = FxHasher::default();
    let mut masked = 0usize;
    let mut kept_alnum = false;
    let mut seg_start = 0;
    for k in 0..=tok.len() {
        let at_delim = k == tok.len() || is_delim(tok[k]);
        if !at_delim {
            continue;
        }
        let seg = &tok[seg_start..k];
        if !seg.is_empty() {
            if segment_masked(tok, seg_start, seg, rules) {
                masked += 1;
                h.write_u8(0xff);
            } else {
                kept_alnum |= seg.iter().any(|b| b.is_ascii_alphanumeric() || *b >= 0x80);
                h.write(seg);
            }
        }
        if k < tok.len() {
            h.write_u8(tok[k]);
        }
        seg_start = k + 1;
    }
    let (kind, hash) = if masked == 0 {
        (TokenKind::Word, h.finish())
    } else if kept_alnum {
        (TokenKind::Partial, h.finish())
    } else {
        (TokenKind::Wild, WILDCARD_HASH)
    };
    Token {
        start: start as u32,
        end: end as u32,
        hash,
        kind,
    }
}

/// Whether segment `seg` (starting at `seg_start` of token `tok`) is masked under `rules`:
/// the one decision behind both a token's hash and its masked text, so the two agree.
fn segment_masked(tok: &[u8], seg_start: usize, seg: &[u8], rules: MaskRules) -> bool {
    (segment_is_variable(seg) && !(rules.numbered_names && is_numbered_name(seg)))
        || (rules.key_values && is_value_after_key(tok, seg_start))
}

/// Whether the segment starting at `seg_start` of `tok` is the value of a `key=value` pair:
/// it follows an `=` that follows a key of letters, digits, `_`, `-` or `.`.
fn is_value_after_key(tok: &[u8], seg_start: usize) -> bool {
    if seg_start < 2 || tok.get(seg_start - 1) != Some(&b'=') {
        return false;
    }
    let key = &tok[..seg_start - 1];
    let key_start = key
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
        .map_or(0, |i| i + 1);
    let key = &key[key_start..];
    !key.is_empty() && key.iter().any(u8::is_ascii_alphabetic)
}

/// The masked text of one token (`<*>`, `size=<*>`, or the token itself).
pub(crate) fn masked_text(line: &str, t: &Token) -> String {
    masked_text_with(line, t, MaskRules::default())
}

/// [`masked_text`] under `rules` (the same rules the token was masked with).
pub(crate) fn masked_text_with(line: &str, t: &Token, rules: MaskRules) -> String {
    let tok = &line.as_bytes()[t.start as usize..t.end as usize];
    match t.kind {
        TokenKind::Wild => WILDCARD.to_string(),
        TokenKind::Word if t.hash == WILDCARD_HASH => WILDCARD.to_string(),
        TokenKind::Word => String::from_utf8_lossy(tok).into_owned(),
        TokenKind::Partial => {
            let mut out = Vec::with_capacity(tok.len());
            let mut seg_start = 0;
            for k in 0..=tok.len() {
                if k < tok.len() && !is_delim(tok[k]) {
                    continue;
                }
                let seg = &tok[seg_start..k];
                if !seg.is_empty() && segment_masked(tok, seg_start, seg, rules) {
                    out.extend_from_slice(WILDCARD.as_bytes());
                } else {
                    out.extend_from_slice(seg);
                }
                if k < tok.len() {
                    out.push(tok[k]);
                }
                seg_start = k + 1;
            }
            String::from_utf8_lossy(&out).into_owned()
        }
    }
}

/// Masks a whole line: every variable becomes `<*>`, tokens joined by one space.
///
/// ```
/// use rca_tools::logs::mask_line;
/// assert_eq!(mask_line("Connection from 10.0.0.1:5050 closed after 12ms"),
///            "Connection from <*> closed after <*>");
/// assert_eq!(mask_line("read size=4096 from /var/data/x"), "read size=<*> from <*>");
/// ```
pub fn mask_line(line: &str) -> String {
    let mut toks = Vec::new();
    tokenize(line, usize::MAX, &mut toks);
    toks.iter()
        .map(|t| masked_text(line, t))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_generic_variables() {
        let cases = [
            ("job_-1608999687919862906", "<*>"),
            ("10.1.43.21:50010", "<*>"),
            ("/10.2.19.102:54106", "<*>"),
            ("0x7f3a", "<*>"),
            ("550e8400-e29b-41d4-a716-446655440000", "<*>"),
            ("https://example.org/a/b", "<*>"),
            ("/usr/lib/libc.so", "<*>"),
            ("deadbeefdeadbeefdeadbeef", "<*>"),
            ("12:00:01,123", "<*>"),
            ("3.5s", "<*>"),
            ("12KB", "<*>"),
            ("size=4096,", "size=<*>,"),
            ("(uid=0)", "(uid=<*>)"),
            ("connection", "connection"),
            ("org.example.Server:", "org.example.Server:"),
            ("-", "-"),
            ("/", "/"),
            ("ünïcode", "ünïcode"),
            ("GET /a/b?x=1&y=z HTTP/1.1\"", "GET <*> <*>"),
            ("at Sun Jul 3 10:05:25", "at <*> <*> <*> <*>"),
            ("size 5.2 KB, free 12 B", "size <*> <*> free <*> <*>"),
            ("B", "B"),
            ("FF:F2:9F:15:7E:6E:00:0D:60:EA:81:91", "<*>"),
            ("de-ad-be-ef", "<*>"),
            ("rhost=mail.example.com", "rhost=<*>"),
            ("org.example.Server", "org.example.Server"),
        ];
        for (tok, want) in cases {
            assert_eq!(mask_line(tok), want, "{tok}");
        }
    }

    #[test]
    fn hashes_match_masked_text() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        tokenize("took 12ms size=1 (uid=0)", 64, &mut a);
        tokenize("took 99ms size=77 (uid=5)", 64, &mut b);
        assert_eq!(
            a.iter().map(|t| t.hash).collect::<Vec<_>>(),
            b.iter().map(|t| t.hash).collect::<Vec<_>>()
        );
        assert_eq!(a[1].kind, TokenKind::Wild);
        assert_eq!(a[2].kind, TokenKind::Partial);
        assert_eq!(a[0].kind, TokenKind::Word);
    }

    #[test]
    fn value_like_tokens() {
        for v in ["com.example.Main", "RILJ_ACK", "WorkSource"] {
            assert!(is_value_like(v), "{v}");
        }
        for w in [
            "opened",
            "Started",
            "finalization.",
            "SPP.",
            "(command",
            "\"GET",
            "user=root",
        ] {
            assert!(!is_value_like(w), "{w}");
        }
    }

    fn masked(line: &str, rules: MaskRules) -> String {
        let mut toks = Vec::new();
        tokenize_with(line, usize::MAX, rules, &mut toks);
        toks.iter()
            .map(|t| masked_text_with(line, t, rules))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn optional_rules() {
        let none = MaskRules::default();
        let collapse = MaskRules {
            collapse_wildcards: true,
            ..none
        };
        assert_eq!(masked("lifetime <1 sec", none), "lifetime <*> <*>");
        assert_eq!(masked("lifetime <1 sec", collapse), "lifetime <*>");
        assert_eq!(masked("from 10.0.0.1 () at", collapse), "from <*> at");
        assert_eq!(masked("from 10.0.0.1 () at", none), "from <*> () at");
        let kv = MaskRules {
            key_values: true,
            ..none
        };
        assert_eq!(
            masked("user=root tty=ssh ruser=", kv),
            "user=<*> tty=<*> ruser="
        );
        assert_eq!(masked("user=root", none), "user=root");
        assert_eq!(masked("a==b =x", kv), "a==b =x");
        let ep = MaskRules {
            endpoints: true,
            ..none
        };
        assert_eq!(masked("to db.internal:5432 ok", ep), "to <*> ok");
        assert_eq!(
            masked("to db.internal:5432 ok", none),
            "to db.internal:<*> ok"
        );
        assert_eq!(masked("Error:12345678", ep), "Error:<*>");
        assert_eq!(masked("key:value", ep), "key:value");
        let names = MaskRules {
            numbered_names: true,
            ..none
        };
        assert_eq!(
            masked("eth0 ssh2 node-148 x1 v12", names),
            "eth0 ssh2 <*> <*> <*>"
        );
        assert_eq!(masked("eth0 ssh2", none), "<*> <*>");
    }

    #[test]
    fn token_cap_folds_the_tail() {
        let mut t = Vec::new();
        tokenize("a b c d e", 3, &mut t);
        assert_eq!(t.len(), 3);
        assert_eq!(
            &"a b c d e"[t[2].start as usize..t[2].end as usize],
            "c d e"
        );
        tokenize("", 3, &mut t);
        assert!(t.is_empty());
        tokenize("   \t ", 3, &mut t);
        assert!(t.is_empty());
    }
}
