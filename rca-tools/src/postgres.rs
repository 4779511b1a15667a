//! PostgreSQL as a [`SqlSource`] (read-only queries) and a [`TableSource`] (rows by entity and
//! time range, for `get_db_records`).
//!
//! The session is read-only on the server side (`default_transaction_read_only`), statements
//! that could change it are refused, and every statement has a timeout.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rca_core::source::{RecordQuery, RecordStream, Row, SqlSource, TableSource, Value};
use rca_core::{SourceError, Timestamp};
use tokio_postgres::types::{ToSql, Type};

use crate::records::{TableOptions, parse_time_cell};

/// A connection to PostgreSQL.
pub struct PostgresSource {
    client: Arc<tokio_postgres::Client>,
    schema: String,
    options: TableOptions,
}

impl std::fmt::Debug for PostgresSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSource")
            .field("schema", &self.schema)
            .field("options", &self.options)
            .finish()
    }
}

fn unavailable(e: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable {
        message: format!("postgres: {e}"),
    }
}

fn query_error(e: tokio_postgres::Error) -> SourceError {
    match e.as_db_error() {
        Some(db) => SourceError::InvalidQuery {
            message: format!("postgres: {} ({})", db.message(), db.code().code()),
        },
        None if e.is_closed() => unavailable(e),
        None => SourceError::Failed {
            message: format!("postgres: {e}"),
        },
    }
}

/// Quotes an identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether a statement is a read (the server enforces read-only too; this refuses statements
/// that could lift that, such as `SET` or `BEGIN`).
fn is_read_statement(sql: &str) -> bool {
    let first = sql
        .trim_start()
        .trim_start_matches(|c: char| c == '(' || c.is_whitespace())
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.as_str(),
        "select" | "with" | "values" | "table" | "explain" | "show"
    )
}

fn millis_of(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp(d.as_millis() as i64),
        Err(e) => Timestamp(-(e.duration().as_millis() as i64)),
    }
}

fn system_time(t: Timestamp) -> SystemTime {
    if t.millis() >= 0 {
        UNIX_EPOCH + Duration::from_millis(t.millis() as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(t.millis().unsigned_abs())
    }
}

/// Converts one cell to a [`Value`] by its column type.
fn cell(row: &tokio_postgres::Row, i: usize) -> Value {
    let ty = row.columns()[i].type_().clone();
    let v = match ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map(|v| v.map(Value::Bool)),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map(|v| v.map(|x| Value::Int(x.into()))),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map(|v| v.map(|x| Value::Int(x.into()))),
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map(|v| v.map(Value::Int)),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(i)
            .map(|v| v.map(|x| Value::Float(x.into()))),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(i)
            .map(|v| v.map(Value::Float)),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => row
            .try_get::<_, Option<SystemTime>>(i)
            .map(|v| v.map(|t| Value::Text(millis_of(t).to_string()))),
        Type::JSON | Type::JSONB => row
            .try_get::<_, Option<serde_json::Value>>(i)
            .map(|v| v.map(|j| Value::Text(j.to_string()))),
        _ => row
            .try_get::<_, Option<String>>(i)
            .map(|v| v.map(Value::Text)),
    };
    match v {
        Ok(Some(v)) => v,
        Ok(None) => Value::Null,
        Err(_) => Value::Text(format!("<unsupported type {ty}>")),
    }
}

fn to_row(row: &tokio_postgres::Row) -> Row {
    row.columns()
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name().to_string(), cell(row, i)))
        .collect()
}

/// A parameter converted to the type the server expects.
fn param(value: &Value, ty: &Type) -> Result<Box<dyn ToSql + Sync + Send>, SourceError> {
    let bad = || SourceError::InvalidQuery {
        message: format!(
            "parameter {value} does not fit type {ty}; cast it in the query (e.g. $1::text)"
        ),
    };
    Ok(match (value, ty) {
        (Value::Null, _) => Box::new(Option::<String>::None),
        (Value::Bool(b), &Type::BOOL) => Box::new(*b),
        (Value::Int(i), &Type::INT2) => Box::new(i16::try_from(*i).map_err(|_| bad())?),
        (Value::Int(i), &Type::INT4) => Box::new(i32::try_from(*i).map_err(|_| bad())?),
        (Value::Int(i), &Type::INT8) => Box::new(*i),
        (Value::Int(i), &Type::FLOAT8) => Box::new(*i as f64),
        (Value::Float(x), &Type::FLOAT8) => Box::new(*x),
        (Value::Float(x), &Type::FLOAT4) => Box::new(*x as f32),
        (Value::Text(s), &Type::TIMESTAMP | &Type::TIMESTAMPTZ) => {
            let t = Timestamp::parse_rfc3339(s).ok_or_else(bad)?;
            Box::new(system_time(t))
        }
        (
            Value::Text(s),
            &Type::TEXT | &Type::VARCHAR | &Type::NAME | &Type::BPCHAR | &Type::UNKNOWN,
        ) => Box::new(s.clone()),
        (v, &Type::TEXT | &Type::VARCHAR) => Box::new(v.to_string()),
        _ => return Err(bad()),
    })
}

