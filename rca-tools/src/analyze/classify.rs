//! Naming a fault type from the kinds of evidence that convict a component, with a fault-type
//! vocabulary the host supplies ([`FaultTaxonomy`]) or the generic default.

use rca_core::Evidence;
use serde::{Deserialize, Serialize};

/// A fault-type vocabulary: rules tried in order; the first whose evidence is present names
/// the type. A host supplies its own (JSON or YAML through serde); the default names generic
/// types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultTaxonomy {
    /// The rules, in order.
    pub rules: Vec<FaultRule>,
}

/// One fault type and the evidence that names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// The label this rule names.
    pub label: String,
    /// Evidence kinds that support it ([`super::Signal::kind`]), as case-insensitive patterns
    /// in which `*` stands for any run of characters (`metric_shift:*cpu*`, `call_gap:*`).
    pub kinds: Vec<String>,
    /// The strongest supporting evidence must reach this score.
    #[serde(default)]
    pub min_score: f64,
    /// ... and be at least as strong as every metric shift about the component (the KPI
    /// moved most of all its metrics).
    #[serde(default)]
    pub dominates_metrics: bool,
}

impl Default for FaultTaxonomy {
    /// Generic types, as fault-injection benchmarks and incident reviews name them, tried in
    /// this order:
    /// - resources, each when its KPI moved most of all the component's metrics (by at least
    ///   10, or 3 for counters of restarts and OOM kills, which do not move at all in normal
    ///   operation): `restarts` (restart, crash and OOM-kill counters), `packet_loss`
    ///   (dropped packets, retransmissions, interface errors), `cpu_saturation`,
    ///   `memory_pressure` (memory in use, resident set, working set, heap: a leak or
    ///   pressure), `disk_io` (disk and file-system reads, writes, I/O time, I/O wait). KPIs
    ///   are matched by what they measure, in the words common exporters use
    ///   (`container_cpu_usage_seconds_total`, `CpuUsage(m)`, `process_resident_memory_bytes`,
    ///   `node_disk_io_time_seconds_total`, `kube_pod_container_status_restarts_total`);
    /// - `error_response`: new or growing error-level log lines (the code noticed and said
    ///   so);
    /// - `execution_cut_short`: normal log lines, calls or operations that vanished without
    ///   errors, or requests that took another path (a wrong result, a swallowed exception);
    /// - `slow_network`: calls whose client-server gap grew (the time is spent between the
    ///   two);
    /// - `latency`: slower spans with nothing else.
    fn default() -> Self {
        let rule = |label: &str, kinds: &[&str], min_score: f64| FaultRule {
            label: label.to_string(),
            kinds: kinds
                .iter()
                .map(|k| format!("metric_shift:*{k}*"))
                .collect(),
            min_score,
            dominates_metrics: true,
        };
        let behaviour = FaultTaxonomy::with_labels([
            "cpu_saturation",
            "error_response",
            "execution_cut_short",
            "latency",
        ]);
        let mut rules = vec![
            rule("restarts", &["restart", "crash", "oom"], 3.0),
            rule(
                "packet_loss",
                &["drop", "retrans", "loss", "errs"],
                RESOURCE_MIN,
            ),
        ];
        rules.push(behaviour.rules[0].clone());
        rules.push(rule(
            "memory_pressure",
            &["mem", "rss", "working_set", "heap"],
            RESOURCE_MIN,
        ));
        rules.push(rule(
            "disk_io",
            &["disk", "fs_", "blkio", "iops", "io_time", "iowait"],
            RESOURCE_MIN,
        ));
        rules.push(behaviour.rules[1].clone());
        rules.push(behaviour.rules[2].clone());
        rules.push(FaultRule {
            label: "slow_network".into(),
            kinds: vec!["call_gap:*".into()],
            min_score: 0.0,
            dominates_metrics: false,
        });
        rules.push(behaviour.rules[3].clone());
        FaultTaxonomy { rules }
    }
}

/// How far a resource KPI must move (its metric score) to name a resource fault.
const RESOURCE_MIN: f64 = 10.0;

