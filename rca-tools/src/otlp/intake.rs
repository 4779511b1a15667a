//! One export request, from the bytes on the wire to a stored batch and the reply.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use serde::Serialize;

use super::convert::{
    self, LimitCounts, MetricConversion, RecordLimits, SeriesMemory, TelemetryBatch,
};
use super::estimate;
use super::{OtlpError, Signal, TelemetrySink};

/// How much one intake accepts. Memory is bounded in bytes, not counts: each request's decoded
/// size is estimated from its body before it is decoded ([`OtlpLimits::max_request_memory_bytes`]),
/// and the intake as a whole refuses what would pass [`OtlpLimits::max_memory_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtlpLimits {
    /// The largest request body, as sent (default 16 MiB).
    pub max_body_bytes: usize,
    /// The largest body once gzip is undone (default 64 MiB).
    pub max_decoded_bytes: usize,
    /// The most cumulative metric series remembered for rates (default 100 000).
    pub max_series: usize,
    /// The most export requests decoded at once (default 2); past it a request is refused
    /// with 503 and `Retry-After` before its body is decoded, so decoding memory is bounded
    /// by this many times `max_decoded_bytes` and what it decodes to.
    pub max_concurrent_decodes: usize,
    /// The most memory one request may take (default 128 MiB), estimated from its body before
    /// it is decoded and without allocating per element: the body's buffers (as sent and
    /// decompressed) plus what it decodes to, every decoded message (span, attribute, data
    /// point, ...) at its in-memory size and every string at its length (for JSON, also what
    /// serde buffers). Past it the request is refused with 413 (a small gzip body of empty
    /// messages decodes to gigabytes). The records converted from an accepted request are
    /// held to the same number of bytes (the ones past it are rejected, as a partial success).
    pub max_request_memory_bytes: u64,
    /// The most records (spans, log records, metric data points) taken from one request
    /// (default 100 000); the ones past it are rejected and said in the partial-success answer.
    /// SDKs export batches of 512 and the Collector's batch processor sends 8192 by default,
    /// so this stops only requests far past what exporters send.
    pub max_records_per_request: usize,
    /// The most attributes kept per record (default 128, the OpenTelemetry SDKs' attribute
    /// count limit); the ones past it (in the order sent) are dropped, the record is kept, and
    /// the partial-success answer says how many.
    pub max_attributes_per_record: usize,
    /// The most memory the intake accounts for at once (default 512 MiB): what the requests
    /// being decoded have reserved plus what the sink holds ([`TelemetrySink::held_bytes`]). A
    /// request reserves its body as sent before it is decompressed, then twice its estimate
    /// (what it decodes to, and the records converted from it) before it is decoded, and
    /// releases it once stored; a reservation that would pass the limit is refused with 503
    /// and `Retry-After`, like the Collector's memory limiter (with 413 if the request alone
    /// would pass it).
    /// Keep it at least the sink's budget plus twice `max_request_memory_bytes` (the default
    /// does for the default [`TelemetryBuffer`](super::TelemetryBuffer)), else a full sink
    /// refuses every request.
    pub max_memory_bytes: u64,
}

