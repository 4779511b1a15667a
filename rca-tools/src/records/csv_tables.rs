//! CSV files as tables, read with condensed arguments (an entity and a time range).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use rca_core::source::{RecordQuery, RecordStream, Row, TableSource, Value};
use rca_core::{SourceError, Timestamp};

/// How to read the tables.
#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    /// Column names (case-insensitive) that hold a row's time; the first present one is used.
    pub time_columns: Vec<String>,
    /// Columns an entity is looked up in; empty: every text column.
    pub entity_columns: Vec<String>,
    /// Rows at or after this instant are never returned (the detection time).
    pub cutoff: Option<Timestamp>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            time_columns: [
                "timestamp",
                "time",
                "ts",
                "event_time",
                "created_at",
                "datetime",
                "date",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            entity_columns: Vec::new(),
            cutoff: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    time_column: Option<usize>,
    times: Vec<Option<Timestamp>>,
}

/// CSV files loaded as tables named by their file stem.
#[derive(Debug, Clone)]
pub struct CsvTables {
    tables: BTreeMap<String, Table>,
    options: TableOptions,
    /// Rows that could not be read, per table.
    skipped: BTreeMap<String, usize>,
}

fn parse_value(text: &str) -> Value {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("null") {
        Value::Null
    } else if let Ok(i) = t.parse::<i64>() {
        Value::Int(i)
    } else if let Ok(x) = t.parse::<f64>() {
        Value::Float(x)
    } else if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        Value::Bool(t.eq_ignore_ascii_case("true"))
    } else {
        Value::Text(t.to_string())
    }
}

/// Reads a time cell (used by every table source): RFC 3339, `YYYY-MM-DD HH:MM:SS`, or epoch seconds / milliseconds /
/// nanoseconds by magnitude.
pub fn parse_time_cell(v: &Value) -> Option<Timestamp> {
    match v {
        Value::Int(i) => Some(epoch_by_magnitude(*i)),
        Value::Float(x) if x.is_finite() => Some(epoch_by_magnitude(*x as i64)),
        Value::Text(s) => Timestamp::parse_rfc3339(s),
        _ => None,
    }
}

fn epoch_by_magnitude(i: i64) -> Timestamp {
    let a = i.unsigned_abs();
    if a >= 100_000_000_000_000_000 {
        Timestamp::from_nanos(i)
    } else if a >= 100_000_000_000_000 {
        Timestamp(i / 1000)
    } else if a >= 100_000_000_000 {
        Timestamp(i)
    } else {
        Timestamp::from_secs(i)
    }
}

impl CsvTables {
    /// Loads the given CSV files. A file that cannot be opened is an error; rows that do not
    /// parse are skipped and counted (see [`CsvTables::skipped`]).
    pub fn load(paths: &[PathBuf], options: TableOptions) -> Result<Self, SourceError> {
        let mut tables = BTreeMap::new();
        let mut skipped = BTreeMap::new();
        for path in paths {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string());
            let (table, bad) = Self::read_table(path, &options)?;
            skipped.insert(name.clone(), bad);
            tables.insert(name, table);
        }
        Ok(CsvTables {
            tables,
            options,
            skipped,
        })
    }

    /// Loads every `*.csv` file of a directory.
    pub fn load_dir(dir: &Path, options: TableOptions) -> Result<Self, SourceError> {
        let entries = std::fs::read_dir(dir).map_err(|e| SourceError::Unavailable {
            message: format!("{}: {e}", dir.display()),
        })?;
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")))
            .collect();
        paths.sort();
        Self::load(&paths, options)
    }

    /// How many rows of each table could not be read.
    pub fn skipped(&self) -> &BTreeMap<String, usize> {
        &self.skipped
    }

    fn read_table(path: &Path, options: &TableOptions) -> Result<(Table, usize), SourceError> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_path(path)
            .map_err(|e| SourceError::Unavailable {
                message: format!("{}: {e}", path.display()),
            })?;
        let columns: Vec<String> = reader
            .headers()
            .map_err(|e| SourceError::Malformed {
                location: path.display().to_string(),
                message: e.to_string(),
            })?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        let time_column = options
            .time_columns
            .iter()
            .find_map(|want| columns.iter().position(|c| c.eq_ignore_ascii_case(want)));
        let mut rows = Vec::new();
        let mut times = Vec::new();
        let mut bad = 0;
        for record in reader.records() {
            let Ok(record) = record else {
                bad += 1;
                continue;
            };
            if record.len() != columns.len() {
                bad += 1;
                continue;
            }
            let row: Vec<Value> = record.iter().map(parse_value).collect();
            times.push(
                time_column
                    .and_then(|i| row.get(i))
                    .and_then(parse_time_cell),
            );
            rows.push(row);
        }
        Ok((
            Table {
                columns,
                rows,
                time_column,
                times,
            },
            bad,
        ))
    }

    fn matches_entity(&self, table: &Table, row: &[Value], entity: &str) -> bool {
        row.iter().enumerate().any(|(i, v)| {
            let Value::Text(text) = v else {
                return matches!(v, Value::Int(n) if n.to_string() == entity);
            };
            let column_ok = self.options.entity_columns.is_empty()
                || table.columns.get(i).is_some_and(|c| {
                    self.options
                        .entity_columns
                        .iter()
                        .any(|e| e.eq_ignore_ascii_case(c))
                });
            column_ok
                && (text == entity
                    || text
                        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
                        .any(|t| t == entity))
        })
    }
}

