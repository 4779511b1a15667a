//! OTLP messages to the records the analyzers read: spans, log records and metric samples.
//!
//! - The component of every record is its resource's `service.name`, else `k8s.pod.name`, else
//!   `host.name` (as the OTLP JSON span files are read).
//! - Ids are lower-case hex; a span fails when its status is ERROR or its HTTP status is 5xx.
//! - A log's level comes from its severity number (the OpenTelemetry bands), else its severity
//!   text; its trace and span ids become the `trace_id`/`span_id` attributes the log-trace
//!   join reads.
//! - Metrics: a gauge or a non-monotonic sum is its value; a monotonic sum becomes a rate per
//!   second (`NAME:rate`); a histogram its rate, mean and 90th percentile (`:rate`, `:mean`,
//!   `:p90`); an exponential histogram its rate and mean; a summary its quantiles (`:p50`).
//!   Rates of cumulative series need the previous point of the series: [`SeriesMemory`] keeps
//!   it (bounded), and its updates are applied only once the batch was stored.
//!   Point attributes are folded into the metric name (`NAME:p90{route="/pay"}`), so that two
//!   routes of one service are two series rather than one jagged one.
//! - [`RecordLimits`] bound what one request turns into: the records converted (the items past
//!   the limit are rejected), the attributes kept per record (those past it are dropped, the
//!   record kept) and the bytes of the converted records ([`RecordBytes`]; records past it are
//!   rejected). What they took is counted ([`LimitCounts`]) and said in the batch's rejection
//!   message, which the intake sends as the partial-success answer.

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, HistogramDataPoint, NumberDataPoint, metric::Data, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{Attributes, Name, Timestamp};

use crate::analyze::events::{SPAN_ID, TRACE_ID};

/// What one export request turned into, and what of it could not be used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetryBatch {
    /// Spans.
    pub spans: Vec<Span>,
    /// Log records.
    pub logs: Vec<LogRecord>,
    /// Metric samples.
    pub metrics: Vec<MetricSample>,
    /// Items (spans, log records, data points) that were not converted.
    pub rejected: u64,
    /// Why the first rejected item was rejected, followed by what the [`RecordLimits`] rejected
    /// or dropped (set also when they only dropped attributes and nothing was rejected: a
    /// warning).
    pub rejection: Option<String>,
}

impl TelemetryBatch {
    /// How many records the batch holds.
    pub fn len(&self) -> usize {
        self.spans.len() + self.logs.len() + self.metrics.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The earliest and latest time of its records.
    pub fn time_span(&self) -> Option<(Timestamp, Timestamp)> {
        let times = self
            .spans
            .iter()
            .map(|s| s.start)
            .chain(self.logs.iter().map(|l| l.timestamp))
            .chain(self.metrics.iter().map(|m| m.timestamp));
        times.fold(None, |acc, t| match acc {
            None => Some((t, t)),
            Some((lo, hi)) => Some((lo.min(t), hi.max(t))),
        })
    }

    fn reject(&mut self, why: impl FnOnce() -> String) {
        self.rejected += 1;
        if self.rejection.is_none() {
            self.rejection = Some(why());
        }
    }
}

/// Bounds on what one export request converts to; the intake sets them from its
/// [`OtlpLimits`](super::OtlpLimits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    /// The most records (spans, log records, metric data points) converted from one request;
    /// the items past it are rejected.
    pub max_records: usize,
    /// The most attributes kept per record (in the order sent); the ones past it are dropped
    /// and the record is kept.
    pub max_attributes: usize,
    /// The most bytes the converted records may take ([`RecordBytes`]); the records past it are
    /// rejected.
    pub max_bytes: u64,
}

impl RecordLimits {
    /// No bound.
    pub const UNLIMITED: RecordLimits = RecordLimits {
        max_records: usize::MAX,
        max_attributes: usize::MAX,
        max_bytes: u64::MAX,
    };
}

/// What the [`RecordLimits`] took out of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitCounts {
    /// Attributes dropped past `max_attributes`.
    pub attributes_dropped: u64,
    /// Records that lost attributes so.
    pub records_cut: u64,
    /// Items rejected past `max_records` (counted in the batch's `rejected` too).
    pub over_records: u64,
    /// Items rejected past `max_bytes` (counted in the batch's `rejected` too).
    pub over_bytes: u64,
}

impl LimitCounts {
    /// Items the limits rejected.
    pub fn rejected(&self) -> u64 {
        self.over_records + self.over_bytes
    }
}

/// What each attribute of a record costs besides its key and value text: the two `String`s of
/// a B-tree map entry and the unused room of its node.
pub const ATTRIBUTE_OVERHEAD_BYTES: u64 = 96;

