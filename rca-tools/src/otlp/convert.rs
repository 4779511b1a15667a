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

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, HistogramDataPoint, NumberDataPoint, metric::Data, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use rca_core::Timestamp;
use rca_core::source::{Level, LogRecord, MetricSample, Span};

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
    /// Why the first rejected item was rejected.
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

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
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

/// Spans of a trace export.
pub fn spans(req: &ExportTraceServiceRequest) -> TelemetryBatch {
    let mut out = TelemetryBatch::default();
    for rs in &req.resource_spans {
        let component = component_of(rs.resource.as_ref());
        for s in rs.scope_spans.iter().flat_map(|ss| &ss.spans) {
            if s.trace_id.is_empty() || s.span_id.is_empty() {
                out.reject(|| format!("span {:?} has no trace or span id", s.name));
                continue;
            }
            let Some(start) = time(s.start_time_unix_nano) else {
                out.reject(|| format!("span {:?} has no start time", s.name));
                continue;
            };
            let attributes = attributes(&s.attributes);
            let http_failed = ["http.response.status_code", "http.status_code"]
                .iter()
                .filter_map(|k| attributes.get(*k)?.parse::<u16>().ok())
                .any(|code| code >= 500);
            let status_error = s.status.as_ref().is_some_and(|st| st.code == 2);
            let duration_ns = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
            out.spans.push(Span {
                trace_id: hex(&s.trace_id),
                span_id: hex(&s.span_id),
                parent_id: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
                component: component.clone(),
                operation: s.name.clone(),
                start,
                duration_us: duration_ns / 1000,
                error: status_error || http_failed,
                attributes,
            });
        }
    }
    out
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
    let mut out = TelemetryBatch::default();
    for rl in &req.resource_logs {
        let component = component_of(rl.resource.as_ref());
        for r in rl.scope_logs.iter().flat_map(|sl| &sl.log_records) {
            let timestamp = time(r.time_unix_nano)
                .or_else(|| time(r.observed_time_unix_nano))
                .unwrap_or(received);
            let mut attrs = attributes(&r.attributes);
            if !r.trace_id.is_empty() {
                attrs.insert(TRACE_ID.into(), hex(&r.trace_id));
            }
            if !r.span_id.is_empty() {
                attrs.insert(SPAN_ID.into(), hex(&r.span_id));
            }
            let mut message = r.body.as_ref().map(value_text).unwrap_or_default();
            if message.is_empty() && !r.event_name.is_empty() {
                message = r.event_name.clone();
            }
            out.logs.push(LogRecord {
                timestamp,
                component: component.clone(),
                level: level(r.severity_number, &r.severity_text),
                message,
                attributes: attrs,
            });
        }
    }
    out
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
    new_series: usize,
}

impl<'m> MetricConversion<'m> {
    /// Converts `req` against what `memory` remembers.
    pub fn run(memory: &'m SeriesMemory, req: &ExportMetricsServiceRequest) -> Self {
        let mut c = MetricConversion {
            memory,
            batch: TelemetryBatch::default(),
            updates: Vec::new(),
            new_series: 0,
        };
        for rm in &req.resource_metrics {
            let component = component_of(rm.resource.as_ref());
            for m in rm.scope_metrics.iter().flat_map(|sm| &sm.metrics) {
                c.metric(&component, m);
            }
        }
        c
    }

    /// Keeps a finite point; a NaN or infinite one is rejected and counted (an exporter's
    /// partial-success answer says how many, and why the first was).
    fn sample(&mut self, component: &str, metric: String, t: Timestamp, value: f64) {
        if value.is_finite() {
            self.batch.metrics.push(MetricSample {
                timestamp: t,
                component: component.to_string(),
                metric,
                value,
                labels: BTreeMap::new(),
            });
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
                    self.number(component, &m.name, p, None);
                }
            }
            Some(Data::Sum(s)) => {
                for p in &s.data_points {
                    let rate = s
                        .is_monotonic
                        .then_some(s.aggregation_temporality == cumulative);
                    self.number(component, &m.name, p, rate);
                }
            }
            Some(Data::Histogram(h)) => {
                for p in &h.data_points {
                    self.histogram(
                        component,
                        &m.name,
                        p,
                        h.aggregation_temporality == cumulative,
                    );
                }
            }
            Some(Data::ExponentialHistogram(h)) => {
                for p in &h.data_points {
                    let as_histogram = HistogramDataPoint {
                        attributes: p.attributes.clone(),
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
                        h.aggregation_temporality == cumulative,
                    );
                }
            }
            Some(Data::Summary(s)) => {
                for p in &s.data_points {
                    let Some(t) = time(p.time_unix_nano) else {
                        self.batch
                            .reject(|| format!("metric {:?}: a point without time", m.name));
                        continue;
                    };
                    for q in &p.quantile_values {
                        let name = format!("{}:p{}", m.name, (q.quantile * 100.0).round());
                        self.sample(component, series_name(&name, &p.attributes), t, q.value);
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
        match rate {
            None => self.sample(component, series_name(name, &p.attributes), t, value),
            Some(cumulative) => {
                let metric = series_name(&format!("{name}:rate"), &p.attributes);
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

    fn histogram(&mut self, component: &str, name: &str, p: &HistogramDataPoint, cumulative: bool) {
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
        let key_name = series_name(name, &p.attributes);
        match self.delta(
            component,
            &key_name,
            p.start_time_unix_nano,
            cumulative,
            point,
        ) {
            Ok(Some((dt, d))) => {
                let named = |stat: &str| series_name(&format!("{name}:{stat}"), &p.attributes);
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
}
