//! The controller's deterministic policy: a [`ChatModel`] that plays the model's part in the
//! ReAct loop without a language model, for hosts that configure none.
//!
//! It investigates the components it is given, most suspect first: their logs (handed to the
//! log expert by the snapshot key of the observation when it was cut), then their metrics and
//! traces, and finalizes with the conclusion it was given, citing what the tools said. Every
//! turn is derived from the request (how many turns came before, the last observation), so a
//! run is the same every time.

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{
    ChatModel, Choice, CompletionRequest, CompletionResponse, FinishReason, Message, Role, Usage,
    estimate_tokens,
};
use rca_core::trajectory::DiagnosisReport;
use serde_json::{Value, json};

use super::finalize::FINALIZE;

/// One planned turn.
#[derive(Debug, Clone, PartialEq)]
enum Planned {
    /// Call a tool with these arguments.
    Call(String, Value),
    /// Give the log expert the last observation (its snapshot key when it was cut).
    ExpertOnLast { tool: String, entity: String },
    /// End the run.
    Finalize,
}

/// A deterministic investigation plan played as the controller's model.
#[derive(Debug, Clone)]
pub struct PlannedInvestigation {
    plan: Vec<Planned>,
    conclusion: DiagnosisReport,
    components: Vec<String>,
}

/// The tools the plan uses, by the names the built-in tools have.
const LOGS: &str = "get_logs";
const METRICS: &str = "get_metrics";
const TRACES: &str = "get_traces";
const LOG_EXPERT: &str = "analyze_logs";

impl PlannedInvestigation {
    /// A plan over `suspects` (most suspect first; the first two are investigated) with the
    /// tools named in `tools`, ending with `conclusion` (for example the deterministic
    /// diagnosis of the same incident).
    pub fn new(suspects: &[String], tools: &[String], conclusion: DiagnosisReport) -> Self {
        let has = |name: &str| tools.iter().any(|t| t == name);
        let mut plan = Vec::new();
        for entity in suspects.iter().take(2) {
            if has(LOGS) {
                plan.push(Planned::Call(LOGS.into(), json!({ "entity": entity })));
                if has(LOG_EXPERT) {
                    plan.push(Planned::ExpertOnLast {
                        tool: LOG_EXPERT.into(),
                        entity: entity.clone(),
                    });
                }
            }
            for tool in [METRICS, TRACES] {
                if has(tool) {
                    plan.push(Planned::Call(tool.into(), json!({ "entity": entity })));
                }
            }
        }
        plan.push(Planned::Finalize);
        PlannedInvestigation {
            plan,
            components: suspects.iter().take(3).cloned().collect(),
            conclusion,
        }
    }

    /// The plan for a loaded incident directory: the deterministic diagnosis of the incident
    /// ([`crate::orchestra::DiagnosisPipeline`] with every role a policy) names the suspects,
    /// most likely first, and the conclusion; `tools` are the names the run offers.
    pub async fn from_deterministic_diagnosis(
        loaded: &rca_tools::incident_dir::IncidentDir,
        tools: &[String],
    ) -> Result<Self, crate::orchestra::OrchestraError> {
        use crate::orchestra::{DiagnosisPipeline, PipelineConfig, RoleModels};
        let pipeline =
            DiagnosisPipeline::new(loaded, RoleModels::default(), PipelineConfig::default())?;
        let diagnosis = pipeline.run(&loaded.incident).await?;
        let suspects: Vec<String> = diagnosis
            .report
            .candidates
            .iter()
            .map(|c| c.component.clone())
            .collect();
        Ok(Self::new(&suspects, tools, diagnosis.report))
    }

    /// How many turns the plan has (its last is `finalize`).
    pub fn turns(&self) -> usize {
        self.plan.len()
    }

    fn turn(&self, request: &CompletionRequest) -> Value {
        let done = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        match self.plan.get(done).unwrap_or(&Planned::Finalize) {
            Planned::Call(tool, args) => json!({
                "thought": format!("Read `{tool}` for {}.", args["entity"].as_str().unwrap_or("it")),
                "action": {"name": tool, "args": args},
            }),
            Planned::ExpertOnLast { tool, entity } => {
                let last = last_observation(&request.messages).unwrap_or_default();
                let text = snapshot_key_in(&last).unwrap_or(last);
                json!({
                    "thought": format!("Let the log expert read the logs of {entity}."),
                    "action": {"name": tool, "args": {"text": text, "entity": entity}},
                })
            }
            Planned::Finalize => {
                let cited: Vec<String> = request
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::User || m.role == Role::Tool)
                    .skip(1)
                    .filter_map(|m| first_finding(&m.content))
                    .take(5)
                    .collect();
                let c = &self.conclusion;
                json!({
                    "thought": "The evidence gathered supports the diagnosis.",
                    "action": {"name": FINALIZE, "args": {
                        "root_cause": c.root_cause,
                        "solution": c.solution,
                        "responsibility": c.responsibility,
                        "confidence": c.confidence.clamp(0.0, 1.0),
                        "evidence": cited,
                        "components": self.components,
                    }},
                })
            }
        }
    }
}