/// Roughly how many bytes a record takes in memory: its struct, the text of its strings, and
/// per attribute (or label) its key and value plus [`ATTRIBUTE_OVERHEAD_BYTES`]. A live buffer
/// and the conversion of one request are bounded with it.
pub trait RecordBytes {
    /// The record's approximate size in bytes.
    fn record_bytes(&self) -> u64;
}

/// The bytes of a record's attributes or labels, each pair with its overhead.
fn pair_bytes<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    pairs
        .map(|(k, v)| (k.len() + v.len()) as u64 + ATTRIBUTE_OVERHEAD_BYTES)
        .sum()
}

impl RecordBytes for Span {
    fn record_bytes(&self) -> u64 {
        let text = self.trace_id.len()
            + self.span_id.len()
            + self.parent_id.as_ref().map_or(0, |p| p.len())
            + self.component.len()
            + self.operation.len();
        (std::mem::size_of::<Span>() + text) as u64
            + pair_bytes(
                self.attributes
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
    }
}

impl RecordBytes for LogRecord {
    fn record_bytes(&self) -> u64 {
        let text = self.component.len() + self.message.len();
        (std::mem::size_of::<LogRecord>() + text) as u64
            + pair_bytes(
                self.attributes
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
    }
}

impl RecordBytes for MetricSample {
    fn record_bytes(&self) -> u64 {
        let text = self.component.len() + self.metric.len();
        (std::mem::size_of::<MetricSample>() + text) as u64
            + pair_bytes(self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

/// Applies [`RecordLimits`] while a request is converted.
#[derive(Debug)]
struct Limiter {
    limits: RecordLimits,
    counts: LimitCounts,
    records: usize,
    bytes: u64,
}

impl Limiter {
    fn new(limits: RecordLimits) -> Self {
        Limiter {
            limits,
            counts: LimitCounts::default(),
            records: 0,
            bytes: 0,
        }
    }

    /// Whether one more record may be converted; past the limit it is rejected and counted.
    fn admit(&mut self, batch: &mut TelemetryBatch) -> bool {
        if self.records >= self.limits.max_records {
            self.counts.over_records += 1;
            batch.rejected += 1;
            return false;
        }
        self.records += 1;
        true
    }

    /// The attributes kept of a record (the first `max_attributes`), counting what is dropped.
    fn attributes<'a>(&mut self, kvs: &'a [KeyValue]) -> &'a [KeyValue] {
        let max = self.limits.max_attributes;
        if kvs.len() > max {
            self.counts.attributes_dropped += (kvs.len() - max) as u64;
            self.counts.records_cut += 1;
            &kvs[..max]
        } else {
            kvs
        }
    }

    /// Whether a converted record fits the byte bound; past it it is rejected and counted.
    fn fits(&mut self, record: &impl RecordBytes, batch: &mut TelemetryBatch) -> bool {
        let bytes = self.bytes.saturating_add(record.record_bytes());
        if bytes > self.limits.max_bytes {
            self.counts.over_bytes += 1;
            batch.rejected += 1;
            return false;
        }
        self.bytes = bytes;
        true
    }

    /// Says in the batch's rejection message what the limits took, and returns the counts.
    fn finish(&mut self, batch: &mut TelemetryBatch, items: &str) -> LimitCounts {
        let c = self.counts;
        let l = self.limits;
        let mut parts: Vec<String> = batch.rejection.take().into_iter().collect();
        if c.over_records > 0 {
            parts.push(format!(
                "{} {items} past the first {} of the request rejected (the limit of records per request, max_records_per_request)",
                c.over_records, l.max_records
            ));
        }
        if c.over_bytes > 0 {
            parts.push(format!(
                "{} {items} rejected: the records converted from the request would take more than its budget of {} bytes (max_request_memory_bytes)",
                c.over_bytes, l.max_bytes
            ));
        }
        if c.attributes_dropped > 0 {
            parts.push(format!(
                "{} attributes dropped from {} records past the first {} of each (the limit of attributes per record, max_attributes_per_record)",
                c.attributes_dropped, c.records_cut, l.max_attributes
            ));
        }
        batch.rejection = (!parts.is_empty()).then(|| parts.join("; "));
        c
    }
}

/// Lower-case hex of an id (empty for an empty id).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// An attribute value as text: strings as they are, numbers and booleans as written, bytes in
/// hex, arrays and maps as JSON.
pub(crate) fn value_text(v: &AnyValue) -> String {
    match &v.value {
        Some(value) => value_json(value).as_str().map_or_else(
            || value_json(value).to_string(),
            std::string::ToString::to_string,
        ),
        None => String::new(),
    }
}

fn value_json(v: &any_value::Value) -> serde_json::Value {
    use any_value::Value as V;
    match v {
        V::StringValue(s) => s.clone().into(),
        V::BoolValue(b) => (*b).into(),
        V::IntValue(i) => (*i).into(),
        V::DoubleValue(d) => serde_json::Number::from_f64(*d)
            .map_or_else(|| d.to_string().into(), serde_json::Value::Number),
        V::BytesValue(b) => hex(b).into(),
        // An index into a string table that only profiles carry: there is no table here.
        V::StringValueStrindex(i) => format!("#{i}").into(),
        V::ArrayValue(a) => a
            .values
            .iter()
            .map(|x| x.value.as_ref().map_or(serde_json::Value::Null, value_json))
            .collect(),
        V::KvlistValue(kv) => kv
            .values
            .iter()
            .map(|x| {
                let v = x.value.as_ref().and_then(|v| v.value.as_ref());
                (x.key.clone(), v.map_or(serde_json::Value::Null, value_json))
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

fn attributes(kvs: &[KeyValue]) -> Attributes {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(value_text).unwrap_or_default(),
            )
        })
        .collect()
}

/// The component a resource names: `service.name`, else `k8s.pod.name`, else `host.name`.
pub(crate) fn component_of(resource: Option<&Resource>) -> String {
    let attrs = resource.map(|r| r.attributes.as_slice()).unwrap_or(&[]);
    ["service.name", "k8s.pod.name", "host.name"]
        .iter()
        .find_map(|key| {
            attrs
                .iter()
                .find(|kv| kv.key == *key)
                .and_then(|kv| kv.value.as_ref())
                .map(value_text)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_default()
}

/// Nanoseconds since the epoch as a time (`None` for 0, "unset", and for times past 2262).
fn time(nanos: u64) -> Option<Timestamp> {
    if nanos == 0 {
        return None;
    }
    i64::try_from(nanos).ok().map(Timestamp::from_nanos)
}

/// Whether an attribute list says the HTTP request failed (a 5xx status code).
fn http_failed(kvs: &[KeyValue]) -> bool {
    kvs.iter()
        .filter(|kv| kv.key == "http.response.status_code" || kv.key == "http.status_code")
        .filter_map(|kv| kv.value.as_ref().map(value_text)?.parse::<u16>().ok())
        .any(|code| code >= 500)
}

/// Spans of a trace export.
pub fn spans(req: &ExportTraceServiceRequest) -> TelemetryBatch {
    spans_within(req, RecordLimits::UNLIMITED).0
}

/// Spans of a trace export, within `limits`, and what the limits took.
pub fn spans_within(
    req: &ExportTraceServiceRequest,
    limits: RecordLimits,
) -> (TelemetryBatch, LimitCounts) {
    let mut out = TelemetryBatch::default();
    let mut limiter = Limiter::new(limits);
    for rs in &req.resource_spans {
        let component = Name::from(component_of(rs.resource.as_ref()));
        for s in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
            if !limiter.admit(&mut out) {
                continue;
            }
            if s.trace_id.is_empty() || s.span_id.is_empty() {
                out.reject(|| format!("span {:?} has no trace or span id", s.name));
                continue;
            }
            let Some(start) = time(s.start_time_unix_nano) else {
                out.reject(|| format!("span {:?} has no start time", s.name));
                continue;
            };
            // The failure is read from every attribute, also those past the limit.
            let http_failed = http_failed(&s.attributes);
            let attributes = attributes(limiter.attributes(&s.attributes));
            let status_error = s.status.as_ref().is_some_and(|st| st.code == 2);
            let duration_ns = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
            let span = Span {
                trace_id: hex(&s.trace_id).into(),
                span_id: hex(&s.span_id).into(),
                parent_id: (!s.parent_span_id.is_empty())
                    .then(|| hex(&s.parent_span_id))
                    .map(Into::into),
                component: component.clone(),
                operation: s.name.clone().into(),
                start,
                duration_us: duration_ns / 1000,
                error: status_error || http_failed,
                attributes,
            };
            if limiter.fits(&span, &mut out) {
                out.spans.push(span);
            }
        }
    }
    let counts = limiter.finish(&mut out, "spans");
    (out, counts)
}

/// The level of an OpenTelemetry severity number (1-4 TRACE ... 21-24 FATAL), else of its
/// severity text.
fn level(number: i32, text: &str) -> Option<Level> {
    Some(match number {
        1..=4 => Level::Trace,
        5..=8 => Level::Debug,
        9..=12 => Level::Info,
        13..=16 => Level::Warning,
        17..=20 => Level::Error,
        21..=24 => Level::Fatal,
        _ => return Level::parse(text),
    })
}

/// Log records of a logs export; a record without a time of its own gets the time it was
/// observed, else `received`.
pub fn logs(req: &ExportLogsServiceRequest, received: Timestamp) -> TelemetryBatch {
    logs_within(req, received, RecordLimits::UNLIMITED).0
}

/// Log records of a logs export (as [`logs`]), within `limits`, and what the limits took. The
/// `trace_id` and `span_id` attributes made of the record's ids do not count toward the
/// attribute limit.
pub fn logs_within(
    req: &ExportLogsServiceRequest,
    received: Timestamp,
    limits: RecordLimits,
) -> (TelemetryBatch, LimitCounts) {
    let mut out = TelemetryBatch::default();
    let mut limiter = Limiter::new(limits);
    for rl in &req.resource_logs {
        let component = Name::from(component_of(rl.resource.as_ref()));
        for r in rl.scope_logs.iter().flat_map(|sl| &sl.log_records) {
            if !limiter.admit(&mut out) {
                continue;
            }
            let timestamp = time(r.time_unix_nano)
                .or_else(|| time(r.observed_time_unix_nano))
                .unwrap_or(received);
            let mut attrs = attributes(limiter.attributes(&r.attributes));
            if !r.trace_id.is_empty() {
                attrs.insert(TRACE_ID, hex(&r.trace_id));
            }
            if !r.span_id.is_empty() {
                attrs.insert(SPAN_ID, hex(&r.span_id));
            }
            let mut message = r.body.as_ref().map(value_text).unwrap_or_default();
            if message.is_empty() && !r.event_name.is_empty() {
                message = r.event_name.clone();
            }
            let record = LogRecord {
                timestamp,
                component: component.clone(),
                level: level(r.severity_number, &r.severity_text),
                message,
                attributes: attrs,
            };
            if limiter.fits(&record, &mut out) {
                out.logs.push(record);
            }
        }
    }
    let counts = limiter.finish(&mut out, "log records");
    (out, counts)
}

/// A series of a cumulative metric: the component, the metric with its point attributes, and
/// the series' start time (so that a restart begins a new series).
pub type SeriesKey = (String, String, u64);

/// The last point of a cumulative series.
#[derive(Debug, Clone, PartialEq)]
pub struct CumulativePoint {
    time_ns: u64,
    count: f64,
    sum: f64,
    buckets: Vec<u64>,
}

/// The previous point of each cumulative series, bounded: a new series past the bound is not
/// converted (its points are rejected and counted) rather than growing memory without end.
#[derive(Debug, Default)]
pub struct SeriesMemory {
    last: HashMap<SeriesKey, CumulativePoint>,
    max_series: usize,
}

impl SeriesMemory {
    /// Memory for at most `max_series` series.
    pub fn new(max_series: usize) -> Self {
        SeriesMemory {
            last: HashMap::new(),
            max_series,
        }
    }

    /// How many series it remembers.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Applies the updates of a stored batch.
    pub fn apply(&mut self, updates: Vec<(SeriesKey, CumulativePoint)>) {
        for (k, p) in updates {
            if self.last.len() < self.max_series || self.last.contains_key(&k) {
                self.last.insert(k, p);
            }
        }
    }
}

/// `name{k="v",...}` with the point's attributes sorted by key (just `name` without any).
fn series_name(name: &str, attrs: &[KeyValue]) -> String {
    if attrs.is_empty() {
        return name.to_string();
    }
    let sorted = attributes(attrs);
    let inner: Vec<String> = sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", serde_json::Value::from(v.as_str())))
        .collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// The value at quantile `q` of a histogram with `counts` in buckets bounded above by
/// `bounds` (the last bucket open), interpolated linearly inside the bucket; the open ends are
/// the point's min and max when known.
fn bucket_quantile(
    counts: &[u64],
    bounds: &[f64],
    q: f64,
    min: Option<f64>,
    max: Option<f64>,
) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 || counts.len() != bounds.len() + 1 {
        return None;
    }
    let rank = q * total as f64;
    let mut seen = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        if (seen + c) as f64 >= rank {
            let lo = if i == 0 {
                min.unwrap_or_else(|| bounds.first().copied().unwrap_or(0.0).min(0.0))
            } else {
                bounds[i - 1]
            };
            let hi = if i == bounds.len() {
                max.unwrap_or(lo)
            } else {
                bounds[i]
            };
            let within = ((rank - seen as f64) / c as f64).clamp(0.0, 1.0);
            return Some(lo + (hi - lo) * within);
        }
        seen += c;
    }
    None
}

/// Converts metric exports, remembering cumulative series in a [`SeriesMemory`].
#[derive(Debug)]
pub struct MetricConversion<'m> {
    memory: &'m SeriesMemory,
    /// The converted samples (and rejections).
    pub batch: TelemetryBatch,
    /// Points to remember once the batch is stored.
    pub updates: Vec<(SeriesKey, CumulativePoint)>,
    /// What the [`RecordLimits`] took (data points count as records; a point's samples are
    /// held to the byte bound one by one).
    pub limited: LimitCounts,
    new_series: usize,
    limiter: Limiter,
}

impl<'m> MetricConversion<'m> {
    /// Converts `req` against what `memory` remembers.
    pub fn run(memory: &'m SeriesMemory, req: &ExportMetricsServiceRequest) -> Self {
        Self::run_within(memory, req, RecordLimits::UNLIMITED)
    }

