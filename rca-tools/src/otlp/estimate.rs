//! What an export request will take in memory once decoded, estimated from its bytes before
//! it is decoded and without allocating per element: a small protobuf body of empty messages
//! (`0a 00` repeated) or a JSON body of empty objects decodes to tens of times its size, so the
//! body limits alone do not bound decoding memory.
//!
//! - **Protobuf**: the wire format is walked (tags, varints, length-delimited fields), recursing
//!   into the message fields of the OTLP request types (resources, scopes, spans, events, links,
//!   log records, metrics, data points, exemplars, attributes and their array and key-value-list
//!   values). Each element of a repeated message field costs twice the in-memory size of its
//!   decoded struct (`size_of` of the `opentelemetry-proto` type: the vector slot, doubled for the
//!   capacity a growing vector may leave unused), the first of each vector four times (a vector's
//!   first allocation holds four); a repeated number costs 16 bytes (8 doubled), the first 32; a
//!   string or byte field costs its length (copied out of the body). Unknown fields cost nothing
//!   (prost skips them). A body that is not valid wire format is refused as prost would refuse it.
//! - **JSON**: one pass over the text tracks which message each object becomes from the field
//!   names (the OTLP JSON mapping), with the same costs per element and every string at its
//!   length, plus what serde buffers. A message read through a flattened field (an `AnyValue`, a
//!   metric, a number data point, an exemplar) first collects the entries it does not name into
//!   serde's generic content tree (64 bytes an entry, 32 an array element, doubled for growth,
//!   the first of each vector four times, plus the strings), and a flattened message inside one
//!   collects a copy of its own; each collection lives until its message is built. The estimate
//!   adds the largest sum of collections along one path of nested flattened messages (all of
//!   them alive at once), not all of them. And the longest string once (the parser's scratch
//!   buffer). Text that is not JSON is refused as serde would refuse it.
//!
//! The buffers holding the body itself are the caller's to add.

use std::mem::size_of;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, EntityRef, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::logs::v1 as logs;
use opentelemetry_proto::tonic::metrics::v1 as metrics;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1 as trace;

use super::Signal;
use super::intake::Encoding;

/// The deepest nesting walked. prost stops at 100 nested messages and serde_json at 128 nested
/// arrays and objects, so nothing deeper decodes; refusing it here bounds the walk's own stack.
const MAX_DEPTH: u32 = 128;

/// The messages of the OTLP requests whose fields the estimate follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TraceRequest,
    LogsRequest,
    MetricsRequest,
    ResourceSpans,
    ResourceLogs,
    ResourceMetrics,
    Resource,
    EntityRef,
    ScopeSpans,
    ScopeLogs,
    ScopeMetrics,
    Scope,
    Span,
    Event,
    Link,
    Status,
    LogRecord,
    Metric,
    Gauge,
    Sum,
    Histogram,
    ExpHistogram,
    Summary,
    NumberPoint,
    HistogramPoint,
    ExpHistogramPoint,
    Buckets,
    SummaryPoint,
    Quantile,
    Exemplar,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A message.
    Msg(Kind),
    /// 64-bit numbers (`fixed64`, `double`), packed or not.
    Fixed64,
    /// Varint 64-bit numbers (`uint64`), packed or not.
    Varint64,
    /// Strings (a repeated string field).
    Str,
}

/// A field the estimate follows: its protobuf number, its JSON name, what it holds, whether it
/// is repeated, and whether serde reads it through a flattened field (buffering it).
#[derive(Debug, Clone, Copy)]
struct Field {
    num: u32,
    json: &'static str,
    shape: Shape,
    repeated: bool,
    flat: bool,
}

const fn rep(num: u32, json: &'static str, shape: Shape) -> Field {
    Field {
        num,
        json,
        shape,
        repeated: true,
        flat: false,
    }
}

const fn one(num: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        num,
        json,
        shape: Shape::Msg(kind),
        repeated: false,
        flat: false,
    }
}

const fn flat(num: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        num,
        json,
        shape: Shape::Msg(kind),
        repeated: false,
        flat: true,
    }
}

use Kind as K;
use Shape::{Fixed64, Msg, Str, Varint64};

const RESOURCE: Field = one(1, "resource", K::Resource);
const SCOPE: Field = one(1, "scope", K::Scope);

