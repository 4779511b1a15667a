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

use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{Modality, Name, Timestamp};

use super::effect::{BASELINE_CHUNKS, ShareChange, ShareSpread};
use super::{Finding, Signal, SpanIndex, Window, fmt_num};

/// The log attribute that names a line's trace.
pub const TRACE_ID: &str = "trace_id";
/// The log attribute that names a line's span.
pub const SPAN_ID: &str = "span_id";

/// Compares, per event, which events follow it within a span.
#[derive(Debug, Clone, PartialEq)]
pub struct EventAnalyzer {
    /// Report transitions whose score (the share's effect size, see
    /// [`super::effect::ShareChange::score`]) reaches this.
    pub min_z: f64,
    /// ... and whose change is at least this significant (a one-sided normal quantile).
    pub min_significance: f64,
    /// Least occurrences of an event in each window for its transitions to be compared.
    pub min_events: usize,
    /// Lines at or above this level are error events.
    pub error_level: Level,
    /// A KPI of a span's component this far from its baseline (robust z) when the span
    /// starts puts an alarm event right after the span's start: a resource fault then shows
    /// as a new pattern on the spans of the component it hit.
    pub alarm_z: f64,
    /// KPIs whose name holds one of these words (case-insensitive) raise no alarm: they
    /// measure symptoms (latency, traffic) that move at every caller of a slow component,
    /// not the resources of the component itself ([`super::metrics::MetricAnalyzer`]'s
    /// symptom words by default).
    pub alarm_skip: Vec<String>,
    /// A transition into an error line that grew scores this many times its effect (one
    /// that fell scores its effect divided by it): new errors are stronger evidence than
    /// vanished ones.
    pub error_weight: f64,
}

impl Default for EventAnalyzer {
    fn default() -> Self {
        EventAnalyzer {
            min_z: 3.0,
            min_significance: 2.33,
            min_events: 5,
            alarm_z: 4.0,
            alarm_skip: super::metrics::MetricAnalyzer::default().symptom_words,
            error_level: Level::Error,
            error_weight: 2.0,
        }
    }
}

/// What happens in a span.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    Start(String),
    Log(String),
    Return(String),
    Alarm(String),
    /// No alarm as a span starts (the other outcome of [`Step::AlarmCheck`]).
    Calm,
    /// A span starts: the source of its alarm outcome, apart from the span's own sequence.
    AlarmCheck(String),
    End(String),
}

/// A step and the component it belongs to (for a return, the callee).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Event {
    component: Name,
    step: Step,
}

impl Event {
    fn describe(&self) -> String {
        match &self.step {
            Step::Start(op) => format!("start of {op}"),
            Step::Log(tpl) => format!("log line \"{tpl}\""),
            Step::Return(op) => format!("return from {} {op}", self.component),
            Step::Alarm(kpi) => format!("alarm on {kpi}"),
            Step::Calm => "no alarm".to_string(),
            Step::AlarmCheck(op) => format!("start of {op}"),
            Step::End(op) => format!("end of {op}"),
        }
    }
}

