//! OpenTelemetry in: an OTLP/HTTP receiver (traces, logs and metrics; protobuf or JSON,
//! optionally gzip) that turns exports into the spans, log records and metric samples the
//! analyzers read, and hands them to a [`TelemetrySink`]: an [`IncidentDirSink`] writes an
//! incident directory (`rca otlp serve DIR`); a host can keep them anywhere else.
//!
//! The message types are the OpenTelemetry project's own (`opentelemetry-proto`, generated
//! from the protocol's `.proto` files, with its JSON mapping). The intake follows the
//! OTLP/HTTP specification: 200 with a partial success naming what was rejected; 400 for a
//! malformed body, 415 for an unknown content type or encoding, 413 for a body over the limit
//! (as sent or once decompressed), each with a `google.rpc.Status` body; 503 with
//! `Retry-After` when the store failed (the sender retries), 507 when it is full. A refused
//! request keeps nothing; an accepted one is stored whole before the reply.
//!
//! See `docs/guides/diagnosis-service.md` ("OpenTelemetry in").

mod convert;
mod error;
mod http;
mod intake;
mod sinks;

pub use convert::{
    CumulativePoint, MetricConversion, SeriesKey, SeriesMemory, TelemetryBatch, logs, spans,
};
pub use error::{OtlpError, SinkError};
pub use http::router;
pub use intake::{Encoding, OtlpIntake, OtlpLimits, OtlpReply, OtlpStats};
pub use sinks::{
    BufferedTelemetry, IncidentDirSink, LOGS_FILE, METRICS_FILE, SPANS_FILE, TelemetryBuffer,
    TelemetrySink,
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
