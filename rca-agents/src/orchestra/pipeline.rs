//! The diagnosis pipeline of an incident directory: one explorer per modality present, the
//! roles (model-backed where the host gives a model, deterministic policies otherwise, and the
//! policies as fallbacks of the model-backed roles), the onset (known, or estimated from the
//! telemetry), and a run bounded by a wall-time budget. `rca diagnose`, `rca eval nezha`, the
//! real-model agent runs and the diagnosis service call it the same way.

use std::sync::Arc;
use std::time::Duration;

use rca_core::llm::ChatModel;
use rca_tools::analyze::classify::FaultTaxonomy;
use rca_tools::analyze::events::EventAnalyzer;
use rca_tools::analyze::logs::LogAnalyzer;
use rca_tools::analyze::metrics::MetricAnalyzer;
use rca_tools::analyze::onset::{OnsetDetector, OnsetEstimate};
use rca_tools::analyze::rank::Ranker;
use rca_tools::analyze::traces::{ServiceGraph, TraceAnalyzer};
use rca_tools::incident_dir::IncidentDir;
use rca_tools::sources::{FileLogSource, FileMetricSource, FileTraceSource};

use super::diagnosis_memory::DiagnosisMemory;
use super::explorers::{Telemetry, TelemetryExplorer, WindowPolicy};
use super::model::{ModelController, ModelPlanner, ModelReasoner};
use super::orchestrator::{Fallbacks, Onset, Orchestrator, RunRecord};
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
    /// How the onset is estimated when the incident does not state it (`None`: it is not,
    /// and the current window is the last `current_minutes`).
    pub onset: Option<OnsetDetector>,
    /// How the policies combine evidence across modalities (the controller's choice among
    /// converging components and the reasoner's ranking).
    pub ranker: Ranker,
    /// The fault-type vocabulary the reasoner names types with.
    pub taxonomy: FaultTaxonomy,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            current_minutes: 10,
            min_modalities: 2,
            wall_time: None,
            fall_back_to_policies: true,
            onset: Some(OnsetDetector::default()),
            ranker: Ranker::multimodal(),
            taxonomy: FaultTaxonomy::default(),
        }
    }
}

/// An orchestration over a loaded incident directory, ready to run.
pub struct DiagnosisPipeline {
    orchestrator: Orchestrator,
    /// The service graph: the manifest's topology, or the call edges of the traces.
    pub service_graph: Vec<(String, String)>,
    config: PipelineConfig,
    telemetry: Option<IncidentTelemetry>,
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
    graph_of_spans(&loaded.traces)
}

fn graph_of_spans(traces: &FileTraceSource) -> Vec<(String, String)> {
    ServiceGraph::from_spans(traces.spans_all())
        .edges()
        .into_iter()
        .map(|(a, b, _)| (a, b))
        .collect()
}

/// The telemetry of one incident, shared by its explorers and the onset estimate: what an
/// incident directory holds, or records a host (or an evaluation) brings.
#[derive(Debug, Clone)]
pub struct IncidentTelemetry {
    /// Log lines.
    pub logs: Arc<FileLogSource>,
    /// Metric samples.
    pub metrics: Arc<FileMetricSource>,
    /// Spans.
    pub traces: Arc<FileTraceSource>,
    /// A known quiet period, when the host has one.
    pub baseline: Option<rca_core::TimeRange>,
}

impl IncidentTelemetry {
    /// The telemetry of a loaded incident directory.
    pub fn of_dir(loaded: &IncidentDir) -> Self {
        IncidentTelemetry {
            logs: Arc::new(loaded.logs.clone()),
            metrics: Arc::new(loaded.metrics.clone()),
            traces: Arc::new(loaded.traces.clone()),
            baseline: loaded.baseline,
        }
    }

    /// The service graph: `incident`'s topology, or else the call edges of the spans.
    pub fn service_graph(&self, incident: &rca_core::Incident) -> Vec<(String, String)> {
        if incident.topology.is_empty() {
            graph_of_spans(&self.traces)
        } else {
            incident.topology.clone()
        }
    }

    /// One explorer per modality present (metrics, traces, logs joined to spans when there
    /// are spans).
    pub fn explorers(&self, windows: WindowPolicy) -> Vec<Arc<dyn Explorer>> {
        let mut explorers: Vec<Arc<dyn Explorer>> = Vec::new();
        if !self.metrics.samples_all().is_empty() {
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Metrics(self.metrics.clone(), MetricAnalyzer::default()),
                windows,
            )));
        }
        let has_spans = !self.traces.spans_all().is_empty();
        if has_spans {
            explorers.push(Arc::new(TelemetryExplorer::new(
                Telemetry::Traces(self.traces.clone(), TraceAnalyzer::default()),
                windows,
            )));
        }
        if !self.logs.records().is_empty() {
            let mut logs = TelemetryExplorer::new(
                Telemetry::Logs(self.logs.clone(), LogAnalyzer::default()),
                windows,
            );
            if has_spans {
                // Log lines joined to their spans: what each operation's requests stopped
                // doing.
                // (Metric alarms as span events, `with_alarms`, are not joined by default: on
                // the Nezha development day they added patterns at components the fault did
                // not touch; see docs/arch/analyzers.md.)
                logs = logs.with_spans(self.traces.clone(), EventAnalyzer::default());
            }
            explorers.push(Arc::new(logs));
        }
        explorers
    }

    /// The onset of `incident` estimated from every modality inside its window (up to the
    /// detection time).
    pub fn estimate_onset(
        &self,
        incident: &rca_core::Incident,
        detector: &OnsetDetector,
    ) -> Option<OnsetEstimate> {
        let window = rca_core::TimeRange::new(
            incident.window.start,
            incident.window.end.min(incident.detected_at),
        );
        detector.detect(
            window,
            self.metrics.samples_all(),
            self.traces.spans_all(),
            self.logs.records(),
        )
    }
}