impl FaultTaxonomy {
    /// The four behavioural rules with other labels, in this order: CPU saturation (a CPU
    /// KPI that moved most of all the component's metrics, by at least 10), error responses,
    /// execution cut short, latency (slower spans, call gaps, blame). A host whose benchmark
    /// names four types uses it; [`FaultTaxonomy::default`] names more.
    pub fn with_labels(labels: [&str; 4]) -> Self {
        let rule =
            |label: &str, kinds: &[&str], min_score: f64, dominates_metrics: bool| FaultRule {
                label: label.to_string(),
                kinds: kinds.iter().map(|k| k.to_string()).collect(),
                min_score,
                dominates_metrics,
            };
        FaultTaxonomy {
            rules: vec![
                rule(labels[0], &["metric_shift:*cpu*"], RESOURCE_MIN, true),
                rule(
                    labels[1],
                    &[
                        "error_burst",
                        "new_template:error",
                        "template_shift:error",
                        "transition:grew:error",
                    ],
                    0.0,
                    false,
                ),
                rule(
                    labels[2],
                    &[
                        "path_dropped:*",
                        "path_appeared:*",
                        "template_shift",
                        "transition:fell",
                        "transition:grew",
                    ],
                    0.0,
                    false,
                ),
                rule(labels[3], &["latency:*", "call_gap:*", "blame"], 0.0, false),
            ],
        }
    }

    /// The problems of this taxonomy (an empty label or kind list, a repeated label), empty
    /// when it is usable.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.rules.is_empty() {
            out.push("the taxonomy has no rules".to_string());
        }
        for (i, r) in self.rules.iter().enumerate() {
            if r.label.trim().is_empty() {
                out.push(format!("rule {}: empty label", i + 1));
            }
            if r.kinds.iter().all(|k| k.trim().is_empty()) {
                out.push(format!("rule {} ({}): no evidence kinds", i + 1, r.label));
            }
            if !r.min_score.is_finite() {
                out.push(format!(
                    "rule {} ({}): min_score is not a number",
                    i + 1,
                    r.label
                ));
            }
            if self.rules[..i].iter().any(|o| o.label == r.label) {
                out.push(format!(
                    "rule {}: label {} repeats an earlier rule",
                    i + 1,
                    r.label
                ));
            }
        }
        out
    }

    /// The fault type the evidence about one component suggests, or `None` when no rule
    /// fits.
    pub fn classify(&self, evidence: &[&Evidence]) -> Option<&str> {
        let best = |pred: &dyn Fn(&str) -> bool| {
            evidence
                .iter()
                .filter(|e| e.kind.as_deref().is_some_and(pred))
                .map(|e| e.score)
                .fold(0.0_f64, f64::max)
        };
        let metrics = best(&|k| k.starts_with("metric_shift:"));
        self.rules.iter().find_map(|r| {
            let score = best(&|k| r.kinds.iter().any(|p| glob(p, k)));
            let fits =
                score > 0.0 && score >= r.min_score && (!r.dominates_metrics || score >= metrics);
            fits.then_some(r.label.as_str())
        })
    }
}

/// Whether `text` matches `pattern` (case-insensitive; `*` is any run of characters).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.to_ascii_lowercase(), text.to_ascii_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == t;
    }
    let mut rest = t.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// The fault type with the default taxonomy ([`FaultTaxonomy::default`]).
