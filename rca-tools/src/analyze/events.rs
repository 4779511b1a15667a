//! Events within spans, in order: what a request does next after each thing it does, compared
//! between the baseline and the current window.
//!
//! Log lines that carry their span's ids (`trace_id` and `span_id` attributes, as OpenTelemetry
//! log records do) are joined to the span that wrote them. Every span becomes a sequence of
//! events ordered by time: its start, its own log lines (as templates), the returns of the
//! calls it made (a child span ends: a client span of its own, or a server span elsewhere),
//! and its end. Each pair of
//! consecutive events is a *transition*; the analyzer compares, for every event, the share of
//! its occurrences that are followed by each next event (`P(next | event)`). Because the share
//! is conditional on the first event, a change of workload mix does not move it; what moves it
//! is a change of what a request does after that point: an exception that cuts the span short
//! (the usual next line vanishes, the span ends early), a wrong return value that sends the
//! caller down another branch, or a new error line. (One exception: an operation that
//! dispatches different request types to different callees under one catch-all name, such as
//! a gateway's `/*`, shows a change of mix as a change of its own transitions.)
//!
//! Findings are log evidence (the sequences are made of a span's log lines; calls and span
//! bounds punctuate them), so one analyzer speaks with one voice in a ranking. A transition
//! belongs to the component of its first event. For a call's return that is the
//! callee: when a caller behaves differently right after a call returns, the callee's answer
//! is what changed. This is the event-graph pattern idea of Nezha (Yu et al., FSE 2023), where
//! patterns are pairs of adjacent events and a pattern is owned by its source event.

use std::collections::HashMap;

use rca_core::source::{Level, LogRecord, Span};
use rca_core::{Modality, Timestamp};

use super::stats::drifting_proportion_z;
use super::{Finding, Signal, SpanIndex, Window, fmt_num};

/// The log attribute that names a line's trace.
pub const TRACE_ID: &str = "trace_id";
/// The log attribute that names a line's span.
pub const SPAN_ID: &str = "span_id";

/// Compares, per event, which events follow it within a span.
#[derive(Debug, Clone, PartialEq)]
pub struct EventAnalyzer {
    /// Report transitions whose share moved by at least this z-score.
    pub min_z: f64,
    /// Least occurrences of an event in each window for its transitions to be compared.
    pub min_events: usize,
    /// Lines at or above this level are error events.
    pub error_level: Level,
    /// A transition into an error line that grew scores this many times its z (one that fell
    /// scores its z divided by it): new errors are stronger evidence than vanished ones.
    pub error_weight: f64,
    /// How much of the difference between the baseline's two halves (by time) counts as
    /// extra variance (0: none). See [`drifting_proportion_z`].
    pub drift_weight: f64,
}

impl Default for EventAnalyzer {
    fn default() -> Self {
        EventAnalyzer {
            min_z: 3.0,
            min_events: 5,
            error_level: Level::Error,
            error_weight: 2.0,
            drift_weight: 0.0,
        }
    }
}

/// What happens in a span.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    Start(String),
    Log(String),
    Return(String),
    End(String),
}

/// A step and the component it belongs to (for a return, the callee).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Event {
    component: String,
    step: Step,
}

impl Event {
    fn describe(&self) -> String {
        match &self.step {
            Step::Start(op) => format!("start of {op}"),
            Step::Log(tpl) => format!("log line \"{tpl}\""),
            Step::Return(op) => format!("return from {} {op}", self.component),
            Step::End(op) => format!("end of {op}"),
        }
    }
}

/// Counts per window part: baseline first half, baseline second half, current.
type Counts = [usize; 3];

#[derive(Default)]
struct Interner {
    ids: HashMap<Event, usize>,
    events: Vec<Event>,
    error: Vec<bool>,
}

