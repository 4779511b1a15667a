//! Metric anomalies per component and KPI against a baseline window.

use std::collections::BTreeMap;

use rca_core::source::MetricSample;
use rca_core::{Modality, Timestamp};

use super::stats::{RobustBaseline, change_point, resolution};
use super::{Finding, Signal, Window, fmt_num};

/// Compares each `(component, KPI)` series in the current window with its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricAnalyzer {
    /// Report series whose robust z-score reaches this.
    pub min_z: f64,
    /// Least baseline samples for a series to be judged.
    pub min_baseline: usize,
    /// The z-score unit is at least this share of the baseline median's magnitude.
    pub relative_floor: f64,
    /// ... and at least this share of the current level's magnitude: a series that was flat
    /// near zero scores at most `1 / level_floor` however small its baseline spread, so it
    /// cannot outrank a saturated resource by orders of magnitude. The unit is also at least
    /// the measurement resolution (the baseline's smallest step between distinct values, or
    /// the series' when the baseline is zero throughout, over `sqrt(12)`: the spread
    /// quantisation alone produces).
    pub level_floor: f64,
    /// Scores are capped here (a flat baseline can make a small change look infinite).
    pub max_score: f64,
    /// A level the series already reached in its own baseline scores at most this: the unit
    /// is at least the largest baseline excursion (in the same direction) divided by it. KPIs
    /// that jump now and then (percentiles of low-traffic components) are thus judged against
    /// their own jumps, while a level far beyond anything seen stays surprising.
    pub excursion_z: f64,
    /// KPIs whose name contains one of these words (case-insensitive) measure a symptom, not
    /// a saturated resource: latency rises at every caller of a slow component, percentiles
    /// of low-traffic components leap on a single slow request, and traffic (requests,
    /// syscalls, bytes on the network) follows the workload and its retries. Their scores are
    /// capped at `symptom_cap`, so a saturated resource (CPU, memory) outranks them.
    pub symptom_words: Vec<String>,
    /// The cap for symptom KPIs.
    pub symptom_cap: f64,
}

impl Default for MetricAnalyzer {
    fn default() -> Self {
        MetricAnalyzer {
            min_z: 4.0,
            min_baseline: 5,
            relative_floor: 0.05,
            level_floor: 0.01,
            max_score: 1000.0,
            excursion_z: 3.0,
            symptom_words: [
                "latency",
                "duration",
                "response_time",
                "responsetime",
                "syscall",
                "network",
                "bytes",
                "packets",
                "request",
                "qps",
                "throughput",
            ]
            .map(String::from)
            .to_vec(),
            symptom_cap: 10.0,
        }
    }
}

