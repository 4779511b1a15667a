//! Diagnosis at volume: the same incident at higher traffic, and a large synthetic one.
//!
//! [`replicate`] copies every trace of an incident, and every log line written in it, with
//! fresh trace and span ids and the same times (metrics unchanged): the same incident at `k`
//! times the request rate. [`synthetic`] generates an incident of a given number of spans on
//! a generated service graph, one of whose services slows down and fails in the last minutes.
//! [`measure`] runs the diagnosis pipeline (the one `rca diagnose` runs, deterministic roles)
//! over one of them and reports its wall time, the records per second and the top three
//! candidates; the peak memory of the process comes from the operating system
//! ([`peak_rss_bytes`]), so each size runs in a process of its own (`rca bench scale`).
//!
//! What it shows: whether the cost grows linearly with the records, and whether the answer
//! stays the same when only the traffic grows (the top three of one copy are the baseline
//! every other size is compared with).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rca_agents::orchestra::{DiagnosisPipeline, IncidentTelemetry, PipelineConfig, RoleModels};
use rca_core::seeded::SeededRng;
use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{Incident, NameInterner, TimeRange, Timestamp};
use rca_tools::analyze::events::{SPAN_ID, TRACE_ID};
use rca_tools::sources::{FileLogSource, FileMetricSource, FileTraceSource};
use serde::{Deserialize, Serialize};

/// An incident's telemetry held in memory.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// The incident.
    pub incident: Incident,
    /// Log lines.
    pub logs: Vec<LogRecord>,
    /// Spans.
    pub spans: Vec<Span>,
    /// Metric samples.
    pub metrics: Vec<MetricSample>,
}

/// `copies` copies of every trace and its log lines, each with fresh trace and span ids
/// (a `-r<copy>` suffix) and the same times; metrics unchanged. The copies' names are
/// shared as a source that read them would share them ([`NameInterner`]): each trace id is
/// held once per copy, each parent id is its parent's own, and components, operations and
/// attribute keys are the original's.
pub fn replicate(t: &Telemetry, copies: usize) -> Telemetry {
    let copies = copies.max(1);
    let mut logs = Vec::with_capacity(t.logs.len() * copies);
    let mut spans = Vec::with_capacity(t.spans.len() * copies);
    for k in 0..copies {
        let tag = format!("-r{k}");
        let mut names = NameInterner::new();
        let mut renamed = |id: &str| names.intern(&format!("{id}{tag}"));
        for r in &t.logs {
            let mut r = r.clone();
            for key in [TRACE_ID, SPAN_ID] {
                if let Some(v) = r.attributes.get_mut(key) {
                    *v = format!("{v}{tag}");
                }
            }
            logs.push(r);
        }
        for s in &t.spans {
            let mut s = s.clone();
            s.trace_id = renamed(&s.trace_id);
            s.span_id = renamed(&s.span_id);
            s.parent_id = s.parent_id.as_deref().map(&mut renamed);
            spans.push(s);
        }
    }
    logs.sort_by_key(|r| r.timestamp);
    spans.sort_by_key(|s| s.start);
    Telemetry {
        incident: t.incident.clone(),
        logs,
        spans,
        metrics: t.metrics.clone(),
    }
}

/// The faulty service of [`synthetic`] incidents.
pub const SYNTHETIC_FAULT: &str = "svc-07";

