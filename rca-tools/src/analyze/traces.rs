//! Trace anomalies: per-operation latency (self time; client spans excluded, their self time is
//! the call's gap) and error-rate shifts, client/server gap
//! shifts between components, call-structure shifts, the service call graph, and blame that
//! follows anomalous callees down the graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::FxHashMap;

use petgraph::Direction;
use petgraph::graphmap::DiGraphMap;
use rca_core::source::Span;
use rca_core::{Modality, Timestamp};

use super::effect::{ShareChange, confident, duration_shift};
use super::stats::{RobustBaseline, median, quantile};
use super::{Finding, Signal, SpanIndex, Window, fmt_num};

/// The call graph between components, built from parent/child spans in different components.
#[derive(Debug, Clone, Default)]
pub struct ServiceGraph {
    names: Vec<String>,
    index: HashMap<String, usize>,
    graph: DiGraphMap<usize, u64>,
}

impl ServiceGraph {
    /// The graph of every caller -> callee pair seen in the spans (edge weight: call count).
    pub fn from_spans(spans: &[Span]) -> Self {
        let by_id: FxHashMap<(&str, &str), &Span> = spans
            .iter()
            .map(|s| ((s.trace_id.as_str(), s.span_id.as_str()), s))
            .collect();
        let mut g = ServiceGraph::default();
        for s in spans {
            g.node(&s.component);
            let Some(parent) = s
                .parent_id
                .as_deref()
                .and_then(|p| by_id.get(&(s.trace_id.as_str(), p)))
            else {
                continue;
            };
            if parent.component != s.component {
                g.add_call(&parent.component, &s.component);
            }
        }
        g
    }

    /// A graph from known caller -> callee edges (a topology the host supplies).
    pub fn from_edges<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut g = ServiceGraph::default();
        for (a, b) in edges {
            g.add_call(a, b);
        }
        g
    }

    fn node(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        self.graph.add_node(i);
        i
    }

    /// Records one call from `caller` to `callee`.
    pub fn add_call(&mut self, caller: &str, callee: &str) {
        self.add_calls(caller, callee, 1);
    }

    /// Records `n` calls from `caller` to `callee`.
    pub fn add_calls(&mut self, caller: &str, callee: &str, n: u64) {
        let (a, b) = (self.node(caller), self.node(callee));
        match self.graph.edge_weight_mut(a, b) {
            Some(w) => *w = w.saturating_add(n),
            None => {
                self.graph.add_edge(a, b, n);
            }
        }
    }

    /// Every component, in the order first seen.
    pub fn components(&self) -> &[String] {
        &self.names
    }

    fn neighbours(&self, c: &str, dir: Direction) -> Vec<String> {
        let Some(&i) = self.index.get(c) else {
            return Vec::new();
        };
        let mut v: Vec<String> = self
            .graph
            .neighbors_directed(i, dir)
            .filter(|&j| j != i)
            .map(|j| self.names[j].clone())
            .collect();
        v.sort();
        v
    }

    /// The components `c` calls.
    pub fn callees(&self, c: &str) -> Vec<String> {
        self.neighbours(c, Direction::Outgoing)
    }

    /// The components that call `c`.
    pub fn callers(&self, c: &str) -> Vec<String> {
        self.neighbours(c, Direction::Incoming)
    }

    /// Every `(caller, callee, calls)` edge, sorted.
    pub fn edges(&self) -> Vec<(String, String, u64)> {
        let mut v: Vec<_> = self
            .graph
            .all_edges()
            .map(|(a, b, w)| (self.names[a].clone(), self.names[b].clone(), *w))
            .collect();
        v.sort();
        v
    }

    /// Follows anomalies down the graph: an anomalous component (score at or above
    /// `threshold`) with an anomalous callee, directly or through other anomalous components,
    /// is explained by it and passes its blame down; the deepest anomalous components keep
    /// their own score plus half the largest score of the anomalous components above them.
    pub fn blame(&self, scores: &BTreeMap<String, f64>, threshold: f64) -> BTreeMap<String, f64> {
        let anomalous: BTreeSet<&str> = scores
            .iter()
            .filter(|(_, s)| **s >= threshold)
            .map(|(c, _)| c.as_str())
            .collect();
        let mut out = BTreeMap::new();
        for &c in &anomalous {
            let has_anomalous_callee = self
                .callees(c)
                .iter()
                .any(|d| anomalous.contains(d.as_str()));
            if has_anomalous_callee {
                continue;
            }
            // Anomalous ancestors reaching c through anomalous components only.
            let mut seen = BTreeSet::from([c.to_string()]);
            let mut stack = vec![c.to_string()];
            let mut above: f64 = 0.0;
            while let Some(x) = stack.pop() {
                for p in self.callers(&x) {
                    if anomalous.contains(p.as_str()) && seen.insert(p.clone()) {
                        above = above.max(scores.get(&p).copied().unwrap_or(0.0));
                        stack.push(p);
                    }
                }
            }
            let own = scores.get(c).copied().unwrap_or(0.0);
            out.insert(c.to_string(), own + 0.5 * above);
        }
        out
    }
}

