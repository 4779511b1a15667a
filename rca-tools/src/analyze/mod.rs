//! Analyzers that need no model: each compares a current window of telemetry with a baseline
//! window and reports [`Finding`]s (which become [`rca_core::Evidence`]).
//!
//! - [`metrics`]: per component and KPI, robust z-scores (median/MAD) of the current window
//!   against the baseline, plus a mean-shift change point.
//! - [`traces`]: per operation latency (self time) and error-rate shifts, client/server gap
//!   shifts on calls between components, call-structure shifts, the service call graph and a
//!   blame pass that follows anomalous callees down the graph (the way STRATUS bootstraps
//!   localisation from traces).
//! - [`events`]: within spans, which event follows which (log templates, calls' returns, start
//!   and end; log lines joined to their spans by trace and span id), per event.
//! - [`logs`]: error-level bursts and template frequency shifts and new templates per
//!   component.
//! - [`onset`]: when the problem began, from the series of all modalities changing together.
//! - [`classify`]: names a fault type from the kinds of evidence about a component.
//! - [`rank`]: combines findings of several modalities into a ranking of components,
//!   rewarding convergence across modalities.
//!
//! Nothing here knows any particular system: components, KPIs and operations are whatever
//! the telemetry names.

pub mod classify;
pub mod effect;
pub mod events;
pub mod logs;
pub mod metrics;
pub mod onset;
pub mod rank;
pub mod stats;
pub mod traces;

use rca_core::{Evidence, Modality, TimeRange, Timestamp};
use serde::{Deserialize, Serialize};

/// The two windows an analyzer compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// What normal looks like.
    pub baseline: TimeRange,
    /// What is examined (ends at or before the detection time).
    pub current: TimeRange,
}

impl Window {
    /// A window pair.
    pub fn new(baseline: TimeRange, current: TimeRange) -> Self {
        Window { baseline, current }
    }
}

/// What kind of anomaly a finding reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum Signal {
    /// A KPI of the component moved away from its baseline.
    MetricShift {
        /// The KPI.
        kpi: String,
        /// Current level minus baseline median.
        delta: f64,
    },
    /// An operation of the component takes longer (self time, its callees excluded).
    Latency {
        /// The operation.
        operation: String,
    },
    /// Calls between the component and a peer spend longer between client and server
    /// (network, queueing, connection set-up).
    CallGap {
        /// The other side of the call.
        peer: String,
    },
    /// An operation of the component fails more often.
    ErrorRate {
        /// The operation.
        operation: String,
    },
    /// Something the component normally does (an operation, a call to a peer) happens much
    /// less often, relative to its other work.
    PathDropped {
        /// The operation or call that dropped.
        event: String,
    },
    /// Something the baseline never showed the component do (an operation, a call to a peer)
    /// happens repeatedly: a request now takes a path it did not take before (an error
    /// handler, a fallback, a retry).
    PathAppeared {
        /// The operation or call that appeared.
        event: String,
    },
    /// The component is the deepest anomalous component on its call paths: its callers'
    /// anomalies are explained by it.
    Blame,
    /// The component writes many more error-level lines than before.
    ErrorBurst,
    /// A log template the baseline never showed.
    NewTemplate {
        /// The template.
        template: String,
        /// Whether its lines are error-level.
        error: bool,
    },
    /// A log template's share of the component's lines rose (error-level) or fell (others).
    TemplateShift {
        /// The template.
        template: String,
        /// Whether its lines are error-level.
        error: bool,
    },
    /// Within spans, what follows an event changed: the share of the event's occurrences
    /// followed by `next` grew or fell (a request took another branch, was cut short, or
    /// logged a new error). The component owns the first event (for a call's return, the
    /// callee).
    Transition {
        /// The first event (`start of <op>`, `log line "<template>"`, `return from <component>
        /// <op>`).
        after: String,
        /// The event that follows it.
        next: String,
        /// Whether `next` is an error-level log line.
        error: bool,
        /// Whether the share grew (else it fell).
        grew: bool,
    },
}

/// One anomaly about one component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Which telemetry it comes from.
    pub modality: Modality,
    /// When it was observed (the start of the anomaly, or of the current window).
    pub observed_at: Timestamp,
    /// The component.
    pub component: String,
    /// What kind of anomaly.
    pub signal: Signal,
    /// One sentence for people and models.
    pub summary: String,
    /// Strength, in z-score-like units (higher is stronger).
    pub score: f64,
}

impl Signal {
    /// A machine-readable kind: the signal's name and, where it has one, its subject
    /// (`metric_shift:cpu_usage`, `latency:/pay`, `error_burst`).
    pub fn kind(&self) -> String {
        match self {
            Signal::MetricShift { kpi, .. } => format!("metric_shift:{kpi}"),
            Signal::Latency { operation } => format!("latency:{operation}"),
            Signal::CallGap { peer } => format!("call_gap:{peer}"),
            Signal::ErrorRate { operation } => format!("error_rate:{operation}"),
            Signal::PathDropped { event } => format!("path_dropped:{event}"),
            Signal::PathAppeared { event } => format!("path_appeared:{event}"),
            Signal::Blame => "blame".to_string(),
            Signal::ErrorBurst => "error_burst".to_string(),
            Signal::NewTemplate { error, .. } => {
                format!("new_template{}", if *error { ":error" } else { "" })
            }
            Signal::TemplateShift { error, .. } => {
                format!("template_shift{}", if *error { ":error" } else { "" })
            }
            Signal::Transition { error, grew, .. } => format!(
                "transition:{}{}",
                if *grew { "grew" } else { "fell" },
                if *error { ":error" } else { "" }
            ),
        }
    }
}

impl Finding {
    /// The finding in the four-field evidence form, with the signal as its kind.
    pub fn to_evidence(&self) -> Evidence {
        Evidence::new(
            self.modality.clone(),
            self.observed_at,
            self.component.clone(),
            self.summary.clone(),
        )
        .with_score(self.score)
        .with_kind(self.signal.kind())
    }
}

/// The spans of both windows, indexed: by (trace id, span id), with each span's parent.
pub(crate) struct SpanIndex<'a> {
    /// The spans whose start lies in the baseline or the current window.
    pub spans: Vec<&'a rca_core::source::Span>,
    /// (trace id, span id) -> position in `spans`.
    pub by_id: rustc_hash::FxHashMap<(&'a str, &'a str), usize>,
    /// Each span's parent, when it is among `spans`.
    pub parent: Vec<Option<usize>>,
}

impl<'a> SpanIndex<'a> {
    /// Indexes the spans that start in either window.
    pub fn new(spans: &'a [rca_core::source::Span], window: &Window) -> Self {
        let spans: Vec<&rca_core::source::Span> = spans
            .iter()
            .filter(|s| window.baseline.contains(s.start) || window.current.contains(s.start))
            .collect();
        let by_id: rustc_hash::FxHashMap<(&str, &str), usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| ((s.trace_id.as_str(), s.span_id.as_str()), i))
            .collect();
        let parent = spans
            .iter()
            .map(|s| {
                s.parent_id
                    .as_deref()
                    .and_then(|p| by_id.get(&(s.trace_id.as_str(), p)).copied())
            })
            .collect();
        SpanIndex {
            spans,
            by_id,
            parent,
        }
    }
}

/// Rounds for display.
pub(crate) fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}
