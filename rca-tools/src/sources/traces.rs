//! Span files: OTLP JSON (`{"resourceSpans": [...]}`, one document per file or per line) and
//! CSV (one span per row; columns matched by name).

use std::io::{BufRead, Read};
use std::path::Path;

use async_trait::async_trait;
use std::sync::Arc;

use rca_core::source::{RecordStream, SharedRecords, Span, TraceQuery, TraceSource};
use rca_core::{Attributes, Name, SourceError, TimeRange, Timestamp};
use serde_json::Value;

use super::io::{ReadBudget, csv_stream_failure, open_text_within, over_budget, parse_time};
use super::{LoadReport, SharedNames, before_cutoff, find_col};

/// How a span file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanFormat {
    /// OTLP JSON, as the OpenTelemetry collector's file exporter writes it.
    OtlpJson,
    /// CSV with columns for trace id, span id, parent id, component, operation, start and
    /// duration (microseconds) or end, and optionally an error flag or status code.
    Csv,
}

impl SpanFormat {
    /// Guesses the format from the file name: `.json`/`.jsonl` (also `.gz`) are OTLP JSON.
    pub fn from_path(path: &Path) -> SpanFormat {
        let name = path.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".json") || name.ends_with(".jsonl") || name.ends_with(".ndjson") {
            SpanFormat::OtlpJson
        } else {
            SpanFormat::Csv
        }
    }
}

/// Spans read from files, answering [`TraceSource`] queries from memory.
#[derive(Debug, Clone, Default)]
pub struct FileTraceSource {
    spans: Arc<Vec<Span>>,
    cutoff: Option<Timestamp>,
    report: LoadReport,
}

impl FileTraceSource {
    /// A source over spans already in memory (sorted by start; the cutoff applies to starts).
    /// Their names are made shared ([`Span::share_names`]), so each distinct id, component
    /// and operation is held once.
    pub fn from_spans(spans: Vec<Span>, cutoff: Option<Timestamp>) -> Self {
        FileTraceSource::from_shared(SharedNames::from_records(spans).records, cutoff)
    }

    /// A source over spans whose names are already shared.
    fn from_shared(mut spans: Vec<Span>, cutoff: Option<Timestamp>) -> Self {
        let before = spans.len();
        spans.retain(|s| before_cutoff(cutoff, s.start));
        spans.sort_by_key(|s| s.start);
        let report = LoadReport {
            records: spans.len(),
            after_cutoff: before - spans.len(),
            ..LoadReport::default()
        };
        FileTraceSource {
            spans: Arc::new(spans),
            cutoff,
            report,
        }
    }

    /// Reads the given files (format from `format` or each file name). A span that starts at
    /// or after `cutoff` is dropped; a row that cannot be decoded is counted and skipped.
    pub fn open<P: AsRef<Path>>(
        paths: &[P],
        format: Option<SpanFormat>,
        cutoff: Option<Timestamp>,
    ) -> Result<Self, SourceError> {
        FileTraceSource::open_within(paths, format, cutoff, None)
    }

    /// [`FileTraceSource::open`] within a read budget shared by the files: once the
    /// decompressed bytes exceed it, reading stops with an error.
    pub fn open_within<P: AsRef<Path>>(
        paths: &[P],
        format: Option<SpanFormat>,
        cutoff: Option<Timestamp>,
        budget: Option<&ReadBudget>,
    ) -> Result<Self, SourceError> {
        let mut report = LoadReport::default();
        let mut spans = SharedNames::default();
        for path in paths {
            let path = path.as_ref();
            let reader = open_text_within(path, budget)?;
            report.files += 1;
            match format.unwrap_or_else(|| SpanFormat::from_path(path)) {
                SpanFormat::Csv => read_csv(reader, path, &mut spans, &mut report)?,
                SpanFormat::OtlpJson => read_otlp(reader, path, &mut spans, &mut report)?,
            }
        }
        let mut s = FileTraceSource::from_shared(spans.records, cutoff);
        report.after_cutoff += s.report.after_cutoff;
        report.records = s.spans.len();
        s.report = report;
        Ok(s)
    }

    /// What loading produced.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Every span, by start time.
    pub fn spans_all(&self) -> &[Span] {
        &self.spans
    }

    /// The spans that match a query, by start time (the cutoff always applies).
    pub fn query(&self, query: &TraceQuery) -> Vec<Span> {
        super::in_range(&self.spans, query.range, self.cutoff, |s| s.start)
            .filter(|s| query.matches(s))
            .cloned()
            .collect()
    }
}

#[async_trait]
impl TraceSource for FileTraceSource {
    async fn spans(&self, query: &TraceQuery) -> Result<RecordStream<Span>, SourceError> {
        let hits: Vec<_> = self.query(query).into_iter().map(Ok).collect();
        Ok(Box::pin(futures::stream::iter(hits)))
    }

