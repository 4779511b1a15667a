//! Arrow record batches as `rca-core` values, and Arrow types as coarse column types.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use rca_core::source::Value;

use super::error::TableError;
use super::schema::ColumnType;

/// The coarse type of an Arrow type.
pub fn column_type(dt: &DataType) -> ColumnType {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => ColumnType::Integer,
        DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => ColumnType::Float,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Text,
        DataType::Boolean => ColumnType::Boolean,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => ColumnType::Timestamp,
        DataType::Dictionary(_, value) => column_type(value),
        other => ColumnType::Other(other.to_string()),
    }
}

fn exec(e: impl std::fmt::Display) -> TableError {
    TableError::Execution {
        message: e.to_string(),
    }
}

/// Appends the rows of `batch` to `rows` (one value per column).
pub fn append_rows(batch: &RecordBatch, rows: &mut Vec<Vec<Value>>) -> Result<(), TableError> {
    let n = batch.num_rows();
    let start = rows.len();
    rows.extend((0..n).map(|_| Vec::with_capacity(batch.num_columns())));
    for column in batch.columns() {
        let converted = match column.data_type() {
            // Timestamps become epoch milliseconds.
            DataType::Timestamp(..) => {
                let millis = cast(column, &DataType::Timestamp(TimeUnit::Millisecond, None))
                    .map_err(exec)?;
                cast(&millis, &DataType::Int64).map_err(exec)?
            }
            dt => {
                let target = match column_type(dt) {
                    ColumnType::Integer => DataType::Int64,
                    ColumnType::Float => DataType::Float64,
                    ColumnType::Boolean => DataType::Boolean,
                    _ => DataType::Utf8,
                };
                cast(column, &target).map_err(exec)?
            }
        };
        for (i, row) in rows[start..].iter_mut().enumerate() {
            let value = if converted.is_null(i) {
                Value::Null
            } else {
                match converted.data_type() {
                    DataType::Int64 => Value::Int(converted.as_primitive::<Int64Type>().value(i)),
                    DataType::Float64 => {
                        Value::Float(converted.as_primitive::<Float64Type>().value(i))
                    }
                    DataType::Boolean => Value::Bool(converted.as_boolean().value(i)),
                    _ => Value::Text(converted.as_string::<i32>().value(i).to_string()),
                }
            };
            row.push(value);
        }
    }
    Ok(())
}
