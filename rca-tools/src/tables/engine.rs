//! The engine-neutral interface the tool lifecycle runs queries through.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::SourceError;
use rca_core::source::{Row, SqlSource, Value};
use serde::{Deserialize, Serialize};

use super::schema::{ColumnInfo, ColumnType, TableSchema};

/// The rows a query returned, materialised, with the column names in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows; each holds one value per column, in column order.
    pub rows: Vec<Vec<Value>>,
}

impl QueryResult {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Index of a column (compared case-insensitively).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
    }

    /// The value at row `row` of column `name`.
    pub fn value(&self, row: usize, name: &str) -> Option<&Value> {
        let i = self.column_index(name)?;
        self.rows.get(row)?.get(i)
    }

    /// The rows in the `rca-core` form (name, value) pairs.
    pub fn to_rows(&self) -> Vec<Row> {
        self.rows
            .iter()
            .map(|r| {
                self.columns
                    .iter()
                    .cloned()
                    .zip(r.iter().cloned())
                    .collect()
            })
            .collect()
    }

    /// Builds a result from `rca-core` rows (columns taken from the first row).
    pub fn from_rows(rows: Vec<Row>) -> Self {
        let columns = rows
            .first()
            .map(|r| r.iter().map(|(c, _)| c.clone()).collect())
            .unwrap_or_default();
        let rows = rows
            .into_iter()
            .map(|r| r.into_iter().map(|(_, v)| v).collect())
            .collect();
        QueryResult { columns, rows }
    }

    /// A plain-text table of at most `max_rows` rows, for a model or a terminal to read.
    pub fn render(&self, max_rows: usize) -> String {
        let mut out = self.columns.join(" | ");
        for row in self.rows.iter().take(max_rows) {
            out.push('\n');
            let cells: Vec<String> = row.iter().map(render_value).collect();
            out.push_str(&cells.join(" | "));
        }
        if self.rows.len() > max_rows {
            out.push_str(&format!("\n... {} more rows", self.rows.len() - max_rows));
        }
        out
    }
}

fn render_value(v: &Value) -> String {
    match v {
        Value::Float(x) => format!("{x:.4}"),
        other => other.to_string(),
    }
}

/// A queryable set of tables with typed schemas: what generated tools run against.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::SourceError;
/// use rca_core::source::Value;
/// use rca_tools::tables::{ColumnInfo, ColumnType, QueryResult, TableEngine, TableSchema};
///
/// /// One table with one row; answers every query with it.
/// struct Fixed;
///
/// #[async_trait]
/// impl TableEngine for Fixed {
///     async fn schemas(&self) -> Result<Vec<TableSchema>, SourceError> {
///         Ok(vec![TableSchema::new("t", vec![ColumnInfo::new("x", ColumnType::Integer)])])
///     }
///     async fn run(&self, _sql: &str, _params: &[Value]) -> Result<QueryResult, SourceError> {
///         Ok(QueryResult { columns: vec!["x".into()], rows: vec![vec![Value::Int(1)]] })
///     }
/// }
/// ```
#[async_trait]
pub trait TableEngine: Send + Sync {
    /// The tables and their typed columns.
    async fn schemas(&self) -> Result<Vec<TableSchema>, SourceError>;
    /// Runs one read-only query with positional parameters (`$1`, `$2`, ...).
    async fn run(&self, sql: &str, params: &[Value]) -> Result<QueryResult, SourceError>;
}

fn _object_safe(_: &dyn TableEngine) {}

/// Adapts any [`SqlSource`] (a host's database) to a [`TableEngine`]. Column types are
/// [`ColumnType::Unknown`] because a `SqlSource` names columns only; results are capped at
/// `max_rows` (more is an error, so a tool never silently loses rows).
pub struct SqlSourceEngine {
    source: Arc<dyn SqlSource>,
    max_rows: usize,
}

impl SqlSourceEngine {
    /// Wraps a source, allowing at most `max_rows` rows per result.
    pub fn new(source: Arc<dyn SqlSource>, max_rows: usize) -> Self {
        SqlSourceEngine { source, max_rows }
    }
}

#[async_trait]
impl TableEngine for SqlSourceEngine {
    async fn schemas(&self) -> Result<Vec<TableSchema>, SourceError> {
        Ok(self
            .source
            .tables()
            .await?
            .into_iter()
            .map(|(name, cols)| {
                TableSchema::new(
                    name,
                    cols.into_iter()
                        .map(|c| ColumnInfo::new(c, ColumnType::Unknown))
                        .collect(),
                )
            })
            .collect())
    }

    async fn run(&self, sql: &str, params: &[Value]) -> Result<QueryResult, SourceError> {
        let mut stream = self.source.query(sql, params).await?;
        let mut rows = Vec::new();
        while let Some(row) = stream.next().await {
            if rows.len() == self.max_rows {
                return Err(SourceError::InvalidQuery {
                    message: format!(
                        "query returned more than {} rows; aggregate or add a LIMIT",
                        self.max_rows
                    ),
                });
            }
            rows.push(row?);
        }
        Ok(QueryResult::from_rows(rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::source::RecordStream;

    struct Canned(Vec<Row>);

    #[async_trait]
    impl SqlSource for Canned {
        async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
            Ok(vec![("t".into(), vec!["a".into(), "b".into()])])
        }
        async fn query(&self, _: &str, _: &[Value]) -> Result<RecordStream<Row>, SourceError> {
            Ok(Box::pin(futures::stream::iter(
                self.0.clone().into_iter().map(Ok),
            )))
        }
    }

    fn row(a: i64) -> Row {
        vec![
            ("a".into(), Value::Int(a)),
            ("b".into(), Value::Text("x".into())),
        ]
    }

    #[tokio::test]
    async fn adapter_collects_and_caps_rows() {
        let engine = SqlSourceEngine::new(Arc::new(Canned(vec![row(1), row(2)])), 2);
        let schemas = engine.schemas().await.unwrap();
        assert_eq!(schemas[0].columns[1].ty, ColumnType::Unknown);
        let r = engine.run("SELECT 1", &[]).await.unwrap();
        assert_eq!(r.columns, vec!["a", "b"]);
        assert_eq!(r.value(1, "A"), Some(&Value::Int(2)));
        assert_eq!(r.to_rows()[0], row(1));
        assert!(r.render(1).contains("1 more rows"));

        let capped = SqlSourceEngine::new(Arc::new(Canned(vec![row(1), row(2), row(3)])), 2);
        let err = capped.run("SELECT 1", &[]).await.unwrap_err();
        assert!(err.to_string().contains("more than 2 rows"));
    }
}
