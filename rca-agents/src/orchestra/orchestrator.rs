//! The staged diagnosis loop: plan, investigate with explorers under a controller, reason.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rca_core::embed::Embedder;
use rca_core::llm::Usage;
use rca_core::memory::{Conclusion, LongTermMemory, MemoryEntry, ShortTermMemory};
use rca_core::trajectory::{Action, Observation, Outcome, Step, Trajectory};
use rca_core::{DiagnosisReport, Evidence, Incident, Modality};
use serde::{Deserialize, Serialize};

use super::roles::{
    Controller, Decision, Escalation, Exploration, ExploreRequest, Explorer, InvestigationView,
    OrchestraError, PastAction, PastIncident, Plan, Planner, Reasoner, ReplanRequest,
};

/// The alert of an incident as memory compares it: its title, and its description when it
/// has one.
fn alert_of(incident: &Incident) -> String {
    if incident.description.trim().is_empty() {
        incident.title.clone()
    } else {
        format!("{}: {}", incident.title, incident.description)
    }
}

/// What makes two pieces of evidence the same finding.
fn evidence_key(e: &Evidence) -> (Modality, String, String, i64) {
    (
        e.modality.clone(),
        e.component.clone(),
        e.finding.clone(),
        e.observed_at.millis(),
    )
}

/// Limits of one orchestrated run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrchestratorConfig {
    /// How many times the controller may ask for a new plan (2 by default).
    pub max_replans: u32,
    /// How many explorations in all (a budget across plans; 24 by default).
    pub max_explorations: usize,
    /// How many past actions long-term memory offers per subgoal (3 by default).
    pub past_actions: usize,
    /// How many past incidents long-term memory offers the planner (3 by default).
    #[serde(default = "default_past_incidents")]
    pub past_incidents: usize,
}

fn default_past_incidents() -> usize {
    3
}

impl Default for OrchestratorConfig {
    fn default() -> Self {
        OrchestratorConfig {
            max_replans: 2,
            max_explorations: 24,
            past_actions: 3,
            past_incidents: default_past_incidents(),
        }
    }
}

/// Something that happened in a run, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// The planner produced a plan.
    Planned {
        /// The plan.
        plan: Plan,
        /// The tokens the planner's model spent on it (zero for a policy).
        #[serde(default)]
        usage: Usage,
    },
    /// An explorer ran a subgoal.
    Explored {
        /// Which explorer.
        explorer: String,
        /// The subgoal's text.
        goal: String,
        /// The rung of the escalation ladder.
        escalation: Escalation,
        /// What it found.
        exploration: Exploration,
        /// How long it took, in milliseconds.
        elapsed_ms: u64,
    },
    /// Long-term memory offered past incidents with a similar alert (before the first plan).
    Recalled {
        /// The past incidents, nearest first.
        incidents: Vec<PastIncident>,
    },
    /// An explorer failed with an error.
    ExplorerFailed {
        /// Which explorer.
        explorer: String,
        /// The rung of the escalation ladder.
        escalation: Escalation,
        /// The error.
        error: String,
    },
    /// A subgoal was skipped because no explorer handles its modality.
    Skipped {
        /// The modality.
        modality: Modality,
    },
    /// The controller decided.
    Decided {
        /// The decision.
        decision: Decision,
        /// The tokens the controller's model spent on it (zero for a policy).
        #[serde(default)]
        usage: Usage,
    },
    /// An exploration identical to one already made (the same explorer, escalation, window,
    /// focus and shared conclusions) was not run again: its findings stand.
    Repeated {
        /// The explorer.
        explorer: String,
        /// The subgoal's goal.
        goal: String,
        /// The escalation step.
        escalation: Escalation,
    },
    /// The run ended because going on would change nothing: every exploration of the new
    /// plan was already made with the same inputs.
    Stopped {
        /// Why.
        reason: String,
    },
    /// A role's model failed or answered with something unusable, and the role's
    /// deterministic policy answered instead (see [`Orchestrator::with_fallbacks`]).
    RoleFellBack {
        /// `planner`, `controller` or `reasoner`.
        role: String,
        /// What went wrong with the model.
        error: String,
        /// The tokens the model spent before it failed (its unusable answers, their
        /// regeneration).
        #[serde(default)]
        usage: Usage,
    },
}

impl RunEvent {
    /// The tokens a role's model spent in this event (zero for explorers and policies).
    pub fn usage(&self) -> Usage {
        match self {
            RunEvent::Planned { usage, .. }
            | RunEvent::Decided { usage, .. }
            | RunEvent::RoleFellBack { usage, .. } => *usage,
            _ => Usage::default(),
        }
    }
}

/// What a role's model spent between two readings of its cumulative usage.
fn spent_since(before: Usage, now: Usage) -> Usage {
    let prompt_tokens = now.prompt_tokens.saturating_sub(before.prompt_tokens);
    let completion_tokens = now
        .completion_tokens
        .saturating_sub(before.completion_tokens);
    Usage {
        prompt_tokens,
        completion_tokens,
        estimated: now.estimated && prompt_tokens + completion_tokens > 0,
    }
}

/// Deterministic policies that answer for a model-backed role whose model fails
/// ([`OrchestraError::Role`]); `None` lets the failure end the run.
#[derive(Clone, Default)]
pub struct Fallbacks {
    /// Answers for the planner.
    pub planner: Option<Arc<dyn Planner>>,
    /// Answers for the controller.
    pub controller: Option<Arc<dyn Controller>>,
    /// Answers for the reasoner.
    pub reasoner: Option<Arc<dyn Reasoner>>,
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// The report.
    pub report: DiagnosisReport,
    /// Every piece of evidence gathered, in the order it arrived.
    pub evidence: Vec<Evidence>,
    /// The controller's final decision (a conclusion, or the last escalation when the re-plan
    /// budget ran out).
    pub decision: Option<Decision>,
    /// Every event, in order.
    pub events: Vec<RunEvent>,
    /// Where the current window began: the incident's stated onset, or the one the pipeline
    /// estimated (`None`: neither; the current window was a fixed length).
    pub onset: Option<Onset>,
}

/// The onset a run used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub enum Onset {
    /// The incident stated it.
    Known {
        /// When the problem began.
        at: rca_core::Timestamp,
    },
    /// Estimated from the telemetry.
    Estimated(rca_tools::analyze::onset::OnsetEstimate),
}

