//! Log-format patterns such as `<Date> <Time> <Level> <Component>: <Content>`, read the way
//! the logparser benchmark reads them: every `<Field>` matches lazily (`.*?`), a run of spaces
//! matches `\s+`, the literal text between fields is a regular-expression fragment (so `\[`,
//! `\|` and `(\[<PID>\])?` work as written), and the pattern is anchored at both ends.
//! `<Content>` is the message body.

use rca_core::source::Level;
use regex::Regex;

use super::error::LogsError;

/// The name of the field that holds the message body.
pub const CONTENT_FIELD: &str = "Content";

/// A compiled log format.
///
/// ```
/// use rca_tools::logs::LogFormat;
/// let f = LogFormat::parse(r"<Date> <Time> \[<Level>\] <Component>: <Content>").unwrap();
/// let h = f.parse_line("2024-01-01 10:00:00 [WARN] db.pool: slow query took 3s").unwrap();
/// assert_eq!(h.content, "slow query took 3s");
/// assert_eq!(h.field("Component"), Some("db.pool"));
/// assert_eq!(h.level, Some(rca_core::source::Level::Warning));
/// ```
#[derive(Debug, Clone)]
pub struct LogFormat {
    pattern: String,
    regex: Regex,
    fields: Vec<String>,
    content: Option<usize>,
    /// Capture-group index of the `<Content>` field in `regex`.
    content_slot: Option<usize>,
    level: Option<usize>,
}

/// The header fields and message body of one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine<'a> {
    /// `(field, value)` in pattern order, the body excluded.
    pub fields: Vec<(&'a str, &'a str)>,
    /// The message body.
    pub content: &'a str,
    /// The level read from a `<Level>` field, when there is one and it names a level.
    pub level: Option<Level>,
}

impl ParsedLine<'_> {
    /// The value of a header field.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

