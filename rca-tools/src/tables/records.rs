//! `rca-core` telemetry records as Arrow record batches (the standard table layouts).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use rca_core::source::{LogRecord, MetricSample, Span};

use super::error::TableError;

fn attrs(a: &(impl serde::Serialize + ?Sized), empty: bool) -> Option<String> {
    if empty {
        None
    } else {
        serde_json::to_string(a).ok()
    }
}

fn batch(
    table: &str,
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch, TableError> {
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| TableError::Register {
        table: table.to_string(),
        message: e.to_string(),
    })
}

fn text<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

/// Logs as `(timestamp BIGINT ms, component, level, message, attributes JSON)`.
pub fn logs_batch(table: &str, records: &[LogRecord]) -> Result<RecordBatch, TableError> {
    let levels: Vec<Option<String>> = records
        .iter()
        .map(|r| r.level.map(|l| l.to_string()))
        .collect();
    batch(
        table,
        vec![
            Field::new("timestamp", DataType::Int64, false),
            Field::new("component", DataType::Utf8, false),
            Field::new("level", DataType::Utf8, true),
            Field::new("message", DataType::Utf8, false),
            Field::new("attributes", DataType::Utf8, true),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(
                records.iter().map(|r| r.timestamp.millis()),
            )),
            text(records.iter().map(|r| r.component.as_str())),
            Arc::new(StringArray::from(levels)),
            text(records.iter().map(|r| r.message.as_str())),
            Arc::new(StringArray::from(
                records
                    .iter()
                    .map(|r| attrs(&r.attributes, r.attributes.is_empty()))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

/// Metrics as `(timestamp BIGINT ms, component, metric, value DOUBLE, labels JSON)`.
pub fn metrics_batch(table: &str, samples: &[MetricSample]) -> Result<RecordBatch, TableError> {
    batch(
        table,
        vec![
            Field::new("timestamp", DataType::Int64, false),
            Field::new("component", DataType::Utf8, false),
            Field::new("metric", DataType::Utf8, false),
            Field::new("value", DataType::Float64, false),
            Field::new("labels", DataType::Utf8, true),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(
                samples.iter().map(|s| s.timestamp.millis()),
            )),
            text(samples.iter().map(|s| s.component.as_str())),
            text(samples.iter().map(|s| s.metric.as_str())),
            Arc::new(Float64Array::from_iter_values(
                samples.iter().map(|s| s.value),
            )),
            Arc::new(StringArray::from(
                samples
                    .iter()
                    .map(|s| attrs(&s.labels, s.labels.is_empty()))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

/// Spans as `(start BIGINT ms, trace_id, span_id, parent_id, component, operation,
/// duration_us BIGINT, error BOOLEAN, attributes JSON)`.
pub fn spans_batch(table: &str, spans: &[Span]) -> Result<RecordBatch, TableError> {
    batch(
        table,
        vec![
            Field::new("start", DataType::Int64, false),
            Field::new("trace_id", DataType::Utf8, false),
            Field::new("span_id", DataType::Utf8, false),
            Field::new("parent_id", DataType::Utf8, true),
            Field::new("component", DataType::Utf8, false),
            Field::new("operation", DataType::Utf8, false),
            Field::new("duration_us", DataType::Int64, false),
            Field::new("error", DataType::Boolean, false),
            Field::new("attributes", DataType::Utf8, true),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(
                spans.iter().map(|s| s.start.millis()),
            )),
            text(spans.iter().map(|s| s.trace_id.as_str())),
            text(spans.iter().map(|s| s.span_id.as_str())),
            Arc::new(StringArray::from(
                spans
                    .iter()
                    .map(|s| s.parent_id.as_deref())
                    .collect::<Vec<_>>(),
            )),
            text(spans.iter().map(|s| s.component.as_str())),
            text(spans.iter().map(|s| s.operation.as_str())),
            Arc::new(Int64Array::from_iter_values(
                spans
                    .iter()
                    .map(|s| i64::try_from(s.duration_us).unwrap_or(i64::MAX)),
            )),
            Arc::new(BooleanArray::from(
                spans.iter().map(|s| s.error).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                spans
                    .iter()
                    .map(|s| attrs(&s.attributes, s.attributes.is_empty()))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}
