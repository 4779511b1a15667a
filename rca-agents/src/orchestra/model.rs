//! Model-backed orchestration roles: each asks a [`ChatModel`] for JSON, repairs it locally
//! and, when repair fails, regenerates it (RCAgent's JsonRegen). A host can give every role
//! its own model (a local model for the explorers, another for the reasoner).
//!
//! The invariants of the orchestration hold whatever a model says: the controller concludes
//! only when evidence from enough modalities converges (a premature "conclude" becomes
//! "continue"), planned modalities must be available, and the reasoner's candidates must be
//! components that evidence names.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{
    Capabilities, ChatModel, CompletionRequest, CompletionResponse, Message, ResponseFormat, Usage,
};
use rca_core::{DiagnosisReport, Evidence, Incident, Modality, Responsibility};
use rca_llm::json::{JsonRegen, repair};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::policy::{ConvergenceController, EvidenceReasoner};
use super::roles::{
    Controller, Decision, InvestigationView, OrchestraError, PastIncident, Plan, Planner, Reasoner,
    ReplanRequest, Subgoal,
};

/// The token limit of one role answer (a plan, a decision, a report are short).
pub const ROLE_MAX_TOKENS: u32 = 200;

/// Evidence lines (the highest-scored) a controller or reasoner prompt shows.
pub const PROMPT_EVIDENCE_LINES: usize = 20;

/// A role's model with the tokens it spends counted: every call, JSON regeneration included,
/// as the server reported them (estimates, marked so, where it reported none).
struct Metered {
    inner: Arc<dyn ChatModel>,
    spent: std::sync::Mutex<Usage>,
}

impl Metered {
    fn new(inner: Arc<dyn ChatModel>) -> Self {
        Metered {
            inner,
            spent: std::sync::Mutex::new(Usage::default()),
        }
    }