impl PostgresSource {
    /// Connects with a libpq-style configuration (`host=... port=... user=... dbname=...`) and
    /// makes the session read-only with a statement timeout.
    pub async fn connect(
        config: &str,
        schema: &str,
        options: TableOptions,
        statement_timeout: Duration,
    ) -> Result<Self, SourceError> {
        let (client, connection) = tokio_postgres::connect(config, tokio_postgres::NoTls)
            .await
            .map_err(unavailable)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "postgres connection closed");
            }
        });
        client
            .batch_execute(&format!(
                "SET default_transaction_read_only = on; SET statement_timeout = {};",
                statement_timeout.as_millis().max(1)
            ))
            .await
            .map_err(query_error)?;
        Ok(PostgresSource {
            client: Arc::new(client),
            schema: schema.to_string(),
            options,
        })
    }

    async fn rows(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SourceError> {
        if !is_read_statement(sql) {
            return Err(SourceError::InvalidQuery {
                message:
                    "only read statements (SELECT, WITH, VALUES, TABLE, EXPLAIN, SHOW) are allowed"
                        .into(),
            });
        }
        let statement = self.client.prepare(sql).await.map_err(query_error)?;
        if statement.params().len() != params.len() {
            return Err(SourceError::InvalidQuery {
                message: format!(
                    "the query takes {} parameters, {} were given",
                    statement.params().len(),
                    params.len()
                ),
            });
        }
        let boxed: Vec<Box<dyn ToSql + Sync + Send>> = params
            .iter()
            .zip(statement.params())
            .map(|(v, t)| param(v, t))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = self
            .client
            .query(&statement, &refs)
            .await
            .map_err(query_error)?;
        Ok(rows.iter().map(to_row).collect())
    }
}

#[async_trait]
impl SqlSource for PostgresSource {
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
        TableSource::tables(self).await
    }

    async fn query(&self, sql: &str, params: &[Value]) -> Result<RecordStream<Row>, SourceError> {
        let rows = self.rows(sql, params).await?;
        Ok(Box::pin(futures::stream::iter(rows.into_iter().map(Ok))))
    }
}

#[async_trait]
impl TableSource for PostgresSource {
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
        let rows = self
            .client
            .query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns \
                 WHERE table_schema = $1 ORDER BY table_name, ordinal_position",
                &[&self.schema],
            )
            .await
            .map_err(query_error)?;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in rows {
            let (t, c): (String, String) = (r.get(0), r.get(1));
            match out.last_mut() {
                Some((name, cols)) if *name == t => cols.push(c),
                _ => out.push((t, vec![c])),
            }
        }
        Ok(out)
    }

    async fn records(
        &self,
        table: &str,
        query: &RecordQuery,
    ) -> Result<RecordStream<Row>, SourceError> {
        let tables = TableSource::tables(self).await?;
        let Some((_, columns)) = tables.iter().find(|(t, _)| t == table) else {
            return Err(SourceError::InvalidQuery {
                message: format!(
                    "no table `{table}`; tables: {}",
                    tables
                        .iter()
                        .map(|(t, _)| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let time_column = self
            .options
            .time_columns
            .iter()
            .find_map(|want| columns.iter().find(|c| c.eq_ignore_ascii_case(want)))
            .cloned();
        let mut sql = format!("SELECT * FROM {}.{}", ident(&self.schema), ident(table));
        let mut params = Vec::new();
        if let Some(entity) = &query.entity {
            let keys: Vec<&String> = if self.options.entity_columns.is_empty() {
                columns.iter().collect()
            } else {
                columns
                    .iter()
                    .filter(|c| {
                        self.options
                            .entity_columns
                            .iter()
                            .any(|e| e.eq_ignore_ascii_case(c))
                    })
                    .collect()
            };
            let ors: Vec<String> = keys
                .iter()
                .map(|c| format!("{}::text = $1", ident(c)))
                .collect();
            if !ors.is_empty() {
                sql.push_str(&format!(" WHERE ({})", ors.join(" OR ")));
                params.push(Value::Text(entity.clone()));
            }
        }
        if let Some(t) = &time_column {
            sql.push_str(&format!(" ORDER BY {}", ident(t)));
        }
        let rows = self.rows(&sql, &params).await?;
        // Time filters run here, so every time representation (timestamps, epoch numbers,
        // text) is read the same way as in the CSV tables.
        let mut out = Vec::new();
        for row in rows {
            let time = time_column
                .as_ref()
                .and_then(|t| row.iter().find(|(c, _)| c == t))
                .and_then(|(_, v)| parse_time_cell(v));
            if let (Some(cutoff), Some(ts)) = (self.options.cutoff, time)
                && ts >= cutoff
            {
                continue;
            }
            if let Some(range) = &query.range
                && time_column.is_some()
                && !time.is_some_and(|ts| range.contains(ts))
            {
                continue;
            }
            out.push(row);
            if query.limit.is_some_and(|l| out.len() >= l) {
                break;
            }
        }
        Ok(Box::pin(futures::stream::iter(out.into_iter().map(Ok))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_statements_only() {
        assert!(is_read_statement("  select 1"));
        assert!(is_read_statement("WITH x AS (SELECT 1) SELECT * FROM x"));
        assert!(is_read_statement("( select 1) union (select 2)"));
        assert!(!is_read_statement(
            "SET default_transaction_read_only = off"
        ));
        assert!(!is_read_statement("delete from t"));
        assert!(!is_read_statement("begin"));
        assert_eq!(ident("we\"ird"), "\"we\"\"ird\"");
    }
}
