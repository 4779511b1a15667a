//! Naming a fault type from the kinds of evidence that convict a component.

use rca_core::Evidence;

/// The fault type that the evidence about one component suggests, from the evidence kinds
/// (see [`super::Signal::kind`]), or `None` when nothing fits:
/// a CPU KPI that moved most of all its metrics (by at least 10) -> `cpu_contention`; new or
/// growing error-level log lines -> `return` (the code noticed a wrong value and said so);
/// normal log lines, calls or operations that vanished without errors -> `exception`
/// (execution was cut short); slower spans or call gaps with nothing else -> `network_delay`.
pub fn fault_type(evidence: &[&Evidence]) -> Option<&'static str> {
    let best = |pred: &dyn Fn(&str) -> bool| {
        evidence
            .iter()
            .filter(|e| e.kind.as_deref().is_some_and(pred))
            .map(|e| e.score)
            .fold(0.0_f64, f64::max)
    };
    let cpu = best(&|k| {
        k.strip_prefix("metric_shift:")
            .is_some_and(|kpi| kpi.to_ascii_lowercase().contains("cpu"))
    });
    let metrics = best(&|k| k.starts_with("metric_shift:"));
    let error_logs = best(&|k| {
        k == "error_burst"
            || k == "new_template:error"
            || k == "template_shift:error"
            || k == "transition:grew:error"
    });
    let vanished = best(&|k| {
        k.starts_with("path_dropped:")
            || k == "template_shift"
            || k == "transition:fell"
            || k == "transition:grew"
    });
    let slower = best(&|k| k.starts_with("latency:") || k.starts_with("call_gap:") || k == "blame");
    if cpu >= 10.0 && cpu >= metrics {
        Some("cpu_contention")
    } else if error_logs > 0.0 {
        Some("return")
    } else if vanished > 0.0 {
        Some("exception")
    } else if slower > 0.0 {
        Some("network_delay")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::{Modality, Timestamp};

    fn ev(kind: &str, score: f64) -> Evidence {
        Evidence::new(Modality::Metrics, Timestamp(0), "a", "x")
            .with_score(score)
            .with_kind(kind)
    }

    #[test]
    fn kinds_name_the_fault() {
        let cpu = [
            ev("metric_shift:CpuUsage", 40.0),
            ev("metric_shift:mem", 5.0),
        ];
        assert_eq!(
            fault_type(&cpu.iter().collect::<Vec<_>>()),
            Some("cpu_contention")
        );
        let err = [ev("transition:grew:error", 4.0), ev("latency:/pay", 9.0)];
        assert_eq!(fault_type(&err.iter().collect::<Vec<_>>()), Some("return"));
        let cut = [ev("transition:fell", 4.0), ev("blame", 9.0)];
        assert_eq!(
            fault_type(&cut.iter().collect::<Vec<_>>()),
            Some("exception")
        );
        let slow = [ev("call_gap:b", 4.0)];
        assert_eq!(
            fault_type(&slow.iter().collect::<Vec<_>>()),
            Some("network_delay")
        );
        assert_eq!(fault_type(&[]), None);
    }
}
