//! A metric of the evidence chain as an SVG line chart: the baseline (grey) against the current
//! window (red), the baseline's median as a dashed line, and the onset marked. The time axis
//! is in two parts with their own scales, since the baseline is often hours and the current
//! window minutes: the baseline takes the left part, the current window the right.

use std::fmt::Write;

use rca_core::Timestamp;

use super::svg::{clock, esc, number, px, shorten, span_of_millis, ticks};
use super::telemetry::{MAX_BASELINE_POINTS, MAX_CURRENT_POINTS, MetricChart, downsample};

/// Size of a chart.
const W: f64 = 560.0;
const H: f64 = 220.0;
/// The plot area inside it.
const LEFT: f64 = 52.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 22.0;
const BOTTOM: f64 = 40.0;
/// The share of the plot's width the baseline takes (when both windows hold time).
const BASELINE_SHARE: f64 = 0.55;

/// A sample: when, and its value.
type Point = (Timestamp, f64);

/// The piecewise time axis.
struct TimeAxis {
    baseline: (i64, i64),
    current: (i64, i64),
    /// Where the current window begins on the page.
    split: f64,
}

impl TimeAxis {
    fn new(chart: &MetricChart) -> Self {
        let w = &chart.windows;
        // The baseline is drawn from its first sample: a long quiet period with data only at
        // its end would otherwise leave most of the chart empty.
        let first = chart
            .points
            .iter()
            .map(|p| p.0)
            .filter(|t| w.baseline.contains(*t))
            .min()
            .unwrap_or(w.baseline.start);
        let baseline = (first.millis(), w.baseline.end.millis());
        let current = (w.current.start.millis(), w.current.end.millis());
        let plot = W - LEFT - RIGHT;
        let split = if baseline.1 <= baseline.0 {
            LEFT
        } else if current.1 <= current.0 {
            W - RIGHT
        } else {
            LEFT + plot * BASELINE_SHARE
        };
        TimeAxis {
            baseline,
            current,
            split,
        }
    }