impl Kind {
    /// The message fields (and repeated number and string fields) of the message.
    fn fields(self) -> &'static [Field] {
        match self {
            K::TraceRequest => const { &[rep(1, "resourceSpans", Msg(K::ResourceSpans))] },
            K::LogsRequest => const { &[rep(1, "resourceLogs", Msg(K::ResourceLogs))] },
            K::MetricsRequest => const { &[rep(1, "resourceMetrics", Msg(K::ResourceMetrics))] },
            K::ResourceSpans => const { &[RESOURCE, rep(2, "scopeSpans", Msg(K::ScopeSpans))] },
            K::ResourceLogs => const { &[RESOURCE, rep(2, "scopeLogs", Msg(K::ScopeLogs))] },
            K::ResourceMetrics => {
                const { &[RESOURCE, rep(2, "scopeMetrics", Msg(K::ScopeMetrics))] }
            }
            K::Resource => {
                const {
                    &[
                        rep(1, "attributes", Msg(K::KeyValue)),
                        rep(3, "entityRefs", Msg(K::EntityRef)),
                    ]
                }
            }
            K::EntityRef => const { &[rep(3, "idKeys", Str), rep(4, "descriptionKeys", Str)] },
            K::ScopeSpans => const { &[SCOPE, rep(2, "spans", Msg(K::Span))] },
            K::ScopeLogs => const { &[SCOPE, rep(2, "logRecords", Msg(K::LogRecord))] },
            K::ScopeMetrics => const { &[SCOPE, rep(2, "metrics", Msg(K::Metric))] },
            K::Scope => const { &[rep(3, "attributes", Msg(K::KeyValue))] },
            K::Span => {
                const {
                    &[
                        rep(9, "attributes", Msg(K::KeyValue)),
                        rep(11, "events", Msg(K::Event)),
                        rep(13, "links", Msg(K::Link)),
                        one(15, "status", K::Status),
                    ]
                }
            }
            K::Event => const { &[rep(3, "attributes", Msg(K::KeyValue))] },
            K::Link => const { &[rep(4, "attributes", Msg(K::KeyValue))] },
            K::Status | K::Quantile => const { &[] },
            K::LogRecord => {
                const {
                    &[
                        one(5, "body", K::AnyValue),
                        rep(6, "attributes", Msg(K::KeyValue)),
                    ]
                }
            }
            K::Metric => {
                const {
                    &[
                        rep(12, "metadata", Msg(K::KeyValue)),
                        flat(5, "gauge", K::Gauge),
                        flat(7, "sum", K::Sum),
                        flat(9, "histogram", K::Histogram),
                        flat(10, "exponentialHistogram", K::ExpHistogram),
                        flat(11, "summary", K::Summary),
                    ]
                }
            }
            K::Gauge | K::Sum => const { &[rep(1, "dataPoints", Msg(K::NumberPoint))] },
            K::Histogram => const { &[rep(1, "dataPoints", Msg(K::HistogramPoint))] },
            K::ExpHistogram => const { &[rep(1, "dataPoints", Msg(K::ExpHistogramPoint))] },
            K::Summary => const { &[rep(1, "dataPoints", Msg(K::SummaryPoint))] },
            K::NumberPoint => {
                const {
                    &[
                        rep(7, "attributes", Msg(K::KeyValue)),
                        rep(5, "exemplars", Msg(K::Exemplar)),
                    ]
                }
            }
            K::HistogramPoint => {
                const {
                    &[
                        rep(9, "attributes", Msg(K::KeyValue)),
                        rep(8, "exemplars", Msg(K::Exemplar)),
                        rep(6, "bucketCounts", Fixed64),
                        rep(7, "explicitBounds", Fixed64),
                    ]
                }
            }
            K::ExpHistogramPoint => {
                const {
                    &[
                        rep(1, "attributes", Msg(K::KeyValue)),
                        rep(11, "exemplars", Msg(K::Exemplar)),
                        one(8, "positive", K::Buckets),
                        one(9, "negative", K::Buckets),
                    ]
                }
            }
            K::Buckets => const { &[rep(2, "bucketCounts", Varint64)] },
            K::SummaryPoint => {
                const {
                    &[
                        rep(7, "attributes", Msg(K::KeyValue)),
                        rep(6, "quantileValues", Msg(K::Quantile)),
                    ]
                }
            }
            K::Exemplar => const { &[rep(7, "filteredAttributes", Msg(K::KeyValue))] },
            K::KeyValue => const { &[one(2, "value", K::AnyValue)] },
            K::AnyValue => {
                const {
                    &[
                        flat(5, "arrayValue", K::ArrayValue),
                        flat(6, "kvlistValue", K::KeyValueList),
                    ]
                }
            }
            K::ArrayValue => const { &[rep(1, "values", Msg(K::AnyValue))] },
            K::KeyValueList => const { &[rep(1, "values", Msg(K::KeyValue))] },
        }
    }

    /// The in-memory size of the decoded struct.
    fn size(self) -> u64 {
        (match self {
            K::TraceRequest => size_of::<ExportTraceServiceRequest>(),
            K::LogsRequest => size_of::<ExportLogsServiceRequest>(),
            K::MetricsRequest => size_of::<ExportMetricsServiceRequest>(),
            K::ResourceSpans => size_of::<trace::ResourceSpans>(),
            K::ResourceLogs => size_of::<logs::ResourceLogs>(),
            K::ResourceMetrics => size_of::<metrics::ResourceMetrics>(),
            K::Resource => size_of::<Resource>(),
            K::EntityRef => size_of::<EntityRef>(),
            K::ScopeSpans => size_of::<trace::ScopeSpans>(),
            K::ScopeLogs => size_of::<logs::ScopeLogs>(),
            K::ScopeMetrics => size_of::<metrics::ScopeMetrics>(),
            K::Scope => size_of::<InstrumentationScope>(),
            K::Span => size_of::<trace::Span>(),
            K::Event => size_of::<trace::span::Event>(),
            K::Link => size_of::<trace::span::Link>(),
            K::Status => size_of::<trace::Status>(),
            K::LogRecord => size_of::<logs::LogRecord>(),
            K::Metric => size_of::<metrics::Metric>(),
            K::Gauge => size_of::<metrics::Gauge>(),
            K::Sum => size_of::<metrics::Sum>(),
            K::Histogram => size_of::<metrics::Histogram>(),
            K::ExpHistogram => size_of::<metrics::ExponentialHistogram>(),
            K::Summary => size_of::<metrics::Summary>(),
            K::NumberPoint => size_of::<metrics::NumberDataPoint>(),
            K::HistogramPoint => size_of::<metrics::HistogramDataPoint>(),
            K::ExpHistogramPoint => size_of::<metrics::ExponentialHistogramDataPoint>(),
            K::Buckets => size_of::<metrics::exponential_histogram_data_point::Buckets>(),
            K::SummaryPoint => size_of::<metrics::SummaryDataPoint>(),
            K::Quantile => size_of::<metrics::summary_data_point::ValueAtQuantile>(),
            K::Exemplar => size_of::<metrics::Exemplar>(),
            K::KeyValue => size_of::<KeyValue>(),
            K::AnyValue => size_of::<AnyValue>(),
            K::ArrayValue => size_of::<ArrayValue>(),
            K::KeyValueList => size_of::<KeyValueList>(),
        }) as u64
    }

    /// Whether serde reads the message through a flattened field, so that every field it does
    /// not name itself (and the flattened ones) is buffered first.
    fn flattens(self) -> bool {
        matches!(self, K::Metric | K::NumberPoint | K::Exemplar | K::AnyValue)
    }

    /// The field numbered `num`, and its index among the message's fields.
    fn field(self, num: u32) -> Option<(usize, Field)> {
        self.fields()
            .iter()
            .enumerate()
            .find(|(_, f)| f.num == num)
            .map(|(i, f)| (i, *f))
    }

    fn json_field(self, name: &[u8]) -> Option<Field> {
        self.fields()
            .iter()
            .find(|f| f.json.as_bytes() == name)
            .copied()
    }

    fn is_record(self) -> bool {
        matches!(
            self,
            K::Span
                | K::LogRecord
                | K::NumberPoint
                | K::HistogramPoint
                | K::ExpHistogramPoint
                | K::SummaryPoint
        )
    }
}

