//! Network delay, injected into real normal telemetry: the minute before each fault of a day
//! (its logs and spans), split in two halves; from the middle on, every call to or from one
//! target pod is delayed as a delay on the pod's network would delay it (the client waits
//! `delay` longer, and so does every span up its chain; a call the pod makes reaches its
//! callee `delay` later). The diagnosis pipeline, told the injection time, ranks the pods; the
//! table gives how often the target's service comes first, per magnitude. A 0 ms row is the
//! control: the same windows and targets with nothing injected.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rand::seq::IndexedRandom as _;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rca_agents::orchestra::PipelineConfig;
use rca_core::source::Span;
use rca_core::{Name, TimeRange, Timestamp};
use serde::Serialize;

use super::NezhaError;
use super::eval::{runtime, service_of, service_rank};
use super::loader::{CaseData, CaseOptions, DayMetrics, Protocol, discover, load_case};

/// Delays every call to or from `target` whose callee span starts at or after `from` by
/// `delay_us`: the client span and all its ancestors last `delay_us` longer; when `target` is
/// the caller, the callee's subtree also starts `delay_us` later. Spans are matched by trace
/// and span id.
pub fn inject_delay(spans: &mut [Span], target: &str, from: Timestamp, delay_us: u64) {
    let index: HashMap<(Name, Name), usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.trace_id.clone(), s.span_id.clone()), i))
        .collect();
    let parent = |spans: &[Span], i: usize| -> Option<usize> {
        let s = &spans[i];
        let p = s.parent_id.as_ref()?;
        index.get(&(s.trace_id.clone(), p.clone())).copied()
    };
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..spans.len() {
        if let Some(p) = parent(spans, i) {
            children.entry(p).or_default().push(i);
        }
    }
    // The delayed calls, decided on the undelayed spans.
    let calls: Vec<(usize, usize)> = (0..spans.len())
        .filter_map(|i| {
            let p = parent(spans, i)?;
            let (s, c) = (&spans[i], &spans[p]);
            (s.start >= from
                && s.component != c.component
                && (s.component == target || c.component == target))
                .then_some((p, i))
        })
        .collect();
    let shift = (delay_us / 1000) as i64;
    for (client, callee) in calls {
        // The client and every ancestor wait longer.
        let mut at = Some(client);
        let mut guard = 0;
        while let Some(i) = at {
            spans[i].duration_us = spans[i].duration_us.saturating_add(delay_us);
            at = parent(spans, i);
            guard += 1;
            if guard > spans.len() {
                break;
            }
        }
        // A request the target sends arrives later.
        if spans[client].component == target {
            let mut stack = vec![callee];
            let mut seen = 0;
            while let Some(i) = stack.pop() {
                spans[i].start = spans[i].start.offset_millis(shift);
                stack.extend(children.get(&i).into_iter().flatten().copied());
                seen += 1;
                if seen > spans.len() {
                    break;
                }
            }
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct DelayRow {
    /// The injected delay in milliseconds (0: the control).
    pub delay_ms: u64,
    /// How many normal windows were scored.
    pub windows: usize,
    /// Share of windows whose target's service ranks first.
    pub as1: f64,
    /// ... among the first three.
    pub as3: f64,
    /// Share of windows where a call-gap finding names the target.
    pub gap_found: f64,
}

/// The normal window before one fault: its logs and spans of the minute before the fault,
/// split at the middle of their time span. Returns the data cut to that minute and the split.
fn normal_minute(mut data: CaseData, fault: Timestamp) -> Option<(CaseData, Timestamp)> {
    let minute = TimeRange::new(fault.offset_millis(-60_000), fault);
    data.logs.retain(|r| minute.contains(r.timestamp));
    data.spans.retain(|s| minute.contains(s.start));
    data.metrics.clear();
    let (lo, hi) = (data.spans.first()?.start, data.spans.last()?.start);
    if hi.millis() - lo.millis() < 10_000 {
        return None;
    }
    let middle = Timestamp((lo.millis() + hi.millis()) / 2);
    data.detected_at = fault;
    data.incident.detected_at = fault;
    data.incident.window = TimeRange::new(lo, fault);
    data.incident.onset = Some(middle);
    Some((data, middle))
}

/// Components with at least `min_calls` cross-component calls (either end) after `from`.
fn busy_components(spans: &[Span], from: Timestamp, min_calls: usize) -> Vec<String> {
    let by_id: HashMap<(&str, &str), &Span> = spans
        .iter()
        .map(|s| ((s.trace_id.as_str(), s.span_id.as_str()), s))
        .collect();
    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.start >= from) {
        let Some(p) = s
            .parent_id
            .as_deref()
            .and_then(|p| by_id.get(&(s.trace_id.as_str(), p)))
        else {
            continue;
        };
        if p.component != s.component {
            *calls.entry(s.component.as_str()).or_default() += 1;
            *calls.entry(p.component.as_str()).or_default() += 1;
        }
    }
    calls
        .into_iter()
        .filter(|(_, n)| *n >= min_calls)
        .map(|(c, _)| c.to_string())
        .collect()
}

/// Runs the benchmark over the days under `root`: for every fault's preceding minute, one
/// target drawn with `seed` among the pods with at least 10 calls in the second half, each
/// magnitude of `delays_ms` (and the 0 ms control) injected, the pipeline run with `config`.
pub fn delay_benchmark(
    root: &Path,
    days: &[String],
    delays_ms: &[u64],
    seed: u64,
    config: &PipelineConfig,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<DelayRow>, NezhaError> {
    let runtime = runtime()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut magnitudes = vec![0];
    magnitudes.extend(delays_ms.iter().copied().filter(|d| *d > 0));
    let mut hits: Vec<(usize, usize, usize, usize)> = vec![(0, 0, 0, 0); magnitudes.len()];
    let options = CaseOptions {
        protocol: Protocol::FaultTime,
        ..CaseOptions::default()
    };
    let all: Vec<_> = discover(root)?
        .into_iter()
        .filter(|d| days.is_empty() || days.contains(&d.name))
        .collect();
    let total: usize = all.iter().map(|d| d.cases.len()).sum();
    let mut done = 0;
    for day in &all {
        let metrics = DayMetrics::load(day)?;
        for case in &day.cases {
            done += 1;
            let data = load_case(day, &metrics, case, &options)?;
            let Some((normal, middle)) = normal_minute(data, case.inject_time) else {
                continue;
            };
            let busy = busy_components(&normal.spans, middle, 10);
            let Some(target) = busy.choose(&mut rng).cloned() else {
                continue;
            };
            // Draw once per window so the sequence does not depend on the magnitudes.
            let _: u32 = rng.random();
            for (m, delay) in magnitudes.iter().enumerate() {
                let mut injected = normal.clone();
                inject_delay(&mut injected.spans, &target, middle, delay * 1000);
                injected.spans.sort_by_key(|s| s.start);
                let d = runtime.block_on(super::diagnose_case(&injected, config, None))?;
                let rank = service_rank(&d.ranked, &target);
                let gap = d.record.evidence.iter().any(|e| {
                    e.component == target
                        && e.kind.as_deref().is_some_and(|k| k.starts_with("call_gap"))
                });
                let h = &mut hits[m];
                h.0 += 1;
                h.1 += usize::from(rank == Some(1));
                h.2 += usize::from(rank.is_some_and(|r| r <= 3));
                h.3 += usize::from(gap);
            }
            progress(
                done,
                total,
                &format!("{} ({})", case.id, service_of(&target)),
            );
        }
    }
    Ok(magnitudes
        .iter()
        .zip(hits)
        .map(|(delay, (n, a1, a3, gap))| {
            let share = |k: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
            DelayRow {
                delay_ms: *delay,
                windows: n,
                as1: share(a1),
                as3: share(a3),
                gap_found: share(gap),
            }
        })
        .collect())
}

/// The rows as a Markdown table.
pub fn delay_table(rows: &[DelayRow]) -> String {
    let mut out = String::from(
        "Measures: delays injected into real minutes at a target drawn at random (a figure \
         that can come out badly). The pipeline is told the injection time (the onset is \
         given, not estimated); the target is not given. Baseline: the 0 ms row, the control \
         (the same windows and targets with nothing injected).\n\n\
         | injected delay | windows | target's service first | in the first three | a call-gap finding names the target |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} |\n",
            if r.delay_ms == 0 {
                "0 ms (control)".to_string()
            } else {
                format!("{} ms", r.delay_ms)
            },
            r.windows,
            r.as1,
            r.as3,
            r.gap_found
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, id: &str, parent: Option<&str>, c: &str, start: i64, us: u64) -> Span {
        Span {
            trace_id: trace.into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_string).map(Into::into),
            component: c.into(),
            operation: "op".into(),
            start: Timestamp(start),
            duration_us: us,
            error: false,
            attributes: Default::default(),
        }
    }

    #[test]
    fn a_delayed_pod_slows_its_callers_and_its_callees_start_later() {
        // web -> mid -> db, once before the injection and once after.
        let mut spans = vec![
            span("a", "1", None, "web", 0, 10_000),
            span("a", "2", Some("1"), "mid", 1, 8_000),
            span("a", "3", Some("2"), "db", 2, 5_000),
            span("b", "1", None, "web", 100, 10_000),
            span("b", "2", Some("1"), "mid", 101, 8_000),
            span("b", "3", Some("2"), "db", 102, 5_000),
        ];
        inject_delay(&mut spans, "mid", Timestamp(50), 2_000);
        // Before the injection nothing changes.
        assert_eq!(spans[0].duration_us, 10_000);
        assert_eq!(spans[1].duration_us, 8_000);
        // After: web waits for both delayed hops, mid for its call to db, db starts later.
        assert_eq!(spans[3].duration_us, 14_000);
        assert_eq!(spans[4].duration_us, 10_000);
        assert_eq!(spans[5].duration_us, 5_000);
        assert_eq!(spans[5].start, Timestamp(104));
    }
}
