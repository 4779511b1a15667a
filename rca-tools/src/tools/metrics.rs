//! `get_metrics`: per series of an entity, the baseline and recent levels, min and max, and
//! the metric analyzer's anomaly flags (which become evidence).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use rca_core::source::{MetricQuery, MetricSource};
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};
use rca_core::{Timestamp, ToolError};

use super::args::{
    EntityArgs, before, bounded, effective_range, invalid, recent_split, unknown_entity,
};
use super::logs::resolve_entity;
use crate::analyze::metrics::MetricAnalyzer;
use crate::analyze::stats::median;
use crate::analyze::{Finding, Signal, fmt_num};
use crate::sources::collect_samples;

/// `get_metrics` over any [`MetricSource`].
pub struct GetMetrics {
    source: Arc<dyn MetricSource>,
    /// Characters of text returned at most.
    pub max_chars: usize,
    /// Flags series whose recent quarter moved away from the rest.
    pub analyzer: MetricAnalyzer,
}

impl std::fmt::Debug for GetMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetMetrics")
            .field("max_chars", &self.max_chars)
            .finish()
    }
}

impl GetMetrics {
    /// The tool over `source`, returning at most 6,000 characters.
    pub fn new(source: Arc<dyn MetricSource>) -> Self {
        GetMetrics {
            source,
            max_chars: 6000,
            analyzer: MetricAnalyzer::default(),
        }
    }
}

/// One series, summarised.
struct SeriesSummary {
    metric: String,
    samples: usize,
    baseline: Option<f64>,
    recent: Option<f64>,
    min: f64,
    max: f64,
    last: f64,
    finding: Option<Finding>,
}

#[async_trait]
impl TypedTool for GetMetrics {
    type Args = EntityArgs;

    fn name(&self) -> &str {
        "get_metrics"
    }

    fn description(&self) -> &str {
        "Summarises every metric of one entity (component, service, job or host) before the \
         detection time: its level in the earlier part of the range (baseline) and in the most \
         recent quarter, min, max and last value, and flags the series that moved."
    }

    async fn run(&self, args: EntityArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let range = effective_range(args.start.as_deref(), args.end.as_deref(), ctx.cutoff)
            .map_err(|m| invalid::<EntityArgs>(self.name(), m))?;
        let series = self
            .source
            .series()
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let known: Vec<String> = series.iter().map(|(c, _)| c.clone()).collect();
        let Some(component) = resolve_entity(&args.entity, &known) else {
            return Err(unknown_entity(&args.entity, "metrics", &known));
        };
        let query = MetricQuery {
            component: Some(component.clone()),
            ..MetricQuery::range(range)
        };
        let mut samples = collect_samples(self.source.as_ref(), &query)
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        samples.retain(|s| {
            before(ctx.cutoff, s.timestamp)
                && range.contains(s.timestamp)
                && s.component == component
        });
        let Some(first) = samples.iter().map(|s| s.timestamp).min() else {
            return Ok(ToolOutput::text(format!(
                "no metric samples of `{component}` in {range}"
            )));
        };
        let last_ts = samples.iter().map(|s| s.timestamp).max().unwrap_or(first);
        let end = if range.end.millis() == i64::MAX {
            last_ts.offset_millis(1)
        } else {
            range.end
        };
        let window = recent_split(first, end);
        let findings = self.analyzer.analyze(&samples, &window);
        let mut by_metric: BTreeMap<&str, Vec<(Timestamp, f64)>> = BTreeMap::new();
        for s in &samples {
            if s.value.is_finite() {
                by_metric
                    .entry(&s.metric)
                    .or_default()
                    .push((s.timestamp, s.value));
            }
        }
        let mut summaries: Vec<SeriesSummary> = by_metric
            .into_iter()
            .map(|(metric, mut points)| {
                points.sort_by_key(|p| p.0);
                let base: Vec<f64> = points.iter().filter(|p| window.baseline.contains(p.0)).map(|p| p.1).collect();
                let cur: Vec<f64> = points.iter().filter(|p| window.current.contains(p.0)).map(|p| p.1).collect();
                let values = points.iter().map(|p| p.1);
                SeriesSummary {
                    metric: metric.to_string(),
                    samples: points.len(),
                    baseline: (!base.is_empty()).then(|| median(&base)),
                    recent: (!cur.is_empty()).then(|| median(&cur)),
                    min: values.clone().fold(f64::INFINITY, f64::min),
                    max: values.fold(f64::NEG_INFINITY, f64::max),
                    last: points.last().map_or(0.0, |p| p.1),
                    finding: findings
                        .iter()
                        .find(|f| matches!(&f.signal, Signal::MetricShift { kpi, .. } if kpi == metric))
                        .cloned(),
                }
            })
            .collect();
        // Flagged series first, strongest first; then by name.
        summaries.sort_by(|a, b| {
            let sa = a.finding.as_ref().map_or(-1.0, |f| f.score);
            let sb = b.finding.as_ref().map_or(-1.0, |f| f.score);
            sb.total_cmp(&sa).then_with(|| a.metric.cmp(&b.metric))
        });
        let opt = |x: Option<f64>| x.map_or("-".to_string(), fmt_num);
        let mut text = format!(
            "{} metric(s) of `{component}` from {first} to {last_ts}; baseline = median before {}, recent = median from then on; {} flagged.\n",
            summaries.len(),
            window.current.start,
            findings.len()
        );
        let mut rows = Vec::new();
        for s in &summaries {
            text.push_str(&format!(
                "{}{}: baseline {}, recent {}, min {}, max {}, last {} ({} samples)\n",
                if s.finding.is_some() { "ANOMALY " } else { "" },
                s.metric,
                opt(s.baseline),
                opt(s.recent),
                fmt_num(s.min),
                fmt_num(s.max),
                fmt_num(s.last),
                s.samples
            ));
            rows.push(serde_json::json!({
                "metric": s.metric,
                "samples": s.samples,
                "baseline": s.baseline,
                "recent": s.recent,
                "min": s.min,
                "max": s.max,
                "last": s.last,
                "anomaly": s.finding.as_ref().map(|f| f.summary.clone()),
            }));
        }
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: Some(serde_json::json!({"entity": component, "series": rows})),
            evidence: findings.iter().map(Finding::to_evidence).collect(),
        })
    }
}