pub fn fault_type(evidence: &[&Evidence]) -> Option<String> {
    FaultTaxonomy::default()
        .classify(evidence)
        .map(str::to_string)
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
        let t = FaultTaxonomy::default();
        let of = |e: &[Evidence]| {
            t.classify(&e.iter().collect::<Vec<_>>())
                .map(str::to_string)
        };
        let cpu = [
            ev("metric_shift:CpuUsage", 40.0),
            ev("metric_shift:mem", 5.0),
        ];
        assert_eq!(of(&cpu).as_deref(), Some("cpu_saturation"));
        // A CPU shift weaker than another metric's, or below 10, is not CPU saturation.
        let weak = [ev("metric_shift:cpu", 8.0)];
        assert_eq!(of(&weak), None);
        let err = [ev("transition:grew:error", 4.0), ev("latency:/pay", 9.0)];
        assert_eq!(of(&err).as_deref(), Some("error_response"));
        let cut = [ev("transition:fell", 4.0), ev("blame", 9.0)];
        assert_eq!(of(&cut).as_deref(), Some("execution_cut_short"));
        let gap = [ev("call_gap:b", 4.0)];
        assert_eq!(of(&gap).as_deref(), Some("slow_network"));
        let slow = [ev("latency:/pay", 4.0), ev("blame", 9.0)];
        assert_eq!(of(&slow).as_deref(), Some("latency"));
        assert_eq!(fault_type(&[]), None);
    }

    #[test]
    fn resources_are_told_apart_by_what_moved_most_in_exporters_words() {
        let t = FaultTaxonomy::default();
        assert!(t.problems().is_empty());
        let of = |e: &[Evidence]| {
            t.classify(&e.iter().collect::<Vec<_>>())
                .map(str::to_string)
        };
        for (kpi, label) in [
            ("container_memory_working_set_bytes", "memory_pressure"),
            ("process_resident_memory_bytes", "memory_pressure"),
            ("MemoryUsage(Mi)", "memory_pressure"),
            ("jvm_memory_heap_used", "memory_pressure"),
            ("node_disk_io_time_seconds_total", "disk_io"),
            ("container_fs_writes_bytes_total", "disk_io"),
            (
                "container_network_receive_packets_dropped_total",
                "packet_loss",
            ),
            ("node_netstat_Tcp_RetransSegs", "packet_loss"),
            ("kube_pod_container_status_restarts_total", "restarts"),
            ("container_oom_events_total", "restarts"),
            ("container_cpu_usage_seconds_total", "cpu_saturation"),
            ("CpuUsage(m)", "cpu_saturation"),
        ] {
            // The resource moved most; a symptom moved too, less.
            let e = [
                ev(&format!("metric_shift:{kpi}"), 40.0),
                ev("metric_shift:PodServerLatencyP90(s)", 8.0),
                ev("transition:fell", 6.0),
            ];
            assert_eq!(of(&e).as_deref(), Some(label), "{kpi}");
        }
        // Memory grew, but CPU moved most: CPU saturation.
        let both = [
            ev("metric_shift:container_memory_rss", 20.0),
            ev("metric_shift:container_cpu_usage_seconds_total", 60.0),
        ];
        assert_eq!(of(&both).as_deref(), Some("cpu_saturation"));
        // A restart counter that moved a little, below a stronger log change: the log
        // change names it; alone, it is a restart.
        let restart = [
            ev("metric_shift:kube_pod_container_status_restarts_total", 4.0),
            ev("transition:grew:error", 9.0),
        ];
        assert_eq!(of(&restart).as_deref(), Some("restarts"));
        let weak = [ev(
            "metric_shift:kube_pod_container_status_restarts_total",
            2.0,
        )];
        assert_eq!(of(&weak), None);
    }

    #[test]
    fn a_host_taxonomy_renames_and_round_trips() {
        let t = FaultTaxonomy::with_labels(["a", "b", "c", "d"]);
        let json = serde_json::to_string(&t).unwrap();
        let back: FaultTaxonomy = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert!(t.problems().is_empty());
        let slow = [ev("call_gap:b", 4.0)];
        assert_eq!(t.classify(&slow.iter().collect::<Vec<_>>()), Some("d"));
        let bad = FaultTaxonomy {
            rules: vec![
                FaultRule {
                    label: "x".into(),
                    kinds: vec![],
                    min_score: 0.0,
                    dominates_metrics: false,
                },
                FaultRule {
                    label: "x".into(),
                    kinds: vec!["blame".into()],
                    min_score: f64::NAN,
                    dominates_metrics: false,
                },
            ],
        };
        assert_eq!(bad.problems().len(), 3, "{:?}", bad.problems());
    }

    #[test]
    fn patterns() {
        assert!(glob("metric_shift:*cpu*", "metric_shift:CpuUsageRate(%)"));
        assert!(!glob("metric_shift:*cpu*", "metric_shift:memory"));
        assert!(glob("call_gap:*", "call_gap:"));
        assert!(glob("blame", "BLAME"));
        assert!(!glob("blame", "blamed"));
        assert!(glob("*fell", "transition:fell"));
    }
}
