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
    /// Generic types: a CPU KPI that moved most of all the component's metrics (by at least
    /// 10) -> `cpu_saturation`; new or growing error-level log lines -> `error_response` (the
    /// code noticed a wrong value and said so); normal log lines, calls or operations that
    /// vanished without errors -> `execution_cut_short`; slower spans or call gaps with
    /// nothing else -> `latency`.
    fn default() -> Self {
        FaultTaxonomy::with_labels([
            "cpu_saturation",
            "error_response",
            "execution_cut_short",
            "latency",
        ])
    }
}

impl FaultTaxonomy {
    /// The default rules with other labels, in the default's order (CPU saturation, error
    /// responses, execution cut short, latency).
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
                rule(labels[0], &["metric_shift:*cpu*"], 10.0, true),
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
        let slow = [ev("call_gap:b", 4.0)];
        assert_eq!(of(&slow).as_deref(), Some("latency"));
        assert_eq!(fault_type(&[]), None);
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