impl Onset {
    /// When the problem began.
    pub fn at(&self) -> rca_core::Timestamp {
        match self {
            Onset::Known { at } => *at,
            Onset::Estimated(e) => e.at,
        }
    }
}

impl RunRecord {
    /// The roles whose model failed and whose policy answered instead, in order, with the
    /// errors ([`RunEvent::RoleFellBack`]).
    pub fn fallbacks(&self) -> Vec<(&str, &str)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                RunEvent::RoleFellBack { role, error, .. } => Some((role.as_str(), error.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The run as a trajectory of thought-action-observation steps.
    pub fn trajectory(&self) -> Trajectory {
        let mut t = Trajectory::new();
        for event in &self.events {
            let mut step = Step {
                index: t.steps.len(),
                usage: event.usage(),
                ..Default::default()
            };
            match event {
                RunEvent::Planned { plan, .. } => {
                    step.thought = format!("plan revision {}: {}", plan.revision, plan.rationale);
                    step.action = Some(Action {
                        name: "plan".into(),
                        args: serde_json::to_value(&plan.subgoals).unwrap_or_default(),
                    });
                }
                RunEvent::Explored {
                    explorer,
                    goal,
                    escalation,
                    exploration,
                    elapsed_ms,
                } => {
                    step.thought = goal.clone();
                    step.action = Some(Action {
                        name: explorer.clone(),
                        args: serde_json::json!({ "goal": goal, "escalation": escalation,
                            "actions": exploration.actions }),
                    });
                    step.observation = Some(Observation::full(format!(
                        "{} ({} evidence)",
                        exploration.conclusion,
                        exploration.evidence.len()
                    )));
                    if !exploration.completed {
                        step.error = Some("explorer could not complete the subgoal".into());
                    }
                    step.elapsed_ms = *elapsed_ms;
                }
                RunEvent::ExplorerFailed {
                    explorer, error, ..
                } => {
                    step.action = Some(Action {
                        name: explorer.clone(),
                        args: serde_json::Value::Null,
                    });
                    step.error = Some(error.clone());
                }
                RunEvent::Skipped { modality } => {
                    step.error = Some(format!("no explorer handles {modality}"));
                }
                RunEvent::Decided { decision, .. } => {
                    step.thought = serde_json::to_string(decision).unwrap_or_default();
                    step.action = Some(Action {
                        name: "controller".into(),
                        args: serde_json::to_value(decision).unwrap_or_default(),
                    });
                }
                RunEvent::Recalled { incidents } => {
                    step.thought = format!(
                        "long-term memory offers {} past incident(s) with a similar alert",
                        incidents.len()
                    );
                    step.action = Some(Action {
                        name: "recall".into(),
                        args: serde_json::to_value(incidents).unwrap_or_default(),
                    });
                }
                RunEvent::Repeated { explorer, goal, .. } => {
                    step.thought = goal.clone();
                    step.action = Some(Action {
                        name: explorer.clone(),
                        args: serde_json::json!({ "goal": goal, "repeated": true }),
                    });
                    step.observation = Some(Observation::full(
                        "the same exploration was already made; its findings stand".to_string(),
                    ));
                }
                RunEvent::Stopped { reason } => {
                    step.thought = reason.clone();
                }
                RunEvent::RoleFellBack { role, error, .. } => {
                    step.thought = format!("the {role}'s model failed; its policy answers");
                    step.error = Some(error.clone());
                }
            }
            t.steps.push(step);
        }
        t.outcome = Outcome::Finalized;
        // The steps' usage plus the reasoner's (the report has no step of its own).
        t.usage = self.report.usage;
        t.elapsed_ms = self.report.elapsed_ms;
        t
    }
}

/// The controller-explorer orchestration.
pub struct Orchestrator {
    planner: Arc<dyn Planner>,
    controller: Arc<dyn Controller>,
    reasoner: Arc<dyn Reasoner>,
    explorers: Vec<Arc<dyn Explorer>>,
    fallbacks: Fallbacks,
    long_term: HashMap<String, Arc<dyn LongTermMemory>>,
    incidents: Option<Arc<dyn LongTermMemory>>,
    embedder: Option<Arc<dyn Embedder>>,
    config: OrchestratorConfig,
    cancelled: Arc<AtomicBool>,
}

impl std::fmt::Debug for Orchestrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Orchestrator")
            .field(
                "explorers",
                &self
                    .explorers
                    .iter()
                    .map(|e| e.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.config)
            .finish()
    }
}

impl Orchestrator {
    /// An orchestration with these roles and no long-term memory.
    pub fn new(
        planner: Arc<dyn Planner>,
        controller: Arc<dyn Controller>,
        reasoner: Arc<dyn Reasoner>,
        explorers: Vec<Arc<dyn Explorer>>,
    ) -> Self {
        Orchestrator {
            planner,
            controller,
            reasoner,
            explorers,
            fallbacks: Fallbacks::default(),
            long_term: HashMap::new(),
            incidents: None,
            embedder: None,
            config: OrchestratorConfig::default(),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Policies that answer when a model-backed role fails; each fallback is recorded as a
    /// [`RunEvent::RoleFellBack`].
    pub fn with_fallbacks(mut self, fallbacks: Fallbacks) -> Self {
        self.fallbacks = fallbacks;
        self
    }

    async fn plan(
        &self,
        incident: &Incident,
        available: &[Modality],
        replan: Option<&ReplanRequest>,
        past: &[PastIncident],
        events: &mut Vec<RunEvent>,
    ) -> Result<Plan, OrchestraError> {
        let before = self.planner.usage();
        let planned = self
            .planner
            .plan_with_memory(incident, available, replan, past)
            .await;
        let mut usage = spent_since(before, self.planner.usage());
        let plan = match planned {
            Err(OrchestraError::Role { role, message }) if self.fallbacks.planner.is_some() => {
                events.push(RunEvent::RoleFellBack {
                    role,
                    error: message,
                    usage,
                });
                let Some(p) = &self.fallbacks.planner else {
                    return Err(OrchestraError::Invalid("no fallback planner".into()));
                };
                let before = p.usage();
                let plan = p.plan_with_memory(incident, available, replan, past).await;
                usage = spent_since(before, p.usage());
                plan
            }
            other => other,
        }?;
        events.push(RunEvent::Planned {
            plan: plan.clone(),
            usage,
        });
        Ok(plan)
    }

    async fn decide(
        &self,
        view: &InvestigationView<'_>,
        events: &mut Vec<RunEvent>,
    ) -> Result<Decision, OrchestraError> {
        let before = self.controller.usage();
        let decided = self.controller.decide(view).await;
        let mut usage = spent_since(before, self.controller.usage());
        let decision = match decided {
            Err(OrchestraError::Role { role, message }) if self.fallbacks.controller.is_some() => {
                events.push(RunEvent::RoleFellBack {
                    role,
                    error: message,
                    usage,
                });
                let Some(c) = &self.fallbacks.controller else {
                    return Err(OrchestraError::Invalid("no fallback controller".into()));
                };
                let before = c.usage();
                let decision = c.decide(view).await;
                usage = spent_since(before, c.usage());
                decision
            }
            other => other,
        }?;
        events.push(RunEvent::Decided {
            decision: decision.clone(),
            usage,
        });
        Ok(decision)
    }

    async fn reason(
        &self,
        incident: &Incident,
        evidence: &[Evidence],
        concluded: Option<&Decision>,
        events: &mut Vec<RunEvent>,
    ) -> Result<(DiagnosisReport, Usage), OrchestraError> {
        let before = self.reasoner.usage();
        let reasoned = self.reasoner.reason(incident, evidence, concluded).await;
        let mut usage = spent_since(before, self.reasoner.usage());
        let report = match reasoned {
            Err(OrchestraError::Role { role, message }) if self.fallbacks.reasoner.is_some() => {
                events.push(RunEvent::RoleFellBack {
                    role,
                    error: message,
                    usage,
                });
                let Some(r) = &self.fallbacks.reasoner else {
                    return Err(OrchestraError::Invalid("no fallback reasoner".into()));
                };
                let before = r.usage();
                let report = r.reason(incident, evidence, concluded).await;
                usage = spent_since(before, r.usage());
                report
            }
            other => other,
        }?;
        Ok((report, usage))
    }

    /// Sets the limits.
    pub fn with_config(mut self, config: OrchestratorConfig) -> Self {
        self.config = config;
        self
    }

    /// Gives explorer `name` a long-term memory; `embedder` embeds subgoals and actions.
    pub fn with_long_term_memory(
        mut self,
        name: impl Into<String>,
        memory: Arc<dyn LongTermMemory>,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        self.long_term.insert(name.into(), memory);
        self.embedder = Some(embedder);
        self
    }

    /// Gives the orchestration a long-term memory of whole incidents: before planning, the
    /// past incidents whose alert is nearest to this one's are offered to the planner
    /// ([`Planner::plan_with_memory`], recorded as [`RunEvent::Recalled`]); after the run the
    /// incident is remembered with the component it named and the modalities that settled it.
    pub fn with_incident_memory(
        mut self,
        memory: Arc<dyn LongTermMemory>,
        embedder: Arc<dyn Embedder>,
    ) -> Self {
        self.incidents = Some(memory);
        self.embedder = Some(embedder);
        self
    }

    /// The names of the explorers, in order.
    pub fn explorer_names(&self) -> Vec<String> {
        self.explorers
            .iter()
            .map(|e| e.name().to_string())
            .collect()
    }

    /// A flag that cancels the run at the next step when set.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancelled)
    }

    fn available(&self) -> Vec<Modality> {
        let mut out: Vec<Modality> = Vec::new();
        for e in &self.explorers {
            if !out.contains(&e.modality()) {
                out.push(e.modality());
            }
        }
        out
    }

    async fn embed_one(&self, text: &str) -> Option<Vec<f32>> {
        let embedder = self.embedder.as_ref()?;
        embedder
            .embed(&[text.to_string()])
            .await
            .ok()
            .and_then(|mut v| v.pop())
    }

    async fn past_actions(
        &self,
        explorer: &str,
        incident: &Incident,
        goal: &str,
    ) -> Vec<PastAction> {
        let Some(memory) = self.long_term.get(explorer) else {
            return Vec::new();
        };
        let query = format!("alert: {}; goal: {goal}", alert_of(incident));
        let Some(vector) = self.embed_one(&query).await else {
            return Vec::new();
        };
        match memory.nearest(&vector, self.config.past_actions).await {
            Ok(hits) => hits
                .into_iter()
                .map(|(entry, similarity)| PastAction {
                    goal: entry.payload["goal"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    summary: entry.text,
                    similarity,
                    incident: entry.payload["incident"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    components: serde_json::from_value(entry.payload["components"].clone())
                        .unwrap_or_default(),
                })
                .collect(),
            Err(e) => {
                tracing::warn!(explorer, error = %e, "long-term memory lookup failed");
                Vec::new()
            }
        }
    }

    async fn remember(
        &self,
        explorer: &str,
        incident: &Incident,
        goal: &str,
        found: &Exploration,
        components: &[String],
    ) {
        let Some(memory) = self.long_term.get(explorer) else {
            return;
        };
        let text = format!(
            "alert: {}; goal: {goal}; actions: {}; conclusion: {}",
            alert_of(incident),
            found.actions.join(", "),
            found.conclusion
        );
        let Some(vector) = self.embed_one(&text).await else {
            return;
        };
        let count = memory.count().await.unwrap_or(0);
        let entry = MemoryEntry {
            id: format!("{}-{explorer}-{count}", incident.id),
            text,
            vector,
            payload: serde_json::json!({ "goal": goal, "incident": incident.id,
                "components": components }),
        };
        if let Err(e) = memory.insert(entry).await {
            tracing::warn!(explorer, error = %e, "long-term memory insert failed");
        }
    }

    /// The past incidents nearest to `incident`'s alert.
    async fn recall(&self, incident: &Incident) -> Vec<PastIncident> {
        let Some(memory) = &self.incidents else {
            return Vec::new();
        };
        if self.config.past_incidents == 0 {
            return Vec::new();
        }
        let Some(vector) = self.embed_one(&alert_of(incident)).await else {
            return Vec::new();
        };
        // One more than wanted: the incident itself may be remembered from an earlier run.
        match memory
            .nearest(&vector, self.config.past_incidents + 1)
            .await
        {
            Ok(hits) => hits
                .into_iter()
                .filter(|(entry, _)| entry.payload["incident"].as_str() != Some(&incident.id))
                .take(self.config.past_incidents)
                .map(|(entry, similarity)| PastIncident {
                    incident: entry.payload["incident"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    alert: entry.text,
                    root_cause: entry.payload["root_cause"].as_str().map(str::to_string),
                    settled_by: serde_json::from_value(entry.payload["settled_by"].clone())
                        .unwrap_or_default(),
                    similarity,
                })
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "long-term memory lookup of past incidents failed");
                Vec::new()
            }
        }
    }

    /// Remembers the finished run of `incident`: the component its report names first and
    /// the modalities whose significant evidence named it, in the order they ran.
    async fn remember_incident(
        &self,
        incident: &Incident,
        report: &DiagnosisReport,
        settled: &[(Modality, Vec<String>)],
    ) {
        let Some(memory) = &self.incidents else {
            return;
        };
        let alert = alert_of(incident);
        let Some(vector) = self.embed_one(&alert).await else {
            return;
        };
        let root_cause = report.candidates.first().map(|c| c.component.clone());
        let mut settled_by: Vec<Modality> = Vec::new();
        if let Some(root) = &root_cause {
            for (modality, components) in settled {
                if components.contains(root) && !settled_by.contains(modality) {
                    settled_by.push(modality.clone());
                }
            }
        }
        let entry = MemoryEntry {
            id: incident.id.clone(),
            text: alert,
            vector,
            payload: serde_json::json!({ "incident": incident.id, "root_cause": root_cause,
                "settled_by": settled_by }),
        };
        if let Err(e) = memory.insert(entry).await {
            tracing::warn!(error = %e, "long-term memory insert of the incident failed");
        }
    }

    /// Runs a staged diagnosis of `incident`. `short_term` is this session's broadcast queue.
    pub async fn run(
        &self,
        incident: &Incident,
        short_term: &dyn ShortTermMemory,
    ) -> Result<RunRecord, OrchestraError> {
        let started = Instant::now();
        let available = self.available();
        if available.is_empty() {
            return Err(OrchestraError::Invalid("no explorers".into()));
        }
        let mut events = Vec::new();
        let mut evidence: Vec<Evidence> = Vec::new();
        let mut seen: std::collections::HashSet<(Modality, String, String, i64)> =
            Default::default();
        let mut significance: std::collections::BTreeMap<Modality, f64> = Default::default();
        let recalled = self.recall(incident).await;
        if !recalled.is_empty() {
            events.push(RunEvent::Recalled {
                incidents: recalled.clone(),
            });
        }
        // Per exploration, the modality and the components it found significant.
        let mut settled: Vec<(Modality, Vec<String>)> = Vec::new();
        let mut plan = self
            .plan(incident, &available, None, &recalled, &mut events)
            .await?;
        let mut explorations = 0usize;
        let mut replans = 0u32;
        let mut final_decision: Option<Decision> = None;
        // The explorations already completed, by what decides their result.
        let mut made: std::collections::HashSet<String> = Default::default();

        'plans: loop {
            let mut failing: Vec<Modality> = Vec::new();
            let mut done = 0usize;
            while done < plan.subgoals.len() {
                if self.cancelled.load(Ordering::Relaxed) {
                    return Err(OrchestraError::Cancelled);
                }
                let subgoal = plan.subgoals[done].clone();
                done += 1;
                let Some(explorer) = self
                    .explorers
                    .iter()
                    .find(|e| e.modality() == subgoal.modality)
                else {
                    events.push(RunEvent::Skipped {
                        modality: subgoal.modality.clone(),
                    });
                    continue;
                };
                // The escalation ladder below re-plan: first attempt, retry, refine.
                let mut succeeded = false;
                for escalation in [Escalation::None, Escalation::Retry, Escalation::Refine] {
                    if explorations >= self.config.max_explorations {
                        break;
                    }
                    let conclusions = shared_conclusions(short_term).await?;
                    let past = self
                        .past_actions(explorer.name(), incident, &subgoal.goal)
                        .await;
                    let key = exploration_key(
                        explorer.name(),
                        escalation,
                        &subgoal.focus,
                        &conclusions,
                        &past,
                    );
                    if made.contains(&key) {
                        events.push(RunEvent::Repeated {
                            explorer: explorer.name().to_string(),
                            goal: subgoal.goal.clone(),
                            escalation,
                        });
                        succeeded = true;
                        break;
                    }
                    explorations += 1;
                    let request = ExploreRequest {
                        incident,
                        subgoal: &subgoal,
                        conclusions: &conclusions,
                        past: &past,
                        escalation,
                    };
                    let t0 = Instant::now();
                    match explorer.explore(&request).await {
                        Ok(found) => {
                            let completed = found.completed;
                            if completed {
                                made.insert(key.clone());
                                // Only findings above the modality's calibrated level are
                                // published as what it points at.
                                let level = found.significance.unwrap_or(0.0);
                                if let Some(l) = found.significance {
                                    significance.insert(explorer.modality(), l);
                                }
                                let mut components: Vec<String> = Vec::new();
                                for e in &found.evidence {
                                    if e.score > level.max(0.0)
                                        && !components.contains(&e.component)
                                    {
                                        components.push(e.component.clone());
                                    }
                                }
                                components.truncate(5);
                                settled.push((explorer.modality(), components.clone()));
                                self.remember(
                                    explorer.name(),
                                    incident,
                                    &subgoal.goal,
                                    &found,
                                    &components,
                                )
                                .await;
                                short_term
                                    .publish(Conclusion {
                                        author: explorer.name().to_string(),
                                        at: incident.detected_at,
                                        text: found.conclusion.clone(),
                                        components,
                                    })
                                    .await
                                    .map_err(|e| OrchestraError::Memory(e.to_string()))?;
                                // A re-run (retry, re-plan) finds much the same again; each
                                // finding counts once.
                                for e in &found.evidence {
                                    if seen.insert(evidence_key(e)) {
                                        evidence.push(e.clone());
                                    }
                                }
                            }
                            events.push(RunEvent::Explored {
                                explorer: explorer.name().to_string(),
                                goal: subgoal.goal.clone(),
                                escalation,
                                exploration: found,
                                elapsed_ms: t0.elapsed().as_millis() as u64,
                            });
                            if completed {
                                succeeded = true;
                                break;
                            }
                        }
                        Err(OrchestraError::Cancelled) => return Err(OrchestraError::Cancelled),
                        Err(e) => events.push(RunEvent::ExplorerFailed {
                            explorer: explorer.name().to_string(),
                            escalation,
                            error: e.to_string(),
                        }),
                    }
                }
                if !succeeded {
                    failing.push(subgoal.modality.clone());
                }
                let view = InvestigationView {
                    incident,
                    plan: &plan,
                    done,
                    evidence: &evidence,
                    failing: &failing,
                    significance: &significance,
                };
                let decision = self.decide(&view, &mut events).await?;
                match decision {
                    Decision::Continue => {}
                    Decision::Conclude { .. } => {
                        final_decision = Some(decision);
                        break 'plans;
                    }
                    Decision::Escalate { reason } => {
                        final_decision = Some(Decision::Escalate {
                            reason: reason.clone(),
                        });
                        if replans >= self.config.max_replans
                            || explorations >= self.config.max_explorations
                        {
                            break 'plans;
                        }
                        replans += 1;
                        let suspects: Vec<String> = super::policy::EvidenceReasoner::default()
                            .rank(&evidence)
                            .into_iter()
                            .map(|c| c.component)
                            .take(5)
                            .collect();
                        let request = ReplanRequest {
                            previous: plan.clone(),
                            reason,
                            failed: failing.clone(),
                            suspects,
                        };
                        plan = self
                            .plan(incident, &available, Some(&request), &recalled, &mut events)
                            .await?;
                        // A plan whose every exploration was already made, with the same
                        // shared conclusions, would find the same again: the run ends here.
                        let conclusions = shared_conclusions(short_term).await?;
                        let mut all_made = !plan.subgoals.is_empty();
                        for subgoal in &plan.subgoals {
                            let Some(explorer) = self
                                .explorers
                                .iter()
                                .find(|e| e.modality() == subgoal.modality)
                            else {
                                continue;
                            };
                            let past = self
                                .past_actions(explorer.name(), incident, &subgoal.goal)
                                .await;
                            let key = exploration_key(
                                explorer.name(),
                                Escalation::None,
                                &subgoal.focus,
                                &conclusions,
                                &past,
                            );
                            if !made.contains(&key) {
                                all_made = false;
                                break;
                            }
                        }
                        if all_made {
                            events.push(RunEvent::Stopped {
                                reason: format!(
                                    "plan revision {} would repeat explorations already made \
                                     (same explorers, windows, focus and shared conclusions): \
                                     nothing would change",
                                    plan.revision
                                ),
                            });
                            break 'plans;
                        }
                        continue 'plans;
                    }
                }
            }
            // A controller that says continue after the last subgoal ends the investigation.
            break;
        }

        let (mut report, reasoned) = self
            .reason(incident, &evidence, final_decision.as_ref(), &mut events)
            .await?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        // The report counts every token the roles' models spent (the server's counts): each
        // event's (plans, decisions, fallbacks), and the reasoner's for the report itself.
        report.usage = reasoned;
        for event in &events {
            report.usage.add(&event.usage());
        }
        self.remember_incident(incident, &report, &settled).await;
        Ok(RunRecord {
            report,
            evidence,
            decision: final_decision,
            events,
            onset: incident.onset.map(|at| Onset::Known { at }),
        })
    }
}

/// Every conclusion published on the short-term memory so far.
async fn shared_conclusions(
    short_term: &dyn ShortTermMemory,
) -> Result<Vec<Conclusion>, OrchestraError> {
    Ok(short_term
        .read_from(0)
        .await
        .map_err(|e| OrchestraError::Memory(e.to_string()))?
        .into_iter()
        .map(|(_, c)| c)
        .collect())
}

/// What decides an exploration's result besides the incident: the explorer, the escalation
/// step (which sets the window and thresholds), the subgoal's focus, the components other
/// explorers published (deduplicated) and the past actions recalled for it.
fn exploration_key(
    explorer: &str,
    escalation: Escalation,
    focus: &[String],
    conclusions: &[Conclusion],
    past: &[PastAction],
) -> String {
    let mut focus: Vec<&str> = focus.iter().map(String::as_str).collect();
    focus.sort_unstable();
    focus.dedup();
    let mut shared: Vec<(&str, Vec<&str>)> = conclusions
        .iter()
        .filter(|c| c.author != explorer)
        .map(|c| {
            let mut v: Vec<&str> = c.components.iter().map(String::as_str).collect();
            v.sort_unstable();
            (c.author.as_str(), v)
        })
        .collect();
    shared.sort();
    shared.dedup();
    let past: Vec<(&str, &Vec<String>)> = past
        .iter()
        .map(|p| (p.incident.as_str(), &p.components))
        .collect();
    serde_json::json!([explorer, escalation, focus, shared, past]).to_string()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use rca_core::embed::cosine;
    use rca_core::{EmbedError, StoreError, TimeRange, Timestamp};

    use super::super::policy::{ConvergenceController, EvidenceReasoner, OrderedPlanner};
    use super::*;

    /// A broadcast queue for these tests.
    #[derive(Default)]
    struct Queue(Mutex<Vec<Conclusion>>);

    #[async_trait]
    impl ShortTermMemory for Queue {
        async fn publish(&self, c: Conclusion) -> Result<u64, StoreError> {
            let mut q = self.0.lock().unwrap();
            q.push(c);
            Ok(q.len() as u64 - 1)
        }
        async fn read_from(&self, from: u64) -> Result<Vec<(u64, Conclusion)>, StoreError> {
            let q = self.0.lock().unwrap();
            Ok(q.iter()
                .cloned()
                .enumerate()
                .map(|(i, c)| (i as u64, c))
                .skip(from as usize)
                .collect())
        }
    }

    /// A brute-force vector memory for these tests.
    #[derive(Default)]
    struct Vectors(Mutex<Vec<MemoryEntry>>);

    #[async_trait]
    impl LongTermMemory for Vectors {
        async fn insert(&self, e: MemoryEntry) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(e);
            Ok(())
        }
        async fn nearest(
            &self,
            v: &[f32],
            k: usize,
        ) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
            let mut hits: Vec<_> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .map(|e| (e.clone(), cosine(v, &e.vector)))
                .collect();
            hits.sort_by(|a, b| b.1.total_cmp(&a.1));
            hits.truncate(k);
            Ok(hits)
        }
        async fn count(&self) -> Result<usize, StoreError> {
            Ok(self.0.lock().unwrap().len())
        }
    }

