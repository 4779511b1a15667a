//! Severity: mu(s) = w1 * |alerts| + w2 * |SLA violations| + w3 * |capacity loss|, and
//! mu(crash) = infinity.

use serde::{Deserialize, Serialize};

/// A firing alert, in the style of kube-prometheus alert names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Alert {
    /// The alert name (`KubePodCrashLooping`, `HighErrorRate`, ...).
    pub name: String,
    /// The component it is about (`deployment/x`, `service/y`, `node/z`).
    pub component: String,
    /// A short reason code (`OOMKilled`, `ImagePullBackOff`, ...), empty when there is none.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

/// A user-facing route that misses its service-level objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlaViolation {
    /// The route.
    pub route: String,
    /// Fraction of requests that succeed.
    pub success_rate: f64,
    /// Estimated latency of a successful request, in milliseconds.
    pub latency_ms: f64,
}

/// What an environment reports about its health; severity is computed from it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HealthReport {
    /// Firing alerts.
    pub alerts: Vec<Alert>,
    /// Routes violating their SLA.
    pub sla_violations: Vec<SlaViolation>,
    /// Lost capacity, in replica units.
    pub capacity_loss: u32,
    /// Whether the system crashed (mu = infinity).
    pub crashed: bool,
    /// Components that are not healthy (pods not ready, nodes not ready), for the oracle.
    pub unhealthy_components: Vec<String>,
    /// Functional probes that fail: a route that answers, but wrongly (no status code shows
    /// it). An environment raises an alert for each as well, which is how they count in mu;
    /// the oracle requires none.
    #[serde(default)]
    pub failed_probes: Vec<String>,
}

/// The weights of the severity metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeverityWeights {
    /// Weight of each firing alert (w1).
    pub alerts: f64,
    /// Weight of each SLA violation (w2).
    pub sla_violations: f64,
    /// Weight of each lost replica unit (w3).
    pub capacity_loss: f64,
}

impl Default for SeverityWeights {
    fn default() -> Self {
        SeverityWeights {
            alerts: 1.0,
            sla_violations: 5.0,
            capacity_loss: 1.0,
        }
    }
}

impl SeverityWeights {
    /// mu of a health report: infinity when crashed.
    pub fn mu(&self, report: &HealthReport) -> f64 {
        if report.crashed {
            return f64::INFINITY;
        }
        self.alerts * report.alerts.len() as f64
            + self.sla_violations * report.sla_violations.len() as f64
            + self.capacity_loss * f64::from(report.capacity_loss)
    }
}

/// A mu value for JSON: `None` stands for infinity (a crash).
pub fn mu_json(mu: f64) -> Option<f64> {
    mu.is_finite().then_some(mu)
}

/// A mu value for people: `inf` for a crash.
pub fn mu_text(mu: f64) -> String {
    if mu.is_finite() {
        format!("{mu}")
    } else {
        "inf".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_apply_and_crash_is_infinite() {
        let mut r = HealthReport {
            alerts: vec![Alert {
                name: "A".into(),
                component: "c".into(),
                reason: String::new(),
                message: String::new(),
            }],
            sla_violations: vec![SlaViolation {
                route: "r".into(),
                success_rate: 0.5,
                latency_ms: 10.0,
            }],
            capacity_loss: 3,
            crashed: false,
            unhealthy_components: vec![],
            failed_probes: vec![],
        };
        let w = SeverityWeights {
            alerts: 2.0,
            sla_violations: 10.0,
            capacity_loss: 0.5,
        };
        assert_eq!(w.mu(&r), 2.0 + 10.0 + 1.5);
        assert_eq!(SeverityWeights::default().mu(&r), 1.0 + 5.0 + 3.0);
        r.crashed = true;
        assert!(w.mu(&r).is_infinite());
        assert_eq!(mu_json(w.mu(&r)), None);
        assert_eq!(mu_text(f64::INFINITY), "inf");
    }
}
