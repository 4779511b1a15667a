//! Events within spans: which log templates a span writes and which components it calls,
//! compared per operation between the baseline and the current window.
//!
//! Log lines that carry their span's ids (`trace_id` and `span_id` attributes, as OpenTelemetry
//! log records do) are joined to the span that wrote them. For every operation of every
//! component, the analyzer asks: of the spans of this operation, how many wrote template T (or
//! called component D)? Because the share is taken over the operation's own spans, a change
//! of workload mix (more of one request type, fewer of another) does not move it; what moves it
//! is a change of what one request does: an exception that cuts the span short (its later log
//! lines and calls vanish), or a new error line. This is the event-graph idea of Nezha (Yu et
//! al., FSE 2023) reduced to per-operation event shares.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rca_core::source::{Level, LogRecord, Span};
use rca_core::{Modality, Timestamp};

use super::stats::drifting_proportion_z;
use super::{Finding, Signal, Window, fmt_num};

/// The log attribute that names a line's trace.
pub const TRACE_ID: &str = "trace_id";
/// The log attribute that names a line's span.
pub const SPAN_ID: &str = "span_id";

/// Compares, per operation, the share of spans that show each event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventAnalyzer {
    /// Report shifts whose two-proportion z reaches this.
    pub min_z: f64,
    /// Least spans of an operation in each window, and least baseline spans showing an event
    /// for its disappearance to count.
    pub min_spans: usize,
    /// Least current spans showing an error event for its growth to count.
    pub min_errors: usize,
    /// Lines at or above this level are error events.
    pub error_level: Level,
}

impl Default for EventAnalyzer {
    fn default() -> Self {
        EventAnalyzer {
            min_z: 3.0,
            min_spans: 5,
            min_errors: 2,
            error_level: Level::Error,
        }
    }
}

#[derive(Default)]
struct Share {
    base: [usize; 2],
    cur: usize,
    error: bool,
    first: Option<Timestamp>,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Log(String),
    Call(String),
}

