//! OpenTelemetry in: an OTLP/HTTP receiver (traces, logs and metrics; protobuf or JSON,
//! optionally gzip) that turns exports into the spans, log records and metric samples the
//! analyzers read, and hands them to a [`TelemetrySink`]: an [`IncidentDirSink`] writes an
//! incident directory (`rca otlp serve DIR`); a host can keep them anywhere else.
//!
//! The message types are the OpenTelemetry project's own (`opentelemetry-proto`, generated
//! from the protocol's `.proto` files, with its JSON mapping). The intake follows the
//! OTLP/HTTP specification: 200 with a partial success naming what was rejected; 400 for a
//! malformed body, 415 for an unknown content type or encoding, 413 for a body over the limit
//! (as sent or once decompressed) or one that would take more memory once decoded than a
//! request may (estimated from the body before decoding it), each with a `google.rpc.Status`
//! body; 503 with `Retry-After` when the store failed, when as many requests as allowed are
//! being decoded, or when the memory the intake accounts for (requests being decoded and what
//! the sink holds) would pass its limit (the sender retries); 507 when the store is full. A
//! refused request keeps nothing; an accepted one is stored whole before the reply. Records
//! past the per-request record limit, and attributes past the per-record limit, are rejected or
//! dropped and said in the partial-success answer ([`OtlpLimits`]).
//!
//! See `docs/guides/diagnosis-service.md` ("OpenTelemetry in").

mod convert;
mod error;
mod estimate;
mod http;
mod intake;
mod sinks;

pub use convert::{
    ATTRIBUTE_OVERHEAD_BYTES, CumulativePoint, LimitCounts, MetricConversion, RecordBytes,
    RecordLimits, SeriesKey, SeriesMemory, TelemetryBatch, logs, logs_within, spans, spans_within,
};
pub use error::{OtlpError, SinkError};
pub use http::router;
pub use intake::{Encoding, OtlpIntake, OtlpLimits, OtlpReply, OtlpStats};
pub use sinks::{
    BufferedTelemetry, DEFAULT_BUFFER_BYTES, IncidentDirSink, LOGS_FILE, METRICS_FILE, SPANS_FILE,
    TelemetryBuffer, TelemetrySink,
};

/// The three kinds of OTLP export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `/v1/traces`.
    Traces,
    /// `/v1/logs`.
    Logs,
    /// `/v1/metrics`.
    Metrics,
}

/// The current time (the receive time of records that carry none).
pub(crate) fn now() -> rca_core::Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    rca_core::Timestamp::from_nanos(nanos)
}
