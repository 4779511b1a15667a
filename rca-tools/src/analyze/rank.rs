//! Combining findings of several modalities into a ranking of components.

use std::collections::{BTreeMap, BTreeSet};

use rca_core::Modality;
use serde::{Deserialize, Serialize};

use super::Finding;

/// A component and how strongly the evidence points at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedComponent {
    /// The component.
    pub component: String,
    /// The combined score.
    pub score: f64,
    /// The modalities whose evidence points at it.
    pub modalities: Vec<Modality>,
    /// Its findings, strongest first.
    pub findings: Vec<Finding>,
}

/// How findings are combined.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranker {
    /// Weight of each modality (missing: 1).
    pub weights: BTreeMap<Modality, f64>,
    /// Bonus factor per additional modality that points at the same component.
    pub convergence_bonus: f64,
    /// A modality "points at" a component when its normalised score reaches this.
    pub agreement_threshold: f64,
}

impl Default for Ranker {
    fn default() -> Self {
        Ranker {
            weights: BTreeMap::new(),
            convergence_bonus: 0.5,
            agreement_threshold: 0.5,
        }
    }
}

impl Ranker {
    /// Ranks components: within each modality a component's strength is its best finding's
    /// score, compressed with `ln(1 + score)` (so one enormous z-score does not drown the
    /// rest), divided by the modality's best over all components; strengths are weighted,
    /// summed over modalities and multiplied by `1 + convergence_bonus` for every further
    /// modality that agrees.
    pub fn rank(&self, findings: &[Finding]) -> Vec<RankedComponent> {
        // modality -> component -> best score
        let mut best: BTreeMap<&Modality, BTreeMap<&str, f64>> = BTreeMap::new();
        for f in findings {
            let e = best
                .entry(&f.modality)
                .or_default()
                .entry(f.component.as_str())
                .or_insert(0.0);
            *e = e.max(f.score.max(0.0).ln_1p());
        }
        let mut total: BTreeMap<&str, (f64, BTreeSet<Modality>)> = BTreeMap::new();
        for (modality, comps) in &best {
            let mut scores: Vec<f64> = comps.values().copied().collect();
            scores.sort_by(|a, b| b.total_cmp(a));
            let top = scores.first().copied().unwrap_or(0.0);
            if top <= 0.0 {
                continue;
            }
            let weight = self.weights.get(*modality).copied().unwrap_or(1.0);
            for (c, s) in comps {
                let norm = s / top;
                let e = total.entry(c).or_default();
                e.0 += weight * norm;
                if norm >= self.agreement_threshold {
                    e.1.insert((*modality).clone());
                }
            }
        }
        let mut ranked: Vec<RankedComponent> = total
            .into_iter()
            .map(|(c, (s, mods))| {
                let extra = mods.len().saturating_sub(1) as f64;
                let mut fs: Vec<Finding> = findings
                    .iter()
                    .filter(|f| f.component == c)
                    .cloned()
                    .collect();
                fs.sort_by(|a, b| b.score.total_cmp(&a.score));
                RankedComponent {
                    component: c.to_string(),
                    score: s * (1.0 + self.convergence_bonus * extra),
                    modalities: mods.into_iter().collect(),
                    findings: fs,
                }
            })
            .collect();
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.component.cmp(&b.component))
        });
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::Signal;
    use rca_core::Timestamp;

    fn f(m: Modality, c: &str, score: f64) -> Finding {
        Finding {
            modality: m,
            observed_at: Timestamp(0),
            component: c.into(),
            signal: Signal::ErrorBurst,
            summary: String::new(),
            score,
        }
    }

    #[test]
    fn convergence_beats_a_single_loud_modality() {
        let fs = vec![
            f(Modality::Metrics, "a", 10.0),
            f(Modality::Metrics, "b", 9.0),
            f(Modality::Logs, "b", 5.0),
            f(Modality::Logs, "c", 1.0),
        ];
        let r = Ranker::default().rank(&fs);
        assert_eq!(r[0].component, "b");
        assert_eq!(r[0].modalities, [Modality::Metrics, Modality::Logs]);
        assert_eq!(r[0].findings.len(), 2);
        assert!(Ranker::default().rank(&[]).is_empty());
    }
}