/// The estimate for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    /// Bytes the decoded request is estimated to take, besides the body's own buffer.
    pub bytes: u64,
    /// Messages found (of the kinds followed), the request included.
    pub messages: u64,
    /// Records found: spans, log records, metric data points.
    pub records: u64,
    /// Attributes found (key-value pairs, at any depth).
    pub attributes: u64,
}

impl Estimate {
    fn message(&mut self, kind: Kind) {
        self.messages += 1;
        if kind.is_record() {
            self.records += 1;
        }
        if kind == K::KeyValue {
            self.attributes += 1;
        }
    }

    /// The cost of one element of a repeated field holding `shape`: its slot, doubled for the
    /// room a growing vector leaves, and four times for the first of its vector (the first
    /// allocation holds four).
    fn slot(&mut self, shape: Shape, first: bool) {
        let size = match shape {
            Msg(kind) => kind.size(),
            Fixed64 | Varint64 => 8,
            Str => size_of::<String>() as u64,
        };
        self.bytes += size * if first { 4 } else { 2 };
    }
}

/// Estimates what `body` (decompressed) decodes to as an export request of `signal`. The walk
/// stops once the estimate passes `stop_above` (it is then at least that much). `Err` is why the
/// body cannot be decoded.
pub(crate) fn estimate(
    signal: Signal,
    encoding: Encoding,
    body: &[u8],
    stop_above: u64,
) -> Result<Estimate, String> {
    let kind = match signal {
        Signal::Traces => K::TraceRequest,
        Signal::Logs => K::LogsRequest,
        Signal::Metrics => K::MetricsRequest,
    };
    match encoding {
        Encoding::Protobuf => {
            let mut walk = Wire {
                est: Estimate::default(),
                stop_above,
            };
            walk.est.message(kind);
            match walk.message(body, kind, 0) {
                Ok(()) | Err(WireStop::Over) => Ok(walk.est),
                Err(WireStop::Bad(why)) => Err(why),
            }
        }
        Encoding::Json => {
            let mut scan = Json {
                text: body,
                at: 0,
                est: Estimate::default(),
                stop_above,
                longest_string: 0,
                peak: 0,
            };
            let top = Ctx {
                shape: Some(Msg(kind)),
                repeated: false,
                element: None,
            };
            let done = scan.value(top, 0).and_then(|_| {
                scan.skip_ws();
                if scan.at < scan.text.len() {
                    return Err(JsonStop::Bad(scan.bad("trailing characters")));
                }
                Ok(())
            });
            match done {
                Ok(()) => {
                    scan.est.bytes += scan.longest_string + scan.peak;
                    Ok(scan.est)
                }
                Err(JsonStop::Over) => {
                    scan.est.bytes += scan.peak;
                    Ok(scan.est)
                }
                Err(JsonStop::Bad(why)) => Err(why),
            }
        }
    }
}

enum WireStop {
    Over,
    Bad(String),
}

struct Wire {
    est: Estimate,
    stop_above: u64,
}

fn varint(buf: &mut &[u8]) -> Result<u64, WireStop> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some((&b, rest)) = buf.split_first() else {
            return Err(WireStop::Bad("truncated varint".into()));
        };
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err(WireStop::Bad("invalid varint".into()))
}

fn take<'a>(buf: &mut &'a [u8], n: u64) -> Result<&'a [u8], WireStop> {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > buf.len() {
        return Err(WireStop::Bad(
            "a field runs past the end of its message".into(),
        ));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

fn key(buf: &mut &[u8]) -> Result<(u32, u8), WireStop> {
    let key = varint(buf)?;
    let num = key >> 3;
    if num == 0 || num > (1 << 29) - 1 {
        return Err(WireStop::Bad(format!("invalid field number {num}")));
    }
    Ok((num as u32, (key & 7) as u8))
}