    /// Converts `req` against what `memory` remembers, within `limits`.
    pub fn run_within(
        memory: &'m SeriesMemory,
        req: &ExportMetricsServiceRequest,
        limits: RecordLimits,
    ) -> Self {
        let mut c = MetricConversion {
            memory,
            batch: TelemetryBatch::default(),
            updates: Vec::new(),
            limited: LimitCounts::default(),
            new_series: 0,
            limiter: Limiter::new(limits),
        };
        for rm in &req.resource_metrics {
            let component = component_of(rm.resource.as_ref());
            for m in rm.scope_metrics.iter().flat_map(|sm| &sm.metrics) {
                c.metric(&component, m);
            }
        }
        c.limited = c.limiter.finish(&mut c.batch, "data points");
        c
    }

    /// Whether one more data point may be converted.
    fn admit(&mut self) -> bool {
        self.limiter.admit(&mut self.batch)
    }

    /// The attributes kept of a data point.
    fn attributes<'a>(&mut self, kvs: &'a [KeyValue]) -> &'a [KeyValue] {
        self.limiter.attributes(kvs)
    }

    /// Keeps a finite point; a NaN or infinite one is rejected and counted (an exporter's
    /// partial-success answer says how many, and why the first was).
    fn sample(&mut self, component: &str, metric: String, t: Timestamp, value: f64) {
        if value.is_finite() {
            let sample = MetricSample {
                timestamp: t,
                component: component.to_string(),
                metric,
                value,
                labels: BTreeMap::new(),
            };
            if self.limiter.fits(&sample, &mut self.batch) {
                self.batch.metrics.push(sample);
            }
        } else {
            self.batch.reject(|| {
                format!("metric {metric} of {component}: the value {value} is not a finite number")
            });
        }
    }