/// The text of the last observation (a tool message, or a user message after the first).
fn last_observation(messages: &[Message]) -> Option<String> {
    let m = messages.iter().skip(1).rev().find(|m| {
        m.role == Role::Tool || (m.role == Role::User && m.content.starts_with("Observation:"))
    })?;
    Some(
        m.content
            .strip_prefix("Observation: ")
            .unwrap_or(&m.content)
            .to_string(),
    )
}

/// The snapshot key named in an observation's note, if it was cut.
fn snapshot_key_in(text: &str) -> Option<String> {
    let at = text.rfind("Snapshot key: ")? + "Snapshot key: ".len();
    let rest = &text[at..];
    let end = rest.find(". ").unwrap_or(rest.len());
    let key = rest[..end].trim();
    (!key.is_empty()).then(|| key.to_string())
}

/// The first line of an observation worth citing (not an error, not a note).
fn first_finding(text: &str) -> Option<String> {
    let body = text.strip_prefix("Observation: ").unwrap_or(text);
    if body.starts_with("Error") {
        return None;
    }
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('['))?;
    Some(line.chars().take(200).collect())
}

#[async_trait]
impl ChatModel for PlannedInvestigation {
    fn model_id(&self) -> &str {
        "policy-planned-investigation"
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let text = self.turn(&request).to_string();
        let prompt: u32 = request
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.content))
            .sum();
        Ok(CompletionResponse {
            served: None,
            model: self.model_id().into(),
            usage: Usage {
                prompt_tokens: u64::from(prompt),
                completion_tokens: u64::from(estimate_tokens(&text)),
                estimated: true,
            },
            choices: vec![Choice {
                index: 0,
                message: Message::assistant(text),
                finish_reason: Some(FinishReason::Stop),
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::trajectory::Responsibility;

    fn conclusion() -> DiagnosisReport {
        DiagnosisReport {
            root_cause: "cpu saturation on pod-a".into(),
            solution: "scale pod-a".into(),
            evidence: vec![],
            responsibility: Responsibility::Platform,
            confidence: 0.8,
            candidates: vec![],
            usage: Usage::default(),
            elapsed_ms: 0,
        }
    }

    #[tokio::test]
    async fn the_plan_follows_the_conversation() {
        let tools = vec![LOGS.to_string(), LOG_EXPERT.into(), METRICS.into()];
        let p = PlannedInvestigation::new(&["pod-a".into()], &tools, conclusion());
        assert_eq!(p.turns(), 4);
        let mut messages = vec![Message::system("rules"), Message::user("incident")];
        let turn = |m: &[Message]| {
            let r = futures::executor::block_on(p.complete(CompletionRequest::new(m.to_vec())));
            serde_json::from_str::<Value>(r.unwrap().text()).unwrap()
        };
        assert_eq!(turn(&messages)["action"]["name"], LOGS);
        messages.push(Message::assistant("x"));
        messages.push(Message::user(
            "Observation: ERROR boom\n[... 10 more characters not shown. Snapshot key: obs-00112233445566aa. Pass this key ...]",
        ));
        let expert = turn(&messages);
        assert_eq!(expert["action"]["args"]["text"], "obs-00112233445566aa");
        messages.push(Message::assistant("x"));
        messages.push(Message::user("Observation: cpu 99%"));
        assert_eq!(turn(&messages)["action"]["name"], METRICS);
        messages.push(Message::assistant("x"));
        messages.push(Message::user("Observation: Error: no data"));
        let fin = turn(&messages);
        assert_eq!(fin["action"]["name"], FINALIZE);
        assert_eq!(
            fin["action"]["args"]["root_cause"],
            "cpu saturation on pod-a"
        );
        assert_eq!(fin["action"]["args"]["evidence"][0], "ERROR boom");
        assert_eq!(
            fin["action"]["args"]["evidence"].as_array().unwrap().len(),
            2
        );
    }
}
