//! Louvain community detection (Blondel et al. 2008), seeded and deterministic: nodes are
//! visited in an order shuffled by a fixed-seed generator, and ties go to the lowest
//! community index.

use rca_core::seeded::SeededRng;

/// An undirected weighted graph in adjacency-list form (each edge stored at both ends;
/// a self-loop once).
#[derive(Debug, Clone, Default)]
pub(crate) struct Adjacency {
    pub neighbors: Vec<Vec<(u32, f64)>>,
}

impl Adjacency {
    pub fn with_nodes(n: usize) -> Self {
        Adjacency {
            neighbors: vec![Vec::new(); n],
        }
    }

    pub fn add_edge(&mut self, a: usize, b: usize, w: f64) {
        if a >= self.neighbors.len() || b >= self.neighbors.len() || w <= 0.0 || !w.is_finite() {
            return;
        }
        self.neighbors[a].push((b as u32, w));
        if a != b {
            self.neighbors[b].push((a as u32, w));
        }
    }
}

/// The community of every node (communities numbered densely from 0 in order of their
/// lowest node).
pub(crate) fn louvain(graph: &Adjacency, resolution: f64, seed: u64) -> Vec<usize> {
    let n = graph.neighbors.len();
    let mut membership: Vec<usize> = (0..n).collect();
    let mut current = graph.clone();
    let mut rng = SeededRng::new(seed);
    for _level in 0..32 {
        let (community, moved) = one_level(&current, resolution, &mut rng);
        if !moved {
            break;
        }
        let (dense, count) = densify(&community);
        membership.iter_mut().for_each(|m| *m = dense[*m]);
        current = aggregate(&current, &dense, count);
    }
    densify(&membership).0
}

fn densify(labels: &[usize]) -> (Vec<usize>, usize) {
    let mut map = vec![usize::MAX; labels.iter().copied().max().map_or(0, |m| m + 1)];
    let mut next = 0;
    let dense = labels
        .iter()
        .map(|&l| {
            if map[l] == usize::MAX {
                map[l] = next;
                next += 1;
            }
            map[l]
        })
        .collect();
    (dense, next)
}

fn one_level(g: &Adjacency, resolution: f64, rng: &mut SeededRng) -> (Vec<usize>, bool) {
    let n = g.neighbors.len();
    // Weighted degree; a self-loop counts twice, as in the modularity definition.
    let degree: Vec<f64> = g
        .neighbors
        .iter()
        .enumerate()
        .map(|(i, adj)| {
            adj.iter()
                .map(|&(j, w)| if j as usize == i { 2.0 * w } else { w })
                .sum()
        })
        .collect();
    let m2: f64 = degree.iter().sum();
    let mut community: Vec<usize> = (0..n).collect();
    if m2 <= 0.0 {
        return (community, false);
    }
    let mut tot = degree.clone();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut weight_to = vec![0.0f64; n];
    let mut touched: Vec<usize> = Vec::new();
    let mut moved_any = false;
    for _pass in 0..64 {
        let mut moved = false;
        for &i in &order {
            let ci = community[i];
            touched.clear();
            for &(j, w) in &g.neighbors[i] {
                let j = j as usize;
                if j == i {
                    continue;
                }
                let cj = community[j];
                if weight_to[cj] == 0.0 {
                    touched.push(cj);
                }
                weight_to[cj] += w;
            }
            tot[ci] -= degree[i];
            let gain = |c: usize, w_ic: f64| w_ic - resolution * tot[c] * degree[i] / m2;
            let mut best = ci;
            let mut best_gain = gain(ci, weight_to[ci]);
            for &c in &touched {
                let g = gain(c, weight_to[c]);
                if g > best_gain + 1e-12 {
                    best = c;
                    best_gain = g;
                }
            }
            tot[best] += degree[i];
            if best != ci {
                community[i] = best;
                moved = true;
                moved_any = true;
            }
            for &c in &touched {
                weight_to[c] = 0.0;
            }
            weight_to[ci] = 0.0;
        }
        if !moved {
            break;
        }
    }
    (community, moved_any)
}

fn aggregate(g: &Adjacency, dense: &[usize], count: usize) -> Adjacency {
    let mut sums: Vec<rustc_hash::FxHashMap<usize, f64>> = vec![Default::default(); count];
    for (i, adj) in g.neighbors.iter().enumerate() {
        let ci = dense[i];
        for &(j, w) in adj {
            let cj = dense[j as usize];
            // Each non-loop edge is seen from both ends; halve so the sum counts it once.
            let w = if j as usize == i { w } else { w / 2.0 };
            *sums[ci.min(cj)].entry(ci.max(cj)).or_default() += w;
        }
    }
    let mut out = Adjacency::with_nodes(count);
    for (a, row) in sums.into_iter().enumerate() {
        let mut row: Vec<(usize, f64)> = row.into_iter().collect();
        row.sort_unstable_by_key(|&(b, _)| b);
        for (b, w) in row {
            out.add_edge(a, b, w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cliques_split() {
        let mut g = Adjacency::with_nodes(8);
        for a in 0..4 {
            for b in a + 1..4 {
                g.add_edge(a, b, 1.0);
                g.add_edge(a + 4, b + 4, 1.0);
            }
        }
        g.add_edge(3, 4, 0.1);
        let c = louvain(&g, 1.0, 7);
        assert!(c[..4].iter().all(|&x| x == c[0]));
        assert!(c[4..].iter().all(|&x| x == c[4]));
        assert_ne!(c[0], c[4]);
        assert_eq!(c, louvain(&g, 1.0, 7));
    }

    #[test]
    fn empty_and_edgeless() {
        assert!(louvain(&Adjacency::with_nodes(0), 1.0, 1).is_empty());
        assert_eq!(louvain(&Adjacency::with_nodes(3), 1.0, 1), vec![0, 1, 2]);
    }
}