    /// The previous point of a cumulative series, or `Err` when the series is new and there is
    /// no room for it.
    fn previous(&mut self, key: &SeriesKey) -> Result<Option<CumulativePoint>, ()> {
        if let Some(p) = self.updates.iter().rev().find(|(k, _)| k == key) {
            return Ok(Some(p.1.clone()));
        }
        match self.memory.last.get(key) {
            Some(p) => Ok(Some(p.clone())),
            None if self.memory.last.len() + self.new_series < self.memory.max_series => {
                self.new_series += 1;
                Ok(None)
            }
            None => Err(()),
        }
    }

    fn metric(&mut self, component: &str, m: &opentelemetry_proto::tonic::metrics::v1::Metric) {
        let cumulative = AggregationTemporality::Cumulative as i32;
        match &m.data {
            Some(Data::Gauge(g)) => {
                for p in &g.data_points {
                    if self.admit() {
                        self.number(component, &m.name, p, None);
                    }
                }
            }
            Some(Data::Sum(s)) => {
                for p in &s.data_points {
                    if !self.admit() {
                        continue;
                    }
                    let rate = s
                        .is_monotonic
                        .then_some(s.aggregation_temporality == cumulative);
                    self.number(component, &m.name, p, rate);
                }
            }
            Some(Data::Histogram(h)) => {
                for p in &h.data_points {
                    if !self.admit() {
                        continue;
                    }
                    self.histogram(
                        component,
                        &m.name,
                        p,
                        &p.attributes,
                        h.aggregation_temporality == cumulative,
                    );
                }
            }
            Some(Data::ExponentialHistogram(h)) => {
                for p in &h.data_points {
                    if !self.admit() {
                        continue;
                    }
                    let as_histogram = HistogramDataPoint {
                        start_time_unix_nano: p.start_time_unix_nano,
                        time_unix_nano: p.time_unix_nano,
                        count: p.count,
                        sum: p.sum,
                        min: p.min,
                        max: p.max,
                        ..Default::default()
                    };
                    self.histogram(
                        component,
                        &m.name,
                        &as_histogram,
                        &p.attributes,
                        h.aggregation_temporality == cumulative,
                    );
                }
            }
            Some(Data::Summary(s)) => {
                for p in &s.data_points {
                    if !self.admit() {
                        continue;
                    }
                    let Some(t) = time(p.time_unix_nano) else {
                        self.batch
                            .reject(|| format!("metric {:?}: a point without time", m.name));
                        continue;
                    };
                    let attrs = self.attributes(&p.attributes);
                    for q in &p.quantile_values {
                        let name = format!("{}:p{}", m.name, (q.quantile * 100.0).round());
                        self.sample(component, series_name(&name, attrs), t, q.value);
                    }
                }
            }
            None => self
                .batch
                .reject(|| format!("metric {:?} has no data", m.name)),
        }
    }

