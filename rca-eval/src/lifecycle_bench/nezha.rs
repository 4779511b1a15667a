//! Nezha incidents for the tool-lifecycle benchmark: each case of a day folder becomes an
//! incident whose tables are the case's logs, metric samples and spans (baseline and current
//! window, nothing after detection), with the three explorer sub-tasks worded at random.
//! The ground truth is kept apart and used only to score the tools' answers.

use std::path::Path;

use rca_tools::tables::{SandboxLimits, TelemetryTables};

use super::synthetic::sub_tasks;
use super::{BenchIncident, LifecycleBenchError, Truth};
use crate::nezha::{CaseOptions, DayMetrics, Protocol, discover, load_case, service_of};
use rca_core::seeded::SeededRng;

/// The cases of one day folder (the first day when `day` is `None`), in time order, as
/// benchmark incidents; at most `limit` of them when given.
pub(crate) fn incidents(
    root: &Path,
    day: Option<&str>,
    limit: Option<usize>,
    rng: &mut SeededRng,
    limits: SandboxLimits,
) -> Result<(String, Vec<BenchIncident>), LifecycleBenchError> {
    let days = discover(root)?;
    let chosen = match day {
        Some(name) => days.into_iter().find(|d| d.name == name),
        None => days.into_iter().next(),
    };
    let Some(day) = chosen else {
        return Err(LifecycleBenchError::NoData(format!(
            "{}: no day folder{} under rca_data/",
            root.display(),
            day.map(|d| format!(" named {d}")).unwrap_or_default()
        )));
    };
    let metrics = DayMetrics::load(&day)?;
    // Tasks are asked about the whole period after the fault (the fault time is known).
    let options = CaseOptions {
        protocol: Protocol::FaultTime,
        ..CaseOptions::default()
    };
    let mut out = Vec::new();
    for case in day.cases.iter().take(limit.unwrap_or(usize::MAX)) {
        let data = load_case(&day, &metrics, case, &options)?;
        let Some(onset) = data.incident.onset else {
            continue;
        };
        let window = rca_core::TimeRange::new(onset, data.detected_at);
        let tables = TelemetryTables::new(limits)?;
        tables.register_logs("logs", &data.logs)?;
        tables.register_metrics("metrics", &data.metrics)?;
        tables.register_spans("spans", &data.spans)?;
        out.push(BenchIncident {
            tables,
            window,
            tasks: sub_tasks(rng, window),
            truth: Truth::AnyTask {
                service: service_of(&case.truth_pod).to_string(),
            },
        });
    }
    Ok((day.name.clone(), out))
}
