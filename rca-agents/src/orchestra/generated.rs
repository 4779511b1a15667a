//! An explorer that answers subgoals with generated diagnostic tools (ICWS'26 pattern 3):
//! it asks a [`ToolLifecycle`] for a tool fitting the subgoal (a stored one when one is
//! relevant, else a newly generated and checked one), runs it on the incident's telemetry
//! tables, and turns the leading rows into evidence. The tools it used are remembered so that
//! the host can teach the tool graph once the diagnosis is judged
//! ([`GeneratedToolExplorer::record_outcome`]).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_core::source::Value;
use rca_core::{Evidence, Modality, TimeRange};
use rca_tools::lifecycle::{Acquisition, ToolLifecycle, ToolTask};
use rca_tools::tables::{QueryResult, TableEngine};

use super::roles::{Escalation, Exploration, ExploreRequest, Explorer, OrchestraError};

/// How many leading rows of a tool's result become evidence.
pub const DEFAULT_EVIDENCE_ROWS: usize = 3;

/// Explores one modality with tools from a shared [`ToolLifecycle`].
pub struct GeneratedToolExplorer {
    name: String,
    modality: Modality,
    lifecycle: Arc<ToolLifecycle>,
    engine: Arc<dyn TableEngine>,
    evidence_rows: usize,
    used: Mutex<Vec<String>>,
}

impl GeneratedToolExplorer {
    /// An explorer of `modality` over `engine` (the incident's telemetry tables).
    pub fn new(
        modality: Modality,
        lifecycle: Arc<ToolLifecycle>,
        engine: Arc<dyn TableEngine>,
    ) -> Self {
        GeneratedToolExplorer {
            name: format!("{modality}-tool-explorer"),
            modality,
            lifecycle,
            engine,
            evidence_rows: DEFAULT_EVIDENCE_ROWS,
            used: Mutex::new(Vec::new()),
        }
    }

    /// Sets how many leading rows of a result become evidence (at least one).
    pub fn with_evidence_rows(mut self, rows: usize) -> Self {
        self.evidence_rows = rows.max(1);
        self
    }

    /// The tools this explorer ran, in order.
    pub fn tools_used(&self) -> Vec<String> {
        self.used.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// Records the finished diagnosis in the lifecycle: a successful one teaches the tool
    /// graph the order in which `sequence` (e.g. the tools of every explorer, in run order)
    /// was used.
    pub fn record_outcome(&self, sequence: &[String], succeeded: bool) -> Result<(), String> {
        self.lifecycle
            .record_diagnosis(sequence, succeeded)
            .map_err(|e| e.to_string())
    }

    fn task(&self, request: &ExploreRequest<'_>) -> ToolTask {
        let mut task = task_for(
            &self.modality,
            &request.subgoal.goal,
            request.incident.window,
        );
        if request.escalation == Escalation::Refine {
            task.description.push_str(" (per component, whole window)");
        }
        task
    }
}

/// The tool task an explorer of `modality` poses for a subgoal: what a warm-up should
/// pre-generate tools for.
pub fn task_for(modality: &Modality, goal: &str, window: TimeRange) -> ToolTask {
    ToolTask::new(format!("{modality} {goal}"), Some(window))
}

/// The leading rows of a result as evidence: the `component` column names the component
/// (rows without one are skipped); the finding lists the row's columns; the score falls with
/// the rank (1, 1/2, 1/3, ...), since every generated tool orders its rows most suspicious
/// first.
fn evidence_from(
    result: &QueryResult,
    modality: &Modality,
    tool: &str,
    window: TimeRange,
    rows: usize,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    for (row, values) in result.rows.iter().enumerate() {
        if out.len() >= rows {
            break;
        }
        let Some(Value::Text(component)) = result.value(row, "component") else {
            continue;
        };
        if component.trim().is_empty() {
            continue;
        }
        let cells: Vec<String> = result
            .columns
            .iter()
            .zip(values)
            .filter(|(c, _)| !c.eq_ignore_ascii_case("component"))
            .map(|(c, v)| format!("{c}={}", render(v)))
            .collect();
        let rank = out.len() + 1;
        out.push(
            Evidence::new(
                modality.clone(),
                window.end,
                component.clone(),
                format!("{tool} ranks it #{rank}: {}", cells.join(", ")),
            )
            .with_kind(format!("generated_tool:{tool}"))
            .with_score(1.0 / rank as f64),
        );
    }
    out
}

fn render(v: &Value) -> String {
    match v {
        Value::Float(f) => format!("{f:.3}"),
        other => other.to_string(),
    }
}

#[async_trait]
impl Explorer for GeneratedToolExplorer {
    fn name(&self) -> &str {
        &self.name
    }

    fn modality(&self) -> Modality {
        self.modality.clone()
    }