    /// Embeds by letter counts: enough for nearest-neighbour tests.
    struct Letters;

    #[async_trait]
    impl Embedder for Letters {
        fn dimension(&self) -> usize {
            26
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; 26];
                    for c in t.bytes().filter(u8::is_ascii_lowercase) {
                        v[(c - b'a') as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    /// An explorer that answers from a fixed list of evidence, failing its first `fail` calls.
    struct Fixed {
        name: String,
        modality: Modality,
        evidence: Vec<Evidence>,
        fail: Mutex<u32>,
        seen: Mutex<Vec<(Escalation, usize, usize)>>,
    }

    impl Fixed {
        fn new(name: &str, modality: Modality, evidence: Vec<Evidence>, fail: u32) -> Arc<Self> {
            Arc::new(Fixed {
                name: name.into(),
                modality,
                evidence,
                fail: Mutex::new(fail),
                seen: Mutex::new(Vec::new()),
            })
        }
    }

    #[async_trait]
    impl Explorer for Fixed {
        fn name(&self) -> &str {
            &self.name
        }
        fn modality(&self) -> Modality {
            self.modality.clone()
        }
        async fn explore(&self, r: &ExploreRequest<'_>) -> Result<Exploration, OrchestraError> {
            self.seen
                .lock()
                .unwrap()
                .push((r.escalation, r.conclusions.len(), r.past.len()));
            let mut fail = self.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(OrchestraError::Role {
                    role: self.name.clone(),
                    message: "no data".into(),
                });
            }
            Ok(Exploration {
                evidence: self.evidence.clone(),
                conclusion: format!("{} looked", self.name),
                completed: true,
                actions: vec!["scan".into()],
                significance: None,
            })
        }
    }

    fn ev(m: Modality, c: &str, s: f64) -> Evidence {
        Evidence::new(m, Timestamp(50), c, format!("{c} is off")).with_score(s)
    }

    fn incident() -> Incident {
        Incident {
            id: "inc".into(),
            title: "checkout alert".into(),
            description: String::new(),
            detected_at: Timestamp(100),
            window: TimeRange::new(Timestamp(0), Timestamp(100)),
            system: String::new(),
            topology: Vec::new(),
            onset: None,
        }
    }

    fn orchestrator(explorers: Vec<Arc<dyn Explorer>>) -> Orchestrator {
        Orchestrator::new(
            Arc::new(OrderedPlanner::default()),
            Arc::new(ConvergenceController::default()),
            Arc::new(EvidenceReasoner::default()),
            explorers,
        )
    }

    #[tokio::test]
    async fn concludes_when_two_modalities_converge() {
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![
                ev(Modality::Metrics, "db", 3.0),
                ev(Modality::Metrics, "web", 3.5),
            ],
            0,
        );
        let traces = Fixed::new(
            "traces",
            Modality::Traces,
            vec![ev(Modality::Traces, "db", 2.0)],
            0,
        );
        let logs = Fixed::new(
            "logs",
            Modality::Logs,
            vec![ev(Modality::Logs, "web", 9.0)],
            0,
        );
        let o = orchestrator(vec![logs.clone(), traces.clone(), metrics.clone()]);
        let run = o.run(&incident(), &Queue::default()).await.unwrap();
        // Metrics alone names two components: no conclusion; traces make db converge; logs never run.
        assert!(
            matches!(&run.decision, Some(Decision::Conclude { component, .. }) if component == "db")
        );
        assert!(logs.seen.lock().unwrap().is_empty());
        assert_eq!(
            traces.seen.lock().unwrap()[0].1,
            1,
            "traces saw the metrics conclusion"
        );
        assert_eq!(run.report.candidates[0].component, "db");
        assert!(run.report.root_cause.starts_with("db"));
        let t = run.trajectory();
        assert_eq!(t.steps.len(), run.events.len());
        assert!(serde_json::to_string(&t).is_ok());
    }