/// Counts per window: baseline, current.
type Counts = [usize; 2];

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
        self.analyze_with_alarms(records, spans, &[], window, template)
    }

    /// As [`analyze`](Self::analyze), with the components' metric alarms as events: when a
    /// KPI of a span's component lies [`alarm_z`](Self::alarm_z) or further from its
    /// baseline as the span starts, the most extreme such KPI becomes an event right after
    /// the start (Nezha's alarms). A finding's modality is that of the event whose share
    /// moved: a log line (logs), an alarm (metrics), a call, a return or a span's end
    /// (traces).
    pub fn analyze_with_alarms(
        &self,
        records: &[LogRecord],
        spans: &[Span],
        metrics: &[MetricSample],
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
                    step: Step::Log(super::logs::statement(r, template(&r.message))),
                },
                error,
            );
            middle[i].push((r.timestamp, id));
        }
        // Alarms are a side pattern of each span's start (start -> alarm or no alarm), apart
        // from its sequence, so an alarm does not break the transitions of what it does.
        let alarms = alarms(metrics, window, self.alarm_z, &self.alarm_skip);
        let mut alarm_of: Vec<Option<usize>> = vec![None; spans.len()];
        if !alarms.is_empty() {
            for (i, s) in spans.iter().enumerate() {
                if !alarms.contains_key(s.component.as_str()) {
                    continue;
                }
                let kpi = alarms.get(s.component.as_str()).and_then(|v| {
                    v.iter()
                        .filter(|a| a.from <= s.start && s.start < a.to)
                        .max_by(|a, b| a.z.abs().total_cmp(&b.z.abs()))
                });
                let step = kpi.map_or(Step::Calm, |a| Step::Alarm(a.label.clone()));
                alarm_of[i] = Some(interner.id(
                    Event {
                        component: s.component.clone(),
                        step,
                    },
                    false,
                ));
            }
        }
        // Per (event, next event): [baseline, current] counts; per event, its baseline
        // occurrences (span start, next event) for the baseline's own spread.
        let mut pairs: HashMap<(usize, usize), Counts> = HashMap::new();
        let mut sources: HashMap<usize, Counts> = HashMap::new();
        let mut history: HashMap<usize, Vec<(Timestamp, usize)>> = HashMap::new();
        let mut first_seen: HashMap<(usize, usize), Timestamp> = HashMap::new();
        // The current window's transitions: (span, event, next event).
        let mut occurrences: Vec<(usize, usize, usize, Timestamp)> = Vec::new();
        for (i, s) in spans.iter().enumerate() {
            let part = usize::from(window.current.contains(s.start));
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
            if let Some(outcome) = alarm_of[i] {
                let check = interner.id(
                    Event {
                        component: s.component.clone(),
                        step: Step::AlarmCheck(names[i].clone()),
                    },
                    false,
                );
                pairs.entry((check, outcome)).or_default()[part] += 1;
                sources.entry(check).or_default()[part] += 1;
                if part == 1 {
                    first_seen.entry((check, outcome)).or_insert(s.start);
                    occurrences.push((i, check, outcome, s.start));
                } else {
                    history.entry(check).or_default().push((s.start, outcome));
                }
            }
            let mut steps = std::mem::take(&mut middle[i]);
            steps.sort_by_key(|(t, _)| *t);
            let seq = std::iter::once((s.start, start))
                .chain(steps)
                .chain(std::iter::once((span_end(s), end)));
            let mut prev: Option<usize> = None;
            for (t, e) in seq {
                if let Some(a) = prev {
                    pairs.entry((a, e)).or_default()[part] += 1;
                    sources.entry(a).or_default()[part] += 1;
                    if part == 1 {
                        first_seen.entry((a, e)).or_insert(s.start);
                        occurrences.push((i, a, e, t));
                    } else {
                        history.entry(a).or_default().push((s.start, e));
                    }
                }
                prev = Some(e);
            }
        }
        let spreads: HashMap<usize, ShareSpread> = history
            .into_iter()
            .map(|(a, mut occurrences)| {
                occurrences.sort_by_key(|(t, _)| *t);
                let outcomes: Vec<usize> = occurrences.into_iter().map(|(_, b)| b).collect();
                (a, ShareSpread::new(&outcomes, BASELINE_CHUNKS))
            })
            .collect();
        let mut out = Vec::new();
        // Each finding's (event, next event) and whether its share grew, in `out`'s order.
        let mut out_pairs: Vec<((usize, usize), bool)> = Vec::new();
        let mut extra = Vec::new();
        for (&(a, b), n) in &pairs {
            let Some(total) = sources.get(&a) else {
                continue;
            };
            if total[0] < self.min_events || total[1] < self.min_events {
                continue;
            }
            let change =
                ShareChange::new(n[0] as f64, total[0] as f64, n[1] as f64, total[1] as f64);
            let spread = spreads.get(&a).map_or(0.0, |s| s.of(b));
            let effect = change.score_against(spread, self.min_significance);
            let error = interner.error[b];
            let grew = effect > 0.0;
            let score = match (error, grew) {
                (true, true) => effect * self.error_weight,
                (true, false) => -effect / self.error_weight,
                _ => effect.abs(),
            };
            if score < self.min_z {
                continue;
            }
            let (from, to) = (&interner.events[a], &interner.events[b]);
            let (after, next) = (from.describe(), to.describe());
            let component = from.component.to_string();
            out_pairs.push(((a, b), grew));
            let modality = match to.step {
                Step::Log(_) => Modality::Logs,
                Step::Alarm(_) | Step::Calm => Modality::Metrics,
                _ => Modality::Traces,
            };
            out.push(Finding {
                modality,
                observed_at: first_seen
                    .get(&(a, b))
                    .copied()
                    .unwrap_or(window.current.start),
                summary: format!(
                    "{component}: after {after}, {next} {} from {}/{} to {}/{} (effect {}, \
                     significance z {})",
                    if grew { "grew" } else { "fell" },
                    n[0],
                    total[0],
                    n[1],
                    total[1],
                    fmt_num(score),
                    fmt_num(change.significance.abs())
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
        let relays = relayed(&spans, &occurrences, &out_pairs, &out);
        for (f, relay) in out.iter_mut().zip(relays) {
            if let Some(relay) = relay {
                extra.push(relay.credit(f));
                f.score *= RELAY_KEEPS;
            }
        }
        out.append(&mut extra);
        out.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.summary.cmp(&b.summary))
        });
        out
    }
}

