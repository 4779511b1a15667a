//! The MCP server: [`RcaMcp`] answers `tools/*`, `resources/*` and `prompts/*` for any
//! transport.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rca_agents::orchestra::explorers::WindowPolicy;
use rca_agents::orchestra::pipeline::service_graph;
use rca_agents::orchestra::{DiagnosisPipeline, PipelineConfig, RoleModels};
use rca_agents::react::Obsk;
use rca_agents::report::{
    ReportBundle, ReportTelemetry, ReportWindows, TRAJECTORY_FORMAT_VERSION, render_markdown,
};
use rca_core::logs::TemplateMiner;
use rca_core::memory::SnapshotStore;
use rca_core::source::{Level, LogQuery, LogRecord, LogSource, MetricSource};
use rca_core::tool::ToolRegistry;
use rca_core::{Incident, ToolContext, ToolError};
use rca_llm::Redactor;
use rca_tools::logs::{MinerConfig, OnlineMiner};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;

use crate::catalogue::{
    self, Component, ComponentsOutput, DiagnoseArgs, DiagnoseOutput, Edge, INCIDENT_ARG,
    ListComponentsArgs, LogTemplatesArgs, ObservationOutput, ReadSnapshotArgs, SnapshotPage,
    TemplateInfo, TemplatesOutput,
};
use crate::error::McpError;
use crate::incidents::{IncidentRoot, LoadedIncident};
use crate::limits::McpLimits;
use crate::live::{LIVE_INCIDENT, LiveSources};
use crate::runs;
use crate::snapshots::BoundedSnapshotStore;

/// The guided-investigation prompt's name.
pub const INVESTIGATE_PROMPT: &str = "investigate";

/// What a server serves and how.
pub struct McpServerConfig {
    /// An incident directory, or a folder of incident directories.
    pub incidents: PathBuf,
    /// Where `diagnose` stores trajectories and reports, served as resources (`None`: nothing
    /// is stored and no resources are listed).
    pub runs: Option<PathBuf>,
    /// Read telemetry files that resolve outside their incident directory (refused by
    /// default, as in `rca diagnose`).
    pub allow_outside_links: bool,
    /// Output, time and memory bounds.
    pub limits: McpLimits,
    /// Applied to everything that leaves the server: tool results, reports, stored runs,
    /// resources.
    pub redactor: Redactor,
    /// The models of `diagnose`'s roles (none: deterministic policies).
    pub models: RoleModels,
    /// `diagnose`'s settings (its wall time is capped by `limits.diagnose_timeout`).
    pub pipeline: PipelineConfig,
    /// Sources queried live (Prometheus, an OTLP buffer), served as the incident `live`.
    pub live: Option<LiveSources>,
}

impl McpServerConfig {
    /// Serves `incidents` with the defaults: runs stored in `rca-runs`, redaction on, no
    /// models.
    pub fn new(incidents: impl Into<PathBuf>) -> Self {
        McpServerConfig {
            incidents: incidents.into(),
            runs: Some(PathBuf::from("rca-runs")),
            allow_outside_links: false,
            limits: McpLimits::default(),
            redactor: Redactor::default(),
            models: RoleModels::default(),
            pipeline: PipelineConfig::default(),
            live: None,
        }
    }
}

struct Shared {
    root: IncidentRoot,
    runs: Option<PathBuf>,
    limits: McpLimits,
    redactor: Redactor,
    models: RoleModels,
    pipeline: PipelineConfig,
    live: Option<LiveSources>,
    snapshots: Arc<BoundedSnapshotStore>,
    obsk: Obsk,
    slots: tokio::sync::Semaphore,
}