    /// A scripted model whose every answer carries the usage a server counted (`usage`, not
    /// an estimate), as a real or replayed backend's does.
    struct ServerCounted {
        inner: rca_llm::ScriptedModel,
        usage: Usage,
    }

    #[async_trait]
    impl rca_core::llm::ChatModel for ServerCounted {
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        async fn complete(
            &self,
            request: rca_core::llm::CompletionRequest,
        ) -> Result<rca_core::llm::CompletionResponse, rca_core::LlmError> {
            let mut response = self.inner.complete(request).await?;
            response.usage = self.usage;
            Ok(response)
        }
    }

    fn counted(name: &str, texts: &[&str], prompt: u64, completion: u64) -> Arc<ServerCounted> {
        Arc::new(ServerCounted {
            inner: rca_llm::ScriptedModel::from_texts(name, texts.iter().map(|t| t.to_string())),
            usage: Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                estimated: false,
            },
        })
    }

    /// Model-backed roles: the usage their server counted is in the step of each call (plan,
    /// decisions, a failed answer's fallback), and the report's and the trajectory's totals
    /// are the sum of the steps plus the reasoner's call for the report itself.
    #[tokio::test]
    async fn the_report_counts_every_token_the_roles_models_spent() {
        use super::super::model::{ModelController, ModelPlanner, ModelReasoner};
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![ev(Modality::Metrics, "db", 3.0)],
            0,
        );
        let traces = Fixed::new(
            "traces",
            Modality::Traces,
            vec![ev(Modality::Traces, "db", 2.0)],
            0,
        );
        let planner = counted(
            "usage-test-planner",
            &[
                r#"{"rationale": "r", "subgoals": [{"modality": "metrics", "goal": "m"}, {"modality": "traces", "goal": "t"}]}"#,
            ],
            1000,
            50,
        );
        // The first decision does not fit the answer's shape: the policy answers, and the
        // tokens of the call are still counted (in the fallback's step).
        let controller = counted(
            "usage-test-controller",
            &[
                r#"{"verdict": "?"}"#,
                r#"{"decision": "continue"}"#,
                r#"{"decision": "continue"}"#,
                r#"{"decision": "conclude"}"#,
            ],
            700,
            7,
        );
        let reasoner = counted(
            "usage-test-reasoner",
            &[r#"{"root_cause": "db is saturated", "solution": "scale db", "candidates": ["db"]}"#],
            2000,
            90,
        );
        let o = Orchestrator::new(
            Arc::new(ModelPlanner::new(planner)),
            Arc::new(ModelController::new(
                controller,
                ConvergenceController::default(),
            )),
            Arc::new(ModelReasoner::new(reasoner)),
            vec![metrics, traces],
        )
        .with_fallbacks(Fallbacks {
            planner: Some(Arc::new(OrderedPlanner::default())),
            controller: Some(Arc::new(ConvergenceController::default())),
            reasoner: Some(Arc::new(EvidenceReasoner::default())),
        });
        let run = o.run(&incident(), &Queue::default()).await.unwrap();
        let t = run.trajectory();
        assert_eq!(t.steps.len(), run.events.len(), "no step is added");
        let steps_sum: u64 = t.steps.iter().map(|s| s.usage.total()).sum();
        assert!(steps_sum > 0);
        // The steps' usage plus the reasoner's (2000 + 90, the report's own call).
        assert_eq!(
            run.report.usage.total(),
            steps_sum + 2090,
            "{:?}",
            run.events
        );
        assert_eq!(t.usage, run.report.usage);
        assert!(!run.report.usage.estimated);
        // Per step: the plan, the reasoner and each decision carry their calls' usage.
        let planned = run.events.iter().find_map(|e| match e {
            RunEvent::Planned { usage, .. } => Some(*usage),
            _ => None,
        });
        assert_eq!(planned.map(|u| u.total()), Some(1050));
        let fell_back: Vec<u64> = run
            .events
            .iter()
            .filter_map(|e| match e {
                RunEvent::RoleFellBack { usage, .. } => Some(usage.total()),
                _ => None,
            })
            .collect();
        assert_eq!(fell_back, vec![707], "{:?}", run.events);
        let controller_calls = run
            .events
            .iter()
            .filter(|e| matches!(e, RunEvent::Decided { usage, .. } if usage.total() == 707))
            .count() as u64;
        assert_eq!(
            run.report.usage.total(),
            1050 + 2090 + 707 + 707 * controller_calls
        );
        assert_eq!(
            run.report.usage.prompt_tokens,
            t.steps.iter().map(|s| s.usage.prompt_tokens).sum::<u64>() + 2000
        );
        let markdown = crate::report::render_markdown(&crate::report::ReportBundle::new(
            incident(),
            run.report.clone(),
            t,
            Vec::new(),
        ));
        assert!(
            markdown.contains(&format!("_{} tokens", run.report.usage.total())),
            "{markdown}"
        );
    }