/// The least number of changed requests in which a callee must have changed too for a finding
/// to count as relayed.
const MIN_RELAYED: usize = 3;

/// A stretch of time in which one KPI of a component lay far from its baseline.
struct Alarm {
    from: Timestamp,
    to: Timestamp,
    label: String,
    z: f64,
}

/// Every alarm of every component in the windows: per (component, KPI) not named by a word of
/// `skip`, with at least five
/// baseline samples, each sample `alarm_z` or more robust units from the baseline median
/// (units floored by 5% of the median and the baseline's resolution) raises an alarm until the
/// next sample (or as long as the series' median sampling gap).
fn alarms<'a>(
    metrics: &'a [MetricSample],
    window: &Window,
    alarm_z: f64,
    skip: &[String],
) -> HashMap<&'a str, Vec<Alarm>> {
    let mut series: HashMap<(&str, &str), Vec<(Timestamp, f64)>> = HashMap::new();
    for m in metrics {
        if m.value.is_finite()
            && (window.baseline.contains(m.timestamp) || window.current.contains(m.timestamp))
        {
            series
                .entry((m.component.as_str(), m.metric.as_str()))
                .or_default()
                .push((m.timestamp, m.value));
        }
    }
    let mut out: HashMap<&str, Vec<Alarm>> = HashMap::new();
    for ((component, kpi), mut points) in series {
        let lower = kpi.to_ascii_lowercase();
        if skip.iter().any(|w| lower.contains(&w.to_ascii_lowercase())) {
            continue;
        }
        points.sort_by_key(|p| p.0);
        let base: Vec<f64> = points
            .iter()
            .filter(|p| window.baseline.contains(p.0))
            .map(|p| p.1)
            .collect();
        if base.len() < 5 {
            continue;
        }
        let quantum = super::stats::resolution(&base) / 12f64.sqrt();
        let rb = super::stats::RobustBaseline::new(&base, 0.05, quantum.max(1e-9));
        let gaps: Vec<f64> = points
            .windows(2)
            .map(|w| (w[1].0.millis() - w[0].0.millis()) as f64)
            .collect();
        let typical = super::stats::median(&gaps).max(1.0) as i64;
        for (k, (t, v)) in points.iter().enumerate() {
            let z = rb.z(*v);
            if z.abs() < alarm_z {
                continue;
            }
            let to = points.get(k + 1).map_or(t.offset_millis(typical), |n| n.0);
            out.entry(component).or_default().push(Alarm {
                from: *t,
                to,
                label: format!("{kpi} {}", if z > 0.0 { "high" } else { "low" }),
                z,
            });
        }
    }
    out
}