    fn lend_spans(&self, range: TimeRange) -> Option<SharedRecords<Span>> {
        Some(SharedRecords::new(
            Arc::clone(&self.spans),
            super::range_of(&self.spans, range, self.cutoff, |s| s.start),
        ))
    }
}

/// Whether a parent-id cell means "no parent".
fn no_parent(p: &str) -> bool {
    let p = p.trim();
    p.is_empty()
        || p.eq_ignore_ascii_case("root")
        || p.eq_ignore_ascii_case("null")
        || p.eq_ignore_ascii_case("none")
        || p.bytes().all(|b| b == b'0')
}

/// Whether a status cell means the span failed (`true`, `error`, `STATUS_CODE_ERROR`, OTLP
/// code 2, or an HTTP status of 500 and above).
fn is_error(cell: &str) -> bool {
    let c = cell.trim().to_ascii_lowercase();
    match c.parse::<i64>() {
        Ok(n) => n == 1 || n == 2 || n >= 500,
        Err(_) => c == "true" || c.contains("error") || c == "failed" || c == "fail",
    }
}

fn read_csv(
    reader: Box<dyn BufRead + Send>,
    path: &Path,
    out: &mut SharedNames<Span>,
    report: &mut LoadReport,
) -> Result<(), SourceError> {
    let malformed = |m: String| SourceError::Malformed {
        location: path.display().to_string(),
        message: m,
    };
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let headers: Vec<String> = csv
        .headers()
        .map_err(|e| match csv_stream_failure(path, &e) {
            Err(over) => over,
            Ok(_) => malformed(format!("no CSV header: {e}")),
        })?
        .iter()
        .map(str::to_string)
        .collect();
    let col = |aliases: &[&str]| find_col(&headers, aliases);
    let trace = col(&["traceid", "trace"]);
    let span = col(&["spanid", "span"]);
    let parent = col(&["parentid", "parentspanid", "parent"]);
    let component = col(&[
        "component",
        "service",
        "servicename",
        "pod",
        "podname",
        "cmdbid",
        "host",
    ]);
    let operation = col(&["operation", "operationname", "spanname", "name", "endpoint"]);
    let start = col(&[
        "starttimeunixnano",
        "start",
        "starttime",
        "startts",
        "timestamp",
        "time",
    ]);
    let end = col(&["endtimeunixnano", "end", "endtime", "endts"]);
    let duration = col(&["durationus", "duration", "elapsed", "elapsedus"]);
    let status = col(&["error", "status", "statuscode", "iserror"]);
    let (Some(trace), Some(span), Some(component), Some(operation), Some(start)) =
        (trace, span, component, operation, start)
    else {
        return Err(malformed(format!(
            "a span CSV needs trace id, span id, component, operation and start columns; \
             found {headers:?}"
        )));
    };
    if duration.is_none() && end.is_none() {
        return Err(malformed(
            "a span CSV needs a duration or an end column".into(),
        ));
    }
    for (i, row) in csv.records().enumerate() {
        let loc = || format!("{}:{}", path.display(), i + 2);
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                let ends = csv_stream_failure(path, &e)?;
                report.bad(loc(), e);
                if ends {
                    break;
                }
                continue;
            }
        };
        let get = |c: usize| row.get(c).unwrap_or("");
        let Some(start_ts) = parse_time(get(start)) else {
            report.bad(loc(), "unreadable start time");
            continue;
        };
        let duration_us = match duration.and_then(|d| get(d).parse::<f64>().ok()) {
            Some(d) if d >= 0.0 && d.is_finite() => d as u64,
            _ => match end.and_then(|e| exact_micros(get(e))) {
                Some(end_us) => {
                    let start_us = exact_micros(get(start)).unwrap_or(start_ts.millis() * 1000);
                    (end_us - start_us).max(0) as u64
                }
                None => {
                    report.bad(loc(), "unreadable duration and end");
                    continue;
                }
            },
        };
        let (trace_id, span_id) = (get(trace).to_string(), get(span).to_string());
        if trace_id.is_empty() || span_id.is_empty() {
            report.bad(loc(), "empty trace or span id");
            continue;
        }
        out.push(Span {
            trace_id: trace_id.into(),
            span_id: span_id.into(),
            parent_id: parent.map(get).filter(|p| !no_parent(p)).map(Name::from),
            component: get(component).into(),
            operation: get(operation).into(),
            start: start_ts,
            duration_us,
            error: status.is_some_and(|s| is_error(get(s))),
            attributes: Default::default(),
        });
    }
    Ok(())
}