/// The server. Cheap to clone (one per HTTP request shares everything).
#[derive(Clone)]
pub struct RcaMcp {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RcaMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcaMcp")
            .field("incidents", &self.shared.root.path())
            .field("runs", &self.shared.runs)
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

impl RcaMcp {
    /// A server for `config`; refuses an incident root that is not a directory.
    pub fn new(config: McpServerConfig) -> Result<Self, McpError> {
        let limits = config.limits;
        let root = IncidentRoot::new(
            &config.incidents,
            config.allow_outside_links,
            limits.max_telemetry_bytes,
            limits.max_loaded_incidents,
        )?;
        let snapshots = Arc::new(BoundedSnapshotStore::new(limits.max_snapshot_chars));
        let obsk = Obsk::new(
            Arc::clone(&snapshots) as Arc<dyn SnapshotStore>,
            limits.head_chars.max(1),
        );
        let slots = tokio::sync::Semaphore::new(limits.max_concurrent_calls.max(1));
        Ok(RcaMcp {
            shared: Arc::new(Shared {
                root,
                runs: config.runs,
                limits,
                redactor: config.redactor,
                models: config.models,
                pipeline: config.pipeline,
                live: config.live,
                snapshots,
                obsk,
                slots,
            }),
        })
    }

    /// Calls the tool `name` as a client would, with its deadline; an error is what the
    /// client sees as an error result.
    pub async fn call(&self, name: &str, args: JsonObject) -> Result<CallToolResult, McpError> {
        let limits = &self.shared.limits;
        let deadline = if name == "diagnose" {
            limits.diagnose_timeout
        } else {
            limits.tool_timeout
        };
        // Waiting for a slot counts against the deadline: a burst of calls cannot queue work
        // past it.
        let work = async {
            let _slot = self
                .shared
                .slots
                .acquire()
                .await
                .map_err(|_| McpError::failed("the server is shutting down"))?;
            self.dispatch(name, args).await
        };
        match tokio::time::timeout(deadline, work).await {
            Ok(result) => result,
            Err(_) => Err(McpError::TimedOut {
                what: format!("the tool {name}"),
                seconds: deadline.as_secs(),
            }),
        }
    }

    async fn dispatch(&self, name: &str, args: JsonObject) -> Result<CallToolResult, McpError> {
        match name {
            "diagnose" => self.diagnose(parse(name, args)?).await,
            "list_components" => self.list_components(parse(name, args)?).await,
            "log_templates" => self.log_templates(parse(name, args)?).await,
            "read_snapshot" => self.read_snapshot(parse(name, args)?).await,
            _ if catalogue::incident_tools().iter().any(|(n, ..)| *n == name) => {
                self.incident_tool(name, args).await
            }
            _ => Err(McpError::refused(format!("unknown tool {name:?}"))),
        }
    }

    fn redact(&self, text: &str) -> String {
        self.shared.redactor.redact(text).into_owned()
    }