impl Interner {
    fn id(&mut self, e: Event, error: bool) -> usize {
        if let Some(&i) = self.ids.get(&e) {
            return i;
        }
        let i = self.events.len();
        self.ids.insert(e.clone(), i);
        self.events.push(e);
        self.error.push(error);
        i
    }
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
        let SpanIndex {
            spans,
            by_id,
            parent,
        } = SpanIndex::new(spans, window);
        // The span each log line was written in (same component).
        let written_in: Vec<Option<usize>> = records
            .iter()
            .map(|r| {
                let (t, sp) = (r.attributes.get(TRACE_ID)?, r.attributes.get(SPAN_ID)?);
                let i = *by_id.get(&(t.as_str(), sp.as_str()))?;
                (spans[i].component == r.component).then_some(i)
            })
            .collect();
        let mut has_logs = vec![false; spans.len()];
        for i in written_in.iter().flatten() {
            has_logs[*i] = true;
        }
        let names = operation_names(&spans, &parent, &has_logs);
        let mut interner = Interner::default();
        // The middle of every span: (time, event id), in arrival order.
        let mut middle: Vec<Vec<(Timestamp, usize)>> = vec![Vec::new(); spans.len()];
        for (i, s) in spans.iter().enumerate() {
            let Some(p) = parent[i] else {
                continue;
            };
            let id = interner.id(
                Event {
                    component: s.component.clone(),
                    step: Step::Return(names[i].clone()),
                },
                false,
            );
            middle[p].push((span_end(s), id));
        }
        for (r, i) in records.iter().zip(&written_in) {
            let Some(i) = *i else {
                continue;
            };
            let error = r.level.is_some_and(|l| l >= self.error_level);
            let id = interner.id(
                Event {
                    component: r.component.clone(),
                    step: Step::Log(template(&r.message)),
                },
                error,
            );
            middle[i].push((r.timestamp, id));
        }
        let split = baseline_split(&spans, window);
        let mut pairs: HashMap<(usize, usize), Counts> = HashMap::new();
        let mut sources: HashMap<usize, Counts> = HashMap::new();
        let mut first_seen: HashMap<(usize, usize), Timestamp> = HashMap::new();
        for (i, s) in spans.iter().enumerate() {
            let part = if window.current.contains(s.start) {
                2
            } else {
                usize::from(s.start >= split)
            };
            let start = interner.id(
                Event {
                    component: s.component.clone(),
                    step: Step::Start(names[i].clone()),
                },
                false,
            );
            let end = interner.id(
                Event {
                    component: s.component.clone(),
                    step: Step::End(names[i].clone()),
                },
                false,
            );
            let mut steps = std::mem::take(&mut middle[i]);
            steps.sort_by_key(|(t, _)| *t);
            let seq = std::iter::once(start)
                .chain(steps.into_iter().map(|(_, e)| e))
                .chain(std::iter::once(end));
            let mut prev: Option<usize> = None;
            for e in seq {
                if let Some(a) = prev {
                    pairs.entry((a, e)).or_default()[part] += 1;
                    sources.entry(a).or_default()[part] += 1;
                    if part == 2 {
                        first_seen.entry((a, e)).or_insert(s.start);
                    }
                }
                prev = Some(e);
            }
        }
        let mut out = Vec::new();
        for (&(a, b), n) in &pairs {
            let Some(total) = sources.get(&a) else {
                continue;
            };
            if total[0] + total[1] < self.min_events || total[2] < self.min_events {
                continue;
            }
            let z = drifting_proportion_z(
                [
                    (n[0] as f64, total[0] as f64),
                    (n[1] as f64, total[1] as f64),
                ],
                n[2] as f64,
                total[2] as f64,
                self.drift_weight,
            );
            let error = interner.error[b];
            let grew = z > 0.0;
            let score = match (error, grew) {
                (true, true) => z * self.error_weight,
                (true, false) => -z / self.error_weight,
                _ => z.abs(),
            };
            if score < self.min_z {
                continue;
            }
            let (from, to) = (&interner.events[a], &interner.events[b]);
            let (after, next) = (from.describe(), to.describe());
            let component = from.component.clone();
            out.push(Finding {
                modality: Modality::Logs,
                observed_at: first_seen
                    .get(&(a, b))
                    .copied()
                    .unwrap_or(window.current.start),
                summary: format!(
                    "{component}: after {after}, {next} {} from {}/{} to {}/{} (z {})",
                    if grew { "grew" } else { "fell" },
                    n[0] + n[1],
                    total[0] + total[1],
                    n[2],
                    total[2],
                    fmt_num(z)
                ),
                component,
                signal: Signal::Transition {
                    after,
                    next,
                    error,
                    grew,
                },
                score,
            });
        }
        out.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.summary.cmp(&b.summary))
        });
        out
    }
}

/// The name of every span's operation. A client span (it writes no log line and has exactly
/// one child, in another component) is named after its callee too: generic client
/// operations (`HTTP POST`) call different services for different requests, and without the
/// callee in the name a change of request mix would look like a change of what the call does.
fn operation_names(spans: &[&Span], parent: &[Option<usize>], has_logs: &[bool]) -> Vec<String> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    spans
        .iter()
        .enumerate()
        .map(|(i, s)| match children[i].as_slice() {
            [c] if !has_logs[i] && spans[*c].component != s.component => {
                format!("{} to {}", s.operation, spans[*c].component)
            }
            _ => s.operation.clone(),
        })
        .collect()
}