#[async_trait]
impl TableSource for CsvTables {
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
        Ok(self
            .tables
            .iter()
            .map(|(n, t)| (n.clone(), t.columns.clone()))
            .collect())
    }

    async fn records(
        &self,
        table: &str,
        query: &RecordQuery,
    ) -> Result<RecordStream<Row>, SourceError> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| SourceError::InvalidQuery {
                message: format!(
                    "no table `{table}`; tables: {}",
                    self.tables.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            })?;
        let mut hits: Vec<(Option<Timestamp>, Row)> = Vec::new();
        for (row, time) in t.rows.iter().zip(&t.times) {
            if let (Some(cutoff), Some(ts)) = (self.options.cutoff, time)
                && *ts >= cutoff
            {
                continue;
            }
            if let Some(range) = &query.range {
                // A row without a readable time cannot be placed in a range.
                if t.time_column.is_some() && !time.is_some_and(|ts| range.contains(ts)) {
                    continue;
                }
            }
            if let Some(entity) = &query.entity
                && !self.matches_entity(t, row, entity)
            {
                continue;
            }
            let named: Row = t.columns.iter().cloned().zip(row.iter().cloned()).collect();
            hits.push((*time, named));
        }
        hits.sort_by_key(|(ts, _)| *ts);
        if let Some(limit) = query.limit {
            hits.truncate(limit);
        }
        Ok(Box::pin(futures::stream::iter(
            hits.into_iter().map(|(_, r)| Ok(r)),
        )))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use rca_core::TimeRange;

    use super::*;

    #[tokio::test]
    async fn entity_range_cutoff_and_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("job_events.csv");
        std::fs::write(
            &p,
            "timestamp,job_id,event,detail\n\
             2024-05-01T10:00:00Z,job-7,SUBMITTED,queue=a\n\
             2024-05-01T10:05:00Z,job-8,SUBMITTED,queue=b\n\
             2024-05-01T10:06:00Z,job-7,FAILED,exit 137 on worker-3\n\
             broken,row\n\
             2024-05-01T10:20:00Z,job-7,RESTARTED,\n",
        )
        .unwrap();
        let opts = TableOptions {
            cutoff: Timestamp::parse_rfc3339("2024-05-01T10:10:00Z"),
            ..Default::default()
        };
        let tables = CsvTables::load_dir(dir.path(), opts).unwrap();
        assert_eq!(tables.skipped()["job_events"], 1);
        let q = RecordQuery {
            entity: Some("job-7".into()),
            ..Default::default()
        };
        let rows: Vec<Row> = tables
            .records("job_events", &q)
            .await
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
            .await;
        assert_eq!(rows.len(), 2, "the restart after the cutoff stays hidden");
        assert_eq!(
            rows[1][2],
            ("event".to_string(), Value::Text("FAILED".into()))
        );
        let q = RecordQuery {
            entity: Some("worker-3".into()),
            range: Some(TimeRange::new(
                Timestamp::parse_rfc3339("2024-05-01T10:01:00Z").unwrap(),
                Timestamp::parse_rfc3339("2024-05-01T10:07:00Z").unwrap(),
            )),
            limit: Some(5),
        };
        let rows: Vec<Row> = tables
            .records("job_events", &q)
            .await
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
            .await;
        assert_eq!(rows.len(), 1);
        let err = tables
            .records("nope", &RecordQuery::default())
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("job_events"));
    }

    #[test]
    fn epochs_by_magnitude() {
        assert_eq!(
            epoch_by_magnitude(1_700_000_000),
            Timestamp(1_700_000_000_000)
        );
        assert_eq!(
            epoch_by_magnitude(1_700_000_000_123),
            Timestamp(1_700_000_000_123)
        );
        assert_eq!(
            epoch_by_magnitude(1_700_000_000_123_456_789),
            Timestamp(1_700_000_000_123)
        );
    }
}
