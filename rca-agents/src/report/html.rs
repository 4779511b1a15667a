//! A self-contained HTML report: no scripts, no external resources, inline CSS and SVG.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

use super::ReportBundle;

/// Escapes text for HTML element content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A stable id for a node: `node-` plus the name with everything but ASCII letters, digits,
/// `-` and `_` replaced by `_`.
pub fn node_id(name: &str) -> String {
    let mut id = String::from("node-");
    id.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '_'
        }
    }));
    id
}

/// Node positions of the service graph: callers left of callees, by breadth-first depth from
/// the nodes nobody calls.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphLayout {
    /// Node name -> (x, y) centre.
    pub positions: BTreeMap<String, (f64, f64)>,
    /// Width of the drawing.
    pub width: f64,
    /// Height of the drawing.
    pub height: f64,
}

impl GraphLayout {
    /// Lays out the graph of `edges` plus any `extra` nodes.
    pub fn new(edges: &[(String, String)], extra: &[String]) -> Self {
        let mut nodes: BTreeSet<String> = extra.iter().cloned().collect();
        let mut callees: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut called: BTreeSet<&str> = BTreeSet::new();
        for (a, b) in edges {
            nodes.insert(a.clone());
            nodes.insert(b.clone());
            callees.entry(a).or_default().push(b);
            called.insert(b);
        }
        let mut depth: BTreeMap<String, usize> = BTreeMap::new();
        let mut queue: VecDeque<(String, usize)> = nodes
            .iter()
            .filter(|n| !called.contains(n.as_str()))
            .map(|n| (n.clone(), 0))
            .collect();
        loop {
            while let Some((n, d)) = queue.pop_front() {
                if depth.contains_key(&n) {
                    continue;
                }
                depth.insert(n.clone(), d);
                for c in callees.get(n.as_str()).into_iter().flatten() {
                    if !depth.contains_key(*c) {
                        queue.push_back(((*c).to_string(), d + 1));
                    }
                }
            }
            // Nodes only reachable through a cycle: start from the first one left.
            match nodes.iter().find(|n| !depth.contains_key(*n)) {
                Some(n) => queue.push_back((n.clone(), 0)),
                None => break,
            }
        }
        let mut layers: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (n, d) in &depth {
            layers.entry(*d).or_default().push(n.clone());
        }
        let (dx, dy, margin) = (200.0, 64.0, 90.0);
        let mut positions = BTreeMap::new();
        let mut tallest = 1usize;
        for (d, names) in &layers {
            tallest = tallest.max(names.len());
            for (i, n) in names.iter().enumerate() {
                positions.insert(n.clone(), (margin + *d as f64 * dx, 40.0 + i as f64 * dy));
            }
        }
        let width = margin * 2.0 + layers.len().saturating_sub(1) as f64 * dx;
        let height = 80.0 + tallest.saturating_sub(1) as f64 * dy;
        GraphLayout {
            positions,
            width,
            height,
        }
    }
}

fn svg_graph(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let root = r.candidates.first().map(|c| c.component.as_str());
    let suspects: BTreeSet<&str> = r
        .candidates
        .iter()
        .skip(1)
        .map(|c| c.component.as_str())
        .collect();
    let extra: Vec<String> = r.candidates.iter().map(|c| c.component.clone()).collect();
    let layout = GraphLayout::new(&bundle.service_graph, &extra);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg id="service-graph" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="service graph">"#,
        w = layout.width,
        h = layout.height
    );
    svg.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#888"/></marker></defs>"##);
    for (a, b) in &bundle.service_graph {
        if let (Some(p), Some(q)) = (layout.positions.get(a), layout.positions.get(b)) {
            let _ = write!(
                svg,
                r##"<line class="edge" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888" marker-end="url(#arrow)"/>"##,
                p.0 + 70.0,
                p.1,
                q.0 - 70.0,
                q.1
            );
        }
    }
    for (name, (x, y)) in &layout.positions {
        let class = if Some(name.as_str()) == root {
            "node root-cause"
        } else if suspects.contains(name.as_str()) {
            "node suspect"
        } else {
            "node"
        };
        let _ = write!(
            svg,
            r#"<g id="{id}" class="{class}"><title>{name}</title><rect x="{rx:.1}" y="{ry:.1}" width="140" height="34" rx="8"/><text x="{x:.1}" y="{ty:.1}" text-anchor="middle">{label}</text></g>"#,
            id = esc(&node_id(name)),
            name = esc(name),
            rx = x - 70.0,
            ry = y - 17.0,
            ty = y + 5.0,
            label = esc(&shorten(name, 20)),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let head: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:72rem}\
h1{font-size:1.5rem}table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}\
td,th{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.summary{background:#fff6f0;border-left:4px solid #d9480f;padding:.75rem 1rem}\
.node rect{fill:#eef;stroke:#557}.node.suspect rect{fill:#fff3bf;stroke:#e67700}\
.node.root-cause rect{fill:#ffc9c9;stroke:#c92a2a;stroke-width:3}.node text{font-size:12px}\
ol.timeline li{margin:.3rem 0}.error{color:#c92a2a}";

/// Renders the bundle as one self-contained HTML page.
pub fn render_html(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Diagnosis: {}</title><style>{STYLE}</style></head><body>",
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
    h.push_str("<h2>Service graph</h2>");
    h.push_str(&svg_graph(bundle));
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
    h.push_str("</table><h2>Timeline</h2><ol id=\"timeline\" class=\"timeline\">");
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
    use super::super::fixtures::bundle;
    use super::*;

    #[test]
    fn html_is_escaped_and_highlights_the_root_cause() {
        let html = render_html(&bundle());
        assert!(html.contains("checkout latency &amp; errors"));
        assert!(html.contains("cpu 4.1x baseline &lt;high&gt;"));
        assert!(!html.contains("<high>"));
        assert!(html.contains(r#"<g id="node-orders" class="node root-cause">"#));
        assert!(html.contains(r#"<g id="node-payments" class="node suspect">"#));
        assert_eq!(html.matches("class=\"evidence\"").count(), 2);
        assert!(!html.contains("<script"));
    }

    #[test]
    fn layout_puts_callers_left_and_survives_cycles() {
        let edges = vec![
            ("a".to_string(), "b".to_string()),
            ("b".to_string(), "c".to_string()),
            ("x".to_string(), "y".to_string()),
            ("y".to_string(), "x".to_string()),
        ];
        let l = GraphLayout::new(&edges, &["lonely".to_string()]);
        assert_eq!(l.positions.len(), 6);
        assert!(l.positions["a"].0 < l.positions["b"].0);
        assert!(l.positions["b"].0 < l.positions["c"].0);
        assert!(l.width > 0.0 && l.height > 0.0);
        assert_eq!(node_id("ts/a b"), "node-ts_a_b");
    }
}