/// A time cell in microseconds since the epoch, keeping the precision of integer nanoseconds.
fn exact_micros(cell: &str) -> Option<i64> {
    let c = cell.trim();
    if c.len() >= 18 && c.bytes().all(|b| b.is_ascii_digit()) {
        return c.parse::<i64>().ok().map(|n| n / 1000);
    }
    parse_time(c).map(|t| t.millis() * 1000)
}

fn read_otlp(
    mut reader: Box<dyn BufRead + Send>,
    path: &Path,
    out: &mut SharedNames<Span>,
    report: &mut LoadReport,
) -> Result<(), SourceError> {
    let mut text = String::new();
    reader.read_to_string(&mut text).map_err(|e| {
        over_budget(path, &e).unwrap_or_else(|| SourceError::Malformed {
            location: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })
    })?;
    // Either one JSON document, or one document per line (the collector's file exporter).
    match serde_json::from_str::<Value>(&text) {
        Ok(doc) => otlp_document(&doc, &path.display().to_string(), out, report),
        Err(_) => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let loc = format!("{}:{}", path.display(), i + 1);
                match serde_json::from_str::<Value>(line) {
                    Ok(doc) => otlp_document(&doc, &loc, out, report),
                    Err(e) => report.bad(&loc, format!("not JSON: {e}")),
                }
            }
        }
    }
    Ok(())
}

fn attr_text(v: &Value) -> String {
    // OTLP AnyValue: {"stringValue": ...} / {"intValue": ...} / ...
    match v.as_object().and_then(|o| o.values().next()) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => v.to_string(),
    }
}

