//! A self-contained HTML report: no scripts, no external resources, inline CSS and SVG. It
//! shows the summary, the service graph, the ranked candidates, the evidence chain with a chart
//! of each of its metrics, the slowest trace through the top candidate and the timeline.

use std::fmt::Write;

use super::ReportBundle;
use super::charts::render_charts;
use super::graph::render_graph;
use super::svg::esc;
use super::waterfall::render_waterfall;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;padding:0 1.5rem;color:#222;max-width:80rem}\
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}\
td,th{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.summary{background:#fff6f0;border-left:4px solid #d9480f;padding:.75rem 1rem}\
svg{max-width:100%;height:auto;font-family:system-ui,sans-serif}\
.graph{overflow-x:auto}.edge{fill:none;stroke:#adb5bd;stroke-width:1.2}.edge.root-edge{stroke:#c92a2a;stroke-width:1.8}\
.node rect{fill:#edf2ff;stroke:#5c7cfa}.node text{font-size:11px}\
.node.suspect rect{fill:#fff9db;stroke:#fcc419}\
.node.rank-2 rect,.swatch.rank-2{fill:#ffd8a8;stroke:#e8590c;background:#ffd8a8;border-color:#e8590c}\
.node.rank-3 rect,.swatch.rank-3{fill:#ffe8cc;stroke:#f76707;background:#ffe8cc;border-color:#f76707}\
.node.rank-4 rect,.swatch.rank-4{fill:#fff3bf;stroke:#f59f00;background:#fff3bf;border-color:#f59f00}\
.node.rank-5 rect,.swatch.rank-5{fill:#fff9db;stroke:#fcc419;background:#fff9db;border-color:#fcc419}\
.node.root-cause rect{fill:#ffc9c9;stroke:#c92a2a;stroke-width:3}.swatch.root-cause{background:#ffc9c9;border-color:#c92a2a}\
.node circle.rank{fill:#fff;stroke:#495057}.node text.rank{font-size:10px;font-weight:bold}\
.legend{font-size:.85rem;color:#495057}.swatch{display:inline-block;width:.9em;height:.9em;border:2px solid;border-radius:3px;margin:0 .25em -.15em .5em}\
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(30rem,1fr));gap:1rem 1.5rem}\
figure.chart{margin:0}figcaption{font-size:.85rem;margin-bottom:.25rem;overflow-wrap:anywhere}\
.metric-chart{width:100%}.baseline-window{fill:#f1f3f5}.current-window{fill:#fff0f0}\
.grid{stroke:#dee2e6;stroke-width:1}.axis{stroke:#495057}.window-split{stroke:#868e96;stroke-dasharray:2 2}\
.tick,.note,.window-label{font-size:10px;fill:#495057}.window-label.current{fill:#c92a2a}\
.series{fill:none;stroke-width:1.6}.series.baseline{stroke:#495057}.series.current{stroke:#c92a2a;stroke-width:2.2}\
circle.series{fill:#c92a2a}.baseline-median{stroke:#1c7ed6;stroke-dasharray:5 3}\
.onset line{stroke:#c92a2a;stroke-width:1.5;stroke-dasharray:4 2}.onset text{font-size:10px;fill:#c92a2a;font-weight:bold}\
#trace-waterfall{width:100%}.span rect{fill:#91a7ff}.span.root-cause rect{fill:#e03131}\
.span.slowest rect{stroke:#5c0011;stroke-width:2}.span .span-label{font-size:11px;fill:#212529}\
.span.root-cause .span-label{font-weight:bold}.span rect.error-hatch{fill:url(#hatch);stroke:none}\
ol.timeline li{margin:.3rem 0}.error{color:#c92a2a}.muted{color:#868e96}";

/// Renders the bundle as one self-contained HTML page.
pub fn render_html(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>Diagnosis: {}</title><style>{STYLE}</style></head><body>",
        esc(&bundle.incident.title)
    );
    let _ = write!(
        h,
        "<h1>Diagnosis: {}</h1><p>Incident <code>{}</code>, detected at {}.</p>",
        esc(&bundle.incident.title),
        esc(&bundle.incident.id),
        esc(&bundle.incident.detected_at.to_string())
    );
    let _ = write!(
        h,
        "<section id=\"summary\" class=\"summary\"><p><strong>Root cause.</strong> <span id=\"root-cause\">{}</span></p><p><strong>Solution.</strong> {}</p><p>Responsibility: {}. Confidence: {:.2}.</p></section>",
        esc(&r.root_cause),
        esc(&r.solution),
        esc(&r.responsibility.to_string()),
        r.confidence
    );
    h.push_str("<h2>Service graph</h2><div class=\"graph\">");
    h.push_str(&render_graph(bundle));
    h.push_str("</div>");
    if !r.candidates.is_empty() {
        h.push_str("<h2>Ranked candidates</h2><table id=\"candidates\"><tr><th>rank</th><th>component</th><th>fault type</th><th>onset</th><th>score</th></tr>");
        for (i, c) in r.candidates.iter().enumerate() {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
                i + 1,
                esc(&c.component),
                esc(c.fault_type.as_deref().unwrap_or("-")),
                c.time.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                c.score
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Evidence chain</h2><table id=\"evidence-chain\"><tr><th>observed at</th><th>modality</th><th>component</th><th>finding</th><th>score</th></tr>");
    for e in &r.evidence {
        let _ = write!(
            h,
            "<tr class=\"evidence\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
            esc(&e.observed_at.to_string()),
            esc(&e.modality.to_string()),
            esc(&e.component),
            esc(&e.finding),
            e.score
        );
    }
    h.push_str("</table>");
    if !bundle.metric_charts.is_empty() {
        h.push_str("<h2>Metrics of the evidence chain</h2><p class=\"legend\">Each metric over the baseline (grey, left part of the time axis) and the current window (red, right part; the two parts have their own time scales), with the baseline's median dashed and the onset marked.</p><section id=\"metric-charts\" class=\"charts\">");
        h.push_str(&render_charts(&bundle.metric_charts));
        h.push_str("</section>");
    }
    if let Some(w) = &bundle.slowest_trace {
        let _ = write!(
            h,
            "<h2>Slowest trace through {}</h2><p class=\"legend\">Trace <code>{}</code>: the trace of the candidate&#39;s longest span in the current window. Its spans are red, the slowest outlined; {} of the trace&#39;s {} spans are drawn (the path to the slowest span, then the longest).</p><div class=\"waterfall\">",
            esc(&w.component),
            esc(&w.trace_id),
            w.spans.len().min(super::telemetry::MAX_WATERFALL_SPANS),
            w.total_spans
        );
        h.push_str(&render_waterfall(w));
        h.push_str("</div>");
    }
    h.push_str("<h2>Timeline</h2><ol id=\"timeline\" class=\"timeline\">");
    for s in &bundle.trajectory.steps {
        let action = s.action.as_ref().map(|a| a.name.as_str()).unwrap_or("-");
        let _ = write!(h, "<li><strong>{}</strong>", esc(action));
        if !s.thought.is_empty() {
            let _ = write!(h, " — {}", esc(&s.thought));
        }
        if let Some(o) = &s.observation {
            let _ = write!(h, " → {}", esc(&o.text));
        }
        if let Some(e) = &s.error {
            let _ = write!(h, " <span class=\"error\">{}</span>", esc(e));
        }
        let _ = write!(h, " <small>({} ms)</small></li>", s.elapsed_ms);
    }
    h.push_str("</ol></body></html>");
    h
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{bundle, bundle_with_telemetry};
    use super::*;

    #[test]
    fn html_is_escaped_and_highlights_the_root_cause() {
        let html = render_html(&bundle());
        assert!(html.contains("checkout latency &amp; errors"));
        assert!(html.contains("cpu 4.1x baseline &lt;high&gt;"));
        assert!(!html.contains("<high>"));
        assert!(html.contains(r#"<g id="node-orders" class="node root-cause">"#));
        assert!(html.contains(r#"<g id="node-payments" class="node suspect rank-2">"#));
        assert_eq!(html.matches("class=\"evidence\"").count(), 2);
        assert!(!html.contains("<script"));
        // No telemetry, no empty sections.
        assert!(
            !html.contains(r#"id="metric-charts""#) && !html.contains(r#"id="trace-waterfall""#)
        );
    }

    #[test]
    fn html_draws_the_charts_and_the_waterfall() {
        let html = render_html(&bundle_with_telemetry());
        assert!(html.contains(r#"<section id="metric-charts""#));
        assert_eq!(html.matches(r#"class="metric-chart""#).count(), 1);
        assert!(html.contains(r#"<svg id="trace-waterfall""#));
        assert!(html.contains(r#"<g class="span root-cause slowest">"#));
        // Self-contained: no script, no link, no remote URL (the SVG namespace is a name).
        assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="));
        assert_eq!(
            html.matches("http").count(),
            html.matches("http://www.w3.org/2000/svg").count()
        );
    }
}