/// Something a component's span does, counted per window: runs an operation, or calls
/// another component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SpanEvent<'a> {
    Operation(&'a str),
    Call(&'a str),
}

impl std::fmt::Display for SpanEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanEvent::Operation(op) => write!(f, "operation {op}"),
            SpanEvent::Call(c) => write!(f, "call to {c}"),
        }
    }
}

/// A map's entries sorted by key.
fn sorted<K: Ord, V>(map: FxHashMap<K, V>) -> Vec<(K, V)> {
    let mut v: Vec<(K, V)> = map.into_iter().collect();
    v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Compares spans of the current window with the baseline window.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceAnalyzer {
    /// Report shifts whose score (an effect size: the latency's robust z, a share's effect
    /// in [`super::effect::SHARE_UNIT`]s) reaches this.
    pub min_z: f64,
    /// ... and that are at least this significant (a one-sided normal quantile: the rank or
    /// log-scale test for durations, the exact or pooled test for shares). This, not a least count,
    /// decides whether a few spans are enough.
    pub min_significance: f64,
    /// Least baseline spans of an operation (or calls on an edge) to judge it.
    pub min_baseline: usize,
    /// Least current spans of an operation to judge it.
    pub min_current: usize,
    /// Latency units are at least this many microseconds.
    pub latency_floor_us: f64,
    /// Latency units are at least this share of the baseline median.
    pub relative_floor: f64,
}

impl Default for TraceAnalyzer {
    fn default() -> Self {
        TraceAnalyzer {
            min_z: 3.0,
            min_significance: 2.33,
            min_baseline: 2,
            min_current: 2,
            latency_floor_us: 1000.0,
            relative_floor: 0.1,
        }
    }
}

#[derive(Default)]
struct Series {
    base: Vec<f64>,
    cur: Vec<f64>,
    first: Option<Timestamp>,
}

impl Series {
    fn push(&mut self, current: bool, v: f64, t: Timestamp) {
        if current {
            self.cur.push(v);
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
        } else {
            self.base.push(v);
        }
    }
}

#[derive(Default)]
struct Tally {
    base: usize,
    cur: usize,
    base_err: usize,
    cur_err: usize,
    first: Option<Timestamp>,
}

impl TraceAnalyzer {
    /// The latency score of a series: the robust z of the current median (and half that of
    /// the 75th percentile) against the baseline, scaled by how sure the rank test is of the
    /// shift (see [`duration_shift`]); `None` when either window holds too few spans.
    fn latency_z(&self, s: &Series) -> Option<f64> {
        if s.base.len() < self.min_baseline || s.cur.len() < self.min_current {
            return None;
        }
        let rb = RobustBaseline::new(&s.base, self.relative_floor, self.latency_floor_us);
        let med = rb.z(median(&s.cur));
        let p75 = rb.z(quantile(&s.cur, 0.75)) * 0.5;
        let effect = med.max(p75);
        if effect <= 0.0 {
            return Some(effect);
        }
        Some(confident(
            effect,
            duration_shift(&s.base, &s.cur),
            self.min_significance,
        ))
    }

    /// Findings, strongest first: latency, call gaps, error rates, dropped paths, and blame
    /// from following anomalous callees down the call graph.
    pub fn analyze(&self, spans: &[Span], window: &Window) -> Vec<Finding> {
        let SpanIndex {
            spans,
            parent: parent_of,
            ..
        } = SpanIndex::new(spans, window);
        // Per span: the summed duration of its children, how many it has (and one of them),
        // and whether any failed.
        let mut child_time = vec![0u64; spans.len()];
        let mut child_count = vec![0u32; spans.len()];
        let mut a_child = vec![0usize; spans.len()];
        let mut child_failed = vec![false; spans.len()];
        for (i, p) in parent_of.iter().enumerate() {
            if let Some(p) = *p {
                child_time[p] = child_time[p].saturating_add(spans[i].duration_us);
                child_count[p] = child_count[p].saturating_add(1);
                a_child[p] = i;
                child_failed[p] |= spans[i].error;
            }
        }
        // A client span (one child, in another component) does no work of its own: its self
        // time is the gap between client and server, judged per call edge below.
        let is_client: Vec<bool> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| child_count[i] == 1 && spans[a_child[i]].component != s.component)
            .collect();
        let mut self_time: FxHashMap<(&str, &str), Series> = FxHashMap::default();
        let mut total_time: FxHashMap<(&str, &str), Series> = FxHashMap::default();
        let mut gaps: FxHashMap<(&str, &str), Series> = FxHashMap::default();
        let mut ops: FxHashMap<(&str, &str), Tally> = FxHashMap::default();
        let mut events: FxHashMap<(&str, SpanEvent<'_>), Tally> = FxHashMap::default();
        let mut comp_total: FxHashMap<&str, (usize, usize)> = FxHashMap::default();
        // Caller -> callee call counts, for the service graph.
        let mut calls: FxHashMap<(&str, &str), u64> = FxHashMap::default();
        for (i, s) in spans.iter().enumerate() {
            let cur = window.current.contains(s.start);
            let own = s.duration_us.saturating_sub(child_time[i]) as f64;
            let key = (s.component.as_str(), s.operation.as_str());
            if !is_client[i] {
                self_time.entry(key).or_default().push(cur, own, s.start);
            }
            total_time
                .entry(key)
                .or_default()
                .push(cur, s.duration_us as f64, s.start);
            // An error of its own: the span failed and none of its children did. A caller
            // that fails because a callee failed passes the error on; it is the callee's.
            let own_error = s.error && !child_failed[i];
            let t = ops.entry(key).or_default();
            let ct = comp_total.entry(s.component.as_str()).or_default();
            let op_ev = events
                .entry((s.component.as_str(), SpanEvent::Operation(&s.operation)))
                .or_default();
            if cur {
                t.cur += 1;
                t.cur_err += usize::from(own_error);
                t.first = Some(t.first.map_or(s.start, |f| f.min(s.start)));
                ct.1 += 1;
                op_ev.cur += 1;
                op_ev.first = Some(op_ev.first.map_or(s.start, |f| f.min(s.start)));
            } else {
                t.base += 1;
                t.base_err += usize::from(own_error);
                ct.0 += 1;
                op_ev.base += 1;
            }
            if let Some(p) = parent_of[i] {
                let parent = spans[p];
                if parent.component != s.component {
                    *calls
                        .entry((parent.component.as_str(), s.component.as_str()))
                        .or_default() += 1;
                    // The gap between client and server is judged only under a client span
                    // (one child, in another component): under a server span, the parent's
                    // duration also holds its own work and its other calls, so a slow
                    // callee would make every sibling's "gap" grow.
                    if is_client[p] {
                        let gap = parent.duration_us.saturating_sub(s.duration_us) as f64;
                        gaps.entry((parent.component.as_str(), s.component.as_str()))
                            .or_default()
                            .push(cur, gap, s.start);
                    }
                    let call = events
                        .entry((parent.component.as_str(), SpanEvent::Call(&s.component)))
                        .or_default();
                    if cur {
                        call.cur += 1;
                        call.first = Some(call.first.map_or(s.start, |f| f.min(s.start)));
                    } else {
                        call.base += 1;
                    }
                }
            }
        }
        // Judged in a fixed order (by name), so equal scores come out the same way every run.
        let self_time = sorted(self_time);
        let total_time = sorted(total_time);
        let gaps = sorted(gaps);
        let ops = sorted(ops);
        let mut by_component: BTreeMap<&str, BTreeMap<String, Tally>> = BTreeMap::new();
        for ((component, event), t) in events {
            by_component
                .entry(component)
                .or_default()
                .insert(event.to_string(), t);
        }
        let events = by_component;
        let mut graph = ServiceGraph::default();
        for s in &spans {
            graph.node(&s.component);
        }
        for ((caller, callee), n) in sorted(calls) {
            graph.add_calls(caller, callee, n);
        }
        let mut out = Vec::new();
        let start = window.current.start;
        for ((component, operation), s) in &self_time {
            if let Some(z) = self.latency_z(s).filter(|z| *z >= self.min_z) {
                out.push(Finding {
                    modality: Modality::Traces,
                    observed_at: s.first.unwrap_or(start),
                    component: component.to_string(),
                    signal: Signal::Latency {
                        operation: operation.to_string(),
                    },
                    summary: format!(
                        "{component} spends longer in {operation} itself: median self time {} us \
                         vs {} us in the baseline (z {})",
                        fmt_num(median(&s.cur)),
                        fmt_num(median(&s.base)),
                        fmt_num(z)
                    ),
                    score: z,
                });
            }
        }
        // A slower edge is the fault of the endpoint that most of its edges are slow at: a
        // delayed component slows every call to and from it, its peers only one edge each.
        let mut share: HashMap<&str, (usize, usize)> = HashMap::new();
        for ((caller, callee), s) in &gaps {
            let Some(z) = self.latency_z(s) else {
                continue;
            };
            let slow = z >= self.min_z;
            for c in [*caller, *callee] {
                let e = share.entry(c).or_default();
                e.0 += usize::from(slow);
                e.1 += 1;
            }
        }
        // (share of a component's judged edges that are slow, how many are slow)
        let slowness = |c: &str| {
            share.get(c).map_or((0.0, 0), |(slow, all)| {
                (*slow as f64 / (*all).max(1) as f64, *slow)
            })
        };
        let mut gap_blame: BTreeMap<String, f64> = BTreeMap::new();
        for ((caller, callee), s) in &gaps {
            if let Some(z) = self.latency_z(s).filter(|z| *z >= self.min_z) {
                let at = if slowness(caller) > slowness(callee) {
                    *caller
                } else {
                    *callee
                };
                let e = gap_blame.entry(at.to_string()).or_insert(0.0);
                *e = e.max(z);
                let peer = if at == *caller { callee } else { caller };
                out.push(Finding {
                    modality: Modality::Traces,
                    observed_at: s.first.unwrap_or(start),
                    component: at.to_string(),
                    signal: Signal::CallGap {
                        peer: peer.to_string(),
                    },
                    summary: format!(
                        "calls {caller} -> {callee} spend longer between client and server: \
                         median gap {} us vs {} us in the baseline (z {})",
                        fmt_num(median(&s.cur)),
                        fmt_num(median(&s.base)),
                        fmt_num(z)
                    ),
                    score: z,
                });
            }
        }
        for ((component, operation), t) in &ops {
            let change = ShareChange::new(
                t.base_err as f64,
                t.base as f64,
                t.cur_err as f64,
                t.cur as f64,
            );
            let z = change.score(self.min_significance);
            if t.cur_err >= 2 && z >= self.min_z {
                out.push(Finding {
                    modality: Modality::Traces,
                    observed_at: t.first.unwrap_or(start),
                    component: component.to_string(),
                    signal: Signal::ErrorRate {
                        operation: operation.to_string(),
                    },
                    summary: format!(
                        "{operation} of {component} failed {}/{} times with none of its callees \
                         failing, vs {}/{} in the baseline (effect {}, significance z {})",
                        t.cur_err,
                        t.cur,
                        t.base_err,
                        t.base,
                        fmt_num(z),
                        fmt_num(change.significance)
                    ),
                    score: z,
                });
            }
        }
        for (component, evs) in &events {
            let (na, nb) = comp_total.get(*component).copied().unwrap_or_default();
            if na < self.min_baseline || nb < self.min_current {
                continue;
            }
            for (event, t) in evs {
                if t.base == 0 && t.cur >= self.min_current {
                    let z = ShareChange::new(0.0, na as f64, t.cur as f64, nb as f64)
                        .score(self.min_significance);
                    if z >= self.min_z {
                        out.push(Finding {
                            modality: Modality::Traces,
                            observed_at: t.first.unwrap_or(start),
                            component: component.to_string(),
                            signal: Signal::PathAppeared {
                                event: event.clone(),
                            },
                            summary: format!(
                                "{component}: {event} appeared in {}/{nb} of its spans, never in \
                                 the {na} of the baseline (effect {})",
                                t.cur,
                                fmt_num(z)
                            ),
                            score: z,
                        });
                    }
                    continue;
                }
                if t.base < self.min_baseline {
                    continue;
                }
                let z = -ShareChange::new(t.base as f64, na as f64, t.cur as f64, nb as f64)
                    .score(self.min_significance);
                if z >= self.min_z {
                    out.push(Finding {
                        modality: Modality::Traces,
                        observed_at: start,
                        component: component.to_string(),
                        signal: Signal::PathDropped {
                            event: event.clone(),
                        },
                        summary: format!(
                            "{component}: {event} fell from {}/{na} to {}/{nb} of its spans (effect {})",
                            t.base,
                            t.cur,
                            fmt_num(z)
                        ),
                        score: z,
                    });
                }
            }
        }
        // Blame: component latency (total span durations), followed down the call graph.
        let mut comp_latency: BTreeMap<String, f64> = BTreeMap::new();
        for ((component, _), s) in &total_time {
            if let Some(z) = self.latency_z(s) {
                let e = comp_latency.entry(component.to_string()).or_insert(0.0);
                *e = e.max(z);
            }
        }
        for (component, z) in &gap_blame {
            let e = comp_latency.entry(component.clone()).or_insert(0.0);
            *e = e.max(*z);
        }
        for (component, score) in graph.blame(&comp_latency, self.min_z) {
            let callees = graph.callees(&component);
            out.push(Finding {
                modality: Modality::Traces,
                observed_at: start,
                component: component.clone(),
                signal: Signal::Blame,
                summary: format!(
                    "{component} is slower (z {}) and none of its callees{} is: the slowdown \
                     starts here",
                    fmt_num(comp_latency.get(&component).copied().unwrap_or(0.0)),
                    if callees.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", callees.join(", "))
                    }
                ),
                score,
            });
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    fn span(trace: usize, id: &str, parent: Option<&str>, c: &str, t: i64, dur: u64) -> Span {
        Span {
            trace_id: format!("t{trace}").into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
            component: c.into(),
            operation: format!("{c}-op").into(),
            start: Timestamp::from_secs(t),
            duration_us: dur,
            error: false,
            attributes: Default::default(),
        }
    }

    /// front -> mid -> db; in the current window db is slow.
    fn traces(slow_db: bool) -> Vec<Span> {
        let mut v = Vec::new();
        for i in 0..40 {
            let cur = i >= 20;
            let jitter = (i % 4) as u64 * 100;
            let db = if cur && slow_db { 50_000 } else { 5_000 } + jitter;
            v.push(span(i, "a", None, "front", i as i64, db + 12_000));
            v.push(span(i, "b", Some("a"), "mid", i as i64, db + 8_000));
            v.push(span(i, "c", Some("b"), "db", i as i64, db));
        }
        v
    }

    fn window() -> Window {
        Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(20)),
            TimeRange::new(Timestamp::from_secs(20), Timestamp::from_secs(40)),
        )
    }

    /// front -> mid -> db and front -> other, through client spans; in the current window
    /// mid's network is slow (its responses and its requests wait `delay` us).
    fn delayed_network(delay: u64) -> Vec<Span> {
        let mut v = Vec::new();
        for i in 0..40 {
            let d = if i >= 20 { delay } else { 0 };
            let jitter = (i % 4) as u64 * 100;
            let t = i as i64;
            let db = 4_000 + jitter;
            let mid_client = db + 500 + d;
            let mid = mid_client + 2_000;
            let other = 3_000 + jitter;
            let front_to_mid = mid + 500 + d;
            let front_to_other = other + 500;
            v.push(span(
                i,
                "a",
                None,
                "front",
                t,
                front_to_mid + front_to_other + 1_000,
            ));
            v.push(span(i, "a1", Some("a"), "front", t, front_to_mid));
            v.push(span(i, "b", Some("a1"), "mid", t, mid));
            v.push(span(i, "b1", Some("b"), "mid", t, mid_client));
            v.push(span(i, "c", Some("b1"), "db", t, db));
            v.push(span(i, "a2", Some("a"), "front", t, front_to_other));
            v.push(span(i, "d", Some("a2"), "other", t, other));
        }
        v
    }

    #[test]
    fn a_slow_network_is_blamed_on_the_component_all_slow_calls_touch() {
        let f = TraceAnalyzer::default().analyze(&delayed_network(50_000), &window());
        let gaps: Vec<&str> = f
            .iter()
            .filter(|x| matches!(x.signal, Signal::CallGap { .. }))
            .map(|x| x.component.as_str())
            .collect();
        assert!(!gaps.is_empty());
        assert!(gaps.iter().all(|c| *c == "mid"), "{f:?}");
        let blamed: Vec<&str> = f
            .iter()
            .filter(|x| matches!(x.signal, Signal::Blame))
            .map(|x| x.component.as_str())
            .collect();
        assert_eq!(blamed, ["mid"], "{f:?}");
        // The callers' client spans are not "slower in themselves".
        assert!(
            f.iter()
                .all(|x| !matches!(x.signal, Signal::Latency { .. }) || x.component == "mid"),
            "{f:?}"
        );
        assert!(
            TraceAnalyzer::default()
                .analyze(&delayed_network(0), &window())
                .is_empty()
        );
    }

    #[test]
    fn graph_and_blame_follow_the_slow_callee() {
        let spans = traces(true);
        let g = ServiceGraph::from_spans(&spans);
        assert_eq!(g.callees("front"), ["mid"]);
        assert_eq!(g.callers("db"), ["mid"]);
        assert_eq!(g.edges().len(), 2);
        let f = TraceAnalyzer::default().analyze(&spans, &window());
        let blamed: Vec<_> = f
            .iter()
            .filter(|x| x.signal == Signal::Blame)
            .map(|x| x.component.as_str())
            .collect();
        assert_eq!(blamed, ["db"]);
        let slow: Vec<_> = f
            .iter()
            .filter(|x| matches!(x.signal, Signal::Latency { .. }))
            .map(|x| x.component.as_str())
            .collect();
        assert_eq!(slow, ["db"], "self time isolates the slow component");
    }

    #[test]
    fn quiet_traces_give_nothing() {
        assert!(
            TraceAnalyzer::default()
                .analyze(&traces(false), &window())
                .is_empty()
        );
    }

    #[test]
    fn dropped_calls_and_errors() {
        let mut spans = traces(false);
        // In the current window front stops calling mid half the time and fails instead.
        spans.retain(|s| {
            !(s.start.secs() >= 20 && s.start.secs() % 2 == 0 && s.component != "front")
        });
        for s in spans.iter_mut() {
            if s.start.secs() >= 20 && s.start.secs() % 2 == 0 {
                s.error = true;
            }
        }
        let f = TraceAnalyzer::default().analyze(&spans, &window());
        assert!(f.iter().any(|x| x.component == "front"
            && matches!(&x.signal, Signal::PathDropped { event } if event == "call to mid")));
        assert!(
            f.iter()
                .any(|x| x.component == "front" && matches!(x.signal, Signal::ErrorRate { .. }))
        );
    }

    #[test]
    fn a_path_the_baseline_never_took_is_reported_and_a_rare_one_is_not() {
        // In the current window every request of mid goes through an error handler.
        let mut spans = traces(false);
        for i in 20..40 {
            let mut handler = span(i, "e", Some("b"), "mid", i as i64, 300);
            handler.operation = "ErrorHandler".into();
            spans.push(handler);
        }
        let f = TraceAnalyzer::default().analyze(&spans, &window());
        let appeared: Vec<(&str, &Signal)> = f
            .iter()
            .filter(|x| matches!(x.signal, Signal::PathAppeared { .. }))
            .map(|x| (x.component.as_str(), &x.signal))
            .collect();
        assert_eq!(
            appeared,
            [(
                "mid",
                &Signal::PathAppeared {
                    event: "operation ErrorHandler".into()
                }
            )],
            "{f:?}"
        );
        assert_eq!(
            f.iter()
                .find(|x| matches!(x.signal, Signal::PathAppeared { .. }))
                .map(|x| x.signal.kind()),
            Some("path_appeared:operation ErrorHandler".to_string())
        );
        // Twice is below the least current count: one-off paths are not findings.
        let mut rare = traces(false);
        for i in [21, 33] {
            let mut handler = span(i, "e", Some("b"), "mid", i as i64, 300);
            handler.operation = "ErrorHandler".into();
            rare.push(handler);
        }
        assert!(
            TraceAnalyzer::default()
                .analyze(&rare, &window())
                .iter()
                .all(|x| !matches!(x.signal, Signal::PathAppeared { .. }))
        );
    }

    #[test]
    fn a_few_spans_are_enough_when_the_change_is_large() {
        // Three baseline spans at about 10 ms, six current ones of 3-20 s: below any fixed
        // least count of old, and as clear as a change gets.
        let mut v = Vec::new();
        for (i, (t, dur)) in [
            (2, 10_000u64),
            (9, 11_000),
            (15, 9_500),
            (21, 3_000_000),
            (24, 20_000_000),
            (27, 7_000_000),
            (30, 12_000_000),
            (33, 4_000_000),
            (36, 15_000_000),
        ]
        .into_iter()
        .enumerate()
        {
            v.push(span(i, "s", None, "server", t, dur));
        }
        let f = TraceAnalyzer::default().analyze(&v, &window());
        assert!(
            f.iter().any(|x| x.component == "server"
                && matches!(x.signal, Signal::Latency { .. })
                && x.score > 100.0),
            "{f:?}"
        );
        // Two spans a side cannot tell a change from chance.
        let few: Vec<Span> = v
            .iter()
            .filter(|s| matches!(s.start.secs(), 2 | 9 | 21 | 24))
            .cloned()
            .collect();
        assert!(TraceAnalyzer::default().analyze(&few, &window()).is_empty());
    }

    #[test]
    fn latency_scores_do_not_grow_with_traffic() {
        let once = TraceAnalyzer::default().analyze(&traces(true), &window());
        let mut tenfold = Vec::new();
        for copy in 0..10 {
            for mut s in traces(true) {
                s.trace_id = format!("{}-{copy}", s.trace_id).into();
                tenfold.push(s);
            }
        }
        let many = TraceAnalyzer::default().analyze(&tenfold, &window());
        let score = |f: &[Finding], c: &str| {
            f.iter()
                .filter(|x| x.component == c)
                .map(|x| x.score)
                .fold(0.0, f64::max)
        };
        assert!(score(&once, "db") > 0.0);
        assert!((score(&once, "db") - score(&many, "db")).abs() < 1e-9 * score(&once, "db"));
    }

    #[test]
    fn without_client_spans_no_sibling_is_blamed_for_a_gap() {
        // front calls mid and other straight from its server span (no client spans); mid
        // slows down. Nothing can be said of the gap to other, which did not change.
        let mut v = Vec::new();
        for i in 0..40 {
            let slow = if i >= 20 { 40_000 } else { 0 };
            let jitter = (i % 4) as u64 * 100;
            let t = i as i64;
            v.push(span(i, "a", None, "front", t, 20_000 + slow + jitter));
            v.push(span(i, "b", Some("a"), "mid", t, 8_000 + slow + jitter));
            v.push(span(i, "d", Some("a"), "other", t, 3_000 + jitter));
        }
        let f = TraceAnalyzer::default().analyze(&v, &window());
        assert!(
            f.iter()
                .all(|x| !matches!(x.signal, Signal::CallGap { .. })),
            "{f:?}"
        );
        assert!(f.iter().all(|x| x.component != "other"), "{f:?}");
        assert!(f.iter().any(|x| x.component == "mid"), "{f:?}");
    }

    #[test]
    fn blame_passes_down_through_anomalous_components() {
        let g = ServiceGraph::from_edges([("a", "b"), ("b", "c"), ("a", "d")]);
        let scores = BTreeMap::from([
            ("a".to_string(), 10.0),
            ("b".to_string(), 8.0),
            ("c".to_string(), 6.0),
            ("d".to_string(), 1.0),
        ]);
        let b = g.blame(&scores, 3.0);
        assert_eq!(b.len(), 1);
        assert_eq!(b["c"], 6.0 + 5.0);
    }
}
