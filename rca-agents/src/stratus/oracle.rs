//! The termination oracles: alerts cleared, requests succeed (and answer correctly),
//! components healthy. They read only a [`HealthReport`], so they work for any
//! [`crate::stratus::Environment`].

use serde::Serialize;

use super::severity::HealthReport;

/// The termination oracles' verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OracleVerdict {
    /// No alert fires.
    pub alerts_cleared: bool,
    /// Every route meets its SLO and its functional probe gets correct answers.
    pub requests_succeed: bool,
    /// Every pod and in-service node is ready.
    pub components_healthy: bool,
    /// What is still wrong.
    pub remaining: Vec<String>,
}

impl OracleVerdict {
    /// All three oracles pass.
    pub fn passed(&self) -> bool {
        self.alerts_cleared && self.requests_succeed && self.components_healthy
    }
}

/// Runs the three termination oracles on a health report.
pub fn oracle(h: &HealthReport) -> OracleVerdict {
    let mut remaining: Vec<String> = h
        .alerts
        .iter()
        .map(|a| format!("alert {} on {}: {}", a.name, a.component, a.message))
        .collect();
    remaining.extend(h.sla_violations.iter().map(|v| {
        format!(
            "route {} violates its SLO (success {:.3}, latency {:.0} ms)",
            v.route, v.success_rate, v.latency_ms
        )
    }));
    remaining.extend(h.failed_probes.iter().cloned());
    remaining.extend(
        h.unhealthy_components
            .iter()
            .map(|c| format!("{c} is not healthy")),
    );
    if h.crashed {
        remaining.push("the system crashed".into());
    }
    OracleVerdict {
        alerts_cleared: h.alerts.is_empty(),
        requests_succeed: h.sla_violations.is_empty() && h.failed_probes.is_empty() && !h.crashed,
        components_healthy: h.unhealthy_components.is_empty() && !h.crashed,
        remaining,
    }
}