    async fn explore(&self, request: &ExploreRequest<'_>) -> Result<Exploration, OrchestraError> {
        let role = |message: String| OrchestraError::Role {
            role: self.name.clone(),
            message,
        };
        let task = self.task(request);
        let last = self.tools_used().last().cloned();
        let acquired = self
            .lifecycle
            .acquire(&task, last.as_deref(), self.engine.as_ref())
            .await
            .map_err(|e| role(e.to_string()))?;
        let (name, how) = match &acquired {
            Acquisition::Reused { name, .. } => (name.clone(), "reused"),
            Acquisition::Generated { name, .. } => (name.clone(), "generated"),
            Acquisition::Escalated(e) => {
                return Ok(Exploration {
                    evidence: Vec::new(),
                    conclusion: format!(
                        "no tool could be generated for `{}`: {}",
                        task.description, e.reason
                    ),
                    completed: false,
                    actions: vec!["tool generation escalated".into()],
                    significance: None,
                });
            }
        };
        let window = request.incident.window;
        let result = match self
            .lifecycle
            .run(
                &name,
                &serde_json::Value::Null,
                Some(window),
                self.engine.as_ref(),
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return Ok(Exploration {
                    evidence: Vec::new(),
                    conclusion: format!("tool {name} failed: {e}"),
                    completed: false,
                    actions: vec![format!("{how} tool {name}")],
                    significance: None,
                });
            }
        };
        if let Ok(mut used) = self.used.lock() {
            used.push(name.clone());
        }
        let evidence = evidence_from(&result, &self.modality, &name, window, self.evidence_rows);
        let conclusion = match evidence.first() {
            Some(e) => format!("{name} ({how}) puts {} first: {}", e.component, e.finding),
            None => format!("{name} ({how}) found no component to blame"),
        };
        Ok(Exploration {
            evidence,
            conclusion,
            completed: true,
            actions: vec![format!("{how} tool {name}"), format!("ran {name}")],
            significance: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rca_llm::HashingEmbedder;
    use rca_tools::incident_dir::IncidentDir;
    use rca_tools::lifecycle::{TemplatePolicy, ToolForge, ToolInventory, ToolSelector};
    use rca_tools::tables::{SandboxLimits, TelemetryTables};

    use super::*;
    use crate::memory::InMemoryShortTermMemory;
    use crate::orchestra::Orchestrator;
    use crate::orchestra::policy::{ConvergenceController, EvidenceReasoner, OrderedPlanner};

    fn lifecycle() -> Arc<ToolLifecycle> {
        let forge = ToolForge::new(Arc::new(TemplatePolicy), Arc::new(TemplatePolicy));
        Arc::new(ToolLifecycle::new(
            ToolInventory::new(),
            ToolSelector::new(Arc::new(HashingEmbedder::default())),
            forge,
        ))
    }

    fn explorers(
        lc: &Arc<ToolLifecycle>,
        engine: &Arc<dyn TableEngine>,
    ) -> Vec<Arc<GeneratedToolExplorer>> {
        [Modality::Logs, Modality::Traces, Modality::Metrics]
            .into_iter()
            .map(|m| Arc::new(GeneratedToolExplorer::new(m, lc.clone(), engine.clone())))
            .collect()
    }

    /// The orchestration runs on the bundled incident with generated-tool explorers: the
    /// first diagnosis generates tools, a second one (same lifecycle) reuses them, and the
    /// successful sequence teaches the tool graph.
    #[tokio::test(flavor = "multi_thread")]
    async fn orchestration_explores_with_generated_tools_and_reuses_them() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/incidents/trainticket-cpu");
        let loaded = IncidentDir::open(&dir).unwrap();
        let tables = TelemetryTables::new(SandboxLimits::default()).unwrap();
        tables.register_incident(&loaded).unwrap();
        let engine: Arc<dyn TableEngine> = Arc::new(tables);
        let lc = lifecycle();

        let mut generated_first = 0;
        for round in 0..2 {
            let ours = explorers(&lc, &engine);
            let as_dyn: Vec<Arc<dyn Explorer>> = ours
                .iter()
                .map(|e| e.clone() as Arc<dyn Explorer>)
                .collect();
            let orchestrator = Orchestrator::new(
                Arc::new(OrderedPlanner::default()),
                Arc::new(ConvergenceController::default()),
                Arc::new(EvidenceReasoner::default()),
                as_dyn,
            );
            let record = orchestrator
                .run(&loaded.incident, &InMemoryShortTermMemory::new())
                .await
                .unwrap();
            let modalities: std::collections::BTreeSet<String> = record
                .evidence
                .iter()
                .filter(|e| {
                    e.kind
                        .as_deref()
                        .is_some_and(|k| k.starts_with("generated_tool:"))
                })
                .map(|e| e.modality.to_string())
                .collect();
            assert!(modalities.len() >= 2, "round {round}: {modalities:?}");
            assert!(!record.report.root_cause.is_empty());
            let sequence: Vec<String> = ours.iter().flat_map(|e| e.tools_used()).collect();
            assert!(!sequence.is_empty());
            let inventory = lc.inventory().unwrap();
            if round == 0 {
                generated_first = inventory.len();
                assert!(generated_first >= 2, "tools generated: {generated_first}");
                ours[0].record_outcome(&sequence, true).unwrap();
                assert!(!lc.inventory().unwrap().graph().is_empty());
            } else {
                // Nothing new was needed: every subgoal reused a stored tool.
                assert_eq!(inventory.len(), generated_first);
                assert!(inventory.tools().all(|t| t.successes >= 2), "{inventory:?}");
            }
        }
    }

    #[test]
    fn rows_without_a_component_give_no_evidence() {
        let result = QueryResult {
            columns: vec!["component".into(), "errors".into()],
            rows: vec![
                vec![Value::Null, Value::Int(9)],
                vec![Value::Text("cart".into()), Value::Int(4)],
                vec![Value::Text("db".into()), Value::Float(1.5)],
            ],
        };
        let window = TimeRange::new(rca_core::Timestamp(0), rca_core::Timestamp(1000));
        let ev = evidence_from(&result, &Modality::Logs, "errs", window, 1);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].component, "cart");
        assert!(ev[0].finding.contains("errors=4"), "{}", ev[0].finding);
        assert_eq!(ev[0].kind.as_deref(), Some("generated_tool:errs"));
    }
}