impl MetricAnalyzer {
    /// Findings for every series that moved, strongest first. The level of the current window
    /// is its second-highest (or second-lowest) value, so one stray sample is not enough.
    ///
    /// A KPI that moved the same way in several components at once measures something they
    /// share (the node they run on, a common dependency, the workload) rather than any one
    /// of them: each of their scores is divided by how many moved.
    pub fn analyze(&self, samples: &[MetricSample], window: &Window) -> Vec<Finding> {
        let mut series: BTreeMap<(&str, &str), Vec<(Timestamp, f64)>> = BTreeMap::new();
        for s in samples {
            if window.baseline.contains(s.timestamp) || window.current.contains(s.timestamp) {
                series
                    .entry((s.component.as_str(), s.metric.as_str()))
                    .or_default()
                    .push((s.timestamp, s.value));
            }
        }
        let mut out = Vec::new();
        for ((component, kpi), mut points) in series {
            points.sort_by_key(|p| p.0);
            let base: Vec<f64> = points
                .iter()
                .filter(|p| window.baseline.contains(p.0))
                .map(|p| p.1)
                .collect();
            let cur: Vec<(Timestamp, f64)> = points
                .iter()
                .copied()
                .filter(|p| window.current.contains(p.0))
                .collect();
            if base.len() < self.min_baseline || cur.is_empty() {
                continue;
            }
            // The measurement resolution: the baseline's smallest step (a jump out of a flat
            // baseline is not a step of the instrument); a baseline that is zero throughout
            // says nothing of the instrument's scale, and then the smallest step the series
            // shows at all is the best evidence of it.
            let all: Vec<f64> = points.iter().map(|p| p.1).collect();
            let step = match resolution(&base) {
                r if r > 0.0 => r,
                _ if base.iter().all(|v| *v == 0.0) => resolution(&all),
                _ => 0.0,
            };
            let quantum = step / 12f64.sqrt();
            let rb = RobustBaseline::new(&base, self.relative_floor, quantum.max(1e-9));
            let top = base.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let bottom = base.iter().copied().fold(f64::INFINITY, f64::min);
            let z_of = |x: f64| {
                let excursion = if x >= rb.median {
                    top - rb.median
                } else {
                    rb.median - bottom
                };
                let scale = rb
                    .scale
                    .max(excursion / self.excursion_z.max(1e-9))
                    .max(self.level_floor * x.abs());
                (x - rb.median) / scale
            };
            let mut values: Vec<f64> = cur.iter().map(|p| p.1).collect();
            values.sort_by(f64::total_cmp);
            let high = values[values.len().saturating_sub(2)];
            let low = values[values.len().min(2) - 1];
            let (level, z) = if z_of(high).abs() >= z_of(low).abs() {
                (high, z_of(high))
            } else {
                (low, z_of(low))
            };
            if z.abs() < self.min_z {
                continue;
            }
            // Where the change began: the change point of the whole series if it falls in the
            // current window, else the first current sample beyond the threshold.
            let observed_at = change_point(&all, 1)
                .map(|cp| points[cp.index].0)
                .filter(|t| window.current.contains(*t))
                .or_else(|| {
                    cur.iter()
                        .find(|p| z_of(p.1).abs() >= self.min_z)
                        .map(|p| p.0)
                })
                .unwrap_or(window.current.start);
            let lower = kpi.to_ascii_lowercase();
            let cap = if self
                .symptom_words
                .iter()
                .any(|w| lower.contains(w.as_str()))
            {
                self.symptom_cap
            } else {
                self.max_score
            };
            let score = z.abs().min(cap);
            out.push(Finding {
                modality: Modality::Metrics,
                observed_at,
                component: component.to_string(),
                signal: Signal::MetricShift {
                    kpi: kpi.to_string(),
                    delta: level - rb.median,
                },
                summary: format!(
                    "{kpi} of {component} went {} to {} (baseline median {}, robust z {})",
                    if z > 0.0 { "up" } else { "down" },
                    fmt_num(level),
                    fmt_num(rb.median),
                    fmt_num(z)
                ),
                score,
            });
        }
        spread_shared_shifts(&mut out);
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }
}