fn attributes(v: Option<&Value>) -> Attributes {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|kv| {
                    let k = kv.get("key")?.as_str()?;
                    Some((k.to_string(), attr_text(kv.get("value")?)))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn nanos(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::String(s) => s.trim().parse().ok(),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    }
}

fn otlp_document(doc: &Value, loc: &str, out: &mut SharedNames<Span>, report: &mut LoadReport) {
    let Some(resource_spans) = doc.get("resourceSpans").and_then(Value::as_array) else {
        report.bad(loc, "no resourceSpans array");
        return;
    };
    for rs in resource_spans {
        let resource = attributes(rs.get("resource").and_then(|r| r.get("attributes")));
        let component = resource
            .get("service.name")
            .or_else(|| resource.get("k8s.pod.name"))
            .or_else(|| resource.get("host.name"))
            .cloned()
            .unwrap_or_default();
        let scopes = rs
            .get("scopeSpans")
            .or_else(|| rs.get("instrumentationLibrarySpans"))
            .and_then(Value::as_array);
        for scope in scopes.into_iter().flatten() {
            for s in scope
                .get("spans")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (Some(start), Some(end)) = (
                    nanos(s.get("startTimeUnixNano")),
                    nanos(s.get("endTimeUnixNano")),
                ) else {
                    report.bad(loc, "span without start or end time");
                    continue;
                };
                let (trace_id, span_id) = (text("traceId"), text("spanId"));
                if trace_id.is_empty() || span_id.is_empty() {
                    report.bad(loc, "span without trace or span id");
                    continue;
                }
                let parent = text("parentSpanId");
                let status = s.get("status").and_then(|st| st.get("code"));
                let error = match status {
                    Some(Value::Number(n)) => n.as_i64() == Some(2),
                    Some(Value::String(c)) => c.to_ascii_uppercase().contains("ERROR"),
                    _ => false,
                };
                out.push(Span {
                    trace_id: trace_id.into(),
                    span_id: span_id.into(),
                    parent_id: (!no_parent(&parent)).then_some(parent).map(Name::from),
                    component: component.as_str().into(),
                    operation: text("name").into(),
                    start: Timestamp::from_nanos(start),
                    duration_us: ((end - start).max(0) / 1000) as u64,
                    error,
                    attributes: attributes(s.get("attributes")),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    #[test]
    fn a_loaded_source_holds_each_name_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("spans.csv");
        let mut text =
            String::from("trace_id,span_id,parent_id,component,operation,start,duration_us\n");
        for t in 0..50 {
            text.push_str(&format!("t{t},a{t},,web,GET /,{t}000,10\n"));
            text.push_str(&format!("t{t},b{t},a{t},db,query,{t}001,5\n"));
        }
        std::fs::write(&p, text).unwrap();
        let files = FileTraceSource::open(&[&p], None, None).unwrap();
        // The same spans handed over in memory, each name its own allocation.
        let memory = FileTraceSource::from_spans(
            files
                .spans_all()
                .iter()
                .map(|s| Span {
                    trace_id: s.trace_id.as_str().into(),
                    span_id: s.span_id.as_str().into(),
                    parent_id: s.parent_id.as_deref().map(Name::from),
                    component: s.component.as_str().into(),
                    operation: s.operation.as_str().into(),
                    ..s.clone()
                })
                .collect(),
            None,
        );
        for source in [&files, &memory] {
            let spans = source.spans_all();
            assert_eq!(spans.len(), 100);
            let webs: Vec<&Span> = spans.iter().filter(|s| s.component == "web").collect();
            assert!(
                webs.iter()
                    .all(|s| s.component.shares_with(&webs[0].component))
            );
            assert!(
                webs.iter()
                    .all(|s| s.operation.shares_with(&webs[0].operation))
            );
            for child in spans.iter().filter(|s| s.component == "db") {
                let parent = spans
                    .iter()
                    .find(|p| Some(&p.span_id) == child.parent_id.as_ref())
                    .unwrap();
                assert!(child.trace_id.shares_with(&parent.trace_id));
                assert!(
                    child
                        .parent_id
                        .as_ref()
                        .unwrap()
                        .shares_with(&parent.span_id)
                );
            }
        }
    }

    #[test]
    fn lent_spans_are_the_streamed_answer_without_a_copy() {
        let span = |t: i64| Span {
            trace_id: format!("t{t}").into(),
            span_id: "s".into(),
            parent_id: None,
            component: "c".into(),
            operation: "op".into(),
            start: Timestamp(t),
            duration_us: 1,
            error: false,
            attributes: Default::default(),
        };
        let source =
            FileTraceSource::from_spans((0..10).rev().map(span).collect(), Some(Timestamp(8)));
        for (a, b) in [(0, 10), (3, 6), (5, 5), (7, 20), (-5, 2)] {
            let range = TimeRange::new(Timestamp(a), Timestamp(b));
            let streamed = source.query(&TraceQuery::range(range));
            let lent = source.lend_spans(range).unwrap();
            assert_eq!(&lent[..], &streamed[..], "{a}..{b}");
        }
        // Lent from the source's own buffer.
        let all = source.lend_spans(TimeRange::new(Timestamp(0), Timestamp(99)));
        assert!(std::ptr::eq(
            all.unwrap().as_ptr(),
            source.spans_all().as_ptr()
        ));
    }

    #[test]
    fn csv_spans_with_root_parent_and_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        std::fs::write(
            &p,
            "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n\
             t1,a,root,front-1,GET /,1674984275529000000,1674984275699829151,170829\n\
             t1,b,a,back-1,query,1674984275530000000,1674984275540000000,\n\
             t1,c,a,back-1,query,notatime,1,1\n",
        )
        .unwrap();
        let s = FileTraceSource::open(&[&p], None, None).unwrap();
        assert_eq!(s.report().bad_rows, 1);
        let spans = s.spans_all();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].parent_id, None);
        assert_eq!(spans[0].duration_us, 170_829);
        assert_eq!(spans[1].duration_us, 10_000);
        assert_eq!(spans[1].parent_id.as_deref(), Some("a"));
    }

    #[test]
    fn otlp_json_document_and_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(
            &p,
            r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"cart"}}]},
               "scopeSpans":[{"spans":[
                 {"traceId":"t","spanId":"s1","parentSpanId":"","name":"checkout","startTimeUnixNano":"1000000000","endTimeUnixNano":"1500000000","status":{"code":2}},
                 {"traceId":"t","spanId":"s2","parentSpanId":"s1","name":"db","startTimeUnixNano":1100000000,"endTimeUnixNano":1200000000,"attributes":[{"key":"db.system","value":{"stringValue":"pg"}}]},
                 {"traceId":"t","spanId":"s3","name":"late","startTimeUnixNano":"9000000000","endTimeUnixNano":"9100000000"},
                 {"traceId":"t","name":"broken"}
               ]}]}]}"#,
        )
        .unwrap();
        let s = FileTraceSource::open(&[&p], None, Some(Timestamp::from_secs(5))).unwrap();
        assert_eq!(s.report().bad_rows, 1);
        assert_eq!(s.report().after_cutoff, 1);
        let spans = s.spans_all();
        assert_eq!(spans.len(), 2);
        assert!(spans[0].error && spans[0].parent_id.is_none());
        assert_eq!(spans[0].component, "cart");
        assert_eq!(spans[0].duration_us, 500_000);
        assert_eq!(spans[1].attributes.get("db.system").unwrap(), "pg");
        let q = TraceQuery::range(TimeRange::new(Timestamp(0), Timestamp(i64::MAX)));
        assert_eq!(s.query(&q).len(), 2);
    }

    #[test]
    fn missing_columns_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        std::fs::write(&p, "a,b\n1,2\n").unwrap();
        assert!(FileTraceSource::open(&[&p], None, None).is_err());
        assert!(is_error("STATUS_CODE_ERROR") && is_error("503") && !is_error("200"));
    }
}