    fn x(&self, t: Timestamp) -> f64 {
        let t = t.millis();
        let frac = |(a, b): (i64, i64)| {
            if b > a {
                ((t - a) as f64 / (b - a) as f64).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        if t < self.current.0 {
            LEFT + frac(self.baseline) * (self.split - LEFT)
        } else {
            self.split + frac(self.current) * (W - RIGHT - self.split)
        }
    }
}

/// What the baseline part of the axis shows: all of the baseline, or its last part (from the
/// first sample).
fn baseline_label(drawn: (i64, i64), whole_millis: i64) -> String {
    let shown = (drawn.1 - drawn.0).max(0);
    if shown + 1000 >= whole_millis {
        format!("baseline ({})", span_of_millis(whole_millis))
    } else {
        format!(
            "baseline: last {} of {}",
            span_of_millis(shown),
            span_of_millis(whole_millis)
        )
    }
}

/// The value range drawn: the points and the baseline median, padded; never empty.
fn value_range(chart: &MetricChart) -> (f64, f64) {
    let values = chart
        .points
        .iter()
        .map(|p| p.1)
        .chain(chart.baseline_median)
        .filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < f64::EPSILON * lo.abs().max(1.0) {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - pad, hi + pad);
    }
    let pad = (hi - lo) * 0.08;
    // A non-negative series keeps 0 as its floor when it comes close.
    let floor = if lo >= 0.0 && lo - pad < 0.0 {
        0.0
    } else {
        lo - pad
    };
    (floor, hi + pad)
}

fn polyline(points: &[(f64, f64)], class: &str, out: &mut String) {
    if points.is_empty() {
        return;
    }
    let coords: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{},{}", px(*x), px(*y)))
        .collect();
    let _ = write!(
        out,
        r#"<polyline class="{class}" points="{}"/>"#,
        coords.join(" ")
    );
}

/// One chart as an SVG element with id `chart-<index>`.
pub(crate) fn render_chart(chart: &MetricChart, index: usize) -> String {
    let axis = TimeAxis::new(chart);
    let (lo, hi) = value_range(chart);
    let y = |v: f64| TOP + (1.0 - (v - lo) / (hi - lo)) * (H - TOP - BOTTOM);
    let bottom = H - BOTTOM;
    let mut s = String::new();
    let name = format!("{} of {}", chart.metric, chart.component);
    let _ = write!(
        s,
        r#"<svg id="chart-{index}" class="metric-chart" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{label}" data-component="{component}" data-metric="{metric}"><title>{label}</title>"#,
        label = esc(&name),
        component = esc(&chart.component),
        metric = esc(&chart.metric),
    );
    // The two windows' backgrounds.
    let _ = write!(
        s,
        r#"<rect class="baseline-window" x="{}" y="{TOP}" width="{}" height="{}"/><rect class="current-window" x="{}" y="{TOP}" width="{}" height="{}"/>"#,
        px(LEFT),
        px(axis.split - LEFT),
        px(bottom - TOP),
        px(axis.split),
        px(W - RIGHT - axis.split),
        px(bottom - TOP),
    );
    // Value ticks and grid.
    for v in ticks(lo, hi, 4) {
        let _ = write!(
            s,
            r#"<line class="grid" x1="{}" y1="{yv}" x2="{}" y2="{yv}"/><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
            px(LEFT),
            px(W - RIGHT),
            px(LEFT - 4.0),
            px(y(v) + 4.0),
            esc(&number(v)),
            yv = px(y(v)),
        );
    }
    // The baseline's median across both windows.
    if let Some(m) = chart.baseline_median.filter(|m| m.is_finite()) {
        let _ = write!(
            s,
            r#"<line class="baseline-median" x1="{}" y1="{ym}" x2="{}" y2="{ym}"><title>baseline median {v}</title></line><text class="note" x="{}" y="{}">baseline median {v}</text>"#,
            px(LEFT),
            px(W - RIGHT),
            px(LEFT + 4.0),
            px(y(m) - 4.0),
            ym = px(y(m)),
            v = esc(&number(m)),
        );
    }
    // The series, bounded again in case the bundle was built by hand.
    let current_start = chart.windows.current.start;
    let (before, after): (Vec<Point>, Vec<Point>) = chart
        .points
        .iter()
        .filter(|p| p.1.is_finite())
        .partition(|p| p.0 < current_start);
    let before = downsample(&before, MAX_BASELINE_POINTS);
    let after = downsample(&after, MAX_CURRENT_POINTS);
    let to_xy = |p: &Point| (axis.x(p.0), y(p.1));
    let base_xy: Vec<(f64, f64)> = before.iter().map(to_xy).collect();
    // The current series starts from the last baseline point, so the line is unbroken.
    let cur_xy: Vec<(f64, f64)> = before
        .last()
        .filter(|_| !after.is_empty())
        .into_iter()
        .chain(after.iter())
        .map(to_xy)
        .collect();
    polyline(&base_xy, "series baseline", &mut s);
    polyline(&cur_xy, "series current", &mut s);
    if base_xy.len() + cur_xy.len() == 1
        && let Some((cx, cy)) = base_xy.first().or(cur_xy.first())
    {
        let _ = write!(
            s,
            r#"<circle class="series current" cx="{}" cy="{}" r="2.5"/>"#,
            px(*cx),
            px(*cy)
        );
    }
    // The axes and the boundary between the windows.
    let _ = write!(
        s,
        r#"<line class="axis" x1="{l}" y1="{b}" x2="{r}" y2="{b}"/><line class="axis" x1="{l}" y1="{t}" x2="{l}" y2="{b}"/><line class="window-split" x1="{sx}" y1="{t}" x2="{sx}" y2="{b}"/>"#,
        l = px(LEFT),
        r = px(W - RIGHT),
        b = px(bottom),
        t = px(TOP),
        sx = px(axis.split),
    );
    // Time labels: the start of each window and the end.
    let w = &chart.windows;
    let mut labels = vec![(LEFT, clock(Timestamp(axis.baseline.0)), "start")];
    if axis.split > LEFT + 30.0 && axis.split < W - RIGHT - 30.0 {
        labels.push((axis.split, clock(w.current.start), "middle"));
    }
    labels.push((W - RIGHT, clock(w.current.end), "end"));
    for (x, text, anchor) in labels {
        let _ = write!(
            s,
            r#"<text class="tick" x="{}" y="{}" text-anchor="{anchor}">{}</text>"#,
            px(x),
            px(bottom + 13.0),
            esc(&text)
        );
    }
    // What each part of the axis is.
    if axis.split > LEFT {
        let _ = write!(
            s,
            r#"<text class="window-label" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            px((LEFT + axis.split) / 2.0),
            px(bottom + 28.0),
            esc(&baseline_label(axis.baseline, w.baseline.duration_millis()))
        );
    }
    if axis.split < W - RIGHT {
        let _ = write!(
            s,
            r#"<text class="window-label current" x="{}" y="{}" text-anchor="middle">current window ({})</text>"#,
            px((axis.split + W - RIGHT) / 2.0),
            px(bottom + 28.0),
            esc(&span_of_millis(w.current.duration_millis()))
        );
    }
    // The onset.
    if let Some(onset) = w.onset {
        let ox = axis.x(onset);
        let anchor = if ox > W - RIGHT - 90.0 {
            "end"
        } else {
            "start"
        };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        let _ = write!(
            s,
            r#"<g class="onset"><title>onset {full}</title><line x1="{x}" y1="{}" x2="{x}" y2="{}"/><text x="{}" y="{}" text-anchor="{anchor}">onset {}</text></g>"#,
            px(TOP - 6.0),
            px(bottom),
            px(ox + dx),
            px(TOP - 8.0),
            esc(&clock(onset)),
            full = esc(&onset.to_string()),
            x = px(ox),
        );
    }
    s.push_str("</svg>");
    s
}

/// Every chart, each in a figure with its caption; empty when there are none.
pub(crate) fn render_charts(charts: &[MetricChart]) -> String {
    let mut h = String::new();
    for (i, c) in charts.iter().enumerate() {
        let _ = write!(
            h,
            r#"<figure class="chart"><figcaption><strong title="{metric}">{metric_short}</strong> of <span title="{component}">{component_short}</span><br><small>{finding}</small></figcaption>{svg}</figure>"#,
            metric = esc(&c.metric),
            metric_short = esc(&shorten(&c.metric, 40)),
            component = esc(&c.component),
            component_short = esc(&shorten(&c.component, 48)),
            finding = esc(&shorten(&c.finding, 160)),
            svg = render_chart(c, i),
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use rca_core::TimeRange;

    use super::super::telemetry::ReportWindows;
    use super::*;

    fn chart(points: Vec<(Timestamp, f64)>) -> MetricChart {
        MetricChart {
            component: "orders <a>".into(),
            metric: "cpu & more".into(),
            finding: "cpu up".into(),
            windows: ReportWindows {
                baseline: TimeRange::new(Timestamp(0), Timestamp(3_600_000)),
                current: TimeRange::new(Timestamp(3_600_000), Timestamp(3_900_000)),
                onset: Some(Timestamp(3_600_000)),
            },
            points,
            baseline_median: Some(1.0),
        }
    }

    #[test]
    fn chart_draws_both_windows_the_median_and_the_onset() {
        let points = (0..65)
            .map(|i| (Timestamp(i * 60_000), if i >= 60 { 9.0 } else { 1.0 }))
            .collect();
        let svg = render_chart(&chart(points), 0);
        assert!(svg.starts_with(r#"<svg id="chart-0" class="metric-chart""#));
        assert!(svg.contains(r#"class="series baseline""#));
        assert!(svg.contains(r#"class="series current""#));
        assert!(svg.contains(r#"class="baseline-median""#));
        assert!(svg.contains(r#"<g class="onset">"#));
        assert!(svg.contains("cpu &amp; more of orders &lt;a&gt;"));
        assert!(!svg.contains("<a>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // The onset sits on the split between the windows.
        assert!(svg.contains(&format!(r#"x1="{}""#, px(LEFT + (W - LEFT - RIGHT) * 0.55))));
    }

    #[test]
    fn flat_empty_and_huge_series_still_draw() {
        let flat = render_chart(&chart(vec![(Timestamp(10), 1.0)]), 1);
        assert!(flat.contains("<circle"));
        let empty = render_chart(&chart(Vec::new()), 2);
        assert!(empty.ends_with("</svg>"));
        let huge: Vec<(Timestamp, f64)> = (0..50_000)
            .map(|i| (Timestamp(i * 70), (i % 13) as f64))
            .collect();
        let svg = render_chart(&chart(huge), 3);
        let commas = svg.matches(',').count();
        assert!(
            commas <= MAX_BASELINE_POINTS + MAX_CURRENT_POINTS + 2,
            "{commas}"
        );
        let nan = render_chart(&chart(vec![(Timestamp(10), f64::NAN)]), 4);
        assert!(!nan.contains("NaN"));
    }
}