/// A generated incident of about `spans` spans: 30 minutes of traffic through a tree of 24
/// services (every request enters at the root and walks three to five levels down), one log
/// line per span joined by trace and span id, CPU and memory samples per service a minute;
/// in the last five minutes [`SYNTHETIC_FAULT`] answers 20 times slower and logs an error
/// instead of its usual line in half of its spans. The alert fires at the end; the onset is
/// for the pipeline to find. Deterministic for a seed.
pub fn synthetic(spans: usize, seed: u64) -> Telemetry {
    const SERVICES: usize = 24;
    let start = Timestamp::from_secs(1_700_000_000);
    let minutes = 30i64;
    let fault_at = start.offset_millis((minutes - 5) * 60_000);
    let end = start.offset_millis(minutes * 60_000);
    let name = |i: usize| format!("svc-{i:02}");
    let mut rng = SeededRng::new(seed);
    let mut out_spans = Vec::with_capacity(spans + 8);
    // Names shared as a source that read them would share them.
    let mut names = NameInterner::new();
    let mut logs = Vec::with_capacity(spans + 8);
    let mut trace = 0u64;
    let span_total = (end.millis() - start.millis()) as f64;
    while out_spans.len() < spans {
        trace += 1;
        let t0 =
            start.offset_millis((out_spans.len() as f64 / spans.max(1) as f64 * span_total) as i64);
        // A path down the tree: each service i calls 2i+1 or 2i+2.
        let depth = 3 + rng.below(3);
        let mut at = 0usize;
        let mut parent: Option<String> = None;
        let mut offset = 0i64;
        for level in 0..depth {
            if at >= SERVICES {
                break;
            }
            let service = name(at);
            let faulty = service == SYNTHETIC_FAULT && t0 >= fault_at;
            let span_id = format!("{trace:x}-{level}");
            let duration = if faulty { 400_000 } else { 20_000 } + rng.below(5_000) as u64;
            let failing = faulty && rng.chance(0.5);
            out_spans.push(Span {
                trace_id: names.intern(&format!("{trace:016x}")),
                span_id: names.intern(&span_id),
                parent_id: parent.as_deref().map(|p| names.intern(p)),
                component: names.intern(&service),
                operation: names.intern(&format!("handle-{}", at % 3)),
                start: t0.offset_millis(offset),
                duration_us: duration,
                error: failing,
                attributes: Default::default(),
            });
            logs.push(LogRecord {
                timestamp: t0.offset_millis(offset + 1),
                component: names.intern(&service),
                level: Some(if failing { Level::Error } else { Level::Info }),
                message: if failing {
                    format!("request {trace} failed: store unavailable")
                } else {
                    format!("request {trace} served in {} ms", duration / 1000)
                },
                attributes: [
                    (names.intern(TRACE_ID), format!("{trace:016x}")),
                    (names.intern(SPAN_ID), span_id.clone()),
                ]
                .into(),
            });
            parent = Some(span_id);
            offset += 2;
            at = 2 * at + 1 + rng.below(2);
        }
    }
    let mut metrics = Vec::new();
    for m in 0..minutes {
        for i in 0..SERVICES {
            for (kpi, level) in [("cpu_usage", 20.0), ("memory_usage", 300.0)] {
                metrics.push(MetricSample {
                    timestamp: start.offset_millis(m * 60_000),
                    component: name(i),
                    metric: kpi.into(),
                    value: level * (1.0 + 0.05 * (rng.below(100) as f64 / 100.0)),
                    labels: BTreeMap::new(),
                });
            }
        }
    }
    Telemetry {
        incident: Incident {
            id: format!("synthetic-{spans}"),
            title: "generated: an alert fired".into(),
            description: String::new(),
            detected_at: end,
            window: TimeRange::new(start, end),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
        },
        logs,
        spans: out_spans,
        metrics,
    }
}

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleRun {
    /// What was diagnosed (`bundled x10`, `synthetic`).
    pub incident: String,
    /// Log lines.
    pub logs: usize,
    /// Spans.
    pub spans: usize,
    /// Metric samples.
    pub metrics: usize,
    /// Wall time of the diagnosis (reading the records into the sources included, the
    /// generation or replication of the records not).
    pub seconds: f64,
    /// The process's peak resident memory when the run ended, in bytes (`None` where the
    /// operating system does not say).
    pub peak_rss_bytes: Option<u64>,
    /// The process's resident memory when the diagnosis began, in bytes: the records held in
    /// memory as the host's store (what a host keeps anyway), so `peak_rss_bytes` less this
    /// is about what diagnosing them took.
    #[serde(default)]
    pub input_rss_bytes: Option<u64>,
    /// The top three candidates and their scores.
    pub top: Vec<(String, f64)>,
}

impl ScaleRun {
    /// Records per second of diagnosis.
    pub fn records_per_second(&self) -> f64 {
        (self.logs + self.spans + self.metrics) as f64 / self.seconds.max(1e-9)
    }
}

/// What went wrong measuring a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScaleError {
    /// The pipeline could not be built or run (the message says why).
    #[error("diagnosis failed: {0}")]
    Diagnosis(String),
    /// No runtime could be started for the pipeline.
    #[error("cannot start a runtime: {0}")]
    Runtime(String),
}

