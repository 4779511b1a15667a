//! `get_db_records`: the rows of a table source that mention an entity, in a time range.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::ToolError;
use rca_core::incident::{Evidence, Modality};
use rca_core::source::{RecordQuery, Row, TableSource, Value};
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{before, bounded, effective_range, invalid};
use crate::records::{TableOptions, parse_time_cell};

/// Arguments of `get_db_records`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DbRecordsArgs {
    /// The entity the rows must mention (a job id, a host, a user id), exactly as written.
    pub entity: String,
    /// Only this table; default: every table.
    #[serde(default)]
    pub table: Option<String>,
    /// Start of the time range (RFC 3339); default: the start of the data.
    #[serde(default)]
    pub start: Option<String>,
    /// End of the time range (RFC 3339); default and upper bound: the detection time.
    #[serde(default)]
    pub end: Option<String>,
}

/// `get_db_records` over any [`TableSource`].
pub struct GetDbRecords {
    source: Arc<dyn TableSource>,
    /// Characters of text returned at most.
    pub max_chars: usize,
    /// Rows per table at most.
    pub max_rows: usize,
    /// Column names (case-insensitive) read as a row's time to enforce the cutoff.
    pub time_columns: Vec<String>,
    /// Words that mark a row as a failure event (matched case-insensitively in its text cells);
    /// such rows become evidence.
    pub failure_words: Vec<String>,
}

impl std::fmt::Debug for GetDbRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetDbRecords")
            .field("max_chars", &self.max_chars)
            .field("max_rows", &self.max_rows)
            .finish()
    }
}

impl GetDbRecords {
    /// The tool over `source`: at most 6,000 characters and 50 rows per table.
    pub fn new(source: Arc<dyn TableSource>) -> Self {
        GetDbRecords {
            source,
            max_chars: 6000,
            max_rows: 50,
            time_columns: TableOptions::default().time_columns,
            failure_words: [
                "fail",
                "error",
                "killed",
                "crash",
                "abort",
                "oom",
                "exception",
                "timeout",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        }
    }

    fn row_time(&self, row: &Row) -> Option<rca_core::Timestamp> {
        self.time_columns.iter().find_map(|name| {
            row.iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| parse_time_cell(v))
        })
    }

    fn is_failure(&self, row: &Row) -> bool {
        row.iter().any(|(_, v)| {
            let Value::Text(t) = v else { return false };
            let t = t.to_ascii_lowercase();
            self.failure_words.iter().any(|w| {
                t.split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|word| word.starts_with(w.as_str()))
            })
        })
    }
}

fn render(row: &Row) -> String {
    row.iter()
        .map(|(c, v)| format!("{c}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[async_trait]
impl TypedTool for GetDbRecords {
    type Args = DbRecordsArgs;

    fn name(&self) -> &str {
        "get_db_records"
    }

    fn description(&self) -> &str {
        "Reads the records (job lifecycle events, configuration changes, database rows) that \
         mention one entity, such as a job id or a host, before the detection time. Name a \
         table to read only it; give a time range to narrow it. No query language is needed."
    }

    async fn run(&self, args: DbRecordsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let entity = args.entity.trim().to_string();
        if entity.is_empty() {
            return Err(invalid::<DbRecordsArgs>(self.name(), "`entity` is empty"));
        }
        let range = effective_range(args.start.as_deref(), args.end.as_deref(), ctx.cutoff)
            .map_err(|m| invalid::<DbRecordsArgs>(self.name(), m))?;
        let tables = self
            .source
            .tables()
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let names: Vec<String> = tables.iter().map(|(n, _)| n.clone()).collect();
        let selected: Vec<String> = match &args.table {
            None => names.clone(),
            Some(t) => match names.iter().find(|n| n.eq_ignore_ascii_case(t.trim())) {
                Some(n) => vec![n.clone()],
                None => {
                    return Err(invalid::<DbRecordsArgs>(
                        self.name(),
                        format!("no table `{t}`; tables: {}", names.join(", ")),
                    ));
                }
            },
        };
        let query = RecordQuery {
            entity: Some(entity.clone()),
            range: Some(range),
            limit: None,
        };
        let mut text = String::new();
        let mut evidence = Vec::new();
        let mut data = serde_json::Map::new();
        let mut total = 0;
        for table in &selected {
            let mut stream = self
                .source
                .records(table, &query)
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            let mut rows: Vec<Row> = Vec::new();
            while let Some(row) = stream.next().await {
                let row = row.map_err(|e| ToolError::failed(e.to_string()))?;
                // Enforced here whatever the source does: nothing at or after the cutoff, and
                // nothing outside the range when the row has a time.
                if let Some(t) = self.row_time(&row)
                    && (!before(ctx.cutoff, t) || !range.contains(t))
                {
                    continue;
                }
                rows.push(row);
            }
            if rows.is_empty() {
                continue;
            }
            total += rows.len();
            let shown = rows.len().min(self.max_rows);
            text.push_str(&format!(
                "table `{table}`: {} row(s) mention `{entity}`{}\n",
                rows.len(),
                if shown < rows.len() {
                    format!(" (the last {shown} shown)")
                } else {
                    String::new()
                }
            ));
            let tail = &rows[rows.len() - shown..];
            for row in tail {
                text.push_str(&format!("- {}\n", render(row)));
                if self.is_failure(row) {
                    evidence.push(
                        Evidence::new(
                            Modality::Records,
                            self.row_time(row)
                                .or(ctx.cutoff)
                                .unwrap_or(rca_core::Timestamp(0)),
                            entity.clone(),
                            format!("{table}: {}", render(row)),
                        )
                        .with_kind(format!("record:{table}"))
                        .with_score(1.0),
                    );
                }
            }
            data.insert(
                table.clone(),
                serde_json::Value::Array(
                    tail.iter()
                        .map(|r| {
                            serde_json::Value::Object(
                                r.iter()
                                    .map(|(c, v)| {
                                        (c.clone(), serde_json::to_value(v).unwrap_or_default())
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                ),
            );
        }
        if total == 0 {
            return Ok(ToolOutput::text(format!(
                "no records mention `{entity}` in {range} (tables searched: {})",
                selected.join(", ")
            )));
        }
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: Some(serde_json::Value::Object(data)),
            evidence,
        })
    }
}
