//! Combining findings of several modalities into a ranking of components.

use std::collections::{BTreeMap, BTreeSet};

use rca_core::{Evidence, Modality};
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
    /// A modality's scores are divided by the larger of its best compressed score and
    /// `ln(1 + significance)`: when nothing in a modality is clearly significant, its best
    /// component does not get full marks just for being the loudest of the quiet.
    pub significance: f64,
    /// How a component's per-modality strengths become one score.
    pub aggregation: Aggregation,
}

/// How a component's weighted per-modality strengths are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Aggregation {
    /// Their sum: every modality that points at a component adds to it.
    #[default]
    Sum,
    /// The strongest one, on one absolute scale (compressed scores times weights, not
    /// normalised per modality: z-like scores of different analyzers are comparable once
    /// compressed); the others only break ties (a tenth of their sum is added). A symptom
    /// shows faintly in many modalities of many components, a root cause strongly in one.
    Strongest,
}

impl Default for Ranker {
    fn default() -> Self {
        Ranker {
            weights: BTreeMap::new(),
            convergence_bonus: 0.5,
            agreement_threshold: 0.5,
            significance: 0.0,
            aggregation: Aggregation::Sum,
        }
    }
}

/// What the modalities say about one component.
#[derive(Default)]
struct Strength {
    normalised_sum: f64,
    absolute_sum: f64,
    strongest: f64,
    modalities: BTreeSet<Modality>,
}

/// A component's place in a ranking of evidence (see [`Ranker::rank_evidence`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedEvidence {
    /// The component.
    pub component: String,
    /// The combined score.
    pub score: f64,
    /// The modalities whose evidence points at it.
    pub modalities: Vec<Modality>,
}

impl Ranker {
    /// The ranker every diagnosis path uses (`rca diagnose`'s reasoner and controller, and
    /// `rca eval nezha`). A component's score is its strongest weighted, compressed finding
    /// ([`Aggregation::Strongest`]). Modalities are weighted by how specific their anomalies
    /// are to the faulty component rather than to its symptoms: latency (traces) spreads to
    /// every caller on the path and request KPIs (metrics) move with load and retries, while
    /// what a component's requests do (logs, and the span events of
    /// [`super::events::EventAnalyzer`]) changes mostly where the fault is: logs 1, metrics
    /// 1/2, traces 0.4. No convergence bonus: symptoms converge too. On the Nezha development
    /// day any traces weight from 0.25 to 0.5 ranks the same; 0.4 leaves room for faults that
    /// show mostly in traces (network delay); see `docs/arch/analyzers.md`.
    pub fn multimodal() -> Self {
        Ranker {
            weights: BTreeMap::from([
                (Modality::Logs, 1.0),
                (Modality::Metrics, 0.5),
                (Modality::Traces, 0.4),
            ]),
            convergence_bonus: 0.0,
            agreement_threshold: 0.5,
            significance: 10.0,
            aggregation: Aggregation::Strongest,
        }
    }

    /// Ranks components: within each modality a component's strength is its best finding's
    /// score, compressed with `ln(1 + score)` (so one enormous z-score does not drown the
    /// rest). With [`Aggregation::Sum`] it is divided by the modality's best over all
    /// components (or `ln(1 + significance)` when larger), and strengths are weighted and
    /// summed over modalities; with [`Aggregation::Strongest`] the largest weighted strength
    /// counts. Either way the score is multiplied by `1 + convergence_bonus` for every further
    /// modality that agrees (whose normalised strength reaches `agreement_threshold`).
    pub fn rank(&self, findings: &[Finding]) -> Vec<RankedComponent> {
        self.combine(
            findings
                .iter()
                .map(|f| (&f.modality, f.component.as_str(), f.score)),
        )
        .into_iter()
        .map(|r| {
            let mut fs: Vec<Finding> = findings
                .iter()
                .filter(|f| f.component == r.component)
                .cloned()
                .collect();
            fs.sort_by(|a, b| b.score.total_cmp(&a.score));
            RankedComponent {
                component: r.component,
                score: r.score,
                modalities: r.modalities,
                findings: fs,
            }
        })
        .collect()
    }