/// The share of its score a relayed finding keeps for the component that relays it; the rest
/// is credited to the component where the change began.
const RELAY_KEEPS: f64 = 0.25;

/// A finding whose requests changed first in another component: in most of the requests
/// (traces) where this finding's change showed, another component called during the span
/// had changed too: it is where the change began.
struct Relay {
    /// Where the change began.
    origin: String,
    /// In how many of the finding's requests.
    requests: usize,
    /// Of how many.
    of: usize,
}

impl Relay {
    /// The finding as evidence for the origin, with its score.
    fn credit(&self, f: &Finding) -> Finding {
        Finding {
            component: self.origin.clone(),
            summary: format!(
                "the change at {} began in {}: in {} of the {} requests where {} changed, {} \
                 (called while it ran) had changed too ({})",
                f.component,
                self.origin,
                self.requests,
                self.of,
                f.component,
                self.origin,
                f.summary
            ),
            ..f.clone()
        }
    }
}

/// For each finding (by its pair and direction), the component where its requests changed
/// first. A finding's changed requests are the spans where its transition occurred (one that
/// grew) or where its first event was followed by something else (one that fell); a
/// component changed in a request when one of its spans in the same trace shows any
/// finding's change and started while the finding's span ran (it was called, at any depth,
/// whether or not the spans between were recorded). The origin is the component that changed
/// in at least half of the finding's changed requests (at least [`MIN_RELAYED`] of them) and
/// at least twice as often as in the requests where the finding's first event occurred
/// without the change; of several, the one that changed first in time (along a chain of calls
/// the deepest callee fails before its callers notice; of two callees the first called that
/// failed is where the request went wrong).
fn relayed(
    spans: &[&Span],
    occurrences: &[(usize, usize, usize, Timestamp)],
    pairs: &[((usize, usize), bool)],
    findings: &[Finding],
) -> Vec<Option<Relay>> {
    let grew: std::collections::HashSet<(usize, usize)> =
        pairs.iter().filter(|(_, g)| *g).map(|(p, _)| *p).collect();
    let fell: HashMap<usize, Vec<usize>> =
        pairs
            .iter()
            .filter(|(_, g)| !*g)
            .fold(HashMap::new(), |mut m, ((a, b), _)| {
                m.entry(*a).or_insert_with(Vec::new).push(*b);
                m
            });
    let changed_by = |a: usize, b: usize, pair: (usize, usize), grew_pair: bool| {
        if grew_pair {
            (a, b) == pair
        } else {
            a == pair.0 && b != pair.1
        }
    };
    // The current occurrences of each first event: (span, next event).
    let mut by_source: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    for &(i, a, b, _) in occurrences {
        by_source.entry(a).or_default().push((i, b));
    }
    // Spans that show any finding's change, by trace, with when it first showed.
    let mut changed: HashMap<&str, Vec<(usize, Timestamp)>> = HashMap::new();
    for &(i, a, b, t) in occurrences {
        let any = grew.contains(&(a, b)) || fell.get(&a).is_some_and(|bs| !bs.contains(&b));
        if any {
            let v = changed.entry(spans[i].trace_id.as_str()).or_default();
            match v.iter_mut().find(|(j, _)| *j == i) {
                Some((_, first)) => *first = (*first).min(t),
                None => v.push((i, t)),
            }
        }
    }
    pairs
        .iter()
        .zip(findings)
        .map(|(&(pair, grew_pair), finding)| {
            let owner = finding.component.as_str();
            let of_source = by_source.get(&pair.0).map_or(&[][..], Vec::as_slice);
            let mut at: Vec<usize> = of_source
                .iter()
                .filter(|(_, b)| changed_by(pair.0, *b, pair, grew_pair))
                .map(|(i, _)| *i)
                .collect();
            at.sort_unstable();
            at.dedup();
            if at.len() < MIN_RELAYED {
                return None;
            }
            // The requests where the finding's first event occurred without its change.
            let mut rest: Vec<usize> = of_source
                .iter()
                .filter(|(i, _)| at.binary_search(i).is_err())
                .map(|(i, _)| *i)
                .collect();
            rest.sort_unstable();
            rest.dedup();
            // component -> requests where it changed below the span, and the sum of how long
            // after the span's start it changed (milliseconds)
            let below = |set: &[usize]| {
                let mut counts: HashMap<&str, (usize, f64)> = HashMap::new();
                for &i in set {
                    let s = spans[i];
                    let (from, to) = (s.start, span_end(s));
                    let mut seen: Vec<&str> = Vec::new();
                    for &(j, when) in changed.get(s.trace_id.as_str()).into_iter().flatten() {
                        let d = spans[j];
                        if d.component != s.component
                            && d.component != owner
                            && d.start >= from
                            && d.start <= to
                            && !seen.contains(&d.component.as_str())
                        {
                            seen.push(d.component.as_str());
                            let e = counts.entry(d.component.as_str()).or_insert((0, 0.0));
                            e.0 += 1;
                            e.1 += (when.millis() - from.millis()) as f64;
                        }
                    }
                }
                counts
            };
            let (changed_below, unchanged_below) = (below(&at), below(&rest));
            // An origin changed in at least half of the changed requests, and at least twice as
            // often as in the requests that did not change (smoothed): a callee that changes
            // whatever its caller does is noise, not the origin.
            let (origin, (requests, _)) = changed_below
                .into_iter()
                .filter(|(c, (n, _))| {
                    let p1 = *n as f64 / at.len() as f64;
                    let n0 = unchanged_below.get(c).map_or(0, |x| x.0);
                    let p0 = (n0 as f64 + 1.0) / (rest.len() as f64 + 2.0);
                    *n >= MIN_RELAYED && p1 >= 0.5 && p1 >= 2.0 * p0
                })
                // The first to change: the smallest mean delay after the span's start.
                .min_by(|x, y| {
                    let mean = |(n, sum): &(usize, f64)| sum / (*n).max(1) as f64;
                    mean(&x.1).total_cmp(&mean(&y.1)).then_with(|| x.0.cmp(y.0))
                })?;
            Some(Relay {
                origin: origin.to_string(),
                requests,
                of: at.len(),
            })
        })
        .collect()
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
            _ => s.operation.to_string(),
        })
        .collect()
}

