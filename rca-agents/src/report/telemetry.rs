//! What a report bundle gathers from the incident's telemetry to draw: the series of every
//! metric in the evidence chain over the baseline and the current window, and the slowest
//! trace through the top root-cause candidate. Everything is bounded: a few charts, a few
//! hundred points per chart, a few dozen spans per waterfall, names cut to a length.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::StreamExt;
use rca_core::source::{MetricQuery, MetricSource, Span, TraceQuery, TraceSource};
use rca_core::{DiagnosisReport, Incident, Modality, TimeRange, Timestamp};
use serde::{Deserialize, Serialize};

use crate::orchestra::Escalation;
use crate::orchestra::explorers::WindowPolicy;

/// Metric charts drawn at most (the first metrics of the evidence chain).
pub const MAX_CHARTS: usize = 8;
/// Points kept of a chart's baseline.
pub const MAX_BASELINE_POINTS: usize = 160;
/// Points kept of a chart's current window.
pub const MAX_CURRENT_POINTS: usize = 80;
/// Spans drawn of a waterfall.
pub const MAX_WATERFALL_SPANS: usize = 40;
/// Spans of one trace read at most (the rest are counted, not kept).
pub const MAX_TRACE_SPANS: usize = 10_000;
/// Characters kept of a name (component, metric, operation).
pub const MAX_NAME_CHARS: usize = 200;
/// How far before the slowest span its trace's other spans are looked for (milliseconds).
const TRACE_LOOKBACK_MILLIS: i64 = 10 * 60_000;

/// The windows a diagnosis compared: what normal looked like, what was examined, and when the
/// problem began (when known or estimated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReportWindows {
    /// What normal looks like.
    pub baseline: TimeRange,
    /// What was examined; ends at or before the detection time.
    pub current: TimeRange,
    /// When the problem began, if known or estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset: Option<Timestamp>,
}

impl ReportWindows {
    /// The windows the diagnosis explorers cut for `incident` ([`WindowPolicy::windows`]),
    /// with `onset` (known or estimated) as the start of the current window when given, else
    /// the incident's own onset, else the last `current_millis` before the detection time.
    /// `baseline` is a known quiet period, if the host has one.
    pub fn for_incident(
        incident: &Incident,
        onset: Option<Timestamp>,
        current_millis: i64,
        baseline: Option<TimeRange>,
    ) -> Self {
        let onset = onset.or(incident.onset);
        let mut with_onset = Incident {
            topology: Vec::new(),
            description: String::new(),
            system: String::new(),
            ..incident.clone()
        };
        with_onset.onset = onset;
        let policy = WindowPolicy {
            current_millis: current_millis.max(1),
            baseline,
        };
        let w = policy.windows(&with_onset, Escalation::None);
        let current = w.current.clamp_end(incident.detected_at);
        ReportWindows {
            baseline: w.baseline.clamp_end(current.start),
            current,
            onset: onset.filter(|o| *o >= w.baseline.start.min(current.start) && *o <= current.end),
        }
    }

    /// The range both windows cover.
    pub fn span(&self) -> TimeRange {
        TimeRange::new(
            self.baseline.start.min(self.current.start),
            self.current.end,
        )
    }
}

/// One metric of the evidence chain, its series over the baseline and the current window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricChart {
    /// The component measured.
    pub component: String,
    /// The KPI.
    pub metric: String,
    /// The evidence's finding about it.
    #[serde(default)]
    pub finding: String,
    /// The windows drawn.
    pub windows: ReportWindows,
    /// `(time, value)` in time order, downsampled (at most [`MAX_BASELINE_POINTS`] in the
    /// baseline and [`MAX_CURRENT_POINTS`] in the current window; the extremes are kept).
    pub points: Vec<(Timestamp, f64)>,
    /// The median of the baseline's samples (all of them, before downsampling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_median: Option<f64>,
}

/// One span of a waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaterfallSpan {
    /// Its id.
    pub span_id: String,
    /// Its parent's id (`None` for a root span).
    #[serde(default)]
    pub parent_id: Option<String>,
    /// The component that ran it.
    pub component: String,
    /// The operation.
    pub operation: String,
    /// When it started.
    pub start: Timestamp,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// Whether it ended in error.
    #[serde(default)]
    pub error: bool,
    /// How many of its ancestors the trace holds (0 for a root).
    #[serde(default)]
    pub depth: usize,
}