/// When a span ends.
fn span_end(s: &Span) -> Timestamp {
    let micros = i64::try_from(s.duration_us).unwrap_or(i64::MAX);
    s.start.offset_millis(micros / 1000)
}

/// The median start time of the baseline's spans: it splits the baseline in two halves whose
/// difference measures drift.
fn baseline_split(spans: &[&Span], window: &Window) -> Timestamp {
    let mut times: Vec<Timestamp> = spans
        .iter()
        .filter(|s| window.baseline.contains(s.start))
        .map(|s| s.start)
        .collect();
    times.sort();
    times
        .get(times.len() / 2)
        .copied()
        .unwrap_or(window.baseline.end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::logs::simple_template;
    use rca_core::TimeRange;

    fn span(i: usize, id: &str, parent: Option<&str>, c: &str, op: &str, at: i64) -> Span {
        Span {
            trace_id: format!("t{i}"),
            span_id: id.into(),
            parent_id: parent.map(str::to_string),
            component: c.into(),
            operation: op.into(),
            start: Timestamp(i as i64 * 1000 + at),
            duration_us: 1000,
            error: false,
            attributes: Default::default(),
        }
    }

    fn line(i: usize, id: &str, c: &str, level: Level, msg: &str, at: i64) -> LogRecord {
        LogRecord {
            timestamp: Timestamp(i as i64 * 1000 + at),
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

    fn window() -> Window {
        Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(40)),
            TimeRange::new(Timestamp::from_secs(40), Timestamp::from_secs(80)),
        )
    }

    fn analyzer() -> EventAnalyzer {
        EventAnalyzer {
            min_events: 3,
            ..EventAnalyzer::default()
        }
    }

    #[test]
    fn a_span_cut_short_changes_what_follows_whatever_the_workload() {
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            let cur = i >= 40;
            // Workload mix: in the current window "b" serves four times as many "list"
            // requests, which must not look like anything.
            let list = if cur { i % 5 != 0 } else { i % 5 == 0 };
            // Each endpoint has its own operation at the front too (a single catch-all
            // operation that dispatches by request type would show the mix as its own
            // transitions).
            let op = if list { "GET /list" } else { "GET /pay" };
            spans.push(span(i, "a", None, "front", op, 0));
            if list {
                spans.push(span(i, "b", Some("a"), "back", "list", 1));
                logs.push(line(
                    i,
                    "b",
                    "back",
                    Level::Info,
                    &format!("listed {i} rows"),
                    2,
                ));
                continue;
            }
            spans.push(span(i, "b", Some("a"), "back", "pay", 1));
            logs.push(line(i, "b", "back", Level::Info, "payment requested", 2));
            if cur && i % 2 == 0 {
                // The fault: pay throws half the time before its last line and its call.
                logs.push(line(
                    i,
                    "b",
                    "back",
                    Level::Error,
                    "payment failed: boom",
                    3,
                ));
                continue;
            }
            logs.push(line(i, "b", "back", Level::Info, "payment stored", 3));
            spans.push(span(i, "c", Some("b"), "db", "insert", 4));
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(!f.is_empty());
        assert!(f.iter().all(|x| x.component == "back"), "{f:?}");
        assert!(f.iter().any(|x| matches!(
            &x.signal,
            Signal::Transition { next, error: true, grew: true, .. } if next.contains("failed")
        )));
        assert!(f.iter().any(|x| matches!(
            &x.signal,
            Signal::Transition { next, error: false, grew: false, .. } if next.contains("stored")
        )));
    }

    #[test]
    fn a_caller_that_changes_branch_after_a_call_blames_the_callee() {
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            let wrong = i >= 40 && i % 2 == 0;
            spans.push(span(i, "a", None, "front", "GET", 0));
            spans.push(span(i, "b", Some("a"), "prices", "quote", 1));
            // The callee looks the same either way; the caller notices the wrong answer.
            let next = if wrong {
                "price rejected"
            } else {
                "price accepted"
            };
            logs.push(line(i, "a", "front", Level::Info, next, 5));
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(!f.is_empty());
        assert!(f.iter().all(|x| x.component == "prices"), "{f:?}");
    }

    #[test]
    fn unchanged_behaviour_reports_nothing() {
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            spans.push(span(i, "a", None, "front", "GET", 0));
            let msg = if i % 3 == 0 {
                "cache miss"
            } else {
                "cache hit"
            };
            logs.push(line(i, "a", "front", Level::Info, msg, 1));
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(f.is_empty(), "{f:?}");
    }
}
