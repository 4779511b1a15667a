//! Live sources: a host's (or a configuration's) sources queried as they are, Prometheus or a
//! buffer of OTLP exports, served as the incident [`LIVE_INCIDENT`]. Each call sees the last
//! `lookback` up to now, now being its detection time (nothing after it is read).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rca_agents::orchestra::Explorer;
use rca_agents::orchestra::explorers::{Telemetry, TelemetryExplorer, WindowPolicy};
use rca_core::source::{LogQuery, LogRecord, LogSource, MetricSource, TraceQuery, TraceSource};
use rca_core::tool::ToolRegistry;
use rca_core::{Incident, TimeRange, Timestamp};
use rca_tools::analyze::logs::LogAnalyzer;
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::traces::{ServiceGraph, TraceAnalyzer};
use rca_tools::tools::{FULL_OUTPUT_CHARS, IncidentTools};

use crate::error::McpError;

/// The name clients give the live sources (`"incident": "live"`).
pub const LIVE_INCIDENT: &str = "live";

/// Sources queried live.
#[derive(Clone)]
pub struct LiveSources {
    /// Log lines, when there is a log source.
    pub logs: Option<Arc<dyn LogSource>>,
    /// Metric samples (Prometheus, an OTLP buffer).
    pub metrics: Option<Arc<dyn MetricSource>>,
    /// Spans.
    pub traces: Option<Arc<dyn TraceSource>>,
    /// Caller -> callee edges, when the host knows them (else the spans' call graph).
    pub topology: Vec<(String, String)>,
    /// How far back a call looks (default one hour).
    pub lookback: Duration,
    /// The system in prose, for the diagnosis and the report.
    pub system: String,
}

impl std::fmt::Debug for LiveSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSources")
            .field("logs", &self.logs.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("traces", &self.traces.is_some())
            .field("lookback", &self.lookback)
            .finish()
    }
}

impl Default for LiveSources {
    fn default() -> Self {
        LiveSources {
            logs: None,
            metrics: None,
            traces: None,
            topology: Vec::new(),
            lookback: Duration::from_secs(3600),
            system: String::new(),
        }
    }
}

fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Timestamp::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
}

fn failed(e: rca_core::SourceError) -> McpError {
    McpError::failed(format!("a live source failed: {e}"))
}

impl LiveSources {
    /// The incident of a call made now: the last `lookback`, detected now.
    pub fn incident(&self) -> Incident {
        let at = now();
        let millis = i64::try_from(self.lookback.as_millis()).unwrap_or(i64::MAX / 2);
        Incident {
            id: format!("live-{}", at.millis()),
            title: "live sources".into(),
            description: String::new(),
            detected_at: at,
            window: TimeRange::new(at.offset_millis(-millis.max(60_000)), at),
            system: self.system.clone(),
            topology: self.topology.clone(),
            onset: None,
        }
    }

    /// The information-gathering tools over the sources (experts as policies).
    pub(crate) async fn tools(&self, incident: &Incident) -> Result<ToolRegistry, McpError> {
        let mut tools = IncidentTools::new(incident.clone());
        tools.logs = self.logs.clone();
        // The tools read from the start of time without a `start` argument: a file does not
        // mind, a server does (Prometheus refuses more than 11,000 points a series).
        tools.metrics = self.metrics.clone().map(|inner| {
            Arc::new(WindowedMetrics {
                inner,
                window: TimeRange::new(incident.window.start, incident.detected_at),
            }) as Arc<dyn MetricSource>
        });
        tools.traces = self.traces.clone();
        tools.output_chars = FULL_OUTPUT_CHARS;
        tools
            .registry(None)
            .await
            .map_err(|e| McpError::failed(format!("cannot build the live tools: {e}")))
    }

    /// One telemetry explorer per source.
    pub(crate) fn explorers(&self, windows: WindowPolicy) -> Vec<Arc<dyn Explorer>> {
        let mut out: Vec<Arc<dyn Explorer>> = Vec::new();
        if let Some(m) = &self.metrics {
            out.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Metrics(Arc::clone(m), MetricAnalyzer::default()),
                windows,
            )));
        }
        if let Some(t) = &self.traces {
            out.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Traces(Arc::clone(t), TraceAnalyzer::default()),
                windows,
            )));
        }
        if let Some(l) = &self.logs {
            out.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Logs(Arc::clone(l), LogAnalyzer::default()),
                windows,
            )));
        }
        out
    }

    /// The service graph: the topology, or the call edges of the spans in the window.
    pub(crate) async fn service_graph(
        &self,
        incident: &Incident,
        max_spans: usize,
    ) -> Result<Vec<(String, String)>, McpError> {
        if !self.topology.is_empty() {
            return Ok(self.topology.clone());
        }
        let spans = self.spans(incident, max_spans).await?;
        Ok(ServiceGraph::from_spans(&spans)
            .edges()
            .into_iter()
            .map(|(a, b, _)| (a, b))
            .collect())
    }

    /// The spans of the window, at most `max`.
    pub(crate) async fn spans(
        &self,
        incident: &Incident,
        max: usize,
    ) -> Result<Vec<rca_core::source::Span>, McpError> {
        let Some(t) = &self.traces else {
            return Ok(Vec::new());
        };
        let query = TraceQuery::range(TimeRange::new(incident.window.start, incident.detected_at));
        let stream = t.spans(&query).await.map_err(failed)?;
        let spans: Vec<_> = stream.take(max).collect().await;
        spans
            .into_iter()
            .filter(|s| s.as_ref().map_or(true, |s| s.start < incident.detected_at))
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)
    }

    /// The log lines of the window matching `query`'s filters, at most `max`.
    pub(crate) async fn lines(
        &self,
        incident: &Incident,
        mut query: LogQuery,
        max: usize,
    ) -> Result<Vec<LogRecord>, McpError> {
        let Some(l) = &self.logs else {
            return Ok(Vec::new());
        };
        query.range = TimeRange::new(incident.window.start, incident.detected_at);
        query.limit = Some(max);
        let stream = l.logs(&query).await.map_err(failed)?;
        let lines: Vec<_> = stream.take(max).collect().await;
        lines
            .into_iter()
            .filter(|r| {
                r.as_ref()
                    .map_or(true, |r| r.timestamp < incident.detected_at)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)
    }
}

/// A metric source whose queries are cut to a window (the live incident's).
struct WindowedMetrics {
    inner: Arc<dyn MetricSource>,
    window: TimeRange,
}

#[async_trait::async_trait]
impl MetricSource for WindowedMetrics {
    async fn samples(
        &self,
        query: &rca_core::source::MetricQuery,
    ) -> Result<rca_core::source::RecordStream<rca_core::source::MetricSample>, rca_core::SourceError>
    {
        let mut query = query.clone();
        query.range = query.range.intersect(&self.window);
        if query.range.is_empty() {
            return Ok(Box::pin(futures::stream::empty()));
        }
        self.inner.samples(&query).await
    }

    async fn series(&self) -> Result<Vec<(String, String)>, rca_core::SourceError> {
        self.inner.series().await
    }
}