    /// As [`Ranker::rank`], over rca-core evidence (what explorers publish).
    pub fn rank_evidence(&self, evidence: &[Evidence]) -> Vec<RankedEvidence> {
        self.combine(
            evidence
                .iter()
                .map(|e| (&e.modality, e.component.as_str(), e.score)),
        )
    }

    fn combine<'a>(
        &self,
        items: impl Iterator<Item = (&'a Modality, &'a str, f64)>,
    ) -> Vec<RankedEvidence> {
        // modality -> component -> best score
        let mut best: BTreeMap<&Modality, BTreeMap<&str, f64>> = BTreeMap::new();
        for (modality, component, score) in items {
            let e = best
                .entry(modality)
                .or_default()
                .entry(component)
                .or_insert(0.0);
            *e = e.max(score.max(0.0).ln_1p());
        }
        let mut total: BTreeMap<&str, Strength> = BTreeMap::new();
        for (modality, comps) in &best {
            let mut scores: Vec<f64> = comps.values().copied().collect();
            scores.sort_by(|a, b| b.total_cmp(a));
            let top = scores
                .first()
                .copied()
                .unwrap_or(0.0)
                .max(self.significance.max(0.0).ln_1p());
            if top <= 0.0 {
                continue;
            }
            let weight = self.weights.get(*modality).copied().unwrap_or(1.0);
            for (c, s) in comps {
                let norm = s / top;
                let e = total.entry(c).or_default();
                e.normalised_sum += weight * norm;
                e.absolute_sum += weight * s;
                e.strongest = e.strongest.max(weight * s);
                if norm >= self.agreement_threshold {
                    e.modalities.insert((*modality).clone());
                }
            }
        }
        let mut ranked: Vec<RankedEvidence> = total
            .into_iter()
            .map(|(c, st)| {
                let extra = st.modalities.len().saturating_sub(1) as f64;
                let s = match self.aggregation {
                    Aggregation::Sum => st.normalised_sum,
                    Aggregation::Strongest => st.strongest + 0.1 * (st.absolute_sum - st.strongest),
                };
                RankedEvidence {
                    component: c.to_string(),
                    score: s * (1.0 + self.convergence_bonus * extra),
                    modalities: st.modalities.into_iter().collect(),
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
        let ev: Vec<Evidence> = fs.iter().map(Finding::to_evidence).collect();
        let by_evidence = Ranker::multimodal().rank_evidence(&ev);
        let by_findings = Ranker::multimodal().rank(&fs);
        assert_eq!(by_evidence.len(), by_findings.len());
        for (a, b) in by_evidence.iter().zip(&by_findings) {
            assert_eq!((&a.component, a.score), (&b.component, b.score));
        }
    }

    #[test]
    fn with_strongest_one_loud_finding_beats_faint_ones_everywhere() {
        // A symptom: a little of everything. A root cause: one strong finding.
        let fs = vec![
            f(Modality::Logs, "symptom", 3.0),
            f(Modality::Metrics, "symptom", 3.0),
            f(Modality::Traces, "symptom", 3.0),
            f(Modality::Logs, "cause", 12.0),
        ];
        let sum = Ranker::default().rank(&fs);
        assert_eq!(sum[0].component, "symptom");
        let strongest = Ranker {
            aggregation: Aggregation::Strongest,
            convergence_bonus: 0.0,
            ..Ranker::default()
        }
        .rank(&fs);
        assert_eq!(strongest[0].component, "cause");
        assert_eq!(Ranker::multimodal().rank(&fs)[0].component, "cause");
    }

    #[test]
    fn a_quiet_modality_does_not_get_full_marks() {
        let fs = vec![f(Modality::Logs, "a", 2.0), f(Modality::Metrics, "b", 50.0)];
        let mut r = Ranker::default();
        assert_eq!(r.rank(&fs)[0].score, 1.0);
        r.significance = 10.0;
        let ranked = r.rank(&fs);
        assert_eq!(ranked[0].component, "b");
        assert!(ranked[1].score < 0.5);
    }
}
