//! A layered drawing of the service graph (the Sugiyama scheme, kept small):
//!
//! 1. cycles are broken by reversing the back edges of a depth-first search;
//! 2. each service gets a layer by call depth (longest-path layering; a service nobody calls
//!    sits just left of its first callee);
//! 3. an edge that spans several layers is routed through one waypoint per layer in between,
//!    so no edge crosses the whole page in one stroke;
//! 4. the order within each layer is found by barycentre sweeps (the order with the fewest
//!    crossings seen is kept);
//! 5. vertical positions pull each node towards its neighbours while keeping the order and the
//!    spacing (an isotonic fit), which straightens the edges.
//!
//! Everything is deterministic: ties break by name.

use std::collections::{BTreeMap, BTreeSet};

/// Width of a node box.
pub(crate) const NODE_W: f64 = 170.0;
/// Height of a node box.
pub(crate) const NODE_H: f64 = 30.0;
/// Horizontal distance between layers.
const LAYER_DX: f64 = 230.0;
/// Vertical distance between two nodes of a layer.
const NODE_DY: f64 = 44.0;
/// Vertical distance between a waypoint and its neighbour in a layer.
const WAYPOINT_DY: f64 = 16.0;
/// Space around the drawing.
const MARGIN: f64 = 24.0;
/// Barycentre sweeps (down and up count as one each).
const SWEEPS: usize = 24;
/// Rounds of the vertical straightening.
const STRAIGHTEN_ROUNDS: usize = 12;

/// Where a drawn edge goes: from its caller's box to its callee's box, through one waypoint per
/// layer it passes.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeRoute {
    /// The caller.
    pub from: String,
    /// The callee.
    pub to: String,
    /// The points of the stroke, from the caller's box edge to the callee's box edge.
    pub points: Vec<(f64, f64)>,
}

/// Node positions of the service graph, layered left to right by call depth.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphLayout {
    /// Node name -> (x, y) centre.
    pub positions: BTreeMap<String, (f64, f64)>,
    /// Node name -> its layer (0 is the leftmost).
    pub layers: BTreeMap<String, usize>,
    /// The edges' routes, in the order of the input edges (duplicates and self-calls dropped).
    pub edges: Vec<EdgeRoute>,
    /// Width of the drawing.
    pub width: f64,
    /// Height of the drawing.
    pub height: f64,
}

/// A vertex of the layered graph: a service, or a waypoint of a long edge.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Vertex {
    Node(usize),
    Waypoint,
}

