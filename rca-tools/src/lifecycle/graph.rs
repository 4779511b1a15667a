//! The tool graph: "A then B" pairs seen in successful diagnoses, with how often each was seen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One edge of the tool graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEdge {
    /// The tool used first.
    pub from: String,
    /// The tool used right after it.
    pub to: String,
    /// In how many successful diagnoses the pair was seen.
    pub count: u64,
}

/// A directed graph of tools; an edge A -> B means B was used right after A in a successful
/// diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolGraph {
    edges: BTreeMap<String, BTreeMap<String, u64>>,
}

impl ToolGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the consecutive pairs of a successful diagnosis's tool sequence. A tool used
    /// twice in a row adds no self-loop; a pair seen twice in one sequence counts once.
    pub fn record_sequence(&mut self, tools: &[String]) {
        let mut seen = std::collections::BTreeSet::new();
        for pair in tools.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a != b && seen.insert((a.clone(), b.clone())) {
                *self
                    .edges
                    .entry(a.clone())
                    .or_default()
                    .entry(b.clone())
                    .or_insert(0) += 1;
            }
        }
    }

    /// How often `to` followed `from`.
    pub fn weight(&self, from: &str, to: &str) -> u64 {
        self.edges
            .get(from)
            .and_then(|m| m.get(to))
            .copied()
            .unwrap_or(0)
    }

    /// The tools that followed `tool`, most frequent first (ties by name).
    pub fn successors(&self, tool: &str) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .edges
            .get(tool)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Drops every edge into or out of `tool`.
    pub fn remove_tool(&mut self, tool: &str) {
        self.edges.remove(tool);
        for m in self.edges.values_mut() {
            m.remove(tool);
        }
        self.edges.retain(|_, m| !m.is_empty());
    }

    /// Every edge, ordered by (from, to).
    pub fn edges(&self) -> Vec<ToolEdge> {
        self.edges
            .iter()
            .flat_map(|(from, m)| {
                m.iter().map(move |(to, count)| ToolEdge {
                    from: from.clone(),
                    to: to.clone(),
                    count: *count,
                })
            })
            .collect()
    }

    /// A graph from edges (counts of repeated edges add up).
    pub fn from_edges(edges: impl IntoIterator<Item = ToolEdge>) -> Self {
        let mut g = ToolGraph::new();
        for e in edges {
            *g.edges.entry(e.from).or_default().entry(e.to).or_insert(0) += e.count;
        }
        g
    }

    /// Number of edges.
    pub fn len(&self) -> usize {
        self.edges.values().map(BTreeMap::len).sum()
    }

    /// Whether there are no edges.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn successors_follow_successful_sequences() {
        let mut g = ToolGraph::new();
        g.record_sequence(&seq(&["metrics", "spans", "logs"]));
        g.record_sequence(&seq(&["metrics", "logs"]));
        g.record_sequence(&seq(&["metrics", "spans", "spans", "metrics", "spans"]));
        assert_eq!(
            g.successors("metrics"),
            vec![("spans".to_string(), 2), ("logs".to_string(), 1)]
        );
        assert_eq!(g.weight("spans", "spans"), 0, "no self-loops");
        assert_eq!(g.weight("spans", "metrics"), 1);
        assert!(g.successors("logs").is_empty());
        let back = ToolGraph::from_edges(g.edges());
        assert_eq!(back, g);
        g.remove_tool("spans");
        assert_eq!(g.successors("metrics"), vec![("logs".to_string(), 1)]);
        assert_eq!(g.len(), 1);
    }
}