    /// A number point; `rate` is `None` for a value, `Some(cumulative)` for a monotonic sum.
    fn number(&mut self, component: &str, name: &str, p: &NumberDataPoint, rate: Option<bool>) {
        let Some(t) = time(p.time_unix_nano) else {
            self.batch
                .reject(|| format!("metric {name:?}: a point without time"));
            return;
        };
        let value = match p.value {
            Some(number_data_point::Value::AsDouble(d)) => d,
            Some(number_data_point::Value::AsInt(i)) => i as f64,
            None => {
                self.batch
                    .reject(|| format!("metric {name:?}: a point without value"));
                return;
            }
        };
        let attrs = self.attributes(&p.attributes);
        match rate {
            None => self.sample(component, series_name(name, attrs), t, value),
            Some(cumulative) => {
                let metric = series_name(&format!("{name}:rate"), attrs);
                let point = CumulativePoint {
                    time_ns: p.time_unix_nano,
                    count: value,
                    sum: 0.0,
                    buckets: Vec::new(),
                };
                match self.delta(
                    component,
                    &metric,
                    p.start_time_unix_nano,
                    cumulative,
                    point,
                ) {
                    Ok(Some((dt, d))) => self.sample(component, metric, t, d.count / dt),
                    Ok(None) => {}
                    Err(why) => self.batch.reject(|| why),
                }
            }
        }
    }

