//! The diagnosis pipeline of an incident directory: one explorer per modality present, the
//! roles (model-backed where the host gives a model, deterministic policies otherwise, and the
//! policies as fallbacks of the model-backed roles), and a run bounded by a wall-time budget.
//! `rca diagnose` and the real-model agent runs call it the same way.

use std::sync::Arc;
use std::time::Duration;

use rca_core::llm::ChatModel;
use rca_tools::analyze::events::EventAnalyzer;
use rca_tools::analyze::logs::LogAnalyzer;
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::traces::{ServiceGraph, TraceAnalyzer};
use rca_tools::incident_dir::IncidentDir;

use super::explorers::{Telemetry, TelemetryExplorer, WindowPolicy};
use super::model::{ModelController, ModelPlanner, ModelReasoner};
use super::orchestrator::{Fallbacks, Orchestrator, RunRecord};
use super::policy::{ConvergenceController, EvidenceReasoner, OrderedPlanner};
use super::roles::{Controller, Explorer, OrchestraError, Planner, Reasoner};
use crate::memory::InMemoryShortTermMemory;

/// The models of the model-backed roles; a role without one runs its deterministic policy.
#[derive(Clone, Default)]
pub struct RoleModels {
    /// The planner's model.
    pub planner: Option<Arc<dyn ChatModel>>,
    /// The controller's model.
    pub controller: Option<Arc<dyn ChatModel>>,
    /// The reasoner's model.
    pub reasoner: Option<Arc<dyn ChatModel>>,
}

impl RoleModels {
    /// The same model for all three roles.
    pub fn all(model: Arc<dyn ChatModel>) -> Self {
        RoleModels {
            planner: Some(Arc::clone(&model)),
            controller: Some(Arc::clone(&model)),
            reasoner: Some(model),
        }
    }
}

/// Settings of a pipeline run.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// Length of the current window before the detection time, in minutes.
    pub current_minutes: i64,
    /// How many modalities must agree before the controller concludes.
    pub min_modalities: usize,
    /// Wall time of the whole run, model requests included (`None`: unlimited).
    pub wall_time: Option<Duration>,
    /// Whether a model-backed role whose model fails hands over to its policy (recorded as a
    /// [`super::RunEvent::RoleFellBack`]) instead of ending the run.
    pub fall_back_to_policies: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            current_minutes: 10,
            min_modalities: 2,
            wall_time: None,
            fall_back_to_policies: true,
        }
    }
}

/// An orchestration over a loaded incident directory, ready to run.
pub struct DiagnosisPipeline {
    orchestrator: Orchestrator,
    /// The service graph: the manifest's topology, or the call edges of the traces.
    pub service_graph: Vec<(String, String)>,
    config: PipelineConfig,
}

impl std::fmt::Debug for DiagnosisPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagnosisPipeline")
            .field("orchestrator", &self.orchestrator)
            .field("config", &self.config)
            .finish()
    }
}

/// The service graph of `loaded`: its manifest's topology, or else the call edges of its spans.
pub fn service_graph(loaded: &IncidentDir) -> Vec<(String, String)> {
    if !loaded.incident.topology.is_empty() {
        return loaded.incident.topology.clone();
    }
    ServiceGraph::from_spans(loaded.traces.spans_all())
        .edges()
        .into_iter()
        .map(|(a, b, _)| (a, b))
        .collect()
}

/// One explorer per modality present in `loaded` (metrics, traces, logs joined to spans when
/// there are spans).
pub fn telemetry_explorers(loaded: &IncidentDir, windows: WindowPolicy) -> Vec<Arc<dyn Explorer>> {
    let mut explorers: Vec<Arc<dyn Explorer>> = Vec::new();
    if !loaded.metrics.samples_all().is_empty() {
        explorers.push(Arc::new(TelemetryExplorer::new(
            Telemetry::Metrics(Arc::new(loaded.metrics.clone()), MetricAnalyzer::default()),
            windows,
        )));
    }
    let has_spans = !loaded.traces.spans_all().is_empty();
    if has_spans {
        explorers.push(Arc::new(TelemetryExplorer::new(
            Telemetry::Traces(Arc::new(loaded.traces.clone()), TraceAnalyzer::default()),
            windows,
        )));
    }
    if !loaded.logs.records().is_empty() {
        let mut logs = TelemetryExplorer::new(
            Telemetry::Logs(Arc::new(loaded.logs.clone()), LogAnalyzer::default()),
            windows,
        );
        if has_spans {
            // Log lines joined to their spans: what each operation's requests stopped doing.
            logs = logs.with_spans(Arc::new(loaded.traces.clone()), EventAnalyzer::default());
        }
        explorers.push(Arc::new(logs));
    }
    explorers
}