impl LogFormat {
    /// Compiles a pattern.
    pub fn parse(pattern: &str) -> Result<LogFormat, LogsError> {
        let invalid = |message: String| LogsError::InvalidFormat {
            pattern: pattern.to_string(),
            message,
        };
        let mut regex = String::from("^");
        let mut fields = Vec::new();
        let mut rest = pattern;
        while !rest.is_empty() {
            match (
                rest.find('<'),
                rest.find('<')
                    .and_then(|s| rest[s..].find('>').map(|e| s + e)),
            ) {
                (Some(s), Some(e))
                    if !rest[s + 1..e].is_empty() && !rest[s + 1..e].contains('<') =>
                {
                    push_literal(&mut regex, &rest[..s]);
                    regex.push_str(&format!("(?P<f{}>.*?)", fields.len()));
                    fields.push(rest[s + 1..e].to_string());
                    rest = &rest[e + 1..];
                }
                (Some(s), _) => {
                    // A `<` that opens no field: literal up to and including it.
                    push_literal(&mut regex, &rest[..=s]);
                    rest = &rest[s + 1..];
                }
                (None, _) => {
                    push_literal(&mut regex, rest);
                    rest = "";
                }
            }
        }
        regex.push('$');
        if fields.is_empty() {
            return Err(invalid("it names no `<Field>`".to_string()));
        }
        let contents: Vec<usize> = fields
            .iter()
            .enumerate()
            .filter(|(_, f)| *f == CONTENT_FIELD)
            .map(|(i, _)| i + 1)
            .collect();
        if contents.len() > 1 {
            return Err(invalid(format!(
                "it names `<{CONTENT_FIELD}>` {} times (fields {contents:?}): the message to mine \
                 is one part of the line",
                contents.len()
            )));
        }
        let regex = Regex::new(&regex).map_err(|e| invalid(e.to_string()))?;
        let content = fields.iter().position(|f| f == CONTENT_FIELD);
        let level = fields.iter().position(|f| f.eq_ignore_ascii_case("Level"));
        let content_slot = content.and_then(|c| {
            let name = format!("f{c}");
            regex.capture_names().position(|n| n == Some(name.as_str()))
        });
        Ok(LogFormat {
            pattern: pattern.to_string(),
            regex,
            fields,
            content,
            content_slot,
            level,
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The field names in pattern order.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The message body of a line (what [`LogFormat::parse_line`] returns as `content`,
    /// without collecting the header fields); `None` when the line does not match.
    pub fn body<'a>(&self, line: &'a str) -> Option<&'a str> {
        let line = line.trim();
        let caps = self.regex.captures(line)?;
        Some(match self.content_slot {
            Some(slot) => caps.get(slot).map_or("", |m| m.as_str()),
            None => line,
        })
    }

    /// Splits a line into header fields and body; `None` when the line does not match (the
    /// caller then keeps the whole line as its body and counts it). Surrounding whitespace
    /// is trimmed first, as the benchmark does.
    pub fn parse_line<'a>(&'a self, line: &'a str) -> Option<ParsedLine<'a>> {
        let line = line.trim();
        let caps = self.regex.captures(line)?;
        let mut fields = Vec::with_capacity(self.fields.len());
        let mut content = "";
        for (i, name) in self.fields.iter().enumerate() {
            let v = caps.name(&format!("f{i}")).map_or("", |m| m.as_str());
            if Some(i) == self.content {
                content = v;
            } else {
                fields.push((name.as_str(), v));
            }
        }
        let level = self
            .level
            .and_then(|i| caps.name(&format!("f{i}")))
            .and_then(|m| Level::parse(m.as_str()));
        let content = if self.content.is_some() {
            content
        } else {
            line
        };
        Some(ParsedLine {
            fields,
            content,
            level,
        })
    }
}

fn push_literal(regex: &mut String, literal: &str) {
    let mut spaces = false;
    for ch in literal.chars() {
        if ch == ' ' {
            if !spaces {
                regex.push_str(r"\s+");
            }
            spaces = true;
        } else {
            spaces = false;
            regex.push(ch);
        }
    }
}

/// Finds a level word among the first tokens of a line (automatic level detection when no
/// format names a `<Level>` field). Only upper-case words of three letters or more
/// (`WARN`) and capitalised words of four or more (`Warning`) count, so a stray `I`, `E` or
/// `fine` in a message is not read as a level.
pub fn detect_level(line: &str) -> Option<Level> {
    line.split_whitespace()
        .take(8)
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_alphabetic()))
        .filter(|w| {
            w.chars().all(|c| c.is_ascii_uppercase())
                || (w.len() >= 4 && w.starts_with(|c: char| c.is_ascii_uppercase()))
        })
        .find_map(Level::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_syntax() {
        let f =
            LogFormat::parse(r"<Month> <Date> <Time> <Level> <Component>(\[<PID>\])?: <Content>")
                .unwrap();
        let p = f
            .parse_line("Jun 14 15:16:01 combo sshd[19939]: auth ok")
            .unwrap();
        assert_eq!(p.field("Component"), Some("sshd"));
        assert_eq!(p.field("PID"), Some("19939"));
        assert_eq!(p.content, "auth ok");
        let p = f
            .parse_line("Jun 14 15:16:01 combo kernel: hello world")
            .unwrap();
        assert_eq!(p.field("Component"), Some("kernel"));
        assert_eq!(p.content, "hello world");

        let f = LogFormat::parse(r"<Time>\|<Component>\|<Pid>\|<Content>").unwrap();
        let p = f
            .parse_line("20171223-22:15:29:606|Step_LSC|30002312|onStandStepChanged 3579")
            .unwrap();
        assert_eq!(p.content, "onStandStepChanged 3579");

        // Runs of spaces match any whitespace run; CRLF is trimmed.
        let f = LogFormat::parse("<Date> <Time>, <Level>      <Component>    <Content>").unwrap();
        let p = f
            .parse_line("2016-09-28 04:30:30, Info  CBS  Loaded x\r")
            .unwrap();
        assert_eq!(p.content, "Loaded x");
        assert_eq!(p.level, Some(Level::Info));
    }

    #[test]
    fn mismatch_and_bad_patterns() {
        let f = LogFormat::parse(r"\[<Time>\] <Content>").unwrap();
        assert!(f.parse_line("no brackets here").is_none());
        assert!(LogFormat::parse("no fields").is_err());
        assert!(matches!(
            LogFormat::parse(r"<A> (<Content>"),
            Err(LogsError::InvalidFormat { .. })
        ));
        // Repeated field names are fine, except the message's: two would mine nothing.
        let f = LogFormat::parse("<A> <A> <Content>").unwrap();
        assert_eq!(f.parse_line("x y z").unwrap().content, "z");
        let err = LogFormat::parse("<Content> <Content>")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`<Content>` 2 times (fields [1, 2])"), "{err}");
    }

    #[test]
    fn body_is_parse_line_content() {
        let cases = [
            (
                r"<Date> <Time> <Level> (\[<PID>\])? <Component>: <Content>",
                "2024-01-01 10:00:00 WARN [42] db: slow query 3s",
            ),
            (
                r"<Time>\|<Component>\|<Pid>\|<Content>",
                "1|a|2|hello there",
            ),
            ("<A> <B>", "x y"),
            ("<A> <A> <Content>", "x y z"),
            (r"\[<Time>\] <Content>", "no brackets here"),
        ];
        for (pattern, line) in cases {
            let f = LogFormat::parse(pattern).unwrap();
            assert_eq!(
                f.body(line),
                f.parse_line(line).map(|p| p.content),
                "{pattern}"
            );
        }
    }

    #[test]
    fn level_detection() {
        assert_eq!(detect_level("2024 ERROR disk full"), Some(Level::Error));
        assert_eq!(detect_level("[WARN] low"), Some(Level::Warning));
        assert_eq!(detect_level("I think E is fine"), None);
    }
}