    /// A result with `text` as content and `value` (redacted) as structured content.
    fn structured(
        &self,
        text: String,
        value: impl serde::Serialize,
    ) -> Result<CallToolResult, McpError> {
        let mut value = serde_json::to_value(value)
            .map_err(|e| McpError::failed(format!("cannot encode the result: {e}")))?;
        self.shared.redactor.redact_json(&mut value);
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.redact(&text))]);
        result.structured_content = Some(value);
        Ok(result)
    }

    /// What a call works on: `incident` loaded from the root, or the live sources now.
    async fn target(&self, incident: Option<&str>) -> Result<Target, McpError> {
        if let Some(live) = &self.shared.live
            && incident.map(str::trim) == Some(LIVE_INCIDENT)
        {
            let incident = live.incident();
            let tools = live.tools(&incident).await?;
            return Ok(Target::Live(Box::new(LiveCall {
                live: live.clone(),
                incident,
                tools,
            })));
        }
        Ok(Target::Dir(self.shared.root.load(incident).await?))
    }

    async fn incident_tool(
        &self,
        name: &str,
        mut args: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let incident = match args.remove(INCIDENT_ARG) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s),
            Some(_) => return Err(McpError::refused("`incident` must be a string")),
        };
        let target = self.target(incident.as_deref()).await?;
        let mut args = serde_json::Value::Object(args);
        // A snapshot key in an argument stands for its full text (analyze_logs over a cut
        // get_logs result), as in the ReAct loop.
        self.shared
            .obsk
            .expand(&mut args)
            .await
            .map_err(|e| McpError::failed(format!("snapshot store: {e}")))?;
        let ctx = ToolContext::default()
            .with_cutoff(target.incident().detected_at)
            .with_incident(target.incident().id.clone());
        let out = match target.tools().dispatch(name, args, &ctx).await {
            Ok(out) => out,
            Err(ToolError::NotFound { available, .. }) => {
                return Err(McpError::refused(format!(
                    "the incident {:?} has no data for {name}; its tools: {}",
                    target.name(),
                    available.join(", ")
                )));
            }
            Err(e) => return Err(McpError::refused(self.redact(&e.to_string()))),
        };
        // Redacted before anything is stored or shown.
        let text = self.redact(&out.text);
        let observation = show(&self.shared.obsk, &text).await?;
        let max = self.shared.limits.max_list_items;
        let mut evidence = out.evidence;
        let evidence_left_out = evidence.len().saturating_sub(max);
        evidence.truncate(max);
        let output = ObservationOutput {
            incident: target.name().to_string(),
            tool: name.to_string(),
            text: observation.text.clone(),
            cut: observation.snapshot_key.is_some(),
            snapshot_key: observation.snapshot_key,
            full_chars: observation.full_chars,
            evidence,
            evidence_left_out,
        };
        self.structured(observation.text, output)
    }

    async fn diagnose(&self, args: DiagnoseArgs) -> Result<CallToolResult, McpError> {
        let shared = &self.shared;
        let target = self.target(args.incident.as_deref()).await?;
        let base = &shared.pipeline;
        let current_minutes = args.current_minutes.unwrap_or(base.current_minutes).max(1);
        let cap = shared.limits.diagnose_timeout;
        let mut config = PipelineConfig {
            current_minutes,
            min_modalities: args.min_modalities.unwrap_or(base.min_modalities).max(1),
            wall_time: Some(base.wall_time.map_or(cap, |w| w.min(cap))),
            ..base.clone()
        };
        let setup = |e: rca_agents::orchestra::OrchestraError| {
            McpError::failed(format!("cannot set up the diagnosis: {e}"))
        };
        let (run, bundle) = match &target {
            Target::Dir(loaded) => {
                let pipeline = DiagnosisPipeline::new(&loaded.dir, shared.models.clone(), config)
                    .map_err(setup)?;
                let graph = pipeline.service_graph.clone();
                let run = pipeline
                    .run(&loaded.dir.incident)
                    .await
                    .map_err(|e| McpError::failed(format!("the diagnosis failed: {e}")))?;
                let bundle = ReportBundle::of_incident_dir(
                    &loaded.dir,
                    run.report.clone(),
                    run.trajectory(),
                    graph,
                    run.onset.map(|o| o.at()),
                    current_minutes,
                )
                .await;
                (run, bundle)
            }
            Target::Live(call) => {
                let (live, incident) = (&call.live, &call.incident);
                // Live sources are queried, not held: the onset is not estimated, and the
                // current window is the last `current_minutes` (as in the diagnosis service).
                config.onset = None;
                let windows = WindowPolicy {
                    current_millis: current_minutes * 60_000,
                    baseline: None,
                };
                let graph = live.service_graph(incident, MAX_LIVE_RECORDS).await?;
                let pipeline = DiagnosisPipeline::with_explorers(
                    live.explorers(windows),
                    graph.clone(),
                    shared.models.clone(),
                    config,
                )
                .map_err(setup)?;
                let run = pipeline
                    .run(incident)
                    .await
                    .map_err(|e| McpError::failed(format!("the diagnosis failed: {e}")))?;
                let telemetry = ReportTelemetry::gather(
                    &run.report,
                    ReportWindows::for_incident(incident, None, current_minutes * 60_000, None),
                    live.metrics.as_deref(),
                    live.traces.as_deref(),
                )
                .await;
                let bundle = ReportBundle::new(
                    incident.clone(),
                    run.report.clone(),
                    run.trajectory(),
                    graph,
                )
                .with_telemetry(telemetry);
                (run, bundle)
            }
        };
        let onset = run.onset.map(|o| o.at());
        let markdown = self.redact(&render_markdown(&bundle));
        let mut record = serde_json::json!({
            "format_version": TRAJECTORY_FORMAT_VERSION,
            "incident": bundle.incident,
            "trajectory": bundle.trajectory,
            "events": run.events,
            "evidence": run.evidence,
            "onset": run.onset,
            "report": run.report,
        });
        shared.redactor.redact_json(&mut record);
        let stored = match &shared.runs {
            Some(dir) => match runs::store(dir, &target.incident().id, &record, &markdown) {
                Ok(uris) => Some(uris),
                Err(e) => {
                    tracing::warn!(error = %e, "the run could not be stored");
                    None
                }
            },
            None => None,
        };
        let shown = show(&shared.obsk, &markdown).await?;
        let output = DiagnoseOutput {
            incident: target.name().to_string(),
            report: run.report.clone(),
            markdown: shown.text.clone(),
            cut: shown.snapshot_key.is_some(),
            snapshot_key: shown.snapshot_key,
            onset: onset.map(|t| t.to_string()),
            fallbacks: run
                .fallbacks()
                .into_iter()
                .map(|(role, error)| format!("{role}: {error}"))
                .collect(),
            trajectory_uri: stored.as_ref().map(|s| s.0.clone()),
            report_uri: stored.map(|s| s.1),
        };
        self.structured(shown.text, output)
    }

    async fn list_components(&self, args: ListComponentsArgs) -> Result<CallToolResult, McpError> {
        let max = self.shared.limits.max_list_items;
        let (mut incidents, mut cut) = self.shared.root.names(max);
        if self.shared.live.is_some() {
            incidents.insert(0, LIVE_INCIDENT.to_string());
        }
        if args.incident.is_none() && !self.shared.root.is_single() {
            let text = format!(
                "{} incident(s){}: {}\nName one as `incident` to list its components.",
                incidents.len(),
                if cut { " (list cut)" } else { "" },
                incidents.join(", ")
            );
            let output = ComponentsOutput {
                incidents,
                incident: None,
                detected_at: None,
                components: Vec::new(),
                edges: Vec::new(),
                cut,
            };
            return self.structured(text, output);
        }
        let target = self.target(args.incident.as_deref()).await?;
        let failed = |e: rca_core::SourceError| McpError::failed(e.to_string());
        let (log_components, series, span_components, graph) = match &target {
            Target::Dir(loaded) => {
                let dir = &loaded.dir;
                let spans: std::collections::BTreeSet<String> = dir
                    .traces
                    .spans_all()
                    .iter()
                    .map(|s| s.component.to_string())
                    .collect();
                (
                    dir.logs.components().await.map_err(failed)?,
                    dir.metrics.series().await.map_err(failed)?,
                    spans,
                    service_graph(dir),
                )
            }
            Target::Live(call) => {
                let (live, incident) = (&call.live, &call.incident);
                let logs = match &live.logs {
                    Some(l) => l.components().await.map_err(failed)?,
                    None => Vec::new(),
                };
                let series = match &live.metrics {
                    Some(m) => m.series().await.map_err(failed)?,
                    None => Vec::new(),
                };
                let spans = live
                    .spans(incident, MAX_LIVE_RECORDS)
                    .await?
                    .into_iter()
                    .map(|s| s.component.to_string())
                    .collect();
                let graph = live.service_graph(incident, MAX_LIVE_RECORDS).await?;
                (logs, series, spans, graph)
            }
        };
        let mut by_name: BTreeMap<String, Component> = BTreeMap::new();
        fn entry<'a>(map: &'a mut BTreeMap<String, Component>, name: &str) -> &'a mut Component {
            map.entry(name.to_string()).or_insert_with(|| Component {
                name: name.to_string(),
                logs: false,
                metric_series: 0,
                traces: false,
            })
        }
        for c in &log_components {
            entry(&mut by_name, c).logs = true;
        }
        for (c, _) in &series {
            entry(&mut by_name, c).metric_series += 1;
        }
        for c in &span_components {
            entry(&mut by_name, c).traces = true;
        }
        let mut edges: Vec<Edge> = graph
            .into_iter()
            .map(|(caller, callee)| Edge { caller, callee })
            .collect();
        for e in &edges {
            entry(&mut by_name, &e.caller);
            entry(&mut by_name, &e.callee);
        }
        let mut components: Vec<Component> = by_name.into_values().collect();
        cut |= components.len() > max || edges.len() > max;
        components.truncate(max);
        edges.truncate(max);
        let detected_at = target.incident().detected_at;
        let mut text = format!(
            "incident {} (detected at {detected_at}): {} component(s){}\n",
            target.name(),
            components.len(),
            if cut {
                ", list cut at the server's bound"
            } else {
                ""
            }
        );
        for c in &components {
            text.push_str(&format!(
                "- {}: logs {}, metric series {}, traces {}\n",
                c.name,
                if c.logs { "yes" } else { "no" },
                c.metric_series,
                if c.traces { "yes" } else { "no" }
            ));
        }
        let output = ComponentsOutput {
            incidents,
            incident: Some(target.name().to_string()),
            detected_at: Some(detected_at.to_string()),
            components,
            edges,
            cut,
        };
        let shown = show(&self.shared.obsk, &text).await?;
        self.structured(shown.text, output)
    }

    async fn log_templates(&self, args: LogTemplatesArgs) -> Result<CallToolResult, McpError> {
        let target = self.target(args.incident.as_deref()).await?;
        let min_level = match args.min_level.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(word) => Some(Level::parse(word).ok_or_else(|| {
                McpError::refused(format!(
                    "`min_level` = {word:?} is not a level; use INFO, WARNING or ERROR"
                ))
            })?),
        };
        let max = self.shared.limits.max_list_items;
        let limit = args.limit.unwrap_or(50).clamp(1, max);
        let entity = args.entity.clone();
        let cutoff = target.incident().detected_at;
        let keep = move |r: &LogRecord| {
            r.timestamp < cutoff
                && entity.as_ref().is_none_or(|e| *e == r.component)
                && min_level.is_none_or(|m| r.level.unwrap_or_default() >= m)
        };
        let (lines, mut templates) = match &target {
            Target::Dir(loaded) => {
                let mine = Arc::clone(loaded);
                tokio::task::spawn_blocking(move || {
                    mine_templates(mine.dir.logs.records().iter().filter(|r| keep(r)))
                })
                .await
            }
            Target::Live(call) => {
                let (live, incident) = (&call.live, &call.incident);
                let records = live
                    .lines(incident, LogQuery::range(incident.window), MAX_LIVE_RECORDS)
                    .await?;
                tokio::task::spawn_blocking(move || {
                    mine_templates(records.iter().filter(|r| keep(r)))
                })
                .await
            }
        }
        .map_err(|e| McpError::failed(format!("mining stopped: {e}")))?;
        if lines == 0
            && let Some(e) = &args.entity
        {
            let known = match &target {
                Target::Dir(loaded) => loaded.dir.logs.components().await.unwrap_or_default(),
                Target::Live(call) => match &call.live.logs {
                    Some(l) => l.components().await.unwrap_or_default(),
                    None => Vec::new(),
                },
            };
            if !known.contains(e) {
                let shown: Vec<&str> = known.iter().take(50).map(String::as_str).collect();
                return Err(McpError::refused(format!(
                    "unknown entity {e:?}; components with logs: {}",
                    shown.join(", ")
                )));
            }
        }
        templates.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        let total_templates = templates.len();
        let cut = total_templates > limit;
        templates.truncate(limit);
        let templates: Vec<TemplateInfo> = templates
            .into_iter()
            .map(|t| TemplateInfo {
                template: self.redact(&t.text),
                count: t.count,
            })
            .collect();
        let mut text = format!(
            "{lines} line(s) of {} before the detection time{}: {total_templates} template(s){}\n",
            target.name(),
            args.entity
                .as_deref()
                .map(|e| format!(" from {e}"))
                .unwrap_or_default(),
            if cut {
                format!(", the {limit} most frequent shown (raise `limit` for more)")
            } else {
                String::new()
            }
        );
        for t in &templates {
            text.push_str(&format!("{:>8}  {}\n", t.count, t.template));
        }
        let shown = show(&self.shared.obsk, &text).await?;
        let output = TemplatesOutput {
            incident: target.name().to_string(),
            entity: args.entity,
            lines,
            total_templates,
            templates,
            cut,
        };
        self.structured(shown.text, output)
    }

    async fn read_snapshot(&self, args: ReadSnapshotArgs) -> Result<CallToolResult, McpError> {
        let full = self
            .shared
            .snapshots
            .get(args.key.trim())
            .await
            .map_err(|e| McpError::failed(format!("snapshot store: {e}")))?
            .ok_or_else(|| {
                McpError::refused(format!(
                    "unknown snapshot key {:?} (snapshots are kept in memory, oldest dropped \
                     first past the server's bound): call the tool again",
                    args.key
                ))
            })?;
        let total_chars = full.chars().count();
        let page = self.shared.limits.page_chars.max(1);
        let offset = args.offset.min(total_chars);
        let text: String = full.chars().skip(offset).take(page).collect();
        let end = offset + text.chars().count();
        let next_offset = (end < total_chars).then_some(end);
        let shown = match next_offset {
            Some(n) => format!(
                "{text}\n[... {} more characters: call read_snapshot with offset {n}]",
                total_chars - n
            ),
            None => text.clone(),
        };
        let output = SnapshotPage {
            key: args.key.trim().to_string(),
            offset,
            text,
            next_offset,
            total_chars,
        };
        self.structured(shown, output)
    }

    fn investigate_prompt(&self, args: Option<&JsonObject>) -> GetPromptResult {
        let get = |k: &str| {
            args.and_then(|a| a.get(k))
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let incident = get("incident");
        let named = incident
            .as_deref()
            .map(|i| format!("the incident `{i}`"))
            .unwrap_or_else(|| "the incident".to_string());
        let arg = incident
            .as_deref()
            .map(|i| format!(" with `incident` = \"{i}\""))
            .unwrap_or_default();
        let focus = get("focus")
            .map(|f| format!("\nThe operator's question: {f}\n"))
            .unwrap_or_default();
        let text = format!(
            "Investigate {named} and find its root cause.{focus}\n\
             1. Call `list_components`{arg}: the components, which modalities have data about \
             each, the service graph and the detection time (no tool sees data at or after it).\n\
             2. Call `diagnose`{arg}: ranked root-cause candidates with their evidence chain.\n\
             3. Check the top candidates yourself: `get_metrics`, `get_logs` and `get_traces` \
             with `entity` set to the component (and `get_db_records` when the incident has \
             tables); `log_templates` shows what the logs say in bulk. Look at the callers and \
             callees of a candidate too: a fault often shows downstream first.\n\
             4. A result that ends with a snapshot key was cut: read the rest with \
             `read_snapshot`, or pass the key as `text` to `analyze_logs`.\n\
             5. Answer with the root-cause component, the kind of fault, the evidence (quote the \
             tool results), and what would confirm or refute it. Say so when the evidence does \
             not decide between candidates; do not go beyond it."
        );
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description("A guided root-cause investigation of one incident")
    }
}