    /// A role whose model always fails.
    struct BrokenRoles;

    fn broken(role: &str) -> OrchestraError {
        OrchestraError::Role {
            role: role.into(),
            message: "the model answered nonsense".into(),
        }
    }

    #[async_trait]
    impl Planner for BrokenRoles {
        async fn plan(
            &self,
            _: &Incident,
            _: &[Modality],
            _: Option<&ReplanRequest>,
        ) -> Result<Plan, OrchestraError> {
            Err(broken("planner"))
        }
    }

    #[async_trait]
    impl Controller for BrokenRoles {
        async fn decide(&self, _: &InvestigationView<'_>) -> Result<Decision, OrchestraError> {
            Err(broken("controller"))
        }
    }

    #[async_trait]
    impl Reasoner for BrokenRoles {
        async fn reason(
            &self,
            _: &Incident,
            _: &[Evidence],
            _: Option<&Decision>,
        ) -> Result<DiagnosisReport, OrchestraError> {
            Err(broken("reasoner"))
        }
    }

    #[tokio::test]
    async fn failing_model_roles_fall_back_to_their_policies_and_say_so() {
        let explorers = || -> Vec<Arc<dyn Explorer>> {
            vec![
                Fixed::new(
                    "metrics",
                    Modality::Metrics,
                    vec![ev(Modality::Metrics, "db", 3.0)],
                    0,
                ),
                Fixed::new(
                    "traces",
                    Modality::Traces,
                    vec![ev(Modality::Traces, "db", 2.0)],
                    0,
                ),
            ]
        };
        let roles = Arc::new(BrokenRoles);
        // Without fallbacks the first failing role ends the run.
        let plain = Orchestrator::new(roles.clone(), roles.clone(), roles.clone(), explorers());
        assert!(matches!(
            plain.run(&incident(), &Queue::default()).await,
            Err(OrchestraError::Role { .. })
        ));
        // With them every role's policy answers, and each hand-over is an event.
        let o = Orchestrator::new(roles.clone(), roles.clone(), roles, explorers()).with_fallbacks(
            Fallbacks {
                planner: Some(Arc::new(OrderedPlanner::default())),
                controller: Some(Arc::new(ConvergenceController::default())),
                reasoner: Some(Arc::new(EvidenceReasoner::default())),
            },
        );
        let run = o.run(&incident(), &Queue::default()).await.unwrap();
        let fell_back: Vec<&str> = run.fallbacks().iter().map(|(role, _)| *role).collect();
        assert_eq!(
            fell_back,
            ["planner", "controller", "controller", "reasoner"]
        );
        assert!(
            matches!(&run.decision, Some(Decision::Conclude { component, .. }) if component == "db")
        );
        assert_eq!(run.report.candidates[0].component, "db");
        let t = run.trajectory();
        assert!(
            t.steps
                .iter()
                .any(|s| s.error.as_deref() == Some("the model answered nonsense"))
        );
    }