/// The part of a wall-time budget kept for the policies once the models' time is up: a fifth,
/// at most 30 s (the policies and explorers take well under a second on the bundled incidents).
fn policy_reserve(limit: Duration) -> Duration {
    (limit / 5).min(Duration::from_secs(30))
}

impl DiagnosisPipeline {
    /// The pipeline over `loaded` with the built-in telemetry explorers.
    pub fn new(
        loaded: &IncidentDir,
        models: RoleModels,
        config: PipelineConfig,
    ) -> Result<Self, OrchestraError> {
        Self::over(
            IncidentTelemetry::of_dir(loaded),
            &loaded.incident,
            models,
            config,
        )
    }

    /// The pipeline over telemetry the caller holds, with the built-in telemetry explorers.
    pub fn over(
        telemetry: IncidentTelemetry,
        incident: &rca_core::Incident,
        models: RoleModels,
        config: PipelineConfig,
    ) -> Result<Self, OrchestraError> {
        let windows = WindowPolicy {
            current_millis: config.current_minutes.max(1) * 60_000,
            baseline: telemetry.baseline,
        };
        let explorers = telemetry.explorers(windows);
        let graph = telemetry.service_graph(incident);
        let mut pipeline = Self::with_explorers(explorers, graph, models, config)?;
        pipeline.telemetry = Some(telemetry);
        Ok(pipeline)
    }

    /// The telemetry the onset is estimated from, for a pipeline built
    /// [`with_explorers`](Self::with_explorers) (generated tools over the same incident).
    pub fn with_onset_telemetry(mut self, telemetry: IncidentTelemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
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
            ranker: config.ranker.clone(),
            ..ConvergenceController::default()
        };
        let policy_planner: Arc<dyn Planner> = Arc::new(OrderedPlanner::default());
        let policy_controller: Arc<dyn Controller> = Arc::new(rule.clone());
        let policy_reasoner: Arc<dyn Reasoner> = Arc::new(EvidenceReasoner {
            ranker: config.ranker.clone(),
            classifier: Some(super::policy::classifier_of(config.taxonomy.clone())),
            ..EvidenceReasoner::default()
        });
        let mut fallbacks = Fallbacks::default();
        // Every model call ends by the run's deadline (see `run`), so a model that never
        // answers fails in time for its role's policy to answer instead.
        let bounded = |m: Arc<dyn ChatModel>| -> Arc<dyn ChatModel> {
            Arc::new(super::deadline::DeadlineModel::new(m))
        };
        let models = RoleModels {
            planner: models.planner.map(bounded),
            controller: models.controller.map(bounded),
            reasoner: models.reasoner.map(bounded),
        };
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
            telemetry: None,
        })
    }

    /// The pipeline reading and writing `memory`: past incidents with a similar alert are
    /// offered to the planner, each explorer's past actions to that explorer, and the run is
    /// remembered when it ends.
    pub fn with_memory(mut self, memory: &mut DiagnosisMemory) -> Result<Self, OrchestraError> {
        let embedder = memory.embedder();
        for name in self.orchestrator.explorer_names() {
            let store = memory
                .explorer(&name)
                .map_err(|e| OrchestraError::Memory(e.to_string()))?;
            self.orchestrator =
                self.orchestrator
                    .with_long_term_memory(name, store, Arc::clone(&embedder));
        }
        self.orchestrator = self
            .orchestrator
            .with_incident_memory(memory.incidents(), embedder);
        Ok(self)
    }

    /// The orchestrator (to add long-term memory or take its cancel flag before running).
    pub fn orchestrator_mut(&mut self) -> &mut Orchestrator {
        &mut self.orchestrator
    }

    /// Runs the diagnosis of `incident` within the wall-time budget
    /// ([`OrchestraError::TimedOut`] when it is exceeded). Without a stated onset the pipeline
    /// estimates one (when it has the telemetry and [`PipelineConfig::onset`] is set), and
    /// the explorers compare the time since the onset with the time before it; the record
    /// says which onset was used.
    pub async fn run(&self, incident: &rca_core::Incident) -> Result<RunRecord, OrchestraError> {
        let mut incident = incident.clone();
        let mut estimate = None;
        if incident.onset.is_none()
            && let (Some(detector), Some(telemetry)) = (&self.config.onset, &self.telemetry)
        {
            estimate = telemetry.estimate_onset(&incident, detector);
            incident.onset = estimate.map(|e| e.at);
        }
        let memory = InMemoryShortTermMemory::new();
        let run = self.orchestrator.run(&incident, &memory);
        let mut record = match self.config.wall_time {
            Some(limit) => {
                // Model calls end a little before the budget, leaving the policies that take
                // over the time to finish the run; the budget itself is the backstop.
                let start = tokio::time::Instant::now();
                let models_until = start + limit.saturating_sub(policy_reserve(limit));
                let run = super::deadline::within(models_until, run);
                tokio::time::timeout_at(start + limit, run)
                    .await
                    .map_err(|_| OrchestraError::TimedOut {
                        seconds: limit.as_secs_f64(),
                    })?
            }
            None => run.await,
        }?;
        if let Some(e) = estimate {
            record.onset = Some(Onset::Estimated(e));
        }
        Ok(record)
    }
}