/// Records (spans, log lines) read at most from live sources per call.
const MAX_LIVE_RECORDS: usize = 200_000;

/// What a call works on.
enum Target {
    /// An incident directory, loaded.
    Dir(Arc<LoadedIncident>),
    /// The live sources, as of now.
    Live(Box<LiveCall>),
}

/// A call on the live sources: the sources, the incident of the moment, its tools.
struct LiveCall {
    live: LiveSources,
    incident: Incident,
    tools: ToolRegistry,
}

/// `text` as the client sees it: whole when short, else its head and the snapshot key that
/// reads the rest (the ReAct loop's observation rule).
async fn show(obsk: &Obsk, text: &str) -> Result<rca_core::trajectory::Observation, McpError> {
    obsk.observe(text)
        .await
        .map_err(|e| McpError::failed(format!("snapshot store: {e}")))
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Dir(l) => &l.name,
            Target::Live(_) => LIVE_INCIDENT,
        }
    }

    fn incident(&self) -> &Incident {
        match self {
            Target::Dir(l) => &l.dir.incident,
            Target::Live(call) => &call.incident,
        }
    }

    fn tools(&self) -> &ToolRegistry {
        match self {
            Target::Dir(l) => &l.tools,
            Target::Live(call) => &call.tools,
        }
    }
}