impl Wire {
    fn message(&mut self, mut buf: &[u8], kind: Kind, depth: u32) -> Result<(), WireStop> {
        if depth > MAX_DEPTH {
            return Err(WireStop::Bad(format!(
                "messages nested more than {MAX_DEPTH} deep"
            )));
        }
        // The repeated fields (by index) that have had an element: each is one vector.
        let mut seen = 0u64;
        while !buf.is_empty() {
            let (num, wire) = key(&mut buf)?;
            let (first, field) = match kind.field(num) {
                Some((i, f)) => {
                    let first = seen & (1 << i) == 0;
                    seen |= 1 << i;
                    (first, Some(f))
                }
                None => (false, None),
            };
            if let Some(Field { shape: Msg(_), .. }) = field
                && wire != 2
            {
                return Err(WireStop::Bad(format!(
                    "field {num} of {kind:?} is a message but has wire type {wire}"
                )));
            }
            let number = field.filter(|f| f.repeated && matches!(f.shape, Fixed64 | Varint64));
            match wire {
                0 => {
                    varint(&mut buf)?;
                    if let Some(f) = number {
                        self.est.slot(f.shape, first);
                    }
                }
                1 => {
                    take(&mut buf, 8)?;
                    if let Some(f) = number {
                        self.est.slot(f.shape, first);
                    }
                }
                5 => {
                    take(&mut buf, 4)?;
                }
                2 => {
                    let len = varint(&mut buf)?;
                    let payload = take(&mut buf, len)?;
                    match field {
                        Some(Field {
                            shape: Msg(child),
                            repeated,
                            ..
                        }) => {
                            self.est.message(child);
                            if repeated {
                                self.est.slot(Msg(child), first);
                            }
                            self.message(payload, child, depth + 1)?;
                        }
                        Some(Field { shape: Fixed64, .. }) => {
                            let n = payload.len().div_ceil(8) as u64;
                            self.est.bytes += 16 * n + if first { 16 } else { 0 };
                        }
                        Some(Field {
                            shape: Varint64, ..
                        }) => {
                            let n = payload.iter().filter(|&&b| b < 0x80).count() as u64;
                            self.est.bytes += 16 * n + if first { 16 } else { 0 };
                        }
                        Some(Field { shape: Str, .. }) => {
                            self.est.slot(Str, first);
                            self.est.bytes += len;
                        }
                        // A string or bytes field: copied out of the body.
                        None => self.est.bytes += len,
                    }
                }
                3 => skip_group(&mut buf, num, depth + 1)?,
                4 => return Err(WireStop::Bad("unexpected end-group tag".into())),
                _ => return Err(WireStop::Bad(format!("invalid wire type {wire}"))),
            }
            if self.est.bytes > self.stop_above {
                return Err(WireStop::Over);
            }
        }
        Ok(())
    }
}

/// Skips a (deprecated) group up to its end tag, as prost skips an unknown one.
fn skip_group(buf: &mut &[u8], num: u32, depth: u32) -> Result<(), WireStop> {
    if depth > MAX_DEPTH {
        return Err(WireStop::Bad(format!(
            "groups nested more than {MAX_DEPTH} deep"
        )));
    }
    loop {
        if buf.is_empty() {
            return Err(WireStop::Bad("unterminated group".into()));
        }
        let (n, wire) = key(buf)?;
        match wire {
            0 => {
                varint(buf)?;
            }
            1 => {
                take(buf, 8)?;
            }
            2 => {
                let len = varint(buf)?;
                take(buf, len)?;
            }
            5 => {
                take(buf, 4)?;
            }
            3 => skip_group(buf, n, depth + 1)?,
            4 if n == num => return Ok(()),
            _ => return Err(WireStop::Bad("malformed group".into())),
        }
    }
}

enum JsonStop {
    Over,
    Bad(String),
}

/// Where a JSON value sits.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    /// What the field it is the value of holds (`None`: a field the estimate does not follow).
    shape: Option<Shape>,
    /// Whether that field is repeated (the value is an array of elements).
    repeated: bool,
    /// Whether the value is an element of a repeated field: `Some(true)` for the first of its
    /// array.
    element: Option<bool>,
}

/// What serde's content tree costs for one JSON value: a copy of it (`content`), and the most
/// that the flattened objects inside it hold buffered at once (`peak`).
#[derive(Debug, Clone, Copy, Default)]
struct Buffered {
    content: u64,
    peak: u64,
}

/// A slot of serde's content tree: an object entry (two 32-byte values) or an array element.
const CONTENT_ENTRY_BYTES: u64 = 64;
const CONTENT_ELEMENT_BYTES: u64 = 32;

/// A content slot, doubled for a growing vector, four times for the first of its vector.
fn content_slot(size: u64, first: bool) -> u64 {
    size * if first { 4 } else { 2 }
}

struct Json<'a> {
    text: &'a [u8],
    at: usize,
    est: Estimate,
    stop_above: u64,
    longest_string: u64,
    /// The most content buffered at once so far.
    peak: u64,
}

