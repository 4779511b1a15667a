//! Synthetic incidents of the tool-lifecycle benchmark, generated from a seed: a few
//! components with logs, metric samples and spans, and one injected fault (an error burst, a
//! latency regression or a CPU spike) in one component.

use rca_core::seeded::SeededRng;
use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{TimeRange, Timestamp};
use rca_tools::lifecycle::ToolTask;
use rca_tools::tables::{SandboxLimits, TableError, TelemetryTables};

use super::{BenchIncident, Truth};

/// The kind of fault injected into a synthetic incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Errors,
    Latency,
    Cpu,
}

pub(crate) const LOG_TASKS: [&str; 4] = [
    "Which components log errors during the incident?",
    "Count error log lines per component in the incident window",
    "Find components whose logs show failures or exceptions",
    "error logs by component",
];
pub(crate) const TRACE_TASKS: [&str; 4] = [
    "Which operations are slow? latency percentiles per operation",
    "Find spans with high p99 latency in the window",
    "Latency of calls per component and operation",
    "slow traces: which operations have high latency",
];
pub(crate) const METRIC_TASKS: [&str; 4] = [
    "Which component shows a CPU or memory metric anomaly?",
    "Find metric spikes per component in the incident window",
    "anomalous metrics: z-scores of resource usage",
    "Is any component's CPU usage spiking?",
];

/// One synthetic incident: a few components, one injected fault in one of them, and the
/// three explorer sub-tasks worded at random from the pools.
pub(crate) fn incident(
    rng: &mut SeededRng,
    limits: SandboxLimits,
) -> Result<BenchIncident, TableError> {
    let n = 3 + rng.below(5);
    let components: Vec<String> = (0..n).map(|k| format!("component-{k}")).collect();
    let culprit = components[rng.below(n)].clone();
    let fault = [Fault::Errors, Fault::Latency, Fault::Cpu][rng.below(3)];
    let window = TimeRange::new(Timestamp(600_000), Timestamp(1_200_000));
    let faulty = |t: Timestamp, c: &str, f: Fault| f == fault && c == culprit && window.contains(t);

    let mut logs = Vec::new();
    let mut metrics = Vec::new();
    let mut spans = Vec::new();
    for step in 0..120i64 {
        let t = Timestamp(step * 10_000);
        for (k, c) in components.iter().enumerate() {
            let noise = rng.below(100);
            let error = (faulty(t, c, Fault::Errors) && noise < 60) || noise < 2;
            logs.push(LogRecord {
                timestamp: t,
                component: c.into(),
                level: Some(if error { Level::Error } else { Level::Info }),
                message: if error {
                    "operation failed".into()
                } else {
                    "operation done".into()
                },
                attributes: Default::default(),
            });
            let base = 30.0 + 3.0 * k as f64 + (noise % 7) as f64;
            metrics.push(MetricSample {
                timestamp: t,
                component: c.clone(),
                metric: "cpu".into(),
                value: if faulty(t, c, Fault::Cpu) {
                    base + 55.0
                } else {
                    base
                },
                labels: Default::default(),
            });
            let d = 5_000 + (noise as u64) * 50;
            spans.push(Span {
                trace_id: format!("trace-{step}").into(),
                span_id: format!("span-{step}-{k}").into(),
                parent_id: None,
                component: c.into(),
                operation: format!("op-{k}").into(),
                start: t,
                duration_us: if faulty(t, c, Fault::Latency) {
                    d * 40
                } else {
                    d
                },
                error: false,
                attributes: Default::default(),
            });
        }
    }
    let tables = TelemetryTables::new(limits)?;
    tables.register_logs("logs", &logs)?;
    tables.register_metrics("metrics", &metrics)?;
    tables.register_spans("spans", &spans)?;
    let tasks = sub_tasks(rng, window);
    let fault_task = match fault {
        Fault::Errors => 0,
        Fault::Latency => 1,
        Fault::Cpu => 2,
    };
    Ok(BenchIncident {
        tables,
        window,
        tasks,
        truth: Truth::FaultTask {
            task: fault_task,
            component: culprit,
        },
    })
}

/// The three explorer sub-tasks (logs, traces, metrics), each worded at random from its pool.
pub(crate) fn sub_tasks(rng: &mut SeededRng, window: TimeRange) -> Vec<ToolTask> {
    [&LOG_TASKS[..], &TRACE_TASKS[..], &METRIC_TASKS[..]]
        .iter()
        .map(|pool| ToolTask::new(pool[rng.below(pool.len())], Some(window)))
        .collect()
}