/// The slowest trace through the top root-cause candidate: the trace of the candidate's
/// longest span in the current window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceWaterfall {
    /// The trace.
    pub trace_id: String,
    /// The candidate whose spans are highlighted.
    pub component: String,
    /// The candidate's slowest span.
    pub slowest_span: String,
    /// The spans drawn, in tree order (each after its parent, siblings by start time): the
    /// path from the root to the slowest span, then the longest of the others, at most
    /// [`MAX_WATERFALL_SPANS`].
    pub spans: Vec<WaterfallSpan>,
    /// How many spans the trace holds (read up to [`MAX_TRACE_SPANS`]).
    pub total_spans: usize,
}

/// What a bundle draws besides the report itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportTelemetry {
    /// The evidence chain's metrics, charted.
    pub metric_charts: Vec<MetricChart>,
    /// The slowest trace through the top candidate.
    pub slowest_trace: Option<TraceWaterfall>,
}

impl ReportTelemetry {
    /// Reads what the report draws: a chart for each metric named by the evidence chain (its
    /// kind `metric_shift:<metric>`), and the slowest trace through the top candidate. Reads
    /// nothing after `windows.current.end`. A source that fails leaves its part out (logged),
    /// so a report is never lost to a drawing.
    pub async fn gather(
        report: &DiagnosisReport,
        windows: ReportWindows,
        metrics: Option<&dyn MetricSource>,
        traces: Option<&dyn TraceSource>,
    ) -> Self {
        let mut out = ReportTelemetry::default();
        if let Some(source) = metrics {
            out.metric_charts = metric_charts(report, windows, source).await;
        }
        let component = report
            .candidates
            .first()
            .map(|c| c.component.as_str())
            .or_else(|| report.evidence.first().map(|e| e.component.as_str()));
        if let (Some(source), Some(component)) = (traces, component) {
            out.slowest_trace = slowest_trace(component, windows, source).await;
        }
        out
    }
}

/// The `(component, metric)` pairs of the evidence chain's metric findings, in chain order.
pub fn evidence_metrics(report: &DiagnosisReport) -> Vec<(String, String, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for e in &report.evidence {
        if e.modality != Modality::Metrics {
            continue;
        }
        let Some(metric) = e
            .kind
            .as_deref()
            .and_then(|k| k.strip_prefix("metric_shift:"))
        else {
            continue;
        };
        if metric.is_empty() || !seen.insert((e.component.clone(), metric.to_string())) {
            continue;
        }
        out.push((e.component.clone(), metric.to_string(), e.finding.clone()));
        if out.len() == MAX_CHARTS {
            break;
        }
    }
    out
}