/// Divides the score of every shift by the number of components whose same KPI moved in the
/// same direction.
fn spread_shared_shifts(findings: &mut [Finding]) {
    let key = |f: &Finding| match &f.signal {
        Signal::MetricShift { kpi, delta } => Some((kpi.clone(), *delta > 0.0)),
        _ => None,
    };
    let mut movers: BTreeMap<(String, bool), usize> = BTreeMap::new();
    for f in findings.iter() {
        if let Some(k) = key(f) {
            *movers.entry(k).or_default() += 1;
        }
    }
    for f in findings.iter_mut() {
        let Some(n) = key(f).and_then(|k| movers.get(&k).copied()) else {
            continue;
        };
        if n > 1 {
            f.score /= n as f64;
            f.summary.push_str(&format!(
                "; it moved in {n} components, so it is shared evidence"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    fn sample(t: i64, c: &str, m: &str, v: f64) -> MetricSample {
        MetricSample {
            timestamp: Timestamp::from_secs(t * 60),
            component: c.into(),
            metric: m.into(),
            value: v,
            labels: Default::default(),
        }
    }

    #[test]
    fn flags_the_series_that_moved() {
        let mut s = Vec::new();
        for t in 0..30 {
            let noise = (t % 3) as f64 * 0.1;
            s.push(sample(t, "a", "cpu", 1.0 + noise));
            s.push(sample(t, "b", "cpu", 2.0 + noise));
            let hot = if t >= 27 { 9.0 } else { 0.0 };
            s.push(sample(t, "b", "mem", 5.0 + noise + hot));
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(27 * 60)),
            TimeRange::new(Timestamp::from_secs(27 * 60), Timestamp::from_secs(30 * 60)),
        );
        let f = MetricAnalyzer::default().analyze(&s, &w);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].component, "b");
        assert!(matches!(&f[0].signal, Signal::MetricShift { kpi, .. } if kpi == "mem"));
        assert_eq!(f[0].observed_at, Timestamp::from_secs(27 * 60));
        assert!(f[0].to_evidence().finding.contains("went up"));
    }

    #[test]
    fn one_spike_is_not_enough() {
        let mut s: Vec<_> = (0..30).map(|t| sample(t, "a", "cpu", 1.0)).collect();
        s[28].value = 50.0;
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(27 * 60)),
            TimeRange::new(Timestamp::from_secs(27 * 60), Timestamp::from_secs(30 * 60)),
        );
        assert!(MetricAnalyzer::default().analyze(&s, &w).is_empty());
    }
    #[test]
    fn a_series_flat_near_zero_cannot_outrank_a_saturated_one() {
        let mut s = Vec::new();
        for t in 0..30 {
            let noise = (t % 3) as f64 * 0.05;
            // idle: exactly 0 until it reads 0.12; busy: CPU from about 2.5 to 389.
            s.push(sample(t, "idle", "cpu", if t >= 27 { 0.12 } else { 0.0 }));
            s.push(sample(
                t,
                "busy",
                "cpu",
                if t >= 27 { 389.0 } else { 2.5 + noise },
            ));
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(27 * 60)),
            TimeRange::new(Timestamp::from_secs(27 * 60), Timestamp::from_secs(30 * 60)),
        );
        let f = MetricAnalyzer::default().analyze(&s, &w);
        assert_eq!(f[0].component, "busy", "{f:?}");
        let idle = f
            .iter()
            .find(|x| x.component == "idle")
            .map_or(0.0, |x| x.score);
        // Its measurement resolution is its unit: 0.12 is one step.
        assert!(idle < 10.0, "{f:?}");
    }

    #[test]
    fn a_kpi_that_moved_in_many_components_is_shared_evidence() {
        let mut s = Vec::new();
        for t in 0..30 {
            let noise = (t % 3) as f64 * 0.1;
            for c in ["a", "b", "c", "d"] {
                // The node's CPU, reported by every pod on it, rises for all.
                let node = 20.0 + noise + if t >= 27 { 30.0 } else { 0.0 };
                s.push(sample(t, c, "node_cpu", node));
                let own = if c == "b" && t >= 27 {
                    9.0
                } else {
                    1.0 + noise
                };
                s.push(sample(t, c, "cpu", own));
            }
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(27 * 60)),
            TimeRange::new(Timestamp::from_secs(27 * 60), Timestamp::from_secs(30 * 60)),
        );
        let f = MetricAnalyzer::default().analyze(&s, &w);
        assert_eq!(f[0].component, "b", "{f:?}");
        assert!(matches!(&f[0].signal, Signal::MetricShift { kpi, .. } if kpi == "cpu"));
        let node: Vec<&Finding> = f
            .iter()
            .filter(|x| matches!(&x.signal, Signal::MetricShift { kpi, .. } if kpi == "node_cpu"))
            .collect();
        assert_eq!(node.len(), 4);
        assert!(
            node.iter()
                .all(|x| x.summary.contains("moved in 4 components"))
        );
    }
}