/// Mines the messages of `records`: how many, and the templates.
fn mine_templates<'a>(
    records: impl Iterator<Item = &'a LogRecord>,
) -> (u64, Vec<rca_core::logs::Template>) {
    let mut miner = OnlineMiner::new(MinerConfig::default());
    let mut lines = 0u64;
    for r in records {
        miner.ingest_line(&r.message);
        lines += 1;
    }
    (lines, TemplateMiner::templates(&miner))
}

/// Parses a tool's arguments into its argument type; the error names the schema's fields.
fn parse<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, McpError> {
    serde_json::from_value(serde_json::Value::Object(args))
        .map_err(|e| McpError::refused(format!("invalid arguments for {tool}: {e}")))
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for RcaMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("rca", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Root-cause analysis of cloud incidents. `list_components` lists the incidents and \
             an incident's components; `diagnose` runs the whole diagnosis; `get_logs`, \
             `get_metrics`, `get_traces`, `get_db_records` gather condensed evidence about one \
             component; `log_templates` summarises the logs. Long results are cut: read the rest \
             with `read_snapshot`. The prompt `investigate` guides an investigation; stored \
             reports and trajectories are resources.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(catalogue::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !catalogue::tools().iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let result = tokio::select! {
            r = self.call(&name, args) => r,
            () = context.ct.cancelled() => Err(McpError::refused("cancelled by the client")),
        };
        Ok(match result {
            Ok(r) => r,
            Err(e) => error_result(self.redact(&e.to_string())),
        }
        .into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let Some(dir) = &self.shared.runs else {
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        };
        let (files, cut) = runs::list(dir, self.shared.limits.max_list_items);
        if cut {
            tracing::info!("the resource list was cut at the server's bound");
        }
        let resources = files
            .into_iter()
            .map(|f| {
                Resource::new(f.uri, f.name.clone())
                    .with_mime_type(f.mime_type)
                    .with_size(f.size)
                    .with_description(format!("stored run {}", f.name))
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(dir) = &self.shared.runs else {
            return Err(ErrorData::resource_not_found("no runs are stored", None));
        };
        match runs::read(
            dir,
            &request.uri,
            self.shared.limits.max_resource_bytes,
            &self.shared.redactor,
        ) {
            Ok((text, mime)) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, request.uri.clone()).with_mime_type(mime),
            ])
            .into()),
            Err(e) => Err(ErrorData::resource_not_found(e.to_string(), None)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            INVESTIGATE_PROMPT,
            Some("A guided root-cause investigation of one incident with this server's tools"),
            Some(vec![
                PromptArgument::new("incident")
                    .with_description("The incident (its folder's name under the root)")
                    .with_required(false),
                PromptArgument::new("focus")
                    .with_description("The operator's question or what to look at first")
                    .with_required(false),
            ]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != INVESTIGATE_PROMPT {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            ));
        }
        Ok(self.investigate_prompt(request.arguments.as_ref()).into())
    }
}

/// Serves `server` on stdin and stdout until the client closes them.
pub async fn serve_stdio(server: RcaMcp) -> Result<(), McpError> {
    use rmcp::ServiceExt;
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::failed(format!("the MCP session could not start: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::failed(format!("the MCP session ended abnormally: {e}")))?;
    Ok(())
}