async fn metric_charts(
    report: &DiagnosisReport,
    windows: ReportWindows,
    source: &dyn MetricSource,
) -> Vec<MetricChart> {
    let mut charts = Vec::new();
    for (component, metric, finding) in evidence_metrics(report) {
        let query = MetricQuery {
            range: windows.span(),
            component: Some(component.clone()),
            metric: Some(metric.clone()),
        };
        let mut stream = match source.samples(&query).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%component, %metric, error = %e, "report: cannot read the metric");
                continue;
            }
        };
        let mut baseline = Vec::new();
        let mut current = Vec::new();
        while let Some(sample) = stream.next().await {
            match sample {
                Ok(s) if s.value.is_finite() && query.matches(&s) => {
                    if windows.current.contains(s.timestamp) {
                        current.push((s.timestamp, s.value));
                    } else if windows.baseline.contains(s.timestamp) {
                        baseline.push((s.timestamp, s.value));
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(%component, %metric, error = %e, "report: a metric sample failed");
                }
            }
        }
        if baseline.is_empty() && current.is_empty() {
            continue;
        }
        baseline.sort_by_key(|p| p.0);
        current.sort_by_key(|p| p.0);
        let baseline_median = median(baseline.iter().map(|p| p.1).collect());
        let mut points = downsample(&baseline, MAX_BASELINE_POINTS);
        points.extend(downsample(&current, MAX_CURRENT_POINTS));
        charts.push(MetricChart {
            component: cut(&component),
            metric: cut(&metric),
            finding: cut(&finding),
            windows,
            points,
            baseline_median,
        });
    }
    charts
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_NAME_CHARS {
        text.to_string()
    } else {
        text.chars().take(MAX_NAME_CHARS).collect()
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// At most `max` of `points` (in time order): the points are cut into `max / 2` runs of equal
/// length and each run keeps its lowest and highest point, so spikes survive.
pub fn downsample(points: &[(Timestamp, f64)], max: usize) -> Vec<(Timestamp, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let buckets = (max / 2).max(1);
    let mut out = Vec::with_capacity(buckets * 2);
    for b in 0..buckets {
        let lo = b * points.len() / buckets;
        let hi = ((b + 1) * points.len() / buckets).min(points.len());
        let run = &points[lo..hi];
        let (Some(min), Some(max)) = (
            run.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
            run.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
        ) else {
            continue;
        };
        if min.0 == max.0 && min.1 == max.1 {
            out.push(*min);
        } else if min.0 <= max.0 {
            out.extend([*min, *max]);
        } else {
            out.extend([*max, *min]);
        }
    }
    out.truncate(max);
    out
}

async fn slowest_trace(
    component: &str,
    windows: ReportWindows,
    source: &dyn TraceSource,
) -> Option<TraceWaterfall> {
    // The candidate's longest span in the current window.
    let query = TraceQuery {
        range: windows.current,
        component: Some(component.to_string()),
        operation: None,
    };
    let mut stream = source
        .spans(&query)
        .await
        .map_err(|e| tracing::warn!(%component, error = %e, "report: cannot read spans"))
        .ok()?;
    let mut slowest: Option<Span> = None;
    while let Some(span) = stream.next().await {
        if let Ok(s) = span
            && query.matches(&s)
            && slowest.as_ref().is_none_or(|b| {
                s.duration_us > b.duration_us
                    || (s.duration_us == b.duration_us
                        && (&s.trace_id, &s.span_id) < (&b.trace_id, &b.span_id))
            })
        {
            slowest = Some(s);
        }
    }
    let slowest = slowest?;
    // Its trace: every span with the same trace id from a while before it up to the end of the
    // current window.
    let range = TimeRange::new(
        slowest
            .start
            .offset_millis(-TRACE_LOOKBACK_MILLIS)
            .max(windows.span().start),
        windows.current.end,
    );
    let mut stream = source
        .spans(&TraceQuery::range(range))
        .await
        .map_err(|e| tracing::warn!(error = %e, "report: cannot read the trace"))
        .ok()?;
    let mut spans = Vec::new();
    let mut total = 0usize;
    while let Some(span) = stream.next().await {
        if let Ok(s) = span
            && s.trace_id == slowest.trace_id
            && range.contains(s.start)
        {
            total += 1;
            if spans.len() < MAX_TRACE_SPANS {
                spans.push(s);
            }
        }
    }
    if !spans.iter().any(|s| s.span_id == slowest.span_id) {
        spans.push(slowest.clone());
        total += 1;
    }
    Some(TraceWaterfall {
        trace_id: cut(&slowest.trace_id),
        component: cut(component),
        slowest_span: cut(&slowest.span_id),
        spans: waterfall_spans(&spans, &slowest.span_id, MAX_WATERFALL_SPANS),
        total_spans: total,
    })
}

/// The spans a waterfall draws: the path from the root to `target`, then `target`'s
/// descendants and the other spans by duration (longest first), at most `max`; in tree order
/// with their depth.
pub fn waterfall_spans(spans: &[Span], target: &str, max: usize) -> Vec<WaterfallSpan> {
    let by_id: HashMap<&str, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.as_str(), i))
        .collect();
    let parent = |i: usize| -> Option<usize> {
        spans[i]
            .parent_id
            .as_deref()
            .and_then(|p| by_id.get(p).copied())
            .filter(|p| *p != i)
    };
    // Children in start order; spans whose parent is missing are roots.
    let mut children: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
    for i in 0..spans.len() {
        children.entry(parent(i)).or_default().push(i);
    }
    for list in children.values_mut() {
        list.sort_by(|&a, &b| {
            spans[a]
                .start
                .cmp(&spans[b].start)
                .then(spans[b].duration_us.cmp(&spans[a].duration_us))
                .then(spans[a].span_id.cmp(&spans[b].span_id))
        });
    }
    // Tree order and depth by an explicit stack (a parent cycle leaves its spans out of the
    // walk; they are appended as roots below).
    let mut order = Vec::with_capacity(spans.len());
    let mut depth = vec![0usize; spans.len()];
    let mut visited = vec![false; spans.len()];
    let mut stack: Vec<(usize, usize)> = children
        .get(&None)
        .map(|roots| roots.iter().rev().map(|&r| (r, 0)).collect())
        .unwrap_or_default();
    loop {
        while let Some((i, d)) = stack.pop() {
            if visited[i] {
                continue;
            }
            visited[i] = true;
            depth[i] = d;
            order.push(i);
            if let Some(kids) = children.get(&Some(i)) {
                stack.extend(kids.iter().rev().map(|&k| (k, d + 1)));
            }
        }
        match (0..spans.len()).find(|&i| !visited[i]) {
            Some(i) => stack.push((i, 0)),
            None => break,
        }
    }
    // What to keep.
    let mut keep = vec![false; spans.len()];
    let mut kept = 0usize;
    let mut path = Vec::new();
    let mut at = by_id.get(target).copied();
    let mut guard = 0;
    while let Some(i) = at {
        if guard > spans.len() {
            break;
        }
        guard += 1;
        path.push(i);
        at = parent(i);
    }
    let under_target = |i: usize| -> bool {
        let mut at = Some(i);
        let mut steps = 0;
        while let Some(j) = at {
            if spans[j].span_id == target {
                return true;
            }
            steps += 1;
            if steps > spans.len() {
                return false;
            }
            at = parent(j);
        }
        false
    };
    let mut rest: Vec<usize> = (0..spans.len()).collect();
    rest.sort_by(|&a, &b| {
        under_target(b)
            .cmp(&under_target(a))
            .then(spans[b].duration_us.cmp(&spans[a].duration_us))
            .then(spans[a].span_id.cmp(&spans[b].span_id))
    });
    for i in path.into_iter().rev().chain(rest) {
        if kept >= max {
            break;
        }
        if !keep[i] {
            keep[i] = true;
            kept += 1;
        }
    }
    order
        .into_iter()
        .filter(|&i| keep[i])
        .map(|i| {
            let s = &spans[i];
            WaterfallSpan {
                span_id: cut(&s.span_id),
                parent_id: s.parent_id.as_deref().map(cut),
                component: cut(&s.component),
                operation: cut(&s.operation),
                start: s.start,
                duration_us: s.duration_us,
                error: s.error,
                depth: depth[i],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rca_core::source::MetricSample;
    use rca_core::trajectory::RootCauseCandidate;
    use rca_core::{Evidence, Responsibility};
    use rca_tools::sources::{FileMetricSource, FileTraceSource};

    use super::*;

    fn t(min: i64) -> Timestamp {
        Timestamp(1_700_000_000_000 + min * 60_000)
    }

    fn span(id: &str, parent: Option<&str>, component: &str, start: i64, dur: u64) -> Span {
        Span {
            trace_id: "t1".into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
            component: component.into(),
            operation: format!("op-{id}").into(),
            start: Timestamp(start),
            duration_us: dur,
            error: false,
            attributes: Default::default(),
        }
    }

    #[test]
    fn downsampling_keeps_extremes_and_bounds() {
        let points: Vec<(Timestamp, f64)> = (0..1000)
            .map(|i| (t(i), if i == 517 { 99.0 } else { (i % 7) as f64 }))
            .collect();
        let d = downsample(&points, 100);
        assert!(d.len() <= 100);
        assert!(d.iter().any(|p| p.1 == 99.0));
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(downsample(&points[..10], 100).len(), 10);
    }

    #[test]
    fn windows_follow_the_onset_and_stop_at_detection() {
        let incident = Incident {
            id: "i".into(),
            title: String::new(),
            description: String::new(),
            detected_at: t(100),
            window: TimeRange::new(t(0), t(200)),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
        };
        let w = ReportWindows::for_incident(&incident, Some(t(90)), 600_000, None);
        assert_eq!(w.current, TimeRange::new(t(90), t(100)));
        assert_eq!(w.baseline, TimeRange::new(t(0), t(90)));
        assert_eq!(w.onset, Some(t(90)));
        let fixed = ReportWindows::for_incident(&incident, None, 5 * 60_000, None);
        assert_eq!(fixed.current, TimeRange::new(t(95), t(100)));
        assert_eq!(fixed.onset, None);
    }

    #[tokio::test]
    async fn gathers_evidence_metrics_and_the_slowest_trace() {
        let mut samples = Vec::new();
        for i in 0..120 {
            for (metric, value) in [("cpu", if i >= 100 { 90.0 } else { 5.0 }), ("mem", 1.0)] {
                samples.push(MetricSample {
                    timestamp: t(i),
                    component: "orders".into(),
                    metric: metric.into(),
                    value,
                    labels: Default::default(),
                });
            }
        }
        let metrics = FileMetricSource::from_samples(samples, None);
        let base = t(105).millis();
        let spans = vec![
            span("root", None, "front", base, 900_000),
            span("a", Some("root"), "orders", base + 10, 800_000),
            span("b", Some("a"), "db", base + 20, 100_000),
            span("c", Some("root"), "other", base + 850, 20_000),
            // After detection: never read.
            Span {
                trace_id: "t2".into(),
                ..span("late", None, "orders", t(111).millis(), 9_000_000)
            },
        ];
        let traces = FileTraceSource::from_spans(spans, None);
        let evidence = vec![
            Evidence::new(Modality::Metrics, t(100), "orders", "cpu up")
                .with_kind("metric_shift:cpu"),
            Evidence::new(Modality::Metrics, t(100), "orders", "cpu up again")
                .with_kind("metric_shift:cpu"),
            Evidence::new(Modality::Traces, t(100), "orders", "slow").with_kind("blame"),
        ];
        let report = DiagnosisReport {
            root_cause: "orders".into(),
            solution: String::new(),
            evidence,
            responsibility: Responsibility::Platform,
            confidence: 0.5,
            candidates: vec![RootCauseCandidate {
                component: "orders".into(),
                fault_type: None,
                time: None,
                score: 1.0,
            }],
            usage: Default::default(),
            elapsed_ms: 0,
        };
        let windows = ReportWindows {
            baseline: TimeRange::new(t(0), t(100)),
            current: TimeRange::new(t(100), t(110)),
            onset: Some(t(100)),
        };
        let metrics: Arc<dyn MetricSource> = Arc::new(metrics);
        let traces: Arc<dyn TraceSource> = Arc::new(traces);
        let got = ReportTelemetry::gather(&report, windows, Some(&*metrics), Some(&*traces)).await;
        assert_eq!(got.metric_charts.len(), 1);
        let chart = &got.metric_charts[0];
        assert_eq!(
            (chart.component.as_str(), chart.metric.as_str()),
            ("orders", "cpu")
        );
        assert_eq!(chart.points.len(), 110);
        assert!(chart.points.iter().all(|p| p.0 < t(110)));
        assert_eq!(chart.baseline_median, Some(5.0));
        let trace = got.slowest_trace.unwrap();
        assert_eq!(trace.trace_id, "t1");
        assert_eq!(trace.slowest_span, "a");
        assert_eq!(trace.total_spans, 4);
        let ids: Vec<&str> = trace.spans.iter().map(|s| s.span_id.as_str()).collect();
        assert_eq!(ids, ["root", "a", "b", "c"]);
        let depths: Vec<usize> = trace.spans.iter().map(|s| s.depth).collect();
        assert_eq!(depths, [0, 1, 2, 1]);
    }

    #[test]
    fn waterfall_keeps_the_path_to_the_slowest_span_within_the_cap() {
        let mut spans = vec![span("root", None, "front", 0, 1_000_000)];
        for i in 0..100 {
            spans.push(span(
                &format!("s{i}"),
                Some("root"),
                "x",
                i,
                500_000 + i as u64,
            ));
        }
        spans.push(span("mid", Some("s3"), "y", 10, 10));
        spans.push(span("target", Some("mid"), "orders", 11, 5));
        let kept = waterfall_spans(&spans, "target", 10);
        assert_eq!(kept.len(), 10);
        let ids: Vec<&str> = kept.iter().map(|s| s.span_id.as_str()).collect();
        for must in ["root", "s3", "mid", "target"] {
            assert!(ids.contains(&must), "{ids:?}");
        }
        // Tree order: every span after its parent.
        let pos = |id: &str| ids.iter().position(|i| *i == id).unwrap();
        assert!(pos("root") < pos("s3") && pos("s3") < pos("mid") && pos("mid") < pos("target"));
        // A parent cycle neither hangs nor loses the spans.
        let cyc = vec![
            span("p", Some("q"), "a", 0, 1),
            span("q", Some("p"), "b", 0, 1),
        ];
        assert_eq!(waterfall_spans(&cyc, "p", 10).len(), 2);
    }
}