impl Default for OtlpLimits {
    fn default() -> Self {
        OtlpLimits {
            max_body_bytes: 16 << 20,
            max_decoded_bytes: 64 << 20,
            max_series: 100_000,
            max_concurrent_decodes: 2,
            max_request_memory_bytes: 128 << 20,
            max_records_per_request: 100_000,
            max_attributes_per_record: 128,
            max_memory_bytes: 512 << 20,
        }
    }
}

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`.
    Protobuf,
    /// `application/json` (the OTLP JSON mapping).
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names.
    pub fn from_content_type(content_type: Option<&str>) -> Result<Encoding, OtlpError> {
        let found = content_type.unwrap_or("");
        let essence = found
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
            "application/json" => Ok(Encoding::Json),
            _ => Err(OtlpError::UnsupportedMediaType {
                found: found.to_string(),
            }),
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// What the intake has received so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OtlpStats {
    /// Requests accepted (wholly or partly).
    pub requests_accepted: u64,
    /// Spans kept.
    pub spans: u64,
    /// Log records kept.
    pub logs: u64,
    /// Metric samples kept (a histogram point gives up to three).
    pub metric_samples: u64,
    /// Items of accepted requests that could not be used (reported as partial success), those
    /// past the limits included.
    pub items_rejected: u64,
    /// Items rejected because their request held more than `max_records_per_request` records,
    /// or its converted records more than its memory budget (also in `items_rejected`).
    pub records_over_limit: u64,
    /// Attributes dropped past `max_attributes_per_record` (their records were kept).
    pub attributes_dropped: u64,
    /// Requests refused as malformed (400).
    pub bad_requests: u64,
    /// Requests refused for their content type or encoding (415).
    pub unsupported_media: u64,
    /// Requests refused as too large (413): the body, decompressed or not, or the memory it
    /// would take once decoded.
    pub too_large: u64,
    /// Requests refused because the store was full (507) or failing (503), or because as many
    /// requests as allowed were being decoded (503).
    pub store_refusals: u64,
    /// Requests refused because the memory accounted for would pass `max_memory_bytes` (503).
    pub memory_refusals: u64,
    /// Bytes of bodies received, as sent.
    pub bytes_received: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests_accepted: AtomicU64,
    spans: AtomicU64,
    logs: AtomicU64,
    metric_samples: AtomicU64,
    items_rejected: AtomicU64,
    records_over_limit: AtomicU64,
    attributes_dropped: AtomicU64,
    bad_requests: AtomicU64,
    unsupported_media: AtomicU64,
    too_large: AtomicU64,
    store_refusals: AtomicU64,
    memory_refusals: AtomicU64,
    bytes_received: AtomicU64,
}

/// The reply to an export request.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpReply {
    /// The HTTP status.
    pub status: u16,
    /// The body's content type.
    pub content_type: &'static str,
    /// The body: an export response (with partial success when items were rejected), or a
    /// `google.rpc.Status` on a refusal.
    pub body: Vec<u8>,
    /// Seconds the sender should wait before retrying, for a retryable refusal.
    pub retry_after: Option<u64>,
}

/// `google.rpc.Status`, the body of an OTLP/HTTP refusal.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// Receives OTLP export requests and hands what they carry to a [`TelemetrySink`]. It is
/// synchronous (decoding and storing block); the HTTP layer runs it off the async threads.
pub struct OtlpIntake {
    sink: Arc<dyn TelemetrySink>,
    limits: OtlpLimits,
    /// Held while a metrics batch is converted and stored, so that the rates of a series are
    /// computed against the point stored before.
    series: Mutex<SeriesMemory>,
    counters: Counters,
    /// Permits to decode a request ([`OtlpLimits::max_concurrent_decodes`]).
    decodes: Arc<tokio::sync::Semaphore>,
    /// Bytes reserved by the requests being decoded ([`OtlpLimits::max_memory_bytes`]).
    reserved: AtomicU64,
}

/// Memory reserved by one request, released when dropped.
struct Reservation<'a> {
    intake: &'a OtlpIntake,
    bytes: u64,
}

impl Reservation<'_> {
    /// Sets the reservation to `bytes`; `Err` (nothing changed) when growing it would pass the
    /// intake's memory limit.
    fn set(&mut self, bytes: u64) -> Result<(), OtlpError> {
        let reserved = &self.intake.reserved;
        if bytes <= self.bytes {
            reserved.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
            self.bytes = bytes;
            return Ok(());
        }
        let limit = self.intake.limits.max_memory_bytes;
        if bytes > limit {
            // Not even alone: retrying will not help.
            return Err(OtlpError::TooMuchMemory {
                estimate: bytes,
                limit,
            });
        }
        let more = bytes - self.bytes;
        let held = self.intake.sink.held_bytes();
        let mut current = reserved.load(Ordering::Acquire);
        loop {
            if current.saturating_add(more).saturating_add(held) > limit {
                return Err(OtlpError::MemoryPressure {
                    needed: bytes,
                    reserved: current - self.bytes,
                    held,
                    limit,
                });
            }
            match reserved.compare_exchange_weak(
                current,
                current + more,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.intake.reserved.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for OtlpIntake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpIntake")
            .field("limits", &self.limits)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn bad(message: impl std::fmt::Display) -> OtlpError {
    OtlpError::BadRequest {
        message: message.to_string(),
    }
}

fn decode<M: Message + Default + serde::de::DeserializeOwned>(
    encoding: Encoding,
    body: &[u8],
) -> Result<M, OtlpError> {
    match encoding {
        Encoding::Protobuf => M::decode(body).map_err(bad),
        Encoding::Json => serde_json::from_slice(body).map_err(bad),
    }
}

fn encode<M: Message + Serialize>(encoding: Encoding, m: &M) -> Vec<u8> {
    match encoding {
        Encoding::Protobuf => m.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(m).unwrap_or_else(|_| b"{}".to_vec()),
    }
}

impl OtlpIntake {
    /// An intake storing into `sink`.
    pub fn new(sink: Arc<dyn TelemetrySink>, limits: OtlpLimits) -> Self {
        OtlpIntake {
            sink,
            limits,
            series: Mutex::new(SeriesMemory::new(limits.max_series)),
            counters: Counters::default(),
            decodes: Arc::new(tokio::sync::Semaphore::new(
                limits.max_concurrent_decodes.max(1),
            )),
            reserved: AtomicU64::new(0),
        }
    }

    /// Bytes reserved now by the requests being decoded (see
    /// [`OtlpLimits::max_memory_bytes`]).
    pub fn reserved_bytes(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// A permit to decode one request, held while it is decoded and stored; `Err` (a busy
    /// refusal) when as many requests as the limit allows are being decoded.
    pub fn decode_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, OtlpError> {
        Arc::clone(&self.decodes)
            .try_acquire_owned()
            .map_err(|_| OtlpError::Busy {
                limit: self.limits.max_concurrent_decodes.max(1),
            })
    }

    /// Its limits.
    pub fn limits(&self) -> OtlpLimits {
        self.limits
    }

    /// What it has received so far.
    pub fn stats(&self) -> OtlpStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        OtlpStats {
            requests_accepted: get(&c.requests_accepted),
            spans: get(&c.spans),
            logs: get(&c.logs),
            metric_samples: get(&c.metric_samples),
            items_rejected: get(&c.items_rejected),
            records_over_limit: get(&c.records_over_limit),
            attributes_dropped: get(&c.attributes_dropped),
            bad_requests: get(&c.bad_requests),
            unsupported_media: get(&c.unsupported_media),
            too_large: get(&c.too_large),
            store_refusals: get(&c.store_refusals),
            memory_refusals: get(&c.memory_refusals),
            bytes_received: get(&c.bytes_received),
        }
    }

    /// Counts a refusal that happened before the body reached [`OtlpIntake::receive`] (a
    /// body over the limit while it was read) and returns its reply.
    pub fn refuse(&self, error: &OtlpError, content_type: Option<&str>) -> OtlpReply {
        let encoding = Encoding::from_content_type(content_type).unwrap_or(Encoding::Json);
        let c = &self.counters;
        let counter = match error {
            OtlpError::BadRequest { .. } => &c.bad_requests,
            OtlpError::UnsupportedMediaType { .. } => &c.unsupported_media,
            OtlpError::TooLarge { .. } | OtlpError::TooMuchMemory { .. } => &c.too_large,
            OtlpError::StoreFull { .. }
            | OtlpError::StoreUnavailable { .. }
            | OtlpError::Busy { .. } => &c.store_refusals,
            OtlpError::MemoryPressure { .. } => &c.memory_refusals,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let status = RpcStatus {
            code: error.rpc_code(),
            message: error.to_string(),
        };
        let body = match encoding {
            Encoding::Protobuf => status.encode_to_vec(),
            Encoding::Json => serde_json::json!({"code": status.code, "message": status.message})
                .to_string()
                .into_bytes(),
        };
        OtlpReply {
            status: error.http_status(),
            content_type: encoding.content_type(),
            body,
            retry_after: error.retryable().then_some(5),
        }
    }

    /// Handles one export request of `signal` with the request's `Content-Type` and
    /// `Content-Encoding` headers and its body as sent.
    pub fn receive(
        &self,
        signal: Signal,
        content_type: Option<&str>,
        content_encoding: Option<&str>,
        body: &[u8],
    ) -> OtlpReply {
        self.counters
            .bytes_received
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        match self.try_receive(signal, content_type, content_encoding, body) {
            Ok(reply) => reply,
            Err(e) => self.refuse(&e, content_type),
        }
    }

    fn try_receive(
        &self,
        signal: Signal,
        content_type: Option<&str>,
        content_encoding: Option<&str>,
        body: &[u8],
    ) -> Result<OtlpReply, OtlpError> {
        let encoding = Encoding::from_content_type(content_type)?;
        if body.len() > self.limits.max_body_bytes {
            return Err(OtlpError::TooLarge {
                what: "the body",
                limit: self.limits.max_body_bytes as u64,
            });
        }
        let sent = body.len() as u64;
        let gzip = self.is_gzip(content_encoding)?;
        // The body as sent, before anything else is spent on it (decompression is bounded by
        // `max_decoded_bytes` and the decode permits).
        let mut reservation = Reservation {
            intake: self,
            bytes: 0,
        };
        reservation.set(sent)?;
        let decoded = if gzip { Some(self.unzip(body)?) } else { None };
        let buffers = sent + decoded.as_ref().map_or(0, |d| d.capacity() as u64);
        let body = decoded.as_deref().unwrap_or(body);
        // What it decodes to, estimated before decoding it.
        let limit = self.limits.max_request_memory_bytes;
        let walked = estimate::estimate(signal, encoding, body, limit.saturating_sub(buffers))
            .map_err(bad)?;
        let estimate = buffers.saturating_add(walked.bytes);
        if estimate > limit {
            return Err(OtlpError::TooMuchMemory { estimate, limit });
        }
        // The decoded request, and the records converted from it (held to as many bytes).
        reservation.set(estimate.saturating_mul(2))?;
        let record_limits = RecordLimits {
            max_records: self.limits.max_records_per_request,
            max_attributes: self.limits.max_attributes_per_record,
            max_bytes: estimate,
        };
        let (batch, limited, response) = match signal {
            Signal::Traces => {
                let req: ExportTraceServiceRequest = decode(encoding, body)?;
                let (batch, limited) = convert::spans_within(&req, record_limits);
                drop(req);
                self.keep(&batch)?;
                let partial = partial(&batch).then(|| ExportTracePartialSuccess {
                    rejected_spans: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportTraceServiceResponse {
                    partial_success: partial,
                };
                (batch, limited, encode(encoding, &r))
            }
            Signal::Logs => {
                let req: ExportLogsServiceRequest = decode(encoding, body)?;
                let (batch, limited) = convert::logs_within(&req, super::now(), record_limits);
                drop(req);
                self.keep(&batch)?;
                let partial = partial(&batch).then(|| ExportLogsPartialSuccess {
                    rejected_log_records: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportLogsServiceResponse {
                    partial_success: partial,
                };
                (batch, limited, encode(encoding, &r))
            }
            Signal::Metrics => {
                let req: ExportMetricsServiceRequest = decode(encoding, body)?;
                let mut series = self
                    .series
                    .lock()
                    .map_err(|_| OtlpError::StoreUnavailable {
                        message: "the metric series memory's lock is poisoned".into(),
                    })?;
                let conversion = MetricConversion::run_within(&series, &req, record_limits);
                drop(req);
                self.keep(&conversion.batch)?;
                let MetricConversion {
                    batch,
                    updates,
                    limited,
                    ..
                } = conversion;
                series.apply(updates);
                drop(series);
                let partial = partial(&batch).then(|| ExportMetricsPartialSuccess {
                    rejected_data_points: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportMetricsServiceResponse {
                    partial_success: partial,
                };
                (batch, limited, encode(encoding, &r))
            }
        };
        drop(reservation);
        self.count_accepted(&batch, limited);
        Ok(OtlpReply {
            status: 200,
            content_type: encoding.content_type(),
            body: response,
            retry_after: None,
        })
    }

    fn count_accepted(&self, batch: &TelemetryBatch, limited: LimitCounts) {
        let c = &self.counters;
        c.requests_accepted.fetch_add(1, Ordering::Relaxed);
        c.spans
            .fetch_add(batch.spans.len() as u64, Ordering::Relaxed);
        c.logs.fetch_add(batch.logs.len() as u64, Ordering::Relaxed);
        c.metric_samples
            .fetch_add(batch.metrics.len() as u64, Ordering::Relaxed);
        c.items_rejected
            .fetch_add(batch.rejected, Ordering::Relaxed);
        c.records_over_limit
            .fetch_add(limited.rejected(), Ordering::Relaxed);
        c.attributes_dropped
            .fetch_add(limited.attributes_dropped, Ordering::Relaxed);
    }

    fn keep(&self, batch: &TelemetryBatch) -> Result<(), OtlpError> {
        self.sink.store(batch).map_err(OtlpError::from)
    }

    /// Whether the body is gzip-encoded (`false` for an identity body); `Err` for another
    /// encoding.
    fn is_gzip(&self, encoding: Option<&str>) -> Result<bool, OtlpError> {
        match encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("identity") => Ok(false),
            Some("gzip") => Ok(true),
            Some(other) => Err(OtlpError::UnsupportedMediaType {
                found: format!("Content-Encoding: {other}"),
            }),
        }
    }

    /// Undoes gzip, bounded by the decoded-size limit.
    fn unzip(&self, body: &[u8]) -> Result<Vec<u8>, OtlpError> {
        let limit = self.limits.max_decoded_bytes;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body)
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| bad(format!("bad gzip body: {e}")))?;
        if out.len() > limit {
            return Err(OtlpError::TooLarge {
                what: "the decompressed body",
                limit: limit as u64,
            });
        }
        Ok(out)
    }
}

/// Whether a batch calls for a partial-success answer: items rejected, or a warning (attributes
/// dropped).
fn partial(batch: &TelemetryBatch) -> bool {
    batch.rejected > 0 || batch.rejection.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::SinkError;
    use std::io::Write;

    /// Keeps batches in memory; refuses every batch while `full`; says it holds `held` bytes.
    #[derive(Default)]
    struct Memory {
        batches: Mutex<Vec<TelemetryBatch>>,
        full: std::sync::atomic::AtomicBool,
        held: AtomicU64,
    }

    impl TelemetrySink for Memory {
        fn store(&self, batch: &TelemetryBatch) -> Result<(), SinkError> {
            if self.full.load(Ordering::Relaxed) {
                return Err(SinkError::Full {
                    message: "full".into(),
                });
            }
            self.batches.lock().unwrap().push(batch.clone());
            Ok(())
        }

        fn held_bytes(&self) -> u64 {
            self.held.load(Ordering::Relaxed)
        }
    }

    const TRACE_JSON: &str = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"service.name","value":{"stringValue":"cart"}}]},
        "scopeSpans":[{"spans":[
          {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
           "name":"GET /cart","startTimeUnixNano":"1700000000000000000",
           "endTimeUnixNano":"1700000000250000000","status":{"code":2},
           "attributes":[{"key":"http.response.status_code","value":{"intValue":"503"}}]},
          {"traceId":"","spanId":"","name":"no ids","startTimeUnixNano":"1"}]}]}]}"#;

    fn intake() -> (Arc<Memory>, OtlpIntake) {
        let sink = Arc::new(Memory::default());
        let intake = OtlpIntake::new(sink.clone(), OtlpLimits::default());
        (sink, intake)
    }

    #[test]
    fn json_traces_are_kept_with_partial_success_for_bad_spans() {
        let (sink, intake) = intake();
        let r = intake.receive(
            Signal::Traces,
            Some("application/json"),
            None,
            TRACE_JSON.as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(reply["partialSuccess"]["rejectedSpans"], 1, "{reply}");
        let batches = sink.batches.lock().unwrap();
        let span = &batches[0].spans[0];
        assert_eq!(span.trace_id, "5b8efff798038103d269b633813fc60c");
        assert_eq!(span.component, "cart");
        assert_eq!(span.duration_us, 250_000);
        assert!(span.error);
        assert_eq!(intake.stats().spans, 1);
        assert_eq!(intake.stats().items_rejected, 1);
    }

    #[test]
    fn protobuf_and_gzip_round_trip() {
        let (sink, intake) = intake();
        let req: ExportTraceServiceRequest = serde_json::from_str(TRACE_JSON).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&req.encode_to_vec()).unwrap();
        let body = gz.finish().unwrap();
        let r = intake.receive(
            Signal::Traces,
            Some("application/x-protobuf"),
            Some("gzip"),
            &body,
        );
        assert_eq!(r.status, 200);
        let reply = ExportTraceServiceResponse::decode(r.body.as_slice()).unwrap();
        assert_eq!(reply.partial_success.unwrap().rejected_spans, 1);
        assert_eq!(sink.batches.lock().unwrap()[0].spans.len(), 1);
    }

    #[test]
    fn refusals_are_4xx_counted_and_keep_nothing() {
        let (sink, intake) = intake();
        let pb = Some("application/x-protobuf");
        assert_eq!(
            intake
                .receive(Signal::Logs, pb, None, b"\xff\xff\xff")
                .status,
            400
        );
        assert_eq!(
            intake
                .receive(
                    Signal::Logs,
                    Some("application/json"),
                    None,
                    b"{\"resourceLogs\": 3}"
                )
                .status,
            400
        );
        assert_eq!(
            intake
                .receive(Signal::Logs, Some("text/plain"), None, b"hi")
                .status,
            415
        );
        assert_eq!(
            intake.receive(Signal::Logs, pb, Some("br"), b"hi").status,
            415
        );
        assert_eq!(
            intake
                .receive(Signal::Logs, pb, Some("gzip"), b"not gzip")
                .status,
            400
        );
        // A gzip bomb: small as sent, over the limit once decompressed.
        let small = OtlpIntake::new(
            sink.clone(),
            OtlpLimits {
                max_decoded_bytes: 1000,
                ..OtlpLimits::default()
            },
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&[0u8; 100_000]).unwrap();
        let bomb = gz.finish().unwrap();
        let r = small.receive(Signal::Logs, pb, Some("gzip"), &bomb);
        assert_eq!(r.status, 413);
        let status = RpcStatus::decode(r.body.as_slice()).unwrap();
        assert_eq!(status.code, 8);
        let stats = intake.stats();
        assert_eq!(
            (
                stats.bad_requests,
                stats.unsupported_media,
                stats.requests_accepted
            ),
            (3, 2, 0)
        );
        assert_eq!(small.stats().too_large, 1);
        assert!(sink.batches.lock().unwrap().is_empty());
    }

    #[test]
    fn a_full_store_refuses_and_metric_memory_does_not_advance() {
        let (sink, intake) = intake();
        let metric = |t: u64, v: i64| {
            format!(
                r#"{{"resourceMetrics":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"cart"}}}}]}},
                "scopeMetrics":[{{"metrics":[{{"name":"requests","sum":{{"isMonotonic":true,"aggregationTemporality":2,
                "dataPoints":[{{"startTimeUnixNano":"1700000000000000000","timeUnixNano":"{t}","asInt":"{v}"}}]}}}}]}}]}}]}}"#
            )
        };
        let json = Some("application/json");
        let first = metric(1_700_000_010_000_000_000, 100);
        assert_eq!(
            intake
                .receive(Signal::Metrics, json, None, first.as_bytes())
                .status,
            200
        );
        sink.full.store(true, Ordering::Relaxed);
        let second = metric(1_700_000_020_000_000_000, 300);
        let r = intake.receive(Signal::Metrics, json, None, second.as_bytes());
        assert_eq!(r.status, 507);
        assert_eq!(r.retry_after, None);
        sink.full.store(false, Ordering::Relaxed);
        // Sent again, the rate is against the point that was stored.
        assert_eq!(
            intake
                .receive(Signal::Metrics, json, None, second.as_bytes())
                .status,
            200
        );
        let batches = sink.batches.lock().unwrap();
        assert_eq!(batches[0].metrics[0].value, 10.0);
        assert_eq!(batches[1].metrics[0].value, 20.0);
        assert_eq!(intake.stats().store_refusals, 1);
    }

    #[test]
    fn decodes_past_the_limit_are_refused_with_retry_after_until_one_ends() {
        let intake = OtlpIntake::new(
            Arc::new(Memory::default()),
            OtlpLimits {
                max_concurrent_decodes: 1,
                ..OtlpLimits::default()
            },
        );
        let held = intake.decode_permit().unwrap();
        let busy = intake.decode_permit().unwrap_err();
        assert_eq!(busy.http_status(), 503);
        assert!(busy.retryable());
        let reply = intake.refuse(&busy, Some("application/json"));
        assert_eq!((reply.status, reply.retry_after), (503, Some(5)));
        assert_eq!(intake.stats().store_refusals, 1);
        drop(held);
        assert!(intake.decode_permit().is_ok());
    }

    fn gzip(body: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(body).unwrap();
        gz.finish().unwrap()
    }

    fn status_message(reply: &OtlpReply) -> RpcStatus {
        RpcStatus::decode(reply.body.as_slice()).unwrap()
    }

    #[test]
    fn a_small_gzip_body_that_decodes_to_gigabytes_is_refused_before_decoding() {
        // Issue 45: `0a 00` (an empty ResourceSpans) repeated to 64 MiB, about 65 KB gzipped,
        // within both body limits; decoded it took about 3 GB.
        let raw = b"\x0a\x00".repeat(32 << 20);
        let body = gzip(&raw);
        let full = estimate::estimate(Signal::Traces, Encoding::Protobuf, &raw, u64::MAX).unwrap();
        eprintln!(
            "amplification body: {} B gzipped, {} B decompressed, {} messages, estimated at {} B decoded",
            body.len(),
            raw.len(),
            full.messages,
            full.bytes
        );
        assert!(full.bytes > 3_000_000_000);
        drop(raw);
        let (sink, intake) = intake();
        let pb = Some("application/x-protobuf");
        let r = intake.receive(Signal::Traces, pb, Some("gzip"), &body);
        assert_eq!(r.status, 413);
        assert_eq!(r.retry_after, None);
        let status = status_message(&r);
        assert_eq!(status.code, 8);
        assert!(
            status.message.contains("bytes of memory"),
            "{}",
            status.message
        );
        // The same in JSON: empty objects.
        let mut json = b"{\"resourceSpans\":[".to_vec();
        json.extend(b"{},".repeat(20 << 20));
        json.extend(b"{}]}");
        let r = intake.receive(
            Signal::Traces,
            Some("application/json"),
            Some("gzip"),
            &gzip(&json),
        );
        assert_eq!(r.status, 413);
        let stats = intake.stats();
        assert_eq!((stats.too_large, stats.requests_accepted), (2, 0));
        assert!(sink.batches.lock().unwrap().is_empty());
        assert_eq!(intake.reserved_bytes(), 0);
        // A normal request still passes, gzipped or not.
        let req: ExportTraceServiceRequest = serde_json::from_str(TRACE_JSON).unwrap();
        let r = intake.receive(
            Signal::Traces,
            pb,
            Some("gzip"),
            &gzip(&req.encode_to_vec()),
        );
        assert_eq!(r.status, 200);
        assert_eq!(intake.reserved_bytes(), 0);
    }

    fn spans_json(spans: usize, attributes: usize) -> String {
        let attrs: Vec<String> = (0..attributes)
            .map(|a| format!(r#"{{"key":"a{a}","value":{{"stringValue":"v{a}"}}}}"#))
            .collect();
        let spans: Vec<String> = (0..spans)
            .map(|i| {
                format!(
                    r#"{{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b17{i}",
                    "name":"s{i}","startTimeUnixNano":"1700000000000000000","attributes":[{}]}}"#,
                    attrs.join(",")
                )
            })
            .collect();
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
            spans.join(",")
        )
    }

    #[test]
    fn records_past_the_limit_are_rejected_and_attributes_dropped_in_the_partial_success() {
        let sink = Arc::new(Memory::default());
        let intake = OtlpIntake::new(
            sink.clone(),
            OtlpLimits {
                max_records_per_request: 2,
                max_attributes_per_record: 3,
                ..OtlpLimits::default()
            },
        );
        let json = Some("application/json");
        let r = intake.receive(Signal::Traces, json, None, spans_json(4, 5).as_bytes());
        assert_eq!(r.status, 200);
        let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(reply["partialSuccess"]["rejectedSpans"], 2, "{reply}");
        let message = reply["partialSuccess"]["errorMessage"].as_str().unwrap();
        assert!(
            message.contains("2 spans past the first 2")
                && message.contains("max_records_per_request")
                && message.contains("4 attributes dropped from 2 records")
                && message.contains("max_attributes_per_record"),
            "{message}"
        );
        {
            let batches = sink.batches.lock().unwrap();
            let spans = &batches[0].spans;
            assert_eq!(spans.len(), 2);
            assert!(spans.iter().all(|s| s.attributes.len() == 3));
            assert!(
                spans[0].attributes.contains_key("a2") && !spans[0].attributes.contains_key("a3")
            );
        }
        let stats = intake.stats();
        assert_eq!(
            (
                stats.spans,
                stats.items_rejected,
                stats.records_over_limit,
                stats.attributes_dropped
            ),
            (2, 2, 2, 4)
        );
        // Attributes dropped alone: a warning (nothing rejected, a message).
        let r = intake.receive(Signal::Traces, json, None, spans_json(1, 5).as_bytes());
        let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            reply["partialSuccess"]["rejectedSpans"]
                .as_i64()
                .unwrap_or(0),
            0
        );
        assert!(
            reply["partialSuccess"]["errorMessage"]
                .as_str()
                .unwrap()
                .contains("2 attributes dropped from 1 records")
        );
        // Logs and metric points count as records too.
        let logs = r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a"}},
            {"body":{"stringValue":"b"}},{"body":{"stringValue":"c"}}]}]}]}"#;
        let r = intake.receive(Signal::Logs, json, None, logs.as_bytes());
        let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(reply["partialSuccess"]["rejectedLogRecords"], 1, "{reply}");
        let points: Vec<String> = (1..=3)
            .map(|i| format!(r#"{{"timeUnixNano":"170000000000000000{i}","asDouble":{i}}}"#))
            .collect();
        let metrics = format!(
            r#"{{"resourceMetrics":[{{"scopeMetrics":[{{"metrics":[{{"name":"q","gauge":{{"dataPoints":[{}]}}}}]}}]}}]}}"#,
            points.join(",")
        );
        let r = intake.receive(Signal::Metrics, json, None, metrics.as_bytes());
        let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(reply["partialSuccess"]["rejectedDataPoints"], 1, "{reply}");
        assert_eq!(intake.stats().records_over_limit, 4);
    }

    #[test]
    fn a_request_cannot_convert_to_more_than_its_memory_budget() {
        // One resource with a 100 KB service name and 2000 spans of 40 bytes: each converted
        // span carries a copy of the name, 200 MB for a 180 KB body.
        use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
        use opentelemetry_proto::tonic::resource::v1::Resource;
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(any_value::Value::StringValue("x".repeat(100_000))),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: (0..2000u64)
                        .map(|i| Span {
                            trace_id: vec![1; 16],
                            span_id: i.to_be_bytes().to_vec(),
                            start_time_unix_nano: 1,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let (sink, intake) = intake();
        let r = intake.receive(
            Signal::Traces,
            Some("application/x-protobuf"),
            None,
            &req.encode_to_vec(),
        );
        assert_eq!(r.status, 200);
        let partial = ExportTraceServiceResponse::decode(r.body.as_slice())
            .unwrap()
            .partial_success
            .unwrap();
        assert!(partial.rejected_spans > 1900, "{partial:?}");
        assert!(partial.error_message.contains("max_request_memory_bytes"));
        let kept = sink.batches.lock().unwrap()[0].spans.len();
        assert_eq!(kept as i64 + partial.rejected_spans, 2000);
        assert_eq!(
            intake.stats().records_over_limit,
            partial.rejected_spans as u64
        );
    }

    #[test]
    fn memory_pressure_refuses_with_retry_after_before_decoding() {
        let limits = OtlpLimits {
            max_memory_bytes: 10 << 20,
            ..OtlpLimits::default()
        };
        let sink = Arc::new(Memory::default());
        let intake = OtlpIntake::new(sink.clone(), limits);
        let json = Some("application/json");
        // The store holds nearly all of it.
        sink.held.store((10 << 20) - 1000, Ordering::Relaxed);
        let r = intake.receive(Signal::Traces, json, None, TRACE_JSON.as_bytes());
        assert_eq!((r.status, r.retry_after), (503, Some(5)));
        let status: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(status["code"], 14);
        assert!(
            status["message"].as_str().unwrap().contains("memory limit"),
            "{status}"
        );
        assert!(sink.batches.lock().unwrap().is_empty());
        sink.held.store(0, Ordering::Relaxed);
        assert_eq!(
            intake
                .receive(Signal::Traces, json, None, TRACE_JSON.as_bytes())
                .status,
            200
        );
        // Requests being decoded hold it.
        let mut other = Reservation {
            intake: &intake,
            bytes: 0,
        };
        other.set((10 << 20) - 1000).unwrap();
        let r = intake.receive(Signal::Traces, json, None, TRACE_JSON.as_bytes());
        assert_eq!(r.status, 503);
        drop(other);
        assert_eq!(intake.reserved_bytes(), 0);
        assert_eq!(
            intake
                .receive(Signal::Traces, json, None, TRACE_JSON.as_bytes())
                .status,
            200
        );
        let stats = intake.stats();
        assert_eq!(
            (
                stats.memory_refusals,
                stats.store_refusals,
                stats.requests_accepted
            ),
            (2, 0, 2)
        );
        assert_eq!(intake.reserved_bytes(), 0);
        // A request that could never fit is 413, not a retry forever.
        let tiny = OtlpIntake::new(
            Arc::new(Memory::default()),
            OtlpLimits {
                max_memory_bytes: 1000,
                ..OtlpLimits::default()
            },
        );
        let r = tiny.receive(Signal::Traces, json, None, TRACE_JSON.as_bytes());
        assert_eq!(r.status, 413);
        assert_eq!(tiny.stats().too_large, 1);
    }
}