    /// Everything spent so far.
    fn spent(&self) -> Usage {
        // A poisoned lock still holds the counts.
        *self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ChatModel for Metered {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let response = self.inner.complete(request).await?;
        self.spent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(&response.usage);
        Ok(response)
    }
}

/// Asks `model` for JSON following the schema of `T` (structured output where the server has
/// it, a prompt hint otherwise) and parses its answer as `T`, repairing and regenerating JSON
/// when needed.
async fn ask_json<T: DeserializeOwned + JsonSchema>(
    role: &str,
    model: &dyn ChatModel,
    system: &str,
    user: String,
    shape: &str,
) -> Result<T, OrchestraError> {
    let fail = |message: String| OrchestraError::Role {
        role: role.to_string(),
        message,
    };
    let mut request = CompletionRequest::new(vec![Message::system(system), Message::user(user)])
        .with_temperature(0.0)
        .with_max_tokens(ROLE_MAX_TOKENS);
    request.response_format = ResponseFormat::JsonSchema {
        name: role.to_string(),
        schema: rca_core::llm::output_schema::<T>(),
    };
    let response = model
        .complete(request)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let value = match repair(response.text()) {
        Ok(r) => r.value,
        Err(_) => {
            JsonRegen::default()
                .recover(model, response.text(), Some(shape))
                .await
                .map_err(|e| fail(e.to_string()))?
                .value
        }
    };
    serde_json::from_value(value).map_err(|e| fail(format!("answer does not fit {shape}: {e}")))
}

fn modality_from_word(word: &str) -> Modality {
    match word.trim().to_ascii_lowercase().as_str() {
        "metrics" | "metric" => Modality::Metrics,
        "logs" | "log" => Modality::Logs,
        "traces" | "trace" | "spans" => Modality::Traces,
        "code" => Modality::Code,
        "records" | "events" | "tables" => Modality::Records,
        other => Modality::Other(other.to_string()),
    }
}

fn incident_text(incident: &Incident) -> String {
    format!(
        "Incident {}: {}\nDetected at {}. Window {}.\n{}\n{}",
        incident.id,
        incident.title,
        incident.detected_at,
        incident.window,
        incident.description,
        incident.system
    )
}

fn evidence_table(evidence: &[Evidence], max: usize) -> String {
    let mut sorted: Vec<&Evidence> = evidence.iter().collect();
    sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
    sorted
        .iter()
        .take(max)
        .map(|e| {
            format!(
                "- [{}] {} {}: {} (score {:.2})",
                e.modality, e.observed_at, e.component, e.finding, e.score
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A planner backed by a model.
pub struct ModelPlanner {
    model: Metered,
}

impl ModelPlanner {
    /// A planner asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelPlanner {
            model: Metered::new(model),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct PlanAnswer {
    #[serde(default)]
    rationale: String,
    subgoals: Vec<SubgoalAnswer>,
}

#[derive(Deserialize, JsonSchema)]
struct SubgoalAnswer {
    modality: String,
    goal: String,
    #[serde(default)]
    focus: Vec<String>,
}

const PLANNER_SYSTEM: &str = "You plan the investigation of a cloud incident. Order the \
available telemetry modalities into subgoals, most informative first; each subgoal names one \
modality and what to find out there. Answer with JSON: {\"rationale\": \"...\", \"subgoals\": \
[{\"modality\": \"metrics|traces|logs|...\", \"goal\": \"...\", \"focus\": [\"component\", ...]}]}.";

#[async_trait]
impl Planner for ModelPlanner {
    fn usage(&self) -> Usage {
        self.model.spent()
    }

    async fn plan(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
    ) -> Result<Plan, OrchestraError> {
        self.plan_with_memory(incident, available, replan, &[])
            .await
    }

    async fn plan_with_memory(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
        past: &[PastIncident],
    ) -> Result<Plan, OrchestraError> {
        let names: Vec<String> = available.iter().map(|m| m.to_string()).collect();
        let mut user = format!(
            "{}\n\nAvailable modalities: {}.",
            incident_text(incident),
            names.join(", ")
        );
        if !past.is_empty() {
            user.push_str("\n\nSimilar past incidents (long-term memory):");
            for p in past {
                let settled: Vec<String> = p.settled_by.iter().map(|m| m.to_string()).collect();
                user.push_str(&format!(
                    "\n- {} (similarity {:.2}): {}; concluded {}; settled by {}",
                    p.incident,
                    p.similarity,
                    p.alert,
                    p.root_cause.as_deref().unwrap_or("nothing"),
                    if settled.is_empty() {
                        "no modality".to_string()
                    } else {
                        settled.join(", ")
                    }
                ));
            }
        }
        if let Some(r) = replan {
            user.push_str(&format!(
                "\n\nThe previous plan must be revised: {}. Modalities that failed: {}. \
                 Suspects so far: {}.",
                r.reason,
                r.failed
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                r.suspects.join(", ")
            ));
        }
        let answer: PlanAnswer = ask_json(
            "planner",
            &self.model,
            PLANNER_SYSTEM,
            user,
            r#"{"rationale": "...", "subgoals": [{"modality": "...", "goal": "...", "focus": []}]}"#,
        )
        .await?;
        let subgoals: Vec<Subgoal> = answer
            .subgoals
            .into_iter()
            .map(|s| Subgoal {
                modality: modality_from_word(&s.modality),
                goal: s.goal,
                focus: s.focus,
            })
            .filter(|s| available.contains(&s.modality))
            .collect();
        if subgoals.is_empty() {
            return Err(OrchestraError::Role {
                role: "planner".into(),
                message: format!(
                    "the plan names none of the available modalities ({})",
                    names.join(", ")
                ),
            });
        }
        Ok(Plan {
            subgoals,
            revision: replan.map(|r| r.previous.revision + 1).unwrap_or(0),
            rationale: answer.rationale,
        })
    }
}

/// A controller backed by a model, held to the convergence rule.
pub struct ModelController {
    model: Metered,
    rule: ConvergenceController,
}

impl ModelController {
    /// A controller asking `model`, concluding only when `rule` sees convergence.
    pub fn new(model: Arc<dyn ChatModel>, rule: ConvergenceController) -> Self {
        ModelController {
            model: Metered::new(model),
            rule,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct DecisionAnswer {
    decision: String,
    #[serde(default)]
    reason: String,
}

const CONTROLLER_SYSTEM: &str = "You control a cloud incident investigation. Given the plan's \
progress and the evidence so far, choose: \"continue\" (run the next subgoal), \"conclude\" \
(evidence from at least two modalities converges on one component) or \"escalate\" (the plan \
is not working and must be revised). Answer with JSON: {\"decision\": \"continue|conclude|escalate\", \"reason\": \"...\"}.";

#[async_trait]
impl Controller for ModelController {
    fn usage(&self) -> Usage {
        self.model.spent()
    }

    async fn decide(&self, view: &InvestigationView<'_>) -> Result<Decision, OrchestraError> {
        let user = format!(
            "{}\n\nPlan ({} of {} subgoals done):\n{}\n\nFailing modalities: {}\n\nEvidence:\n{}",
            incident_text(view.incident),
            view.done,
            view.plan.subgoals.len(),
            view.plan
                .subgoals
                .iter()
                .map(|s| format!("- {}", s.goal))
                .collect::<Vec<_>>()
                .join("\n"),
            view.failing
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            evidence_table(view.evidence, PROMPT_EVIDENCE_LINES)
        );
        let answer: DecisionAnswer = ask_json(
            "controller",
            &self.model,
            CONTROLLER_SYSTEM,
            user,
            r#"{"decision": "continue", "reason": "..."}"#,
        )
        .await?;
        let converged = self.rule.converged(view.evidence, view.significance);
        let more = view.done < view.plan.subgoals.len();
        Ok(
            match (
                answer.decision.trim().to_ascii_lowercase().as_str(),
                converged,
            ) {
                ("conclude", Some((component, modalities))) => Decision::Conclude {
                    component,
                    modalities,
                },
                // Concluding without convergence breaks the two-modality rule: keep going.
                ("conclude", None) if more => Decision::Continue,
                ("conclude", None) => Decision::Escalate {
                    reason: "no component has converging evidence from enough modalities".into(),
                },
                ("escalate", _) => Decision::Escalate {
                    reason: if answer.reason.is_empty() {
                        "the controller asked for a new plan".into()
                    } else {
                        answer.reason
                    },
                },
                (_, _) if more => Decision::Continue,
                // Nothing left to run: the rule decides.
                (_, Some((component, modalities))) => Decision::Conclude {
                    component,
                    modalities,
                },
                (_, None) => Decision::Escalate {
                    reason: "the plan is done without convergence".into(),
                },
            },
        )
    }
}

/// A reasoner backed by a model: the deterministic ranking is offered as a hint, the model
/// writes the report, and its candidates are kept only when evidence names them.
pub struct ModelReasoner {
    model: Metered,
    ranking: EvidenceReasoner,
}

impl ModelReasoner {
    /// A reasoner asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelReasoner {
            model: Metered::new(model),
            ranking: EvidenceReasoner::default(),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct ReportAnswer {
    root_cause: String,
    solution: String,
    #[serde(default)]
    responsibility: Option<String>,
    #[serde(default)]
    confidence: Option<f64>,
    #[serde(default)]
    candidates: Vec<String>,
    #[serde(default)]
    fault_type: Option<String>,
}

const REASONER_SYSTEM: &str = "You are the reasoner of a cloud incident diagnosis. Think step \
by step over the evidence (each line: modality, time, component, finding, score), then write \
the report. Name candidate root-cause components best first, only components that appear in \
the evidence. Answer with JSON: {\"root_cause\": \"...\", \"solution\": \"...\", \
\"responsibility\": \"platform|user|infrastructure\", \"confidence\": 0.0-1.0, \
\"fault_type\": \"...\", \"candidates\": [\"component\", ...]}.";

#[async_trait]
impl Reasoner for ModelReasoner {
    fn usage(&self) -> Usage {
        self.model.spent()
    }

    async fn reason(
        &self,
        incident: &Incident,
        evidence: &[Evidence],
        concluded: Option<&Decision>,
    ) -> Result<DiagnosisReport, OrchestraError> {
        let hint = self.ranking.rank(evidence);
        let user = format!(
            "{}\n\nController decision: {}\n\nRanking by evidence scores (a hint): {}\n\nEvidence:\n{}",
            incident_text(incident),
            concluded
                .map(|d| serde_json::to_string(d).unwrap_or_default())
                .unwrap_or_else(|| "none".into()),
            hint.iter()
                .take(5)
                .map(|c| format!("{} ({:.2})", c.component, c.score))
                .collect::<Vec<_>>()
                .join(", "),
            evidence_table(evidence, PROMPT_EVIDENCE_LINES)
        );
        let answer: ReportAnswer = ask_json(
            "reasoner",
            &self.model,
            REASONER_SYSTEM,
            user,
            r#"{"root_cause": "...", "solution": "...", "responsibility": "platform", "confidence": 0.5, "fault_type": "...", "candidates": []}"#,
        )
        .await?;
        // Only components that evidence names can be candidates (the ranking holds exactly
        // those), in the model's order.
        let mut candidates: Vec<rca_core::trajectory::RootCauseCandidate> = Vec::new();
        for name in &answer.candidates {
            if let Some(c) = hint.iter().find(|c| &c.component == name)
                && !candidates.iter().any(|x| x.component == c.component)
            {
                candidates.push(c.clone());
            }
        }
        // Components the model left out follow in the evidence ranking's order.
        for c in hint {
            if !candidates.iter().any(|x| x.component == c.component) {
                candidates.push(c);
            }
        }
        if let (Some(top), Some(kind)) = (candidates.first_mut(), answer.fault_type.clone()) {
            top.fault_type = Some(kind);
        }
        let top = candidates.first().map(|c| c.component.clone());
        let mut chain: Vec<Evidence> = evidence
            .iter()
            .filter(|e| Some(&e.component) == top.as_ref() && e.score > 0.0)
            .cloned()
            .collect();
        chain.sort_by_key(|e| e.observed_at);
        Ok(DiagnosisReport {
            root_cause: answer.root_cause,
            solution: answer.solution,
            evidence: chain,
            responsibility: answer
                .responsibility
                .map(Responsibility::from)
                .unwrap_or(Responsibility::Platform),
            confidence: answer.confidence.unwrap_or(0.5).clamp(0.0, 1.0),
            candidates,
            usage: Default::default(),
            elapsed_ms: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use rca_core::{TimeRange, Timestamp};
    use rca_llm::ScriptedModel;

    use super::*;

    fn incident() -> Incident {
        Incident {
            id: "inc".into(),
            title: "checkout errors".into(),
            description: String::new(),
            detected_at: Timestamp(1000),
            window: TimeRange::new(Timestamp(0), Timestamp(1000)),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
        }
    }

    fn ev(m: Modality, c: &str, s: f64) -> Evidence {
        Evidence::new(m, Timestamp(10), c, format!("{c} anomalous")).with_score(s)
    }

    #[tokio::test]
    async fn planner_keeps_available_modalities_and_repairs_json() {
        // Canned turn written for this test (trailing comma, prose around the JSON).
        let model = ScriptedModel::from_texts(
            "scripted-planner-test",
            [
                r#"Here is the plan: {"rationale": "errors first", "subgoals": [
                {"modality": "logs", "goal": "find errors"},
                {"modality": "profiles", "goal": "not available"},
                {"modality": "Metrics", "goal": "cpu", "focus": ["db"]},]}"#,
            ],
        );
        let plan = ModelPlanner::new(Arc::new(model))
            .plan(&incident(), &[Modality::Metrics, Modality::Logs], None)
            .await
            .unwrap();
        let mods: Vec<_> = plan.subgoals.iter().map(|s| s.modality.clone()).collect();
        assert_eq!(mods, vec![Modality::Logs, Modality::Metrics]);
        assert_eq!(plan.subgoals[1].focus, vec!["db".to_string()]);
    }

    #[tokio::test]
    async fn controller_cannot_conclude_without_convergence() {
        let plan = Plan {
            subgoals: vec![
                Subgoal {
                    modality: Modality::Metrics,
                    goal: "m".into(),
                    focus: vec![],
                },
                Subgoal {
                    modality: Modality::Logs,
                    goal: "l".into(),
                    focus: vec![],
                },
            ],
            revision: 0,
            rationale: String::new(),
        };
        let model = ScriptedModel::from_texts(
            "scripted-controller-test",
            [
                r#"{"decision": "conclude", "reason": "metrics are convincing"}"#,
                r#"{"decision": "conclude", "reason": "both agree"}"#,
            ],
        );
        let c = ModelController::new(Arc::new(model), ConvergenceController::default());
        let one = vec![ev(Modality::Metrics, "db", 5.0)];
        let inc = incident();
        let view = InvestigationView {
            incident: &inc,
            plan: &plan,
            done: 1,
            evidence: &one,
            failing: &[],
            significance: &Default::default(),
        };
        assert_eq!(c.decide(&view).await.unwrap(), Decision::Continue);
        let two = vec![
            ev(Modality::Metrics, "db", 5.0),
            ev(Modality::Logs, "db", 2.0),
        ];
        let view = InvestigationView {
            incident: &inc,
            plan: &plan,
            done: 2,
            evidence: &two,
            failing: &[],
            significance: &Default::default(),
        };
        assert!(
            matches!(c.decide(&view).await.unwrap(), Decision::Conclude { component, .. } if component == "db")
        );
    }

    #[tokio::test]
    async fn reasoner_keeps_only_components_with_evidence() {
        let model = ScriptedModel::from_texts(
            "scripted-reasoner-test",
            [
                r#"{"root_cause": "cache eviction storm", "solution": "raise cache memory",
                "responsibility": "platform", "confidence": 1.7, "fault_type": "memory",
                "candidates": ["made-up-service", "cache", "db"]}"#,
            ],
        );
        let evidence = vec![
            ev(Modality::Metrics, "db", 5.0),
            ev(Modality::Logs, "cache", 2.0),
        ];
        let report = ModelReasoner::new(Arc::new(model))
            .reason(&incident(), &evidence, None)
            .await
            .unwrap();
        let names: Vec<_> = report
            .candidates
            .iter()
            .map(|c| c.component.as_str())
            .collect();
        assert_eq!(names, ["cache", "db"]);
        assert_eq!(report.candidates[0].fault_type.as_deref(), Some("memory"));
        assert_eq!(report.confidence, 1.0);
        assert_eq!(report.evidence.len(), 1);
    }

    #[tokio::test]
    async fn broken_answers_become_role_errors() {
        let model = ScriptedModel::from_texts("scripted-planner-broken", ["no plan today"]);
        let err = ModelPlanner::new(Arc::new(model))
            .plan(&incident(), &[Modality::Metrics], None)
            .await
            .unwrap_err();
        assert!(matches!(err, OrchestraError::Role { .. }));
    }
}
