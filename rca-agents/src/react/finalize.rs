//! The `finalize` tool: how the controller ends a run with a [`DiagnosisReport`].

use rca_core::incident::{Evidence, Modality};
use rca_core::time::Timestamp;
use rca_core::tool::ToolSpec;
use rca_core::trajectory::{DiagnosisReport, Responsibility, RootCauseCandidate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the finalize tool.
pub const FINALIZE: &str = "finalize";

/// The arguments of `finalize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinalizeArgs {
    /// What went wrong, in a sentence or two, naming the faulty component.
    pub root_cause: String,
    /// What should be done about it.
    pub solution: String,
    /// Who must act: `platform`, `user`, `infrastructure`, or a host-defined label.
    pub responsibility: Responsibility,
    /// Confidence between 0 and 1.
    pub confidence: f64,
    /// Short statements of the evidence supporting the root cause.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Components blamed, most likely first.
    #[serde(default)]
    pub components: Vec<String>,
}

impl FinalizeArgs {
    /// Reads and checks the arguments; the error is written for the model.
    pub fn parse(args: &serde_json::Value) -> Result<Self, String> {
        let parsed: FinalizeArgs =
            serde_json::from_value(args.clone()).map_err(|e| e.to_string())?;
        if parsed.root_cause.trim().is_empty() {
            return Err("`root_cause` must not be empty".into());
        }
        if !parsed.confidence.is_finite() || !(0.0..=1.0).contains(&parsed.confidence) {
            return Err("`confidence` must be a number between 0 and 1".into());
        }
        Ok(parsed)
    }

    /// The report, with the evidence the tools established and the evidence the model cited
    /// (as findings observed at `cited_at`).
    pub fn into_report(self, tool_evidence: &[Evidence], cited_at: Timestamp) -> DiagnosisReport {
        let first_component = self.components.first().cloned().unwrap_or_default();
        let mut evidence = tool_evidence.to_vec();
        evidence.extend(self.evidence.into_iter().map(|finding| {
            Evidence::new(
                Modality::Other("cited".into()),
                cited_at,
                first_component.clone(),
                finding,
            )
        }));
        let n = self.components.len().max(1) as f64;
        let candidates = self
            .components
            .iter()
            .enumerate()
            .map(|(i, c)| RootCauseCandidate {
                component: c.clone(),
                fault_type: None,
                time: None,
                score: self.confidence * (n - i as f64) / n,
            })
            .collect();
        DiagnosisReport {
            root_cause: self.root_cause,
            solution: self.solution,
            evidence,
            responsibility: self.responsibility,
            confidence: self.confidence,
            candidates,
            usage: Default::default(),
            elapsed_ms: 0,
        }
    }
}

/// The spec of `finalize` shown to the model.
pub fn finalize_spec() -> ToolSpec {
    ToolSpec {
        name: FINALIZE.into(),
        description: "Ends the investigation with the diagnosis. Call it once the root cause is \
                      supported by evidence from the tools."
            .into(),
        parameters: serde_json::Value::from(schemars::schema_for!(FinalizeArgs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_checks_and_builds_reports() {
        let args = json!({"root_cause": "db disk full", "solution": "free space",
            "responsibility": "platform", "confidence": 0.8, "evidence": ["disk 100%"],
            "components": ["db", "api"]});
        let f = FinalizeArgs::parse(&args).unwrap();
        let r = f.into_report(&[], Timestamp(5));
        assert_eq!(r.responsibility, Responsibility::Platform);
        assert_eq!(r.evidence[0].finding, "disk 100%");
        assert_eq!(r.candidates[0].component, "db");
        assert!(r.candidates[0].score > r.candidates[1].score);
        assert!(FinalizeArgs::parse(&json!({"root_cause": "x"})).is_err());
        let bad =
            json!({"root_cause": "x", "solution": "y", "responsibility": "user", "confidence": 3});
        assert!(
            FinalizeArgs::parse(&bad)
                .unwrap_err()
                .contains("between 0 and 1")
        );
        assert!(
            finalize_spec()
                .parameters
                .to_string()
                .contains("root_cause")
        );
    }
}
