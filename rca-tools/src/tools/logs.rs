//! `get_logs`: an entity's log lines, deduplicated by template with counts, below WARNING
//! dropped by default, bounded, with the log analyzer's anomalies as evidence.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::ToolError;
use rca_core::source::{Level, LogQuery, LogRecord, LogSource};
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{
    before, bounded, effective_range, invalid, recent_split, same_entity, unknown_entity,
};
use crate::analyze::logs::LogAnalyzer;
use crate::logs::{DEFAULT_MIN_LEVEL, dedup_lines, line_level};
use crate::sources::collect_logs;

/// Arguments of `get_logs`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsArgs {
    /// The component, service, job or host whose logs to read, as the system names it.
    pub entity: String,
    /// Start of the time range (RFC 3339); default: the start of the data.
    #[serde(default)]
    pub start: Option<String>,
    /// End of the time range (RFC 3339); default and upper bound: the detection time.
    #[serde(default)]
    pub end: Option<String>,
    /// The least severe level shown: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL. Default
    /// WARNING; lines without a level count as INFO.
    #[serde(default)]
    pub min_level: Option<String>,
}

/// `get_logs` over any [`LogSource`].
pub struct GetLogs {
    source: Arc<dyn LogSource>,
    /// Characters of text returned at most.
    pub max_chars: usize,
    /// Finds error bursts and new templates in the recent quarter of the lines read.
    pub analyzer: LogAnalyzer,
}

impl std::fmt::Debug for GetLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetLogs")
            .field("max_chars", &self.max_chars)
            .finish()
    }
}

impl GetLogs {
    /// The tool over `source`, returning at most 6,000 characters.
    pub fn new(source: Arc<dyn LogSource>) -> Self {
        GetLogs {
            source,
            max_chars: 6000,
            analyzer: LogAnalyzer::default(),
        }
    }
}

fn level_of(r: &LogRecord) -> Level {
    r.level
        .or_else(|| line_level(&r.message, None))
        .unwrap_or_default()
}

/// Resolves `entity` to a name the source knows (case-insensitively).
pub(crate) fn resolve_entity(entity: &str, known: &[String]) -> Option<String> {
    known
        .iter()
        .find(|k| k.as_str() == entity.trim())
        .or_else(|| known.iter().find(|k| same_entity(k, entity)))
        .cloned()
}

fn fail(e: rca_core::SourceError) -> ToolError {
    ToolError::failed(e.to_string())
}

#[async_trait]
impl TypedTool for GetLogs {
    type Args = LogsArgs;

    fn name(&self) -> &str {
        "get_logs"
    }

    fn description(&self) -> &str {
        "Reads the log lines of one entity (component, service, job or host) before the \
         detection time. Similar lines are merged into one with a count; lines below WARNING \
         are dropped unless `min_level` says otherwise. Give a time range to narrow it."
    }

    async fn run(&self, args: LogsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let min_level = match args.min_level.as_deref().map(str::trim) {
            None | Some("") => DEFAULT_MIN_LEVEL,
            Some(word) => Level::parse(word).ok_or_else(|| {
                invalid::<LogsArgs>(
                    self.name(),
                    format!("`min_level` = \"{word}\" is not a level; use INFO, WARNING or ERROR"),
                )
            })?,
        };
        let range = effective_range(args.start.as_deref(), args.end.as_deref(), ctx.cutoff)
            .map_err(|m| invalid::<LogsArgs>(self.name(), m))?;
        let known = self.source.components().await.map_err(fail)?;
        let Some(component) = resolve_entity(&args.entity, &known) else {
            return Err(unknown_entity(&args.entity, "logs", &known));
        };
        let query = LogQuery {
            component: Some(component.clone()),
            ..LogQuery::range(range)
        };
        let mut records = collect_logs(self.source.as_ref(), &query)
            .await
            .map_err(fail)?;
        // The source should have cut the range; the tool enforces it whatever the source does.
        records.retain(|r| {
            before(ctx.cutoff, r.timestamp)
                && range.contains(r.timestamp)
                && r.component == component
        });
        records.sort_by_key(|r| r.timestamp);
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Ok(ToolOutput::text(format!(
                "no log lines of `{component}` in {range}"
            )));
        };
        let end = if range.end.millis() == i64::MAX {
            last.timestamp.offset_millis(1)
        } else {
            range.end
        };
        let window = recent_split(first.timestamp, end);
        let evidence: Vec<_> = self
            .analyzer
            .analyze(&records, &window)
            .iter()
            .map(|f| f.to_evidence())
            .collect();

        let kept: Vec<&LogRecord> = records
            .iter()
            .filter(|r| level_of(r) >= min_level)
            .collect();
        let messages: Vec<&str> = kept.iter().map(|r| r.message.as_str()).collect();
        let groups = dedup_lines(&messages);
        let mut text = format!(
            "{} log line(s) of `{component}` from {} to {}; {} at or above {min_level} in {} group(s) of similar lines{}.\n",
            records.len(),
            first.timestamp,
            last.timestamp,
            kept.len(),
            groups.len(),
            if min_level > Level::Info {
                format!(
                    " (pass \"min_level\": \"INFO\" to see the {} other line(s))",
                    records.len() - kept.len()
                )
            } else {
                String::new()
            }
        );
        let mut rows = Vec::new();
        for g in &groups {
            let Some(r) = kept.get(g.first_line) else {
                continue;
            };
            // The level is shown unless the message names it already.
            let level = if line_level(&r.message, None).is_some() {
                String::new()
            } else {
                format!("{} ", level_of(r))
            };
            text.push_str(&format!(
                "{} {level}[x{}] {}\n",
                r.timestamp, g.count, g.example
            ));
            rows.push(serde_json::json!({
                "first_seen": r.timestamp,
                "level": level_of(r).to_string(),
                "count": g.count,
                "template": g.template,
                "example": g.example,
            }));
        }
        if !evidence.is_empty() {
            text.push_str("Anomalies in the most recent quarter of the range:\n");
            for e in &evidence {
                text.push_str(&format!("- {}\n", e.finding));
            }
        }
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: Some(serde_json::json!({
                "entity": component,
                "lines": records.len(),
                "shown_lines": kept.len(),
                "groups": rows,
            })),
            evidence,
        })
    }
}