impl EventAnalyzer {
    /// Findings, strongest first. Lines without span ids, or whose span is not among
    /// `spans`, are ignored (the plain [`super::logs::LogAnalyzer`] judges them).
    pub fn analyze(
        &self,
        records: &[LogRecord],
        spans: &[Span],
        window: &Window,
        template: &dyn Fn(&str) -> String,
    ) -> Vec<Finding> {
        let in_windows = |t: Timestamp| window.baseline.contains(t) || window.current.contains(t);
        let spans: Vec<&Span> = spans.iter().filter(|s| in_windows(s.start)).collect();
        let by_id: HashMap<(&str, &str), usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| ((s.trace_id.as_str(), s.span_id.as_str()), i))
            .collect();
        // Events of every span.
        let mut events: Vec<BTreeSet<Event>> = vec![BTreeSet::new(); spans.len()];
        let mut error_templates: BTreeSet<String> = BTreeSet::new();
        for s in &spans {
            let Some(&p) = s
                .parent_id
                .as_deref()
                .and_then(|p| by_id.get(&(s.trace_id.as_str(), p)))
            else {
                continue;
            };
            if spans[p].component != s.component {
                events[p].insert(Event::Call(s.component.clone()));
            }
        }
        for r in records {
            let (Some(t), Some(sp)) = (r.attributes.get(TRACE_ID), r.attributes.get(SPAN_ID))
            else {
                continue;
            };
            let Some(&i) = by_id.get(&(t.as_str(), sp.as_str())) else {
                continue;
            };
            if spans[i].component != r.component {
                continue;
            }
            let tpl = template(&r.message);
            if r.level.is_some_and(|l| l >= self.error_level) {
                error_templates.insert(tpl.clone());
            }
            events[i].insert(Event::Log(tpl));
        }
        // The baseline's two halves (by time) measure how much shares drift on their own.
        let mut base_times: Vec<Timestamp> = spans
            .iter()
            .filter(|s| window.baseline.contains(s.start))
            .map(|s| s.start)
            .collect();
        base_times.sort();
        let split = base_times
            .get(base_times.len() / 2)
            .copied()
            .unwrap_or(window.baseline.end);
        // (component, operation) -> (baseline spans per half, current spans), event shares.
        let mut totals: BTreeMap<(&str, &str), ([usize; 2], usize)> = BTreeMap::new();
        let mut shares: BTreeMap<(&str, &str), BTreeMap<&Event, Share>> = BTreeMap::new();
        for (i, s) in spans.iter().enumerate() {
            let cur = window.current.contains(s.start);
            let half = usize::from(s.start >= split);
            let key = (s.component.as_str(), s.operation.as_str());
            let t = totals.entry(key).or_default();
            if cur {
                t.1 += 1;
            } else {
                t.0[half] += 1;
            }
            let per = shares.entry(key).or_default();
            for e in &events[i] {
                let sh = per.entry(e).or_default();
                if cur {
                    sh.cur += 1;
                    sh.first = Some(sh.first.map_or(s.start, |f| f.min(s.start)));
                } else {
                    sh.base[half] += 1;
                }
                if let Event::Log(tpl) = e {
                    sh.error = error_templates.contains(tpl);
                }
            }
        }
        let mut out = Vec::new();
        for ((component, operation), per) in &shares {
            let (parts, nc) = totals
                .get(&(*component, *operation))
                .copied()
                .unwrap_or_default();
            let nb = parts[0] + parts[1];
            if nb < self.min_spans || nc < self.min_spans {
                continue;
            }
            for (event, sh) in per {
                let base = sh.base[0] + sh.base[1];
                let z = drifting_proportion_z(
                    [
                        (sh.base[0] as f64, parts[0] as f64),
                        (sh.base[1] as f64, parts[1] as f64),
                    ],
                    sh.cur as f64,
                    nc as f64,
                );
                let (score, grew) = if sh.error { (z, true) } else { (-z, false) };
                if score < self.min_z
                    || (grew && sh.cur < self.min_errors)
                    || (!grew && base < self.min_spans)
                {
                    continue;
                }
                let (modality, signal, what) = match event {
                    Event::Log(tpl) => (
                        Modality::Logs,
                        Signal::SpanEvent {
                            operation: operation.to_string(),
                            event: tpl.clone(),
                            error: sh.error,
                        },
                        format!("log line \"{tpl}\""),
                    ),
                    Event::Call(peer) => (
                        Modality::Traces,
                        Signal::SpanEvent {
                            operation: operation.to_string(),
                            event: format!("call to {peer}"),
                            error: false,
                        },
                        format!("a call to {peer}"),
                    ),
                };
                out.push(Finding {
                    modality,
                    observed_at: sh.first.unwrap_or(window.current.start),
                    component: component.to_string(),
                    signal,
                    summary: format!(
                        "{component}: spans of {operation} with {what} went from {}/{nb} to \
                         {}/{nc} (z {})",
                        base,
                        sh.cur,
                        fmt_num(z)
                    ),
                    score,
                });
            }
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::logs::simple_template;
    use rca_core::TimeRange;

    fn span(i: usize, id: &str, parent: Option<&str>, c: &str, op: &str) -> Span {
        Span {
            trace_id: format!("t{i}"),
            span_id: id.into(),
            parent_id: parent.map(str::to_string),
            component: c.into(),
            operation: op.into(),
            start: Timestamp::from_secs(i as i64),
            duration_us: 1000,
            error: false,
            attributes: Default::default(),
        }
    }

    fn line(i: usize, id: &str, c: &str, level: Level, msg: &str) -> LogRecord {
        LogRecord {
            timestamp: Timestamp::from_secs(i as i64),
            component: c.into(),
            level: Some(level),
            message: msg.into(),
            attributes: [
                (TRACE_ID.to_string(), format!("t{i}")),
                (SPAN_ID.to_string(), id.to_string()),
            ]
            .into(),
        }
    }

    #[test]
    fn a_span_cut_short_loses_its_later_events_whatever_the_workload() {
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            let cur = i >= 40;
            // Workload mix: in the current window "b" serves four times as many "list"
            // requests, which must not look like anything.
            let list = if cur { i % 5 != 0 } else { i % 5 == 0 };
            spans.push(span(i, "a", None, "front", "GET"));
            if list {
                spans.push(span(i, "b", Some("a"), "back", "list"));
                logs.push(line(
                    i,
                    "b",
                    "back",
                    Level::Info,
                    &format!("listed {i} rows"),
                ));
                continue;
            }
            spans.push(span(i, "b", Some("a"), "back", "pay"));
            logs.push(line(i, "b", "back", Level::Info, "payment requested"));
            if cur && i % 2 == 0 {
                // The fault: pay throws half the time before its last line and its call.
                logs.push(line(i, "b", "back", Level::Error, "payment failed: boom"));
                continue;
            }
            logs.push(line(i, "b", "back", Level::Info, "payment stored"));
            spans.push(span(i, "c", Some("b"), "db", "insert"));
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(40)),
            TimeRange::new(Timestamp::from_secs(40), Timestamp::from_secs(80)),
        );
        let f = EventAnalyzer {
            min_spans: 3,
            ..EventAnalyzer::default()
        }
        .analyze(&logs, &spans, &w, &simple_template);
        assert!(!f.is_empty());
        assert!(f.iter().all(|x| x.component == "back"), "{f:?}");
        assert!(f.iter().all(|x| matches!(
            &x.signal,
            Signal::SpanEvent { operation, .. } if operation == "pay"
        )));
        assert!(f.iter().any(|x| matches!(
            &x.signal,
            Signal::SpanEvent { event, error: true, .. } if event.contains("failed")
        )));
        assert!(f.iter().any(|x| x.modality == Modality::Traces));
    }
}