impl GraphLayout {
    /// Lays out the graph of `edges` plus any `extra` nodes (candidates that no edge names).
    pub fn new(edges: &[(String, String)], extra: &[String]) -> Self {
        let mut names: BTreeSet<&str> = extra.iter().map(String::as_str).collect();
        for (a, b) in edges {
            names.insert(a);
            names.insert(b);
        }
        let names: Vec<&str> = names.into_iter().collect();
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        // Distinct edges between distinct nodes, in input order.
        let mut seen = BTreeSet::new();
        let mut graph_edges: Vec<(usize, usize)> = Vec::new();
        for (a, b) in edges {
            if let (Some(&u), Some(&v)) = (index.get(a.as_str()), index.get(b.as_str()))
                && u != v
                && seen.insert((u, v))
            {
                graph_edges.push((u, v));
            }
        }
        let n = names.len();
        let reversed = back_edges(n, &graph_edges);
        // The acyclic graph: back edges turned around (an edge whose reverse is also present
        // becomes a parallel edge, which is harmless).
        let dag: Vec<(usize, usize)> = graph_edges
            .iter()
            .zip(&reversed)
            .map(|(&(u, v), &r)| if r { (v, u) } else { (u, v) })
            .collect();
        let layer = layering(n, &dag);

        // The layered graph: services plus waypoints, edges only between neighbouring layers.
        let depth = layer.iter().copied().max().map_or(1, |m| m + 1);
        let mut vertices: Vec<Vertex> = (0..n).map(Vertex::Node).collect();
        let mut vlayer: Vec<usize> = layer.clone();
        let mut links: Vec<(usize, usize)> = Vec::new();
        let mut chains: Vec<Vec<usize>> = Vec::with_capacity(dag.len());
        for &(u, v) in &dag {
            let mut chain = vec![u];
            for l in layer[u] + 1..layer[v] {
                vertices.push(Vertex::Waypoint);
                vlayer.push(l);
                chain.push(vertices.len() - 1);
            }
            chain.push(v);
            for pair in chain.windows(2) {
                links.push((pair[0], pair[1]));
            }
            chains.push(chain);
        }
        let mut order: Vec<Vec<usize>> = vec![Vec::new(); depth];
        for (i, l) in vlayer.iter().enumerate() {
            order[*l].push(i);
        }
        let order = order_layers(order, &links, vertices.len());

        // Vertical positions.
        let gap = |a: usize, b: usize| match (vertices[a], vertices[b]) {
            (Vertex::Node(_), Vertex::Node(_)) => NODE_DY,
            (Vertex::Waypoint, Vertex::Waypoint) => WAYPOINT_DY,
            _ => (NODE_DY + WAYPOINT_DY) / 2.0,
        };
        let y = straighten(&order, &links, vertices.len(), &gap);
        let top = order
            .iter()
            .filter_map(|l| l.first().map(|v| y[*v]))
            .fold(f64::INFINITY, f64::min);
        let shift = if top.is_finite() {
            MARGIN + NODE_H / 2.0 - top
        } else {
            0.0
        };
        let x = |l: usize| MARGIN + NODE_W / 2.0 + l as f64 * LAYER_DX;
        let pos = |v: usize| (x(vlayer[v]), y[v] + shift);

        let mut positions = BTreeMap::new();
        let mut layers = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            positions.insert(name.to_string(), pos(i));
            layers.insert(name.to_string(), layer[i]);
        }
        let mut routes = Vec::with_capacity(chains.len());
        for ((chain, &(u, v)), &r) in chains.iter().zip(&graph_edges).zip(&reversed) {
            let mut points: Vec<(f64, f64)> = chain.iter().map(|&c| pos(c)).collect();
            // Leave the left box on its right side and enter the right box on its left; a
            // reversed edge then runs right to left, from its caller to its callee.
            if let Some(first) = points.first_mut() {
                first.0 += NODE_W / 2.0;
            }
            if let Some(last) = points.last_mut() {
                last.0 -= NODE_W / 2.0;
            }
            if r {
                points.reverse();
            }
            routes.push(EdgeRoute {
                from: names[u].to_string(),
                to: names[v].to_string(),
                points,
            });
        }
        let bottom = positions
            .values()
            .map(|p| p.1)
            .chain(routes.iter().flat_map(|r| r.points.iter().map(|p| p.1)))
            .fold(0.0, f64::max);
        GraphLayout {
            positions,
            layers,
            edges: routes,
            width: 2.0 * MARGIN + NODE_W + (depth.saturating_sub(1)) as f64 * LAYER_DX,
            height: (bottom + NODE_H / 2.0 + MARGIN).max(NODE_H + 2.0 * MARGIN),
        }
    }

    /// How many pairs of edge strokes cross between neighbouring layers (strokes that share an
    /// end do not count).
    pub fn crossings(&self) -> usize {
        // Each stroke between two neighbouring layers is a segment; two segments between the
        // same pair of layers cross when their ends are in opposite vertical order.
        type Segment = ((f64, f64), (f64, f64));
        let mut segments: BTreeMap<i64, Vec<Segment>> = BTreeMap::new();
        for r in &self.edges {
            for pair in r.points.windows(2) {
                let (a, b) = if pair[0].0 <= pair[1].0 {
                    (pair[0], pair[1])
                } else {
                    (pair[1], pair[0])
                };
                // The gap between layers this segment lies in.
                let gap = ((a.0 + b.0) / 2.0 / LAYER_DX).floor() as i64;
                segments.entry(gap).or_default().push((a, b));
            }
        }
        let mut count = 0;
        for segs in segments.values() {
            for (i, s) in segs.iter().enumerate() {
                for t in &segs[i + 1..] {
                    let d0 = s.0.1 - t.0.1;
                    let d1 = s.1.1 - t.1.1;
                    if d0 * d1 < 0.0 {
                        count += 1;
                    }
                }
            }
        }
        count
    }
}

