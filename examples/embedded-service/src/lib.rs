//! A host service that embeds the library: it links `rca-core` and `rca-agents` only and
//! brings its own model ([`GatewayModel`], an in-house gateway) and its own log store
//! ([`ShipperStore`]). The orchestra plans and explores deterministically over the host's
//! logs, and the host's model writes the report (its candidates are kept only when the
//! evidence names them).

#![deny(missing_docs)]

use std::sync::Arc;

use example_host_log_source::ShipperStore;
use example_host_model::GatewayModel;
use rca_agents::memory::InMemoryShortTermMemory;
use rca_agents::orchestra::explorers::{LogAnalyzer, Telemetry, TelemetryExplorer, WindowPolicy};
use rca_agents::orchestra::model::ModelReasoner;
use rca_agents::orchestra::policy::{ConvergenceController, OrderedPlanner};
use rca_agents::orchestra::{Explorer, OrchestraError, Orchestrator, RunRecord};
use rca_core::Incident;

pub use example_host_log_source::ShipperStore as HostLogStore;
pub use example_host_model::{GatewayConfig, GatewayModel as HostModel};

/// The orchestra wired to the host's model and log store.
pub fn orchestrator(model: GatewayModel, logs: ShipperStore, current_minutes: i64) -> Orchestrator {
    let explorer: Arc<dyn Explorer> = Arc::new(TelemetryExplorer::new(
        Telemetry::Logs(Arc::new(logs), LogAnalyzer::default()),
        WindowPolicy {
            current_millis: current_minutes.max(1) * 60_000,
            baseline: None,
        },
    ));
    Orchestrator::new(
        Arc::new(OrderedPlanner::default()),
        // Logs are the only modality here, so one agreeing modality is enough.
        Arc::new(ConvergenceController {
            min_modalities: 1,
            ..ConvergenceController::default()
        }),
        Arc::new(ModelReasoner::new(Arc::new(model))),
        vec![explorer],
    )
}

/// Diagnoses `incident` over the host's logs with the host's model.
pub async fn diagnose(
    model: GatewayModel,
    logs: ShipperStore,
    incident: &Incident,
) -> Result<RunRecord, OrchestraError> {
    orchestrator(model, logs, 10)
        .run(incident, &InMemoryShortTermMemory::new())
        .await
}