    /// The change since the previous point of a series and the seconds it took: for a delta
    /// series the point itself over its own interval; for a cumulative one the difference to
    /// the remembered point (or to the series' start, counted from zero).
    fn delta(
        &mut self,
        component: &str,
        metric: &str,
        start_ns: u64,
        cumulative: bool,
        point: CumulativePoint,
    ) -> Result<Option<(f64, CumulativePoint)>, String> {
        // An unset start (0) gives no interval.
        let seconds =
            |from: u64, to: u64| (from > 0 && to > from).then(|| (to - from) as f64 / 1e9);
        if !cumulative {
            return Ok(seconds(start_ns, point.time_ns).map(|dt| (dt, point)));
        }
        let key: SeriesKey = (component.to_string(), metric.to_string(), start_ns);
        let prev = self
            .previous(&key)
            .map_err(|()| format!("metric {metric:?}: too many series to remember"))?;
        let out = match &prev {
            Some(prev) if point.time_ns > prev.time_ns && point.count >= prev.count => {
                seconds(prev.time_ns, point.time_ns).map(|dt| {
                    let buckets = if point.buckets.len() == prev.buckets.len() {
                        point
                            .buckets
                            .iter()
                            .zip(&prev.buckets)
                            .map(|(a, b)| a.saturating_sub(*b))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    (
                        dt,
                        CumulativePoint {
                            time_ns: point.time_ns,
                            count: point.count - prev.count,
                            sum: point.sum - prev.sum,
                            buckets,
                        },
                    )
                })
            }
            Some(_) => None,
            None => seconds(start_ns, point.time_ns).map(|dt| (dt, point.clone())),
        };
        if prev.as_ref().is_none_or(|p| point.time_ns > p.time_ns) {
            self.updates.push((key, point));
        }
        Ok(out)
    }

    /// A histogram point with its attributes `attrs` (an exponential histogram's point comes
    /// as a histogram point without buckets and attributes).
    fn histogram(
        &mut self,
        component: &str,
        name: &str,
        p: &HistogramDataPoint,
        attrs: &[KeyValue],
        cumulative: bool,
    ) {
        let Some(t) = time(p.time_unix_nano) else {
            self.batch
                .reject(|| format!("metric {name:?}: a point without time"));
            return;
        };
        let point = CumulativePoint {
            time_ns: p.time_unix_nano,
            count: p.count as f64,
            sum: p.sum.unwrap_or(f64::NAN),
            buckets: p.bucket_counts.clone(),
        };
        let attrs = self.attributes(attrs);
        let key_name = series_name(name, attrs);
        match self.delta(
            component,
            &key_name,
            p.start_time_unix_nano,
            cumulative,
            point,
        ) {
            Ok(Some((dt, d))) => {
                let named = |stat: &str| series_name(&format!("{name}:{stat}"), attrs);
                self.sample(component, named("rate"), t, d.count / dt);
                if d.count > 0.0 {
                    self.sample(component, named("mean"), t, d.sum / d.count);
                    if let Some(q) =
                        bucket_quantile(&d.buckets, &p.explicit_bounds, 0.9, p.min, p.max)
                    {
                        self.sample(component, named("p90"), t, q);
                    }
                }
            }
            Ok(None) => {}
            Err(why) => self.batch.reject(|| why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::metrics::v1::{
        Gauge, Histogram, Metric, ResourceMetrics, ScopeMetrics, Sum,
    };

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.into())),
            }),
            ..Default::default()
        }
    }

    fn export(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", "cart")],
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * S;

    fn counter(t: u64, v: i64) -> Metric {
        Metric {
            name: "requests".into(),
            data: Some(Data::Sum(Sum {
                data_points: vec![NumberDataPoint {
                    attributes: vec![kv("route", "/pay")],
                    start_time_unix_nano: T0,
                    time_unix_nano: t,
                    value: Some(number_data_point::Value::AsInt(v)),
                    ..Default::default()
                }],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        }
    }

    #[test]
    fn cumulative_counters_become_rates_once_stored() {
        let mut memory = SeriesMemory::new(10);
        let first = MetricConversion::run(&memory, &export(vec![counter(T0 + 10 * S, 50)]));
        assert_eq!(first.batch.metrics.len(), 1);
        assert_eq!(
            first.batch.metrics[0].metric,
            "requests:rate{route=\"/pay\"}"
        );
        assert_eq!(first.batch.metrics[0].value, 5.0);
        assert_eq!(first.batch.metrics[0].component, "cart");
        // Not stored: the next conversion still counts from the start.
        let again = MetricConversion::run(&memory, &export(vec![counter(T0 + 20 * S, 80)]));
        assert_eq!(again.batch.metrics[0].value, 4.0);
        memory.apply(first.updates);
        let next = MetricConversion::run(&memory, &export(vec![counter(T0 + 20 * S, 80)]));
        assert_eq!(next.batch.metrics[0].value, 3.0);
        // A point older than the remembered one says nothing.
        memory.apply(next.updates);
        let late = MetricConversion::run(&memory, &export(vec![counter(T0 + 15 * S, 60)]));
        assert!(late.batch.metrics.is_empty());
        assert_eq!(late.batch.rejected, 0);
    }

    #[test]
    fn series_past_the_bound_are_rejected_and_counted() {
        let memory = SeriesMemory::new(1);
        let mut second = counter(T0 + 10 * S, 5);
        second.name = "errors".into();
        let c = MetricConversion::run(&memory, &export(vec![counter(T0 + 10 * S, 5), second]));
        assert_eq!(c.batch.metrics.len(), 1);
        assert_eq!(c.batch.rejected, 1);
        assert!(c.batch.rejection.unwrap().contains("too many series"));
    }

    #[test]
    fn points_that_are_not_finite_numbers_are_rejected_and_counted() {
        let memory = SeriesMemory::new(10);
        let point = |t: u64, v: f64| NumberDataPoint {
            time_unix_nano: t,
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        };
        let gauge = Metric {
            name: "queue".into(),
            data: Some(Data::Gauge(Gauge {
                data_points: vec![
                    point(T0, f64::NAN),
                    point(T0 + 10 * S, f64::INFINITY),
                    point(T0 + 20 * S, 3.0),
                ],
            })),
            ..Default::default()
        };
        let c = MetricConversion::run(&memory, &export(vec![gauge]));
        assert_eq!(c.batch.metrics.len(), 1);
        assert_eq!(c.batch.rejected, 2);
        assert!(c.batch.rejection.unwrap().contains("not a finite number"));
    }

    #[test]
    fn gauges_and_histograms() {
        let memory = SeriesMemory::new(10);
        let gauge = Metric {
            name: "queue".into(),
            data: Some(Data::Gauge(Gauge {
                data_points: vec![NumberDataPoint {
                    time_unix_nano: T0,
                    value: Some(number_data_point::Value::AsDouble(7.5)),
                    ..Default::default()
                }],
            })),
            ..Default::default()
        };
        let histogram = Metric {
            name: "latency".into(),
            data: Some(Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    start_time_unix_nano: T0,
                    time_unix_nano: T0 + 10 * S,
                    count: 10,
                    sum: Some(30.0),
                    bucket_counts: vec![0, 8, 2],
                    explicit_bounds: vec![1.0, 5.0],
                    max: Some(9.0),
                    ..Default::default()
                }],
                aggregation_temporality: AggregationTemporality::Delta as i32,
            })),
            ..Default::default()
        };
        let c = MetricConversion::run(&memory, &export(vec![gauge, histogram]));
        let by_name: BTreeMap<_, _> = c
            .batch
            .metrics
            .iter()
            .map(|m| (m.metric.as_str(), m.value))
            .collect();
        assert_eq!(by_name["queue"], 7.5);
        assert_eq!(by_name["latency:rate"], 1.0);
        assert_eq!(by_name["latency:mean"], 3.0);
        // The 9th of 10 values lies in the open bucket (5, max 9]: halfway through it.
        assert_eq!(by_name["latency:p90"], 7.0);
        assert!(c.updates.is_empty(), "delta series need no memory");
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        assert_eq!(
            bucket_quantile(&[10, 0], &[2.0], 0.5, Some(0.0), None),
            Some(1.0)
        );
        assert_eq!(bucket_quantile(&[0, 0], &[2.0], 0.5, None, None), None);
        assert_eq!(bucket_quantile(&[1], &[2.0], 0.5, None, None), None);
    }

    #[test]
    fn levels_follow_severity_bands_then_text() {
        assert_eq!(level(17, ""), Some(Level::Error));
        assert_eq!(level(13, "info"), Some(Level::Warning));
        assert_eq!(level(0, "WARN"), Some(Level::Warning));
        assert_eq!(level(0, ""), None);
    }

    #[test]
    fn ids_are_hex_and_values_are_text() {
        assert_eq!(hex(&[0x0a, 0xff]), "0aff");
        let arr = AnyValue {
            value: Some(any_value::Value::ArrayValue(
                opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: vec![AnyValue {
                        value: Some(any_value::Value::IntValue(3)),
                    }],
                },
            )),
        };
        assert_eq!(value_text(&arr), "[3]");
        assert_eq!(
            value_text(&AnyValue {
                value: Some(any_value::Value::StringValue("x".into()))
            }),
            "x"
        );
    }

    #[test]
    fn limits_reject_records_and_drop_attributes_with_a_message() {
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span as OtlpSpan};
        let span = |i: u8, attrs: usize| OtlpSpan {
            trace_id: vec![1; 16],
            span_id: vec![i; 8],
            start_time_unix_nano: T0,
            attributes: (0..attrs).map(|a| kv(&format!("k{a}"), "v")).collect(),
            ..Default::default()
        };
        let mut failed = span(1, 4);
        failed
            .attributes
            .push(kv("http.response.status_code", "503"));
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![failed, span(2, 1), span(3, 0), OtlpSpan::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let limits = RecordLimits {
            max_records: 3,
            max_attributes: 2,
            max_bytes: u64::MAX,
        };
        let (batch, counts) = spans_within(&req, limits);
        assert_eq!(batch.spans.len(), 3);
        assert_eq!(batch.spans[0].attributes.len(), 2);
        // The failure is read from an attribute past the limit.
        assert!(batch.spans[0].error);
        assert_eq!(batch.rejected, 1);
        assert_eq!(
            counts,
            LimitCounts {
                attributes_dropped: 3,
                records_cut: 1,
                over_records: 1,
                over_bytes: 0
            }
        );
        let why = batch.rejection.unwrap();
        assert!(
            why.contains("1 spans past the first 3") && why.contains("3 attributes dropped"),
            "{why}"
        );
        // Unlimited, the conversion is as before.
        let all = spans(&req);
        assert_eq!((all.spans.len(), all.rejected), (3, 1));
        assert_eq!(all.spans[0].attributes.len(), 5);
    }

    #[test]
    fn converted_records_are_held_to_the_byte_bound() {
        use opentelemetry_proto::tonic::metrics::v1::{
            Summary, SummaryDataPoint, summary_data_point,
        };
        // One summary point with 100 attributes of 1 KB and 1000 quantiles: each quantile's
        // sample names every attribute, 100 MB from a body of about 120 KB.
        let point = SummaryDataPoint {
            attributes: (0..100)
                .map(|a| kv(&format!("k{a}"), &"x".repeat(1000)))
                .collect(),
            time_unix_nano: T0,
            quantile_values: (0..1000)
                .map(|q| summary_data_point::ValueAtQuantile {
                    quantile: f64::from(q) / 1000.0,
                    value: 1.0,
                })
                .collect(),
            ..Default::default()
        };
        let summary = Metric {
            name: "latency".into(),
            data: Some(Data::Summary(Summary {
                data_points: vec![point],
            })),
            ..Default::default()
        };
        let limits = RecordLimits {
            max_records: 10,
            max_attributes: 128,
            max_bytes: 1 << 20,
        };
        let memory = SeriesMemory::new(10);
        let c = MetricConversion::run_within(&memory, &export(vec![summary]), limits);
        let bytes: u64 = c.batch.metrics.iter().map(RecordBytes::record_bytes).sum();
        assert!(bytes <= 1 << 20, "{bytes}");
        assert!(!c.batch.metrics.is_empty());
        assert_eq!(
            c.batch.metrics.len() as u64 + c.limited.over_bytes,
            1000,
            "every quantile is a sample kept or rejected"
        );
        assert_eq!(c.batch.rejected, c.limited.over_bytes);
        assert!(
            c.batch
                .rejection
                .unwrap()
                .contains("max_request_memory_bytes")
        );
    }

    #[test]
    fn record_bytes_count_text_and_attributes() {
        let span = Span {
            trace_id: "ab".into(),
            span_id: "cd".into(),
            parent_id: None,
            component: "cart".into(),
            operation: "GET".into(),
            start: Timestamp::from_secs(1),
            duration_us: 1,
            error: false,
            attributes: [("k".to_string(), "v".repeat(1000))].into(),
        };
        let base = std::mem::size_of::<Span>() as u64 + 2 + 2 + 4 + 3;
        assert_eq!(span.record_bytes(), base + 1001 + ATTRIBUTE_OVERHEAD_BYTES);
    }
}