impl DiagnosisPipeline {
    /// The pipeline over `loaded` with the built-in telemetry explorers.
    pub fn new(
        loaded: &IncidentDir,
        models: RoleModels,
        config: PipelineConfig,
    ) -> Result<Self, OrchestraError> {
        let windows = WindowPolicy {
            current_millis: config.current_minutes.max(1) * 60_000,
            baseline: loaded.baseline,
        };
        let explorers = telemetry_explorers(loaded, windows);
        Self::with_explorers(explorers, service_graph(loaded), models, config)
    }

    /// The pipeline with explorers the caller built (generated tools, a host's own).
    pub fn with_explorers(
        explorers: Vec<Arc<dyn Explorer>>,
        service_graph: Vec<(String, String)>,
        models: RoleModels,
        config: PipelineConfig,
    ) -> Result<Self, OrchestraError> {
        if explorers.is_empty() {
            return Err(OrchestraError::Invalid(
                "the manifest lists no logs, metrics or traces to examine".into(),
            ));
        }
        let rule = ConvergenceController {
            min_modalities: config.min_modalities,
            ..ConvergenceController::default()
        };
        let policy_planner: Arc<dyn Planner> = Arc::new(OrderedPlanner::default());
        let policy_controller: Arc<dyn Controller> = Arc::new(rule.clone());
        let policy_reasoner: Arc<dyn Reasoner> = Arc::new(EvidenceReasoner::default());
        let mut fallbacks = Fallbacks::default();
        let planner: Arc<dyn Planner> = match models.planner {
            Some(m) => {
                fallbacks.planner = Some(Arc::clone(&policy_planner));
                Arc::new(ModelPlanner::new(m))
            }
            None => policy_planner,
        };
        let controller: Arc<dyn Controller> = match models.controller {
            Some(m) => {
                fallbacks.controller = Some(Arc::clone(&policy_controller));
                Arc::new(ModelController::new(m, rule))
            }
            None => policy_controller,
        };
        let reasoner: Arc<dyn Reasoner> = match models.reasoner {
            Some(m) => {
                fallbacks.reasoner = Some(Arc::clone(&policy_reasoner));
                Arc::new(ModelReasoner::new(m))
            }
            None => policy_reasoner,
        };
        let mut orchestrator = Orchestrator::new(planner, controller, reasoner, explorers);
        if config.fall_back_to_policies {
            orchestrator = orchestrator.with_fallbacks(fallbacks);
        }
        Ok(DiagnosisPipeline {
            orchestrator,
            service_graph,
            config,
        })
    }

    /// The orchestrator (to add long-term memory or take its cancel flag before running).
    pub fn orchestrator_mut(&mut self) -> &mut Orchestrator {
        &mut self.orchestrator
    }

    /// Runs the diagnosis of `incident` within the wall-time budget
    /// ([`OrchestraError::TimedOut`] when it is exceeded).
    pub async fn run(&self, incident: &rca_core::Incident) -> Result<RunRecord, OrchestraError> {
        let memory = InMemoryShortTermMemory::new();
        let run = self.orchestrator.run(incident, &memory);
        match self.config.wall_time {
            Some(limit) => {
                tokio::time::timeout(limit, run)
                    .await
                    .map_err(|_| OrchestraError::TimedOut {
                        seconds: limit.as_secs_f64(),
                    })?
            }
            None => run.await,
        }
    }
}
