//! Recognising what a column is for (the time, the component, a log level, a duration...)
//! from its name and type, so deterministic tool templates work over any telemetry table whose
//! columns use common names.

use super::schema::{ColumnInfo, ColumnType, TableSchema};

/// What a column holds, as far as the tool templates care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnRole {
    /// When the record happened (epoch milliseconds, or an engine timestamp).
    Time,
    /// The component (service, pod, host, node) the record is about.
    Component,
    /// A log level or severity word.
    Level,
    /// A log message.
    Message,
    /// The name of a metric (KPI) in a long-format metrics table.
    MetricName,
    /// A metric value.
    MetricValue,
    /// The operation (endpoint, span name) of a span.
    Operation,
    /// The duration of a span or request.
    Duration,
    /// Whether a span or request failed.
    ErrorFlag,
}

impl ColumnRole {
    /// Column names that hold this role, most specific first (compared case-insensitively).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            ColumnRole::Time => &[
                "timestamp",
                "ts",
                "time",
                "start",
                "start_time",
                "starttime",
                "event_time",
                "datetime",
            ],
            ColumnRole::Component => &[
                "component",
                "service",
                "service_name",
                "servicename",
                "pod",
                "pod_name",
                "podname",
                "host",
                "hostname",
                "node",
                "instance",
                "container",
            ],
            ColumnRole::Level => &[
                "level",
                "severity",
                "log_level",
                "loglevel",
                "severity_text",
            ],
            ColumnRole::Message => &["message", "msg", "log", "body", "content", "text"],
            ColumnRole::MetricName => &["metric", "metric_name", "kpi", "kpi_name", "name"],
            ColumnRole::MetricValue => &["value", "metric_value", "val"],
            ColumnRole::Operation => &[
                "operation",
                "operation_name",
                "operationname",
                "span_name",
                "endpoint",
                "name",
            ],
            ColumnRole::Duration => &[
                "duration_us",
                "duration_ms",
                "duration",
                "latency",
                "latency_ms",
                "elapsed",
            ],
            ColumnRole::ErrorFlag => &["error", "is_error", "failed", "status_error"],
        }
    }

    fn type_fits(self, ty: &ColumnType) -> bool {
        match self {
            ColumnRole::MetricValue | ColumnRole::Duration => {
                ty.is_numeric() || *ty == ColumnType::Unknown
            }
            ColumnRole::Time => !matches!(ty, ColumnType::Boolean),
            ColumnRole::ErrorFlag => matches!(
                ty,
                ColumnType::Boolean | ColumnType::Integer | ColumnType::Unknown
            ),
            _ => true,
        }
    }
}

/// The column of `table` that plays `role`, if any: the first name in [`ColumnRole::names`]
/// order that the table has with a fitting type.
pub fn find_column(table: &TableSchema, role: ColumnRole) -> Option<&ColumnInfo> {
    role.names()
        .iter()
        .filter_map(|n| table.column(n))
        .find(|c| role.type_fits(&c.ty))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_columns_by_common_names_and_types() {
        let spans = TableSchema::new(
            "spans",
            vec![
                ColumnInfo::new("StartTime", ColumnType::Integer),
                ColumnInfo::new("ServiceName", ColumnType::Text),
                ColumnInfo::new("OperationName", ColumnType::Text),
                ColumnInfo::new("Duration", ColumnType::Integer),
                ColumnInfo::new("error", ColumnType::Boolean),
            ],
        );
        assert_eq!(
            find_column(&spans, ColumnRole::Time).map(|c| c.name.as_str()),
            Some("StartTime")
        );
        assert_eq!(
            find_column(&spans, ColumnRole::Component).map(|c| c.name.as_str()),
            Some("ServiceName")
        );
        assert!(find_column(&spans, ColumnRole::Level).is_none());
        let text_duration =
            TableSchema::new("x", vec![ColumnInfo::new("duration", ColumnType::Text)]);
        assert!(find_column(&text_duration, ColumnRole::Duration).is_none());
    }
}