    #[tokio::test]
    async fn a_replan_that_changes_nothing_runs_no_explorer_twice() {
        // db in metrics, cache in logs: never two modalities on one component, so the
        // controller escalates after every plan.
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![ev(Modality::Metrics, "db", 3.0)],
            0,
        );
        let logs = Fixed::new(
            "logs",
            Modality::Logs,
            vec![ev(Modality::Logs, "cache", 1.0)],
            0,
        );
        let o = orchestrator(vec![metrics.clone(), logs.clone()]);
        let run = o.run(&incident(), &Queue::default()).await.unwrap();
        // Plan 0 (no focus, nothing shared yet for the first explorer), plan 1 (the
        // suspects as focus, the others' conclusions now shared): each ran twice. Plan 2 has
        // the same focus and the same shared conclusions: nothing runs again.
        assert_eq!(metrics.seen.lock().unwrap().len(), 2, "{:?}", run.events);
        assert_eq!(logs.seen.lock().unwrap().len(), 2, "{:?}", run.events);
        let stopped: Vec<&str> = run
            .events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Stopped { reason } => Some(reason.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(stopped.len(), 1, "{:?}", run.events);
        assert!(stopped[0].contains("nothing would change"));
        assert!(
            run.trajectory()
                .steps
                .iter()
                .any(|s| s.thought.contains("would repeat explorations"))
        );
        assert!(matches!(run.decision, Some(Decision::Escalate { .. })));
    }

