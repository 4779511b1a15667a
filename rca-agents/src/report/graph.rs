//! The service graph as SVG: laid out in layers by call depth ([`GraphLayout`]), each node with
//! its full name on hover, the root-cause candidates coloured by rank.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

use super::ReportBundle;
use super::layout::{GraphLayout, NODE_H, NODE_W};
use super::svg::{esc, node_id, px, shorten};

/// Services drawn at most: the candidates and the services nearest to them.
pub const MAX_GRAPH_NODES: usize = 120;
/// Candidates coloured by rank (the rest look like other services).
pub const RANKED_COLOURS: usize = 5;

/// The edges to draw: all of them when the graph is small, else those among the
/// [`MAX_GRAPH_NODES`] services nearest (in calls, either way) to the candidates. Returns the
/// edges and how many services were left out.
fn bounded_graph(
    edges: &[(String, String)],
    candidates: &[String],
) -> (Vec<(String, String)>, usize) {
    let mut nodes: BTreeSet<&str> = candidates.iter().map(String::as_str).collect();
    let mut neighbours: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        nodes.insert(a);
        nodes.insert(b);
        neighbours.entry(a).or_default().push(b);
        neighbours.entry(b).or_default().push(a);
    }
    if nodes.len() <= MAX_GRAPH_NODES {
        return (edges.to_vec(), 0);
    }
    // Breadth-first from the candidates, in rank order, then from the rest by name.
    let mut keep: BTreeSet<&str> = BTreeSet::new();
    let mut queue: VecDeque<&str> = candidates.iter().map(String::as_str).collect();
    let mut starts = nodes.iter();
    while keep.len() < MAX_GRAPH_NODES {
        let Some(n) = queue
            .pop_front()
            .or_else(|| starts.find(|n| !keep.contains(*n)).copied())
        else {
            break;
        };
        if !keep.insert(n) {
            continue;
        }
        for m in neighbours.get(n).into_iter().flatten() {
            if !keep.contains(m) {
                queue.push_back(m);
            }
        }
    }
    let kept: Vec<(String, String)> = edges
        .iter()
        .filter(|(a, b)| keep.contains(a.as_str()) && keep.contains(b.as_str()))
        .cloned()
        .collect();
    (kept, nodes.len() - keep.len())
}

/// A cubic path through `points`, leaving and entering each point horizontally.
fn path(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, p) in points.iter().enumerate() {
        if i == 0 {
            let _ = write!(d, "M{},{}", px(p.0), px(p.1));
        } else {
            let q = points[i - 1];
            let mid = (q.0 + p.0) / 2.0;
            let _ = write!(
                d,
                " C{},{} {},{} {},{}",
                px(mid),
                px(q.1),
                px(mid),
                px(p.1),
                px(p.0),
                px(p.1)
            );
        }
    }
    d
}

/// The service graph as an SVG element with id `service-graph`, and a note of what was left
/// out.
pub(crate) fn render_graph(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let candidates: Vec<String> = r.candidates.iter().map(|c| c.component.clone()).collect();
    let rank: BTreeMap<&str, usize> = candidates
        .iter()
        .enumerate()
        .rev()
        .map(|(i, c)| (c.as_str(), i + 1))
        .collect();
    let (edges, left_out) = bounded_graph(&bundle.service_graph, &candidates);
    let layout = GraphLayout::new(&edges, &candidates);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg id="service-graph" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="service graph">"#,
        w = px(layout.width),
        h = px(layout.height)
    );
    svg.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#868e96"/></marker></defs>"##);
    let root = candidates.first().map(String::as_str);
    for e in &layout.edges {
        let touches_root = root.is_some_and(|c| e.from == c || e.to == c);
        let _ = write!(
            svg,
            r#"<path class="edge{}" d="{}" marker-end="url(#arrow)"><title>{} → {}</title></path>"#,
            if touches_root { " root-edge" } else { "" },
            path(&e.points),
            esc(&e.from),
            esc(&e.to),
        );
    }
    for (name, (x, y)) in &layout.positions {
        let class = match rank.get(name.as_str()) {
            Some(1) => "node root-cause".to_string(),
            Some(k) if *k <= RANKED_COLOURS => format!("node suspect rank-{k}"),
            Some(_) => "node suspect".to_string(),
            None => "node".to_string(),
        };
        let title = match rank.get(name.as_str()) {
            Some(k) => format!("{name} (candidate {k})"),
            None => name.clone(),
        };
        let _ = write!(
            svg,
            r#"<g id="{id}" class="{class}"><title>{title}</title><rect x="{rx}" y="{ry}" width="{NODE_W}" height="{NODE_H}" rx="7"/><text x="{tx}" y="{ty}" text-anchor="middle">{label}</text>"#,
            id = esc(&node_id(name)),
            title = esc(&title),
            rx = px(x - NODE_W / 2.0),
            ry = px(y - NODE_H / 2.0),
            tx = px(*x),
            ty = px(y + 4.0),
            label = esc(&shorten(name, 25)),
        );
        if let Some(k) = rank.get(name.as_str()) {
            let _ = write!(
                svg,
                r#"<circle class="rank" cx="{}" cy="{}" r="9"/><text class="rank" x="{}" y="{}" text-anchor="middle">{k}</text>"#,
                px(x - NODE_W / 2.0),
                px(y - NODE_H / 2.0),
                px(x - NODE_W / 2.0),
                px(y - NODE_H / 2.0 + 4.0),
            );
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    let mut legend = String::from(r#"<p class="legend">"#);
    let shown = candidates.len().min(RANKED_COLOURS);
    for k in 1..=shown {
        let class = if k == 1 {
            "root-cause".to_string()
        } else {
            format!("suspect rank-{k}")
        };
        let _ = write!(
            legend,
            r#"<span class="swatch {class}"></span>{}"#,
            if k == 1 {
                "1 root cause ".to_string()
            } else {
                format!("{k} ")
            }
        );
    }
    legend.push_str(
        "· candidates by rank; callers left of callees, by call depth; hover a node or an edge for its full name.",
    );
    if left_out > 0 {
        let _ = write!(
            legend,
            " {left_out} services farther from the candidates are not drawn."
        );
    }
    legend.push_str("</p>");
    svg + &legend
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::bundle;
    use super::*;

    #[test]
    fn graph_colours_candidates_by_rank_and_names_nodes_on_hover() {
        let svg = render_graph(&bundle());
        assert!(svg.contains(
            r#"<g id="node-orders" class="node root-cause"><title>orders (candidate 1)</title>"#
        ));
        assert!(svg.contains(r#"<g id="node-payments" class="node suspect rank-2">"#));
        assert!(svg.contains(r#"<g id="node-catalog" class="node"><title>catalog</title>"#));
        assert_eq!(svg.matches(r#"<path class="edge"#).count(), 3);
        assert!(svg.contains("<title>frontend → orders</title>"));
    }

    #[test]
    fn a_huge_graph_keeps_the_candidates_neighbourhood() {
        let mut edges = Vec::new();
        for i in 0..400 {
            edges.push((format!("s{i}"), format!("s{}", i + 1)));
        }
        let (kept, left_out) = bounded_graph(&edges, &["s200".to_string()]);
        let names: BTreeSet<&str> = kept
            .iter()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        assert!(names.len() <= MAX_GRAPH_NODES && names.contains("s200") && names.contains("s201"));
        assert_eq!(left_out, 401 - MAX_GRAPH_NODES);
    }
}
