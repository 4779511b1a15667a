//! The sandbox every query runs in: the read-only gate, DataFusion's own plan checks (no DDL,
//! DML or session statements), a row limit, the memory pool of the session's runtime and a
//! timeout.

use std::time::Duration;

use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::execution::context::{SQLOptions, SessionContext};
use futures::StreamExt;
use rca_core::source::Value;
use serde::{Deserialize, Serialize};

use super::arrow_rows::append_rows;
use super::engine::QueryResult;
use super::error::TableError;
use super::readonly::check_read_only;

/// The limits of the query sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxLimits {
    /// Most rows a result may have; more is an error (aggregate or add a `LIMIT`).
    pub max_rows: usize,
    /// Bytes the session's memory pool grants to all running queries together.
    pub memory_bytes: usize,
    /// Longest a query may run, planning included.
    pub timeout: Duration,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            max_rows: 10_000,
            memory_bytes: 512 * 1024 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

fn scalar(v: &Value) -> ScalarValue {
    match v {
        Value::Null => ScalarValue::Null,
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Int(i) => ScalarValue::Int64(Some(*i)),
        Value::Float(x) => ScalarValue::Float64(Some(*x)),
        Value::Text(s) => ScalarValue::Utf8(Some(s.clone())),
    }
}

/// Sorts an engine error by what the caller should do.
fn classify(e: DataFusionError) -> TableError {
    let message = e.to_string();
    match e.find_root() {
        DataFusionError::ResourcesExhausted(_) => TableError::MemoryLimit { message },
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_) => TableError::InvalidQuery { message },
        _ => TableError::Execution { message },
    }
}

/// Runs one query under the limits.
pub(crate) async fn run_sandboxed(
    ctx: &SessionContext,
    limits: &SandboxLimits,
    sql: &str,
    params: &[Value],
) -> Result<QueryResult, TableError> {
    check_read_only(sql)?;
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let run = async {
        let mut df = ctx.sql_with_options(sql, options).await.map_err(classify)?;
        if !params.is_empty() {
            let values: Vec<ScalarValue> = params.iter().map(scalar).collect();
            df = df.with_param_values(values).map_err(classify)?;
        }
        let columns: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut stream = df.execute_stream().await.map_err(classify)?;
        let mut rows = Vec::new();
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(classify)?;
            if rows.len() + batch.num_rows() > limits.max_rows {
                return Err(TableError::TooManyRows {
                    limit: limits.max_rows,
                });
            }
            append_rows(&batch, &mut rows)?;
        }
        Ok::<QueryResult, TableError>(QueryResult { columns, rows })
    };
    tokio::time::timeout(limits.timeout, run)
        .await
        .map_err(|_| TableError::Timeout {
            millis: u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
        })?
}