/// Diagnoses `t` with the pipeline's defaults and measures the run.
pub fn measure(label: &str, t: Telemetry) -> Result<ScaleRun, ScaleError> {
    let (logs, spans, metrics) = (t.logs.len(), t.spans.len(), t.metrics.len());
    let input_rss_bytes = rss_bytes();
    let started = Instant::now();
    let cutoff = Some(t.incident.detected_at);
    let telemetry = IncidentTelemetry {
        logs: Arc::new(FileLogSource::from_records(t.logs, cutoff)),
        metrics: Arc::new(FileMetricSource::from_samples(t.metrics, cutoff)),
        traces: Arc::new(FileTraceSource::from_spans(t.spans, cutoff)),
        baseline: None,
    };
    let pipeline = DiagnosisPipeline::over(
        telemetry,
        &t.incident,
        RoleModels::default(),
        PipelineConfig::default(),
    )
    .map_err(|e| ScaleError::Diagnosis(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| ScaleError::Runtime(e.to_string()))?;
    let record = runtime
        .block_on(pipeline.run(&t.incident))
        .map_err(|e| ScaleError::Diagnosis(e.to_string()))?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(ScaleRun {
        incident: label.to_string(),
        logs,
        spans,
        metrics,
        seconds,
        peak_rss_bytes: peak_rss_bytes(),
        input_rss_bytes,
        top: record
            .report
            .candidates
            .iter()
            .take(3)
            .map(|c| (c.component.clone(), c.score))
            .collect(),
    })
}

/// The peak resident memory of this process (`VmHWM` of `/proc/self/status`), where the
/// operating system has it.
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The resident memory of this process now (`VmRSS` of `/proc/self/status`), where the
/// operating system has it.
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A size in kB from a line of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The runs as a Markdown table, each size's top three compared with the first run's.
pub fn scale_table(runs: &[ScaleRun], build: &str) -> String {
    let mut out = format!(
        "Measures ({build} build, this machine). The first run's top three are the baseline \
         every replicated size is compared with: the same incident at more traffic should name \
         the same candidates. A change needs enough records to be significant (a finding's \
         score is its effect size, scaled down while the test is unsure of it), so a size \
         may add candidates the one before could not establish; the last column compares \
         each size with the one before it. Input MB is the resident memory when the \
         diagnosis began (the records held in memory, as a host's store would hold them) and \
         bytes / record that divided by the records; peak RSS MB is the whole process's \
         peak.\n\n\
         | incident | log lines | spans | seconds | input MB | bytes / record | peak RSS MB | records/s | top three (score) | same top three as one copy | as the size before |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n"
    );
    let names = |r: &ScaleRun| -> Vec<String> { r.top.iter().map(|(c, _)| c.clone()).collect() };
    let baseline: Vec<String> = runs.first().map(names).unwrap_or_default();
    let mut before: Option<Vec<String>> = None;
    for r in runs {
        let top = names(r);
        let bundled = r.incident.starts_with("bundled");
        let yes_no = |same: bool| if same { "yes" } else { "no" };
        let same = if bundled {
            yes_no(top == baseline)
        } else {
            "-"
        };
        let previous = match (&before, bundled) {
            (Some(b), true) => yes_no(&top == b),
            _ => "-",
        };
        if bundled {
            before = Some(top);
        }
        let records = r.logs + r.spans + r.metrics;
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {} | {} | {:.0} | {} | {same} | {previous} |\n",
            r.incident,
            r.logs,
            r.spans,
            r.seconds,
            r.input_rss_bytes
                .map_or("-".to_string(), |b| format!("{:.0}", b as f64 / 1e6)),
            r.input_rss_bytes
                .filter(|_| records > 0)
                .map_or("-".to_string(), |b| format!(
                    "{:.0}",
                    b as f64 / records as f64
                )),
            r.peak_rss_bytes
                .map_or("-".to_string(), |b| format!("{:.0}", b as f64 / 1e6)),
            r.records_per_second(),
            r.top
                .iter()
                .map(|(c, s)| format!("{c} ({s:.2})"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_renames_and_keeps_times() {
        let t = synthetic(2_000, 1);
        let r = replicate(&t, 3);
        assert_eq!(r.spans.len(), 3 * t.spans.len());
        assert_eq!(r.logs.len(), 3 * t.logs.len());
        assert_eq!(r.metrics.len(), t.metrics.len());
        let ids: std::collections::HashSet<(&str, &str)> = r
            .spans
            .iter()
            .map(|s| (s.trace_id.as_str(), s.span_id.as_str()))
            .collect();
        assert_eq!(ids.len(), r.spans.len());
        // Every copy keeps its links: a parent is in the same trace.
        let parents = r.spans.iter().filter(|s| {
            s.parent_id
                .as_ref()
                .is_some_and(|p| ids.contains(&(s.trace_id.as_str(), p.as_str())))
        });
        assert_eq!(
            parents.count(),
            r.spans.iter().filter(|s| s.parent_id.is_some()).count()
        );
        let times = |v: &[Span]| v.iter().map(|s| s.start).min();
        assert_eq!(times(&r.spans), times(&t.spans));
        // The copies' names are shared as a loading source shares them: one component name
        // for every copy, one trace id per copied trace.
        let first = &r.spans[0];
        assert!(
            r.spans
                .iter()
                .filter(|s| s.component == first.component)
                .all(|s| s.component.shares_with(&first.component))
        );
        assert!(
            r.spans
                .iter()
                .filter(|s| s.trace_id == first.trace_id)
                .all(|s| s.trace_id.shares_with(&first.trace_id))
        );
    }

    #[test]
    fn the_synthetic_fault_is_found_and_replication_keeps_the_top_candidate() {
        let t = synthetic(6_000, 7);
        assert!(t.spans.len() >= 6_000 && t.spans.len() < 6_010);
        assert_eq!(synthetic(6_000, 7).spans, t.spans);
        let one = measure("synthetic", t.clone()).unwrap();
        assert_eq!(one.top[0].0, SYNTHETIC_FAULT, "{one:?}");
        let four = measure("synthetic x4", replicate(&t, 4)).unwrap();
        assert_eq!(four.top[0].0, SYNTHETIC_FAULT);
        assert!(
            (four.top[0].1 - one.top[0].1).abs() <= 0.1 * one.top[0].1,
            "{one:?} {four:?}"
        );
        let md = scale_table(&[one, four], "debug");
        assert!(md.contains("| synthetic |") && md.contains("debug build"));
    }
}