    #[tokio::test]
    async fn failing_explorer_climbs_the_ladder_then_replans() {
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![ev(Modality::Metrics, "db", 3.0)],
            3,
        );
        let logs = Fixed::new(
            "logs",
            Modality::Logs,
            vec![ev(Modality::Logs, "cache", 1.0)],
            0,
        );
        let o = orchestrator(vec![metrics.clone(), logs.clone()]);
        let run = o.run(&incident(), &Queue::default()).await.unwrap();
        let ladder: Vec<Escalation> = metrics.seen.lock().unwrap().iter().map(|s| s.0).collect();
        assert_eq!(
            &ladder[..3],
            &[Escalation::None, Escalation::Retry, Escalation::Refine]
        );
        let plans: Vec<u32> = run
            .events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Planned { plan, .. } => Some(plan.revision),
                _ => None,
            })
            .collect();
        assert!(plans.len() >= 2, "re-planned: {plans:?}");
        // After re-planning, the failing modality runs last and then succeeds: db and cache
        // never share two modalities, so the run ends on the re-plan budget, not a conclusion.
        assert!(matches!(run.decision, Some(Decision::Escalate { .. })));
        assert!(run.report.confidence < 0.9);
        // The logs explorer ran once per plan and found the same each time: it counts once.
        assert!(logs.seen.lock().unwrap().len() >= 2);
        let cache: Vec<&Evidence> = run
            .evidence
            .iter()
            .filter(|e| e.component == "cache")
            .collect();
        assert_eq!(cache.len(), 1, "{cache:?}");
    }

    #[tokio::test]
    async fn long_term_memory_offers_past_actions_on_the_next_run() {
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![ev(Modality::Metrics, "db", 3.0)],
            0,
        );
        let traces = Fixed::new(
            "traces",
            Modality::Traces,
            vec![ev(Modality::Traces, "db", 3.0)],
            0,
        );
        let memory: Arc<dyn LongTermMemory> = Arc::new(Vectors::default());
        let o = orchestrator(vec![metrics.clone(), traces]).with_long_term_memory(
            "metrics",
            Arc::clone(&memory),
            Arc::new(Letters),
        );
        o.run(&incident(), &Queue::default()).await.unwrap();
        assert_eq!(memory.count().await.unwrap(), 1);
        o.run(&incident(), &Queue::default()).await.unwrap();
        let seen = metrics.seen.lock().unwrap();
        assert_eq!(seen[0].2, 0, "first run: nothing remembered");
        assert_eq!(seen[1].2, 1, "second run: the past action is offered");
    }

    #[tokio::test]
    async fn incident_memory_leads_the_next_plan_with_what_settled_the_last() {
        let metrics = Fixed::new(
            "metrics",
            Modality::Metrics,
            vec![ev(Modality::Metrics, "cache", 1.0)],
            0,
        );
        let traces = Fixed::new(
            "traces",
            Modality::Traces,
            vec![ev(Modality::Traces, "db", 3.0)],
            0,
        );
        let logs = Fixed::new(
            "logs",
            Modality::Logs,
            vec![ev(Modality::Logs, "db", 3.0)],
            0,
        );
        let memory: Arc<dyn LongTermMemory> = Arc::new(Vectors::default());
        let o = orchestrator(vec![metrics, traces, logs])
            .with_incident_memory(Arc::clone(&memory), Arc::new(Letters));
        let first = Incident {
            id: "inc-1".into(),
            ..incident()
        };
        let run = o.run(&first, &Queue::default()).await.unwrap();
        assert!(
            !run.events
                .iter()
                .any(|e| matches!(e, RunEvent::Recalled { .. }))
        );
        let RunEvent::Planned { plan, .. } = &run.events[0] else {
            panic!("the run starts with a plan")
        };
        assert_eq!(
            plan.subgoals[0].modality,
            Modality::Metrics,
            "no memory yet"
        );
        assert_eq!(memory.count().await.unwrap(), 1);

        let second = Incident {
            id: "inc-2".into(),
            ..incident()
        };
        let run = o.run(&second, &Queue::default()).await.unwrap();
        let recalled = run
            .events
            .iter()
            .find_map(|e| match e {
                RunEvent::Recalled { incidents } => Some(incidents.clone()),
                _ => None,
            })
            .expect("the first incident is recalled");
        assert_eq!(recalled.len(), 1);
        assert_eq!(recalled[0].incident, "inc-1");
        assert_eq!(recalled[0].root_cause.as_deref(), Some("db"));
        assert_eq!(
            recalled[0].settled_by,
            vec![Modality::Traces, Modality::Logs]
        );
        let plan = run
            .events
            .iter()
            .find_map(|e| match e {
                RunEvent::Planned { plan, .. } => Some(plan.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(plan.subgoals[0].modality, Modality::Traces);
        assert!(
            plan.rationale.starts_with("long-term memory"),
            "{}",
            plan.rationale
        );
        // The run itself is remembered too; an incident never recalls itself.
        assert_eq!(memory.count().await.unwrap(), 2);
        let again = o.run(&second, &Queue::default()).await.unwrap();
        assert!(again.events.iter().all(|e| match e {
            RunEvent::Recalled { incidents } => incidents.iter().all(|p| p.incident != "inc-2"),
            _ => true,
        }));
        assert!(
            run.trajectory()
                .steps
                .iter()
                .any(|s| s.action.as_ref().is_some_and(|a| a.name == "recall"))
        );
    }

    #[tokio::test]
    async fn cancellation_stops_the_run() {
        let metrics = Fixed::new("metrics", Modality::Metrics, vec![], 0);
        let o = orchestrator(vec![metrics]);
        o.cancel_flag().store(true, Ordering::Relaxed);
        assert_eq!(
            o.run(&incident(), &Queue::default()).await.unwrap_err(),
            OrchestraError::Cancelled
        );
        let none = orchestrator(vec![]);
        assert!(matches!(
            none.run(&incident(), &Queue::default()).await,
            Err(OrchestraError::Invalid(_))
        ));
    }
}
