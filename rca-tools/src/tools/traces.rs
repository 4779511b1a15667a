//! `get_traces`: an entity's operations with latency and error summaries, its slowest spans,
//! and the trace analyzer's anomalies (as evidence).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use rca_core::ToolError;
use rca_core::source::{Span, TraceQuery, TraceSource};
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};

use super::args::{
    EntityArgs, before, bounded, effective_range, invalid, recent_split, same_entity,
    unknown_entity,
};
use crate::analyze::stats::quantile;
use crate::analyze::traces::TraceAnalyzer;
use crate::analyze::{Finding, fmt_num};
use crate::sources::collect_spans;

/// `get_traces` over any [`TraceSource`].
pub struct GetTraces {
    source: Arc<dyn TraceSource>,
    /// Characters of text returned at most.
    pub max_chars: usize,
    /// How many of the slowest spans to list.
    pub slowest: usize,
    /// Finds latency, error-rate and call shifts in the recent quarter of the range.
    pub analyzer: TraceAnalyzer,
}

impl std::fmt::Debug for GetTraces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetTraces")
            .field("max_chars", &self.max_chars)
            .field("slowest", &self.slowest)
            .finish()
    }
}

impl GetTraces {
    /// The tool over `source`: at most 6,000 characters, the 5 slowest spans.
    pub fn new(source: Arc<dyn TraceSource>) -> Self {
        GetTraces {
            source,
            max_chars: 6000,
            slowest: 5,
            analyzer: TraceAnalyzer::default(),
        }
    }
}

fn ms(us: f64) -> String {
    format!("{} ms", fmt_num(us / 1000.0))
}

#[async_trait]
impl TypedTool for GetTraces {
    type Args = EntityArgs;

    fn name(&self) -> &str {
        "get_traces"
    }

    fn description(&self) -> &str {
        "Summarises the trace spans of one entity (component or service) before the detection \
         time: per operation the call count, errors and p50/p95/max latency, the slowest \
         spans with their trace ids, and latency or error shifts in the most recent quarter."
    }

    async fn run(&self, args: EntityArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let range = effective_range(args.start.as_deref(), args.end.as_deref(), ctx.cutoff)
            .map_err(|m| invalid::<EntityArgs>(self.name(), m))?;
        // Every span of the range: the analyzer needs callers and callees for self times.
        let mut all = collect_spans(self.source.as_ref(), &TraceQuery::range(range))
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        all.retain(|s| before(ctx.cutoff, s.start) && range.contains(s.start));
        all.sort_by_key(|s| s.start);
        let component = all
            .iter()
            .find(|s| s.component == args.entity.trim())
            .or_else(|| all.iter().find(|s| same_entity(&s.component, &args.entity)))
            .map(|s| s.component.clone());
        let Some(component) = component else {
            if all.is_empty() {
                return Ok(ToolOutput::text(format!("no spans in {range}")));
            }
            let known: Vec<String> = all.iter().map(|s| s.component.to_string()).collect();
            return Err(unknown_entity(&args.entity, "spans", &known));
        };
        let own: Vec<&Span> = all.iter().filter(|s| s.component == component).collect();
        let (Some(first), Some(last)) = (all.first(), all.last()) else {
            return Ok(ToolOutput::text(format!("no spans in {range}")));
        };
        let end = if range.end.millis() == i64::MAX {
            last.start.offset_millis(1)
        } else {
            range.end
        };
        let window = recent_split(first.start, end);
        let findings: Vec<Finding> = self
            .analyzer
            .analyze(&all, &window)
            .into_iter()
            .filter(|f| f.component == component)
            .collect();

        let mut ops: BTreeMap<&str, (Vec<f64>, usize)> = BTreeMap::new();
        for s in &own {
            let e = ops.entry(&s.operation).or_default();
            e.0.push(s.duration_us as f64);
            e.1 += usize::from(s.error);
        }
        let mut text = format!(
            "{} span(s) of `{component}` in {} operation(s) from {} to {}.\nPer operation (calls, errors, p50, p95, max):\n",
            own.len(),
            ops.len(),
            own.first().map_or(first.start, |s| s.start),
            own.last().map_or(last.start, |s| s.start),
        );
        let mut rows = Vec::new();
        for (op, (durations, errors)) in &ops {
            let (p50, p95) = (quantile(durations, 0.5), quantile(durations, 0.95));
            let max = durations.iter().copied().fold(0.0, f64::max);
            text.push_str(&format!(
                "- {op}: {} calls, {errors} errors, p50 {}, p95 {}, max {}\n",
                durations.len(),
                ms(p50),
                ms(p95),
                ms(max)
            ));
            rows.push(serde_json::json!({
                "operation": op, "calls": durations.len(), "errors": errors,
                "p50_us": p50, "p95_us": p95, "max_us": max,
            }));
        }
        let mut slow: Vec<&&Span> = own.iter().collect();
        slow.sort_by(|a, b| {
            b.duration_us
                .cmp(&a.duration_us)
                .then(a.start.cmp(&b.start))
        });
        text.push_str("Slowest spans:\n");
        for s in slow.iter().take(self.slowest) {
            text.push_str(&format!(
                "- trace {} {} at {}: {}{}\n",
                s.trace_id,
                s.operation,
                s.start,
                ms(s.duration_us as f64),
                if s.error { " (error)" } else { "" }
            ));
        }
        if !findings.is_empty() {
            text.push_str("Anomalies in the most recent quarter of the range:\n");
            for f in &findings {
                text.push_str(&format!("- {}\n", f.summary));
            }
        }
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: Some(serde_json::json!({"entity": component, "operations": rows})),
            evidence: findings.iter().map(Finding::to_evidence).collect(),
        })
    }
}
