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

use super::convert::{self, MetricConversion, SeriesMemory, TelemetryBatch};
use super::{OtlpError, Signal, TelemetrySink};

/// How much one intake accepts.
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
}

impl Default for OtlpLimits {
    fn default() -> Self {
        OtlpLimits {
            max_body_bytes: 16 << 20,
            max_decoded_bytes: 64 << 20,
            max_series: 100_000,
            max_concurrent_decodes: 2,
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
    /// Items of accepted requests that could not be used (reported as partial success).
    pub items_rejected: u64,
    /// Requests refused as malformed (400).
    pub bad_requests: u64,
    /// Requests refused for their content type or encoding (415).
    pub unsupported_media: u64,
    /// Requests refused as too large (413).
    pub too_large: u64,
    /// Requests refused because the store was full (507) or failing (503), or because as many
    /// requests as allowed were being decoded (503).
    pub store_refusals: u64,
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
    bad_requests: AtomicU64,
    unsupported_media: AtomicU64,
    too_large: AtomicU64,
    store_refusals: AtomicU64,
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
        }
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
            bad_requests: get(&c.bad_requests),
            unsupported_media: get(&c.unsupported_media),
            too_large: get(&c.too_large),
            store_refusals: get(&c.store_refusals),
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
            OtlpError::TooLarge { .. } => &c.too_large,
            OtlpError::StoreFull { .. }
            | OtlpError::StoreUnavailable { .. }
            | OtlpError::Busy { .. } => &c.store_refusals,
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
        let decoded = self.unzip(content_encoding, body)?;
        let body = decoded.as_deref().unwrap_or(body);
        let (batch, response) = match signal {
            Signal::Traces => {
                let req: ExportTraceServiceRequest = decode(encoding, body)?;
                let batch = convert::spans(&req);
                self.keep(&batch)?;
                let partial = (batch.rejected > 0).then(|| ExportTracePartialSuccess {
                    rejected_spans: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportTraceServiceResponse {
                    partial_success: partial,
                };
                (batch, encode(encoding, &r))
            }
            Signal::Logs => {
                let req: ExportLogsServiceRequest = decode(encoding, body)?;
                let batch = convert::logs(&req, super::now());
                self.keep(&batch)?;
                let partial = (batch.rejected > 0).then(|| ExportLogsPartialSuccess {
                    rejected_log_records: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportLogsServiceResponse {
                    partial_success: partial,
                };
                (batch, encode(encoding, &r))
            }
            Signal::Metrics => {
                let req: ExportMetricsServiceRequest = decode(encoding, body)?;
                let mut series = self
                    .series
                    .lock()
                    .map_err(|_| OtlpError::StoreUnavailable {
                        message: "the metric series memory's lock is poisoned".into(),
                    })?;
                let conversion = MetricConversion::run(&series, &req);
                self.keep(&conversion.batch)?;
                let MetricConversion { batch, updates, .. } = conversion;
                series.apply(updates);
                drop(series);
                let partial = (batch.rejected > 0).then(|| ExportMetricsPartialSuccess {
                    rejected_data_points: batch.rejected as i64,
                    error_message: batch.rejection.clone().unwrap_or_default(),
                });
                let r = ExportMetricsServiceResponse {
                    partial_success: partial,
                };
                (batch, encode(encoding, &r))
            }
        };
        let c = &self.counters;
        c.requests_accepted.fetch_add(1, Ordering::Relaxed);
        c.spans
            .fetch_add(batch.spans.len() as u64, Ordering::Relaxed);
        c.logs.fetch_add(batch.logs.len() as u64, Ordering::Relaxed);
        c.metric_samples
            .fetch_add(batch.metrics.len() as u64, Ordering::Relaxed);
        c.items_rejected
            .fetch_add(batch.rejected, Ordering::Relaxed);
        Ok(OtlpReply {
            status: 200,
            content_type: encoding.content_type(),
            body: response,
            retry_after: None,
        })
    }

    fn keep(&self, batch: &TelemetryBatch) -> Result<(), OtlpError> {
        self.sink.store(batch).map_err(OtlpError::from)
    }

    /// Undoes gzip (bounded by the decoded-size limit); `None` for an identity body.
    fn unzip(&self, encoding: Option<&str>, body: &[u8]) -> Result<Option<Vec<u8>>, OtlpError> {
        match encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("identity") => Ok(None),
            Some("gzip") => {
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
                Ok(Some(out))
            }
            Some(other) => Err(OtlpError::UnsupportedMediaType {
                found: format!("Content-Encoding: {other}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::SinkError;
    use std::io::Write;

    /// Keeps batches in memory; refuses every batch while `full`.
    #[derive(Default)]
    struct Memory {
        batches: Mutex<Vec<TelemetryBatch>>,
        full: std::sync::atomic::AtomicBool,
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
}
