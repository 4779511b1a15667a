//! Incidents and the evidence gathered about them.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::time::{TimeRange, Timestamp};

/// Where a piece of evidence came from.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    /// Time series of resource or request metrics.
    Metrics,
    /// Log lines.
    Logs,
    /// Distributed-tracing spans.
    Traces,
    /// Source code.
    Code,
    /// Rows of a table (job events, configuration, a database).
    Records,
    /// Anything else a host defines.
    Other(String),
}

impl fmt::Display for Modality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Modality::Metrics => f.write_str("metrics"),
            Modality::Logs => f.write_str("logs"),
            Modality::Traces => f.write_str("traces"),
            Modality::Code => f.write_str("code"),
            Modality::Records => f.write_str("records"),
            Modality::Other(s) => f.write_str(s),
        }
    }
}

/// A finding, in the four-field form (modality, observed-at, component, finding) plus a score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Which kind of telemetry it comes from.
    pub modality: Modality,
    /// When it was observed.
    pub observed_at: Timestamp,
    /// The component (service, pod, host, job) it is about.
    pub component: String,
    /// What was found, in one sentence.
    pub finding: String,
    /// How strongly it points at a problem (analyzer-specific; higher is stronger).
    #[serde(default)]
    pub score: f64,
    /// A machine-readable kind of finding, when the producer knows it (for example
    /// `metric_shift:cpu_usage`, `error_burst`, `latency:/pay`), so reasoners can classify
    /// faults without parsing prose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl Evidence {
    /// A piece of evidence with score 0.
    pub fn new(
        modality: Modality,
        observed_at: Timestamp,
        component: impl Into<String>,
        finding: impl Into<String>,
    ) -> Self {
        Evidence {
            modality,
            observed_at,
            component: component.into(),
            finding: finding.into(),
            score: 0.0,
            kind: None,
        }
    }

    /// Sets the machine-readable kind.
    pub fn with_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// Sets the score.
    pub fn with_score(mut self, score: f64) -> Self {
        self.score = score;
        self
    }
}

/// An incident to diagnose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Incident {
    /// A stable identifier.
    pub id: String,
    /// A one-line title (the alert).
    pub title: String,
    /// What was observed, in prose.
    #[serde(default)]
    pub description: String,
    /// When the problem was detected; no tool returns data from after it.
    pub detected_at: Timestamp,
    /// The telemetry window to examine.
    pub window: TimeRange,
    /// A description of the system (architecture, services), for the model's context.
    #[serde(default)]
    pub system: String,
    /// Known caller -> callee edges between components, when the host has them.
    #[serde(default)]
    pub topology: Vec<(String, String)>,
    /// When the problem began, when the host knows it (a deploy, an injected fault). `None`:
    /// the diagnosis estimates the onset from the telemetry (an alert fires some time after
    /// the fault, so `detected_at` alone does not say where normal behaviour ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset: Option<Timestamp>,
}
