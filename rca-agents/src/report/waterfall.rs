//! The slowest trace through the top candidate as an SVG waterfall: one row per span in tree
//! order, indented by depth, its bar placed on the trace's time line; the candidate's spans
//! are red, its slowest span outlined, failed spans hatched.

use std::fmt::Write;

use super::svg::{esc, micros, px, shorten};
use super::telemetry::{MAX_WATERFALL_SPANS, TraceWaterfall};

const W: f64 = 960.0;
/// Width of the label column.
const LABEL_W: f64 = 330.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 26.0;
const ROW: f64 = 18.0;
const BAR: f64 = 12.0;

/// The waterfall as an SVG element with id `trace-waterfall`.
pub(crate) fn render_waterfall(w: &TraceWaterfall) -> String {
    let spans = &w.spans[..w.spans.len().min(MAX_WATERFALL_SPANS)];
    // The trace's time line, in microseconds since its first span began.
    let t0 = spans.iter().map(|s| s.start.millis()).min().unwrap_or(0);
    let offset = |s: &super::telemetry::WaterfallSpan| (s.start.millis() - t0) as f64 * 1000.0;
    let total = spans
        .iter()
        .map(|s| offset(s) + s.duration_us as f64)
        .fold(1.0, f64::max);
    let plot = W - LABEL_W - RIGHT;
    let x = |us: f64| LABEL_W + us / total * plot;
    let height = TOP + spans.len() as f64 * ROW + 8.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="trace-waterfall" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img" aria-label="waterfall of trace {id}" data-trace="{id}"><title>trace {id}</title>"#,
        h = px(height),
        id = esc(&w.trace_id),
    );
    s.push_str(r##"<defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="4" fill="#862e2e"/></pattern></defs>"##);
    // The time axis: five ticks over the trace.
    for i in 0..=4 {
        let us = total * f64::from(i) / 4.0;
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            r#"<line class="grid" x1="{xv}" y1="{}" x2="{xv}" y2="{}"/><text class="tick" x="{xv}" y="{}" text-anchor="{anchor}">{}</text>"#,
            px(TOP - 6.0),
            px(height - 4.0),
            px(TOP - 10.0),
            esc(&micros(us)),
            xv = px(x(us)),
        );
    }
    for (row, span) in spans.iter().enumerate() {
        let top = TOP + row as f64 * ROW;
        let is_candidate = span.component == w.component;
        let mut class = String::from("span");
        if is_candidate {
            class.push_str(" root-cause");
        }
        if span.span_id == w.slowest_span {
            class.push_str(" slowest");
        }
        if span.error {
            class.push_str(" error");
        }
        let bx = x(offset(span));
        let bw = (span.duration_us as f64 / total * plot).max(1.5);
        let indent = (span.depth.min(12) as f64) * 10.0;
        let label = format!("{} {}", span.component, span.operation);
        let max_chars = ((LABEL_W - 12.0 - indent) / 6.2).max(8.0) as usize;
        let _ = write!(
            s,
            r#"<g class="{class}"><title>{component} — {operation}: {dur}{err}</title><text class="span-label" x="{lx}" y="{ty}">{label}</text><rect x="{bx}" y="{by}" width="{bw}" height="{BAR}" rx="2"/>"#,
            component = esc(&span.component),
            operation = esc(&span.operation),
            dur = esc(&micros(span.duration_us as f64)),
            err = if span.error { " (error)" } else { "" },
            lx = px(4.0 + indent),
            ty = px(top + BAR - 1.0),
            label = esc(&shorten(&label, max_chars)),
            bx = px(bx),
            by = px(top),
            bw = px(bw),
        );
        if span.error {
            let _ = write!(
                s,
                r#"<rect class="error-hatch" x="{}" y="{}" width="{}" height="{BAR}" fill="url(#hatch)"/>"#,
                px(bx),
                px(top),
                px(bw)
            );
        }
        let _ = write!(
            s,
            r#"<text class="tick" x="{}" y="{}">{}</text></g>"#,
            px((bx + bw + 4.0).min(W - RIGHT + 4.0)),
            px(top + BAR - 2.0),
            esc(&micros(span.duration_us as f64))
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use rca_core::Timestamp;

    use super::super::telemetry::WaterfallSpan;
    use super::*;

    fn span(id: &str, component: &str, start: i64, dur: u64, depth: usize) -> WaterfallSpan {
        WaterfallSpan {
            span_id: id.into(),
            parent_id: None,
            component: component.into(),
            operation: format!("GET /{id}?<x>"),
            start: Timestamp(start),
            duration_us: dur,
            error: id == "b",
            depth,
        }
    }

    #[test]
    fn waterfall_rows_are_escaped_and_the_candidate_is_marked() {
        let w = TraceWaterfall {
            trace_id: "t<1>".into(),
            component: "orders".into(),
            slowest_span: "a".into(),
            spans: vec![
                span("root", "front", 0, 1_000_000, 0),
                span("a", "orders", 10, 800_000, 1),
                span("b", "db", 20, 100_000, 2),
            ],
            total_spans: 3,
        };
        let svg = render_waterfall(&w);
        assert!(svg.starts_with(r#"<svg id="trace-waterfall""#));
        assert_eq!(svg.matches(r#"<g class="span"#).count(), 3);
        assert!(svg.contains(r#"<g class="span root-cause slowest">"#));
        assert!(svg.contains(r#"<g class="span error">"#));
        assert!(svg.contains("t&lt;1&gt;") && !svg.contains("<x>"));
        // The root's bar spans the whole time line.
        assert!(svg.contains(&format!(r#"width="{}""#, px(W - LABEL_W - RIGHT))));
    }

    #[test]
    fn a_huge_waterfall_is_cut() {
        let w = TraceWaterfall {
            trace_id: "t".into(),
            component: "x".into(),
            slowest_span: "s0".into(),
            spans: (0..500)
                .map(|i| span(&format!("s{i}"), "x", i, 10, 0))
                .collect(),
            total_spans: 500,
        };
        let svg = render_waterfall(&w);
        assert_eq!(
            svg.matches(r#"<g class="span"#).count(),
            MAX_WATERFALL_SPANS
        );
    }
}
