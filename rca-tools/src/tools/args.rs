//! Condensed arguments shared by the tools (an entity and an optional time range), the cutoff
//! arithmetic and output bounding.

use rca_core::{TimeRange, Timestamp, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::analyze::Window;
use crate::sources::parse_time;

/// An entity and an optional time range: the arguments of `get_metrics` and `get_traces`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityArgs {
    /// The component, service, job or host to look at, exactly as the system names it.
    pub entity: String,
    /// Start of the time range (RFC 3339, e.g. "2024-05-01T10:00:00Z"); default: the start of
    /// the data.
    #[serde(default)]
    pub start: Option<String>,
    /// End of the time range (RFC 3339); default and upper bound: the detection time.
    #[serde(default)]
    pub end: Option<String>,
}

/// The JSON schema of `T` as text (for argument errors raised after parsing).
pub(crate) fn schema_text<T: JsonSchema>() -> String {
    serde_json::Value::from(schemars::schema_for!(T)).to_string()
}

/// An argument error that carries the tool's schema, for values that parse but do not make
/// sense (an unreadable time, an empty range).
pub(crate) fn invalid<T: JsonSchema>(tool: &str, message: impl Into<String>) -> ToolError {
    ToolError::InvalidArgs {
        tool: tool.to_string(),
        message: message.into(),
        schema: schema_text::<T>(),
    }
}

/// The range a tool reads: `[start, end)` with missing ends open, and the end never past the
/// cutoff. Errors (as text) name the bad value.
pub fn effective_range(
    start: Option<&str>,
    end: Option<&str>,
    cutoff: Option<Timestamp>,
) -> Result<TimeRange, String> {
    let parse = |key: &str, v: Option<&str>| -> Result<Option<Timestamp>, String> {
        match v.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => parse_time(s).map(Some).ok_or_else(|| {
                format!(
                    "`{key}` = \"{s}\" is not a time; write RFC 3339 like \"2024-05-01T10:15:00Z\""
                )
            }),
        }
    };
    let start = parse("start", start)?.unwrap_or(Timestamp(i64::MIN));
    let end = parse("end", end)?.unwrap_or(Timestamp(i64::MAX));
    if start >= end {
        return Err(format!(
            "the range [{start}, {end}) is empty: start must come before end"
        ));
    }
    let range = TimeRange::new(start, end);
    Ok(match cutoff {
        Some(c) => range.clamp_end(c),
        None => range,
    })
}

/// Splits the data span `[first, end)` into a baseline (the first three quarters) and a recent
/// window (the last quarter), the windows the analyzers compare.
pub fn recent_split(first: Timestamp, end: Timestamp) -> Window {
    let span = end.millis().saturating_sub(first.millis()).max(1);
    let split = end.offset_millis(-(span / 4).max(1));
    Window::new(TimeRange::new(first, split), TimeRange::new(split, end))
}

/// `text` cut to at most `max_chars` characters at a line boundary, with a note of what was
/// cut.
pub fn bounded(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = 0;
    for line in &lines {
        let n = line.chars().count() + 1;
        if used + n > max_chars {
            break;
        }
        out.push_str(line);
        out.push('\n');
        used += n;
        kept += 1;
    }
    if kept == 0 {
        out = text.chars().take(max_chars).collect();
        out.push('\n');
    }
    out.push_str(&format!(
        "... ({} more line(s) cut; narrow the time range or raise the level)",
        lines.len().saturating_sub(kept.max(1))
    ));
    out
}

/// Whether `t` lies before the cutoff (always, without one).
pub(crate) fn before(cutoff: Option<Timestamp>, t: Timestamp) -> bool {
    cutoff.is_none_or(|c| t < c)
}

/// Case-insensitive entity match, so `Payments` finds `payments`.
pub(crate) fn same_entity(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// "`x` is unknown; known: a, b, c" (at most 30 names).
pub(crate) fn unknown_entity(entity: &str, what: &str, known: &[String]) -> ToolError {
    let mut names: Vec<&str> = known.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let more = names.len().saturating_sub(30);
    names.truncate(30);
    ToolError::failed(format!(
        "no {what} for entity `{entity}`; entities with {what}: {}{}",
        names.join(", "),
        if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_clamped_at_the_cutoff() {
        let c = Timestamp::parse_rfc3339("2024-05-01T10:15:00Z");
        let r = effective_range(
            Some("2024-05-01T10:00:00Z"),
            Some("2024-05-01T11:00:00Z"),
            c,
        )
        .unwrap();
        assert_eq!(Some(r.end), c);
        let open = effective_range(None, None, c).unwrap();
        assert_eq!(Some(open.end), c);
        assert!(
            effective_range(Some("yesterday"), None, c)
                .unwrap_err()
                .contains("start")
        );
        assert!(
            effective_range(
                Some("2024-05-01T10:10:00Z"),
                Some("2024-05-01T10:00:00Z"),
                c
            )
            .unwrap_err()
            .contains("empty")
        );
    }

    #[test]
    fn bounded_cuts_at_lines() {
        let text = "aaaa\nbbbb\ncccc\n";
        assert_eq!(bounded(text, 100), text);
        let b = bounded(text, 10);
        assert!(b.starts_with("aaaa\nbbbb\n") && b.contains("1 more line"));
    }

    #[test]
    fn split_keeps_a_recent_quarter() {
        let w = recent_split(Timestamp(0), Timestamp(400));
        assert_eq!(w.current.start, Timestamp(300));
        assert_eq!(w.baseline.end, Timestamp(300));
    }
}