impl Json<'_> {
    fn bad(&self, what: &str) -> String {
        format!("bad JSON at byte {}: {what}", self.at)
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonStop> {
        self.skip_ws();
        if self.text.get(self.at) == Some(&byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(JsonStop::Bad(
                self.bad(&format!("expected {:?}", byte as char)),
            ))
        }
    }

    /// A string starting at the current quote: where its raw contents start and end, and
    /// whether they hold escapes.
    fn string(&mut self) -> Result<(usize, usize, bool), JsonStop> {
        let start = self.at + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &self.text[i.min(self.text.len())..])
            else {
                self.at = self.text.len();
                return Err(JsonStop::Bad(self.bad("unterminated string")));
            };
            i += off;
            if self.text[i] == b'"' {
                self.at = i + 1;
                let len = (i - start) as u64;
                self.longest_string = self.longest_string.max(len);
                return Ok((start, i, escaped));
            }
            escaped = true;
            // A backslash and the character it escapes (`\u` is followed by plain hex digits).
            i += 2;
        }
    }

    fn value(&mut self, ctx: Ctx, depth: u32) -> Result<Buffered, JsonStop> {
        self.skip_ws();
        let Some(&c) = self.text.get(self.at) else {
            return Err(JsonStop::Bad(self.bad("unexpected end")));
        };
        if let (Some(first), Some(shape)) = (ctx.element, ctx.shape) {
            self.est.slot(shape, first);
        }
        let buffered = match c {
            b'{' => {
                let kind = match ctx.shape {
                    Some(Msg(kind)) => {
                        self.est.message(kind);
                        Some(kind)
                    }
                    _ => None,
                };
                self.object(kind, depth + 1)?
            }
            b'[' => self.array(ctx, depth + 1)?,
            b'"' => {
                let (start, end, _) = self.string()?;
                let len = (end - start) as u64;
                // The owned copy (and, buffered, the content's).
                self.est.bytes += len;
                Buffered {
                    content: len,
                    peak: 0,
                }
            }
            b'-' | b'0'..=b'9' => {
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') =
                    self.text.get(self.at)
                {
                    self.at += 1;
                }
                Buffered::default()
            }
            b't' | b'f' | b'n' => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !self.text[self.at..].starts_with(word) {
                    return Err(JsonStop::Bad(self.bad("unknown literal")));
                }
                self.at += word.len();
                Buffered::default()
            }
            _ => return Err(JsonStop::Bad(self.bad("expected a value"))),
        };
        if self.est.bytes.saturating_add(self.peak) > self.stop_above {
            return Err(JsonStop::Over);
        }
        Ok(buffered)
    }

    fn deeper(&self, depth: u32) -> Result<(), JsonStop> {
        if depth > MAX_DEPTH {
            return Err(JsonStop::Bad(
                self.bad(&format!("nested more than {MAX_DEPTH} deep")),
            ));
        }
        Ok(())
    }

    fn object(&mut self, kind: Option<Kind>, depth: u32) -> Result<Buffered, JsonStop> {
        self.deeper(depth)?;
        self.at += 1;
        self.skip_ws();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(Buffered::default());
        }
        let flattens = kind.is_some_and(Kind::flattens);
        // The object as content (every entry), and what a flattening message collects (the
        // entries it does not name itself, and the flattened ones).
        let (mut all, mut collected) = (0u64, 0u64);
        let (mut entries, mut collected_entries) = (0u32, 0u32);
        let mut peak = 0u64;
        loop {
            self.skip_ws();
            if self.text.get(self.at) != Some(&b'"') {
                return Err(JsonStop::Bad(self.bad("expected a field name")));
            }
            let (start, end, escaped) = self.string()?;
            let field = match kind {
                Some(kind) if escaped => {
                    // Rare: serde matches the unescaped name.
                    let raw = &self.text[start - 1..=end];
                    let name: String = serde_json::from_slice(raw)
                        .map_err(|e| JsonStop::Bad(self.bad(&e.to_string())))?;
                    kind.json_field(name.as_bytes())
                }
                Some(kind) => kind.json_field(&self.text[start..end]),
                None => None,
            };
            self.expect(b':')?;
            let ctx = Ctx {
                shape: field.map(|f| f.shape),
                repeated: field.is_some_and(|f| f.repeated),
                element: None,
            };
            let child = self.value(ctx, depth)?;
            let entry = (end - start) as u64 + child.content;
            all += content_slot(CONTENT_ENTRY_BYTES, entries == 0) + entry;
            entries += 1;
            if flattens && field.is_none_or(|f| f.flat) {
                collected += content_slot(CONTENT_ENTRY_BYTES, collected_entries == 0) + entry;
                collected_entries += 1;
            }
            peak = peak.max(child.peak);
            self.skip_ws();
            match self.text.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                _ => return Err(JsonStop::Bad(self.bad("expected ',' or '}'"))),
            }
        }
        if flattens {
            // Its collected entries stay buffered while the values inside are read.
            peak += collected;
            self.peak = self.peak.max(peak);
        }
        Ok(Buffered { content: all, peak })
    }

    fn array(&mut self, ctx: Ctx, depth: u32) -> Result<Buffered, JsonStop> {
        self.deeper(depth)?;
        self.at += 1;
        self.skip_ws();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(Buffered::default());
        }
        let mut element = Ctx {
            element: ctx.repeated.then_some(true),
            repeated: false,
            ..ctx
        };
        let mut out = Buffered::default();
        let mut first = true;
        loop {
            let child = self.value(element, depth)?;
            element.element = element.element.map(|_| false);
            out.content += content_slot(CONTENT_ELEMENT_BYTES, first) + child.content;
            out.peak = out.peak.max(child.peak);
            first = false;
            self.skip_ws();
            match self.text.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return Err(JsonStop::Bad(self.bad("expected ',' or ']'"))),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use opentelemetry_proto::tonic::metrics::v1::{
        exponential_histogram_data_point::Buckets, metric::Data, number_data_point,
        summary_data_point::ValueAtQuantile,
    };
    use prost::Message;

    /// The heap bytes a decoded message holds (vector and string capacities, recursively): the
    /// real decoded size the estimate is compared with.
    pub(crate) trait Heap {
        fn heap(&self) -> u64;
    }

    impl<T: Heap> Heap for Vec<T> {
        fn heap(&self) -> u64 {
            (self.capacity() * size_of::<T>()) as u64 + self.iter().map(Heap::heap).sum::<u64>()
        }
    }

    impl<T: Heap> Heap for Option<T> {
        fn heap(&self) -> u64 {
            self.as_ref().map_or(0, Heap::heap)
        }
    }

    impl Heap for String {
        fn heap(&self) -> u64 {
            self.capacity() as u64
        }
    }

    macro_rules! no_heap {
        ($($t:ty),*) => { $(impl Heap for $t { fn heap(&self) -> u64 { 0 } })* };
    }
    no_heap!(u8, u64, f64, trace::Status, ValueAtQuantile);

    macro_rules! heap {
        ($($t:ty: $($f:ident),*;)*) => {
            $(impl Heap for $t {
                fn heap(&self) -> u64 { 0 $(+ self.$f.heap())* }
            })*
        };
    }
    heap! {
        ExportTraceServiceRequest: resource_spans;
        ExportLogsServiceRequest: resource_logs;
        ExportMetricsServiceRequest: resource_metrics;
        trace::ResourceSpans: resource, scope_spans, schema_url;
        logs::ResourceLogs: resource, scope_logs, schema_url;
        metrics::ResourceMetrics: resource, scope_metrics, schema_url;
        Resource: attributes, entity_refs;
        EntityRef: schema_url, r#type, id_keys, description_keys;
        trace::ScopeSpans: scope, spans, schema_url;
        logs::ScopeLogs: scope, log_records, schema_url;
        metrics::ScopeMetrics: scope, metrics, schema_url;
        InstrumentationScope: name, version, attributes;
        trace::Span: trace_id, span_id, trace_state, parent_span_id, name, attributes, events,
            links, status;
        trace::span::Event: name, attributes;
        trace::span::Link: trace_id, span_id, trace_state, attributes;
        logs::LogRecord: severity_text, body, attributes, trace_id, span_id, event_name;
        metrics::Metric: name, description, unit, metadata, data;
        metrics::Gauge: data_points;
        metrics::Sum: data_points;
        metrics::Histogram: data_points;
        metrics::ExponentialHistogram: data_points;
        metrics::Summary: data_points;
        metrics::NumberDataPoint: attributes, exemplars;
        metrics::HistogramDataPoint: attributes, bucket_counts, explicit_bounds, exemplars;
        metrics::ExponentialHistogramDataPoint: attributes, positive, negative, exemplars;
        Buckets: bucket_counts;
        metrics::SummaryDataPoint: attributes, quantile_values;
        metrics::Exemplar: filtered_attributes, span_id, trace_id;
        KeyValue: key, value;
        AnyValue: value;
        ArrayValue: values;
        KeyValueList: values;
    }

    impl Heap for Data {
        fn heap(&self) -> u64 {
            match self {
                Data::Gauge(g) => g.heap(),
                Data::Sum(s) => s.heap(),
                Data::Histogram(h) => h.heap(),
                Data::ExponentialHistogram(h) => h.heap(),
                Data::Summary(s) => s.heap(),
            }
        }
    }

    impl Heap for Value {
        fn heap(&self) -> u64 {
            match self {
                Value::StringValue(s) => s.heap(),
                Value::BytesValue(b) => b.heap(),
                Value::ArrayValue(a) => a.heap(),
                Value::KvlistValue(k) => k.heap(),
                _ => 0,
            }
        }
    }

    fn s(v: &str) -> Option<AnyValue> {
        Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        })
    }

    pub(crate) fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: s(v),
            ..Default::default()
        }
    }

    fn resource() -> Option<Resource> {
        Some(Resource {
            attributes: vec![kv("service.name", "checkout"), kv("host.name", "node-7")],
            ..Default::default()
        })
    }

    /// A trace export like an SDK sends: spans with a dozen attributes, an event and a link.
    pub(crate) fn traces(n: usize) -> ExportTraceServiceRequest {
        let span = |i: usize| trace::Span {
            trace_id: vec![7; 16],
            span_id: (i as u64).to_be_bytes().to_vec(),
            parent_span_id: vec![1; 8],
            name: format!("GET /api/v1/items/{}", i % 17),
            start_time_unix_nano: 1_700_000_000_000_000_000 + i as u64,
            end_time_unix_nano: 1_700_000_000_250_000_000 + i as u64,
            attributes: (0..12)
                .map(|a| kv(&format!("app.attribute.{a}"), &format!("value-{i}-{a}")))
                .collect(),
            events: vec![trace::span::Event {
                name: "exception".into(),
                attributes: vec![kv("exception.message", "connection reset by peer")],
                ..Default::default()
            }],
            links: vec![trace::span::Link {
                trace_id: vec![9; 16],
                span_id: vec![3; 8],
                ..Default::default()
            }],
            status: Some(trace::Status {
                code: 2,
                message: "upstream failed".into(),
            }),
            ..Default::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![trace::ResourceSpans {
                resource: resource(),
                scope_spans: vec![trace::ScopeSpans {
                    spans: (0..n).map(span).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    pub(crate) fn logs_request(n: usize) -> ExportLogsServiceRequest {
        let record = |i: usize| logs::LogRecord {
            time_unix_nano: 1_700_000_000_000_000_000 + i as u64,
            severity_number: 17,
            severity_text: "ERROR".into(),
            body: s(&format!("payment {i} failed: card declined by issuer")),
            attributes: (0..6)
                .map(|a| kv(&format!("log.attr.{a}"), &format!("v{i}")))
                .collect(),
            trace_id: vec![7; 16],
            span_id: vec![1; 8],
            ..Default::default()
        };
        ExportLogsServiceRequest {
            resource_logs: vec![logs::ResourceLogs {
                resource: resource(),
                scope_logs: vec![logs::ScopeLogs {
                    log_records: (0..n).map(record).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    pub(crate) fn metrics_request(n: usize) -> ExportMetricsServiceRequest {
        let attrs = |i: usize| vec![kv("route", &format!("/r{}", i % 9)), kv("code", "200")];
        let metric = |i: usize| {
            let data = match i % 5 {
                0 => Data::Gauge(metrics::Gauge {
                    data_points: vec![metrics::NumberDataPoint {
                        attributes: attrs(i),
                        time_unix_nano: 1_700_000_000_000_000_000,
                        value: Some(number_data_point::Value::AsDouble(1.5)),
                        ..Default::default()
                    }],
                }),
                1 => Data::Sum(metrics::Sum {
                    data_points: vec![metrics::NumberDataPoint {
                        attributes: attrs(i),
                        time_unix_nano: 1_700_000_000_000_000_000,
                        value: Some(number_data_point::Value::AsInt(42)),
                        ..Default::default()
                    }],
                    aggregation_temporality: 2,
                    is_monotonic: true,
                }),
                2 => Data::Histogram(metrics::Histogram {
                    data_points: vec![metrics::HistogramDataPoint {
                        attributes: attrs(i),
                        time_unix_nano: 1_700_000_000_000_000_000,
                        count: 10,
                        sum: Some(3.0),
                        bucket_counts: vec![1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0],
                        explicit_bounds: vec![
                            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                        ],
                        ..Default::default()
                    }],
                    aggregation_temporality: 2,
                }),
                3 => Data::ExponentialHistogram(metrics::ExponentialHistogram {
                    data_points: vec![metrics::ExponentialHistogramDataPoint {
                        attributes: attrs(i),
                        time_unix_nano: 1_700_000_000_000_000_000,
                        count: 10,
                        positive: Some(Buckets {
                            offset: 3,
                            bucket_counts: vec![1, 2, 3, 4],
                        }),
                        ..Default::default()
                    }],
                    aggregation_temporality: 2,
                }),
                _ => Data::Summary(metrics::Summary {
                    data_points: vec![metrics::SummaryDataPoint {
                        attributes: attrs(i),
                        time_unix_nano: 1_700_000_000_000_000_000,
                        quantile_values: vec![
                            ValueAtQuantile {
                                quantile: 0.5,
                                value: 1.0,
                            },
                            ValueAtQuantile {
                                quantile: 0.99,
                                value: 9.0,
                            },
                        ],
                        ..Default::default()
                    }],
                }),
            };
            metrics::Metric {
                name: format!("http.server.duration.{i}"),
                unit: "s".into(),
                data: Some(data),
                ..Default::default()
            }
        };
        ExportMetricsServiceRequest {
            resource_metrics: vec![metrics::ResourceMetrics {
                resource: resource(),
                scope_metrics: vec![metrics::ScopeMetrics {
                    metrics: (0..n).map(metric).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn full(signal: Signal, encoding: Encoding, body: &[u8]) -> Estimate {
        estimate(signal, encoding, body, u64::MAX).unwrap()
    }

    /// Checks `estimate ≥ real` and returns estimate / real (real: the decoded heap plus the
    /// body).
    fn ratio<M: Message + Default + Heap + serde::de::DeserializeOwned>(
        signal: Signal,
        encoding: Encoding,
        body: &[u8],
    ) -> f64 {
        let est = full(signal, encoding, body);
        let decoded: M = match encoding {
            Encoding::Protobuf => M::decode(body).unwrap(),
            Encoding::Json => serde_json::from_slice(body).unwrap(),
        };
        let real = decoded.heap();
        assert!(
            est.bytes >= real,
            "{signal:?} {encoding:?}: estimate {} under the decoded heap {real}",
            est.bytes
        );
        let r = (est.bytes + body.len() as u64) as f64 / (real + body.len() as u64) as f64;
        eprintln!(
            "{signal:?} {encoding:?}: body {} B, decoded heap {real} B, estimate {} B (+ body: {r:.2}x of heap + body)",
            body.len(),
            est.bytes
        );
        r
    }

    #[test]
    fn estimates_cover_what_realistic_requests_decode_to() {
        for encoding in [Encoding::Protobuf, Encoding::Json] {
            let enc = |m: &dyn Fn() -> (Vec<u8>, Vec<u8>)| match encoding {
                Encoding::Protobuf => m().0,
                Encoding::Json => m().1,
            };
            let t = traces(500);
            let body = enc(&|| (t.encode_to_vec(), serde_json::to_vec(&t).unwrap()));
            let r = ratio::<ExportTraceServiceRequest>(Signal::Traces, encoding, &body);
            assert!((1.0..3.0).contains(&r), "traces {encoding:?}: {r}");
            let l = logs_request(500);
            let body = enc(&|| (l.encode_to_vec(), serde_json::to_vec(&l).unwrap()));
            let r = ratio::<ExportLogsServiceRequest>(Signal::Logs, encoding, &body);
            assert!((1.0..3.0).contains(&r), "logs {encoding:?}: {r}");
            let m = metrics_request(500);
            let body = enc(&|| (m.encode_to_vec(), serde_json::to_vec(&m).unwrap()));
            let r = ratio::<ExportMetricsServiceRequest>(Signal::Metrics, encoding, &body);
            assert!((1.0..3.0).contains(&r), "metrics {encoding:?}: {r}");
        }
    }

    #[test]
    fn bodies_of_empty_messages_are_estimated_at_what_they_decode_to() {
        // `0a 00`: an empty ResourceSpans, two bytes that decode to a struct of about a hundred.
        let body = b"\x0a\x00".repeat(50_000);
        let r = ratio::<ExportTraceServiceRequest>(Signal::Traces, Encoding::Protobuf, &body);
        assert!(r > 1.0);
        let est = full(Signal::Traces, Encoding::Protobuf, &body);
        assert_eq!(est.messages, 50_001);
        assert!(est.bytes >= 50_000 * size_of::<trace::ResourceSpans>() as u64);
        // The same in JSON: `{}` objects.
        let mut json = b"{\"resourceSpans\":[".to_vec();
        json.extend(b"{},".repeat(49_999));
        json.extend(b"{}]}");
        ratio::<ExportTraceServiceRequest>(Signal::Traces, Encoding::Json, &json);
        // Empty attributes in empty spans count as attributes and records.
        let spans = b"\x0a\x06\x12\x04\x12\x02\x4a\x00";
        let est = full(Signal::Traces, Encoding::Protobuf, spans);
        assert_eq!((est.records, est.attributes), (1, 1));
    }

    #[test]
    fn nested_values_in_json_count_each_level_serde_buffers() {
        // An attribute whose value is an array nested ten deep around 2000 numbers: serde holds
        // a copy of the numbers at each level while it reads the innermost.
        let numbers: Vec<_> = (0..2000)
            .map(|i| serde_json::json!({"intValue": i.to_string()}))
            .collect();
        let mut value = serde_json::json!({"arrayValue": {"values": numbers}});
        for _ in 0..10 {
            value = serde_json::json!({"arrayValue": {"values": [value]}});
        }
        let body = serde_json::json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [
            {"attributes": [{"key": "deep", "value": value}]}]}]}]})
        .to_string();
        let est = full(Signal::Logs, Encoding::Json, body.as_bytes());
        let one_copy = 2000 * 2 * CONTENT_ELEMENT_BYTES;
        assert!(est.bytes > 11 * one_copy, "{}", est.bytes);
        ratio::<ExportLogsServiceRequest>(Signal::Logs, Encoding::Json, body.as_bytes());
    }

    #[test]
    fn packed_numbers_and_unknown_fields() {
        // A histogram point's 1000 bucket counts, packed: 8 bytes each on the wire, 16 here.
        let m = ExportMetricsServiceRequest {
            resource_metrics: vec![metrics::ResourceMetrics {
                scope_metrics: vec![metrics::ScopeMetrics {
                    metrics: vec![metrics::Metric {
                        data: Some(Data::Histogram(metrics::Histogram {
                            data_points: vec![metrics::HistogramDataPoint {
                                bucket_counts: vec![1; 1000],
                                ..Default::default()
                            }],
                            aggregation_temporality: 1,
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let body = m.encode_to_vec();
        ratio::<ExportMetricsServiceRequest>(Signal::Metrics, Encoding::Protobuf, &body);
        assert!(full(Signal::Metrics, Encoding::Protobuf, &body).bytes >= 16_000);
        // Varint bucket counts of an exponential histogram: one byte each on the wire.
        let mut e = m.clone();
        e.resource_metrics[0].scope_metrics[0].metrics[0].data =
            Some(Data::ExponentialHistogram(metrics::ExponentialHistogram {
                data_points: vec![metrics::ExponentialHistogramDataPoint {
                    positive: Some(Buckets {
                        offset: 0,
                        bucket_counts: vec![1; 1000],
                    }),
                    ..Default::default()
                }],
                aggregation_temporality: 1,
            }));
        let body = e.encode_to_vec();
        ratio::<ExportMetricsServiceRequest>(Signal::Metrics, Encoding::Protobuf, &body);
        // An unknown field (number 99, a string) and an unknown group are skipped.
        let mut body = traces(1).encode_to_vec();
        body.extend([0x9a, 0x06, 0x03, b'a', b'b', b'c']);
        body.extend([0x9b, 0x06, 0x08, 0x01, 0x9c, 0x06]);
        assert!(estimate(Signal::Traces, Encoding::Protobuf, &body, u64::MAX).is_ok());
        assert!(ExportTraceServiceRequest::decode(body.as_slice()).is_ok());
    }

    #[test]
    fn what_would_not_decode_is_refused() {
        let pb = |b: &[u8]| estimate(Signal::Traces, Encoding::Protobuf, b, u64::MAX);
        for bad in [
            &b"\x0a"[..],                                    // truncated key/length
            b"\x0a\x05\x00",                                 // length past the end
            b"\x0f",                                         // wire type 7
            b"\x00\x00",                                     // field number 0
            b"\x08\x01",                                     // the message field 1 as a varint
            b"\x0c",                                         // an end-group tag without a group
            b"\x0b\x08\x01",                                 // an unterminated group
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // an over-long varint
        ] {
            assert!(pb(bad).is_err(), "{bad:?}");
            assert!(ExportTraceServiceRequest::decode(bad).is_err(), "{bad:?}");
        }
        // Attribute values nested 200 deep (arrays of arrays).
        let mut v = AnyValue::default();
        for _ in 0..200 {
            v = AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values: vec![v] })),
            };
        }
        let deep = ExportLogsServiceRequest {
            resource_logs: vec![logs::ResourceLogs {
                scope_logs: vec![logs::ScopeLogs {
                    log_records: vec![logs::LogRecord {
                        body: Some(v),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec();
        assert!(estimate(Signal::Logs, Encoding::Protobuf, &deep, u64::MAX).is_err());
        assert!(ExportLogsServiceRequest::decode(deep.as_slice()).is_err());
        let js = |b: &str| estimate(Signal::Traces, Encoding::Json, b.as_bytes(), u64::MAX);
        for bad in [
            "",
            "{",
            "{\"resourceSpans\": [}",
            "{\"resourceSpans\": []} x",
            "{\"a\": \"unterminated}",
            "{\"a\" 1}",
            "{\"a\": tru}",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        ] {
            assert!(js(bad).is_err(), "{bad:?}");
            assert!(
                serde_json::from_str::<ExportTraceServiceRequest>(bad).is_err(),
                "{bad:?}"
            );
        }
        // Unknown fields, escapes and every kind of value are fine.
        let ok = r#" {"resourceSpans": [{"scopeSpans": [], "x": [1, -2.5e3, true, false, null,
            {"y": "a\"b\\c\u00e9"}]}], "other": {}} "#;
        assert!(js(ok).is_ok());
        assert!(serde_json::from_str::<ExportTraceServiceRequest>(ok).is_ok());
    }

    #[test]
    fn escaped_field_names_are_followed_and_the_walk_stops_past_its_limit() {
        let mut json = b"{\"resource\\u0053pans\":[".to_vec();
        json.extend(b"{},".repeat(999));
        json.extend(b"{}]}");
        let est = full(Signal::Traces, Encoding::Json, &json);
        assert_eq!(est.messages, 1001);
        let decoded: ExportTraceServiceRequest = serde_json::from_slice(&json).unwrap();
        assert_eq!(decoded.resource_spans.len(), 1000);
        // Stopped early: past the limit, not the whole estimate.
        let stopped = estimate(Signal::Traces, Encoding::Json, &json, 10_000).unwrap();
        assert!(stopped.bytes > 10_000 && stopped.messages < 1000);
        let body = b"\x0a\x00".repeat(1000);
        let stopped = estimate(Signal::Traces, Encoding::Protobuf, &body, 10_000).unwrap();
        assert!(stopped.bytes > 10_000 && stopped.messages < 1000);
    }
}