/// Which edges close a cycle (a depth-first search's back edges, searched from the nodes
/// nobody calls first, then from the rest in name order).
fn back_edges(n: usize, edges: &[(usize, usize)]) -> Vec<bool> {
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut called = vec![false; n];
    for (i, &(u, v)) in edges.iter().enumerate() {
        out[u].push((v, i));
        called[v] = true;
    }
    // 0: unvisited, 1: on the stack, 2: done.
    let mut state = vec![0u8; n];
    let mut back = vec![false; edges.len()];
    let starts = (0..n).filter(|&v| !called[v]).chain(0..n);
    for s in starts {
        if state[s] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(s, 0)];
        state[s] = 1;
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            if let Some(&(w, e)) = out[v].get(next) {
                top.1 += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    back
}

/// The layer of each node of an acyclic graph: the length of the longest call chain that
/// reaches it; then a node nobody calls moves right, next to its nearest callee.
fn layering(n: usize, dag: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(u, v) in dag {
        indegree[v] += 1;
        out[u].push(v);
    }
    let mut layer = vec![0usize; n];
    let mut ready: BTreeSet<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut left = indegree.clone();
    while let Some(v) = ready.pop_first() {
        for &w in &out[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            left[w] -= 1;
            if left[w] == 0 {
                ready.insert(w);
            }
        }
    }
    for v in 0..n {
        if indegree[v] == 0
            && let Some(nearest) = out[v].iter().map(|&w| layer[w]).min()
        {
            layer[v] = nearest.saturating_sub(1);
        }
    }
    layer
}

/// Crossings between two neighbouring layers, given each vertex's position in its layer.
fn crossings_between(links: &[(usize, usize)], pos: &[usize]) -> usize {
    let mut count = 0;
    for (i, &(a, b)) in links.iter().enumerate() {
        for &(c, d) in &links[i + 1..] {
            let (pa, pb, pc, pd) = (pos[a], pos[b], pos[c], pos[d]);
            if (pa < pc && pb > pd) || (pa > pc && pb < pd) {
                count += 1;
            }
        }
    }
    count
}

/// All crossings of an ordering.
fn total_crossings(order: &[Vec<usize>], by_gap: &[Vec<(usize, usize)>], nv: usize) -> usize {
    let pos = positions_of(order, nv);
    by_gap.iter().map(|l| crossings_between(l, &pos)).sum()
}

fn positions_of(order: &[Vec<usize>], nv: usize) -> Vec<usize> {
    let mut pos = vec![0usize; nv];
    for layer in order {
        for (i, v) in layer.iter().enumerate() {
            pos[*v] = i;
        }
    }
    pos
}

/// Orders each layer by barycentre sweeps, keeping the ordering with the fewest crossings.
fn order_layers(
    mut order: Vec<Vec<usize>>,
    links: &[(usize, usize)],
    nv: usize,
) -> Vec<Vec<usize>> {
    let mut vlayer = vec![0usize; nv];
    for (l, layer) in order.iter().enumerate() {
        for v in layer {
            vlayer[*v] = l;
        }
    }
    // Links grouped by the gap they span (from layer l to l + 1).
    let mut by_gap: Vec<Vec<(usize, usize)>> = vec![Vec::new(); order.len().saturating_sub(1)];
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); nv];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); nv];
    for &(a, b) in links {
        if let Some(g) = by_gap.get_mut(vlayer[a]) {
            g.push((a, b));
        }
        down[a].push(b);
        up[b].push(a);
    }
    let mut best = order.clone();
    let mut best_count = total_crossings(&order, &by_gap, nv);
    for sweep in 0..SWEEPS {
        if best_count == 0 {
            break;
        }
        let downward = sweep % 2 == 0;
        let layers: Vec<usize> = if downward {
            (1..order.len()).collect()
        } else {
            (0..order.len().saturating_sub(1)).rev().collect()
        };
        for l in layers {
            let pos = positions_of(&order, nv);
            let neighbours = if downward { &up } else { &down };
            let mut keyed: Vec<(f64, usize, usize)> = order[l]
                .iter()
                .map(|&v| {
                    let ns = &neighbours[v];
                    let bary = if ns.is_empty() {
                        pos[v] as f64
                    } else {
                        ns.iter().map(|&w| pos[w] as f64).sum::<f64>() / ns.len() as f64
                    };
                    (bary, pos[v], v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            order[l] = keyed.into_iter().map(|k| k.2).collect();
        }
        let count = total_crossings(&order, &by_gap, nv);
        if count < best_count {
            best_count = count;
            best = order.clone();
        }
    }
    best
}

/// Vertical positions: each vertex pulled towards the mean height of its neighbours, keeping
/// the order within its layer and at least `gap(a, b)` between neighbours `a` above `b`.
fn straighten(
    order: &[Vec<usize>],
    links: &[(usize, usize)],
    nv: usize,
    gap: &dyn Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); nv];
    for &(a, b) in links {
        neighbours[a].push(b);
        neighbours[b].push(a);
    }
    // Start packed and centred on the tallest layer.
    let mut y = vec![0.0f64; nv];
    let heights: Vec<f64> = order
        .iter()
        .map(|l| l.windows(2).map(|p| gap(p[0], p[1])).sum())
        .collect();
    let tallest = heights.iter().copied().fold(0.0, f64::max);
    for (layer, h) in order.iter().zip(&heights) {
        let mut at = (tallest - h) / 2.0;
        for (i, v) in layer.iter().enumerate() {
            if i > 0 {
                at += gap(layer[i - 1], *v);
            }
            y[*v] = at;
        }
    }
    for _ in 0..STRAIGHTEN_ROUNDS {
        for layer in order {
            let wanted: Vec<f64> = layer
                .iter()
                .map(|&v| {
                    let ns = &neighbours[v];
                    if ns.is_empty() {
                        y[v]
                    } else {
                        ns.iter().map(|&w| y[w]).sum::<f64>() / ns.len() as f64
                    }
                })
                .collect();
            let offsets: Vec<f64> = std::iter::once(0.0)
                .chain(layer.windows(2).map(|p| gap(p[0], p[1])))
                .scan(0.0, |acc, g| {
                    *acc += g;
                    Some(*acc)
                })
                .collect();
            let fitted = spaced_fit(&wanted, &offsets);
            for (v, f) in layer.iter().zip(fitted) {
                y[*v] = f;
            }
        }
    }
    y
}