/// When a span ends.
fn span_end(s: &Span) -> Timestamp {
    let micros = i64::try_from(s.duration_us).unwrap_or(i64::MAX);
    s.start.offset_millis(micros / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::logs::simple_template;
    use rca_core::TimeRange;

    fn span(i: usize, id: &str, parent: Option<&str>, c: &str, op: &str, at: i64) -> Span {
        Span {
            trace_id: format!("t{i}").into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
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

    /// front -> a -> b -> c: in the current window `c` throws in half the requests (an error
    /// line instead of its usual one), and every caller above it notices and logs an error
    /// of its own after the call returns.
    fn error_chain() -> (Vec<Span>, Vec<LogRecord>) {
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        let chain = [
            ("front", 0, 20_000u64),
            ("a", 1, 15_000),
            ("b", 2, 10_000),
            ("c", 3, 4_000),
        ];
        for i in 0..80 {
            let failing = i >= 40 && i % 2 == 0;
            for (k, (c, at, dur)) in chain.iter().enumerate() {
                let mut sp = span(i, c, (k > 0).then(|| chain[k - 1].0), c, "handle", *at);
                sp.duration_us = *dur;
                spans.push(sp);
                let (level, msg) = match (failing, *c) {
                    (false, "c") => (Level::Info, "stored row"),
                    (true, "c") => (Level::Error, "insert failed: constraint violated"),
                    (false, _) => (Level::Info, "call succeeded"),
                    (true, _) => (Level::Error, "call failed: upstream error"),
                };
                // Callers log after the call returns.
                let when = if *c == "c" { 4 } else { 19 - k as i64 };
                logs.push(line(i, c, c, level, msg, when));
            }
        }
        (spans, logs)
    }

    #[test]
    fn an_error_chain_is_blamed_where_it_began_three_calls_deep() {
        let (spans, logs) = error_chain();
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        // Every caller's change is a relay of c's: credited to c. (A caller's change right
        // after a call returns is owned by the callee it called: front's by a, a's by b.)
        let ranked = crate::analyze::rank::Ranker::multimodal().rank(&f);
        assert_eq!(ranked[0].component, "c", "{ranked:#?}");
        let credits: Vec<&Finding> = f
            .iter()
            .filter(|x| x.component == "c" && x.summary.starts_with("the change at"))
            .collect();
        for caller in ["a", "b"] {
            assert!(
                credits
                    .iter()
                    .any(|x| x.summary.contains(&format!("change at {caller} "))),
                "{caller} relays c: {f:#?}"
            );
        }
        // The relays keep a quarter of their score: none outranks the origin's own finding.
        let own = f
            .iter()
            .filter(|x| x.component == "c" && !x.summary.starts_with("the change at"))
            .map(|x| x.score)
            .fold(0.0, f64::max);
        assert!(own > 0.0);
        for x in f.iter().filter(|x| x.component != "c") {
            assert!(x.score < own, "{x:?}");
        }
    }

    #[test]
    fn a_caller_failing_on_its_own_is_not_a_relay() {
        // The same chain, but b fails before it calls c, and c behaves as before: b's own
        // change stays its own.
        let (spans, mut logs) = error_chain();
        for l in logs.iter_mut() {
            if l.component == "c" {
                l.level = Some(Level::Info);
                l.message = "stored row".into();
            } else if l.component == "b" && l.level == Some(Level::Error) {
                l.timestamp = l.timestamp.offset_millis(-16);
            }
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(
            f.iter().all(|x| !x.summary.starts_with("the change at b")),
            "{f:#?}"
        );
        let ranked = crate::analyze::rank::Ranker::multimodal().rank(&f);
        // b is the deepest that changed: the change begins there, a and front relay it.
        assert_eq!(ranked[0].component, "b", "{ranked:#?}");
    }

    #[test]
    fn a_callee_that_changes_whatever_its_caller_does_is_not_the_origin() {
        // c takes a new path in every current request; b fails (before calling c) in half of
        // them. c's change is everywhere, so it does not explain where b failed.
        let (spans, mut logs) = error_chain();
        for l in logs.iter_mut() {
            let current = l.timestamp >= Timestamp::from_secs(40);
            if l.component == "c" {
                l.level = Some(Level::Info);
                l.message = if current {
                    "stored row via replica"
                } else {
                    "stored row"
                }
                .into();
            } else if l.component == "b" && l.level == Some(Level::Error) {
                l.timestamp = l.timestamp.offset_millis(-16);
            }
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(
            f.iter().all(|x| !x.summary.contains("began in c")),
            "{:#?}",
            f.iter().map(|x| &x.summary).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_resource_alarm_becomes_a_new_pattern_on_the_component_it_hit() {
        // Nothing in the spans or logs changes; db's CPU is far above its baseline in the
        // current window.
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            spans.push(span(i, "a", None, "front", "GET", 0));
            spans.push(span(i, "b", Some("a"), "db", "insert", 1));
            logs.push(line(i, "b", "db", Level::Info, "row stored", 2));
        }
        let metrics: Vec<MetricSample> = (0..80)
            .flat_map(|t| {
                ["front", "db"].into_iter().map(move |c| MetricSample {
                    timestamp: Timestamp(t * 1000),
                    component: c.into(),
                    metric: "cpu_usage".into(),
                    value: if c == "db" && t >= 40 {
                        95.0
                    } else {
                        10.0 + (t % 3) as f64
                    },
                    labels: Default::default(),
                })
            })
            .collect();
        let f =
            analyzer().analyze_with_alarms(&logs, &spans, &metrics, &window(), &simple_template);
        assert!(
            f.iter().any(|x| x.component == "db"
                && x.modality == Modality::Metrics
                && matches!(&x.signal, Signal::Transition { next, grew: true, .. }
                    if next == "alarm on cpu_usage high")),
            "{f:#?}"
        );
        assert!(f.iter().all(|x| x.component == "db"), "{f:#?}");
        assert!(
            analyzer()
                .analyze(&logs, &spans, &window(), &simple_template)
                .is_empty()
        );
    }

    #[test]
    fn of_two_callees_that_changed_the_first_to_change_is_the_origin() {
        // front calls r, then p with what r returned. r fails in half the current requests;
        // p then gets nothing to work on and says so; front reports the failure.
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            let failing = i >= 40 && i % 2 == 0;
            let mut front = span(i, "f", None, "front", "handle", 0);
            front.duration_us = 20_000;
            let mut r = span(i, "r", Some("f"), "r", "lookup", 1);
            r.duration_us = 3_000;
            let mut p = span(i, "p", Some("f"), "p", "price", 6);
            p.duration_us = 3_000;
            spans.extend([front, r, p]);
            let (rl, rm) = if failing {
                (Level::Error, "lookup failed: no route")
            } else {
                (Level::Info, "route found")
            };
            logs.push(line(i, "r", "r", rl, rm, 2));
            let pm = if failing {
                "nothing to price"
            } else {
                "priced"
            };
            logs.push(line(i, "p", "p", Level::Info, pm, 7));
            let fm = if failing {
                "request failed"
            } else {
                "request served"
            };
            logs.push(line(i, "f", "front", Level::Info, fm, 15));
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        let credits: Vec<&str> = f
            .iter()
            .filter(|x| x.summary.starts_with("the change at"))
            .map(|x| x.component.as_str())
            .collect();
        assert!(!credits.is_empty(), "{f:#?}");
        assert!(credits.iter().all(|c| *c == "r"), "{credits:?}");
        assert_eq!(
            crate::analyze::rank::Ranker::multimodal().rank(&f)[0].component,
            "r"
        );
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
    fn two_statements_that_write_the_same_text_are_two_events() {
        // A service logs "computed distance" from two statements; in the current window the
        // second no longer runs after the first in most requests. Only the code location
        // tells the two lines apart.
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for i in 0..80 {
            spans.push(span(i, "a", None, "travel", "GET", 0));
            let at = |line: u32| {
                [
                    ("code.namespace".to_string(), "svc.Distance".to_string()),
                    ("code.lineno".to_string(), line.to_string()),
                ]
            };
            let mut first = line(i, "a", "travel", Level::Info, "computed distance 4", 1);
            first.attributes.extend(at(366));
            logs.push(first);
            if i < 40 || i % 4 == 0 {
                let mut second = line(i, "a", "travel", Level::Info, "computed distance 7", 2);
                second.attributes.extend(at(372));
                logs.push(second);
            }
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(
            f.iter().any(|x| matches!(
                &x.signal,
                Signal::Transition { next, grew: false, .. } if next.contains("svc.Distance:372")
            ) && x.component == "travel"),
            "{f:?}"
        );
        // Without the location the two lines are one template, and which one runs is unseen
        // (the share of the template after the first line still changes: the span's end
        // follows it more often, so only the location names what vanished).
        for l in &mut logs {
            l.attributes.retain(|k, _| !k.starts_with("code."));
        }
        let f = analyzer().analyze(&logs, &spans, &window(), &simple_template);
        assert!(f.iter().all(|x| !x.summary.contains(":372")), "{f:?}");
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