/// The positions closest (least squares) to `wanted` with `p[i+1] - p[i] >= offsets[i+1] -
/// offsets[i]`: pool-adjacent-violators on `wanted - offsets`.
fn spaced_fit(wanted: &[f64], offsets: &[f64]) -> Vec<f64> {
    // Blocks of (sum, count) whose means must not decrease.
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for (w, o) in wanted.iter().zip(offsets) {
        blocks.push((w - o, 1));
        while blocks.len() > 1 {
            let (s1, c1) = blocks[blocks.len() - 1];
            let (s0, c0) = blocks[blocks.len() - 2];
            if s0 / c0 as f64 > s1 / c1 as f64 {
                blocks.pop();
                let last = blocks.len() - 1;
                blocks[last] = (s0 + s1, c0 + c1);
            } else {
                break;
            }
        }
    }
    let mut out = Vec::with_capacity(wanted.len());
    for (s, c) in blocks {
        let mean = s / c as f64;
        for _ in 0..c {
            let i = out.len();
            out.push(mean + offsets[i]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    #[test]
    fn callers_sit_left_of_callees_and_cycles_survive() {
        let edges = vec![e("a", "b"), e("b", "c"), e("x", "y"), e("y", "x")];
        let l = GraphLayout::new(&edges, &["lonely".to_string()]);
        assert_eq!(l.positions.len(), 6);
        assert!(l.positions["a"].0 < l.positions["b"].0);
        assert!(l.positions["b"].0 < l.positions["c"].0);
        assert_ne!(l.layers["x"], l.layers["y"]);
        assert_eq!(l.edges.len(), 4);
        assert!(l.width > 0.0 && l.height > 0.0);
        // Every node lies inside the drawing.
        for (x, y) in l.positions.values() {
            assert!(*x - NODE_W / 2.0 >= 0.0 && *x + NODE_W / 2.0 <= l.width);
            assert!(*y - NODE_H / 2.0 >= 0.0 && *y + NODE_H / 2.0 <= l.height);
        }
    }

    #[test]
    fn layers_follow_call_depth_and_long_edges_get_waypoints() {
        // gw -> a -> b -> c and gw -> c: c sits at depth 3, and gw -> c passes two layers.
        let edges = vec![
            e("gw", "a"),
            e("a", "b"),
            e("b", "c"),
            e("gw", "c"),
            e("z", "c"),
        ];
        let l = GraphLayout::new(&edges, &[]);
        assert_eq!(l.layers["gw"], 0);
        assert_eq!(l.layers["c"], 3);
        // A service nobody calls sits next to its callee, not at the far left.
        assert_eq!(l.layers["z"], 2);
        let long = l
            .edges
            .iter()
            .find(|r| r.from == "gw" && r.to == "c")
            .unwrap();
        assert_eq!(long.points.len(), 4);
        // No stroke spans more than one gap between layers.
        for r in &l.edges {
            for p in r.points.windows(2) {
                assert!((p[1].0 - p[0].0).abs() <= LAYER_DX + 1e-9, "{r:?}");
            }
        }
    }

    #[test]
    fn barycentre_ordering_removes_avoidable_crossings() {
        // Two independent call chains whose names interleave: sorted by name the second layer
        // would cross; ordered by barycentre it does not.
        let edges = vec![
            e("a1", "z1"),
            e("a2", "b2"),
            e("a3", "y3"),
            e("z1", "c1"),
            e("b2", "x2"),
            e("y3", "a0"),
        ];
        let l = GraphLayout::new(&edges, &[]);
        assert_eq!(l.crossings(), 0, "{l:?}");
        // A complete bipartite graph K(3,3) has crossings no order avoids; they are counted.
        let mut k33 = Vec::new();
        for a in ["p", "q", "r"] {
            for b in ["s", "t", "u"] {
                k33.push(e(a, b));
            }
        }
        assert!(GraphLayout::new(&k33, &[]).crossings() > 0);
    }

    #[test]
    fn reversed_edges_still_point_from_caller_to_callee() {
        let edges = vec![e("a", "b"), e("b", "c"), e("c", "a")];
        let l = GraphLayout::new(&edges, &[]);
        for r in &l.edges {
            let first = r.points.first().unwrap();
            let last = r.points.last().unwrap();
            let (fx, fy) = l.positions[&r.from];
            let (tx, ty) = l.positions[&r.to];
            // The stroke starts on the caller's box and ends on the callee's.
            assert!((first.0 - fx).abs() <= NODE_W / 2.0 + 1e-9 && (first.1 - fy).abs() < 1e-9);
            assert!((last.0 - tx).abs() <= NODE_W / 2.0 + 1e-9 && (last.1 - ty).abs() < 1e-9);
        }
    }

    #[test]
    fn spaced_fit_keeps_order_and_spacing() {
        let fitted = spaced_fit(&[10.0, 10.0, 10.0], &[0.0, 5.0, 10.0]);
        assert_eq!(fitted, vec![5.0, 10.0, 15.0]);
        let free = spaced_fit(&[0.0, 100.0], &[0.0, 5.0]);
        assert_eq!(free, vec![0.0, 100.0]);
        assert!(spaced_fit(&[], &[]).is_empty());
    }

    #[test]
    fn empty_graph_has_a_size() {
        let l = GraphLayout::new(&[], &[]);
        assert!(l.positions.is_empty() && l.width > 0.0 && l.height > 0.0);
        let one = GraphLayout::new(&[], &["solo".to_string()]);
        assert_eq!(one.positions.len(), 1);
    }
}
