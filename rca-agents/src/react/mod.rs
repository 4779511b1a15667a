//! The RCAgent controller: a zero-shot ReAct loop with observation snapshot keys, JSON
//! stabilisation, error rules and budgets.
//!
//! Each turn the model answers `{"thought": ..., "action": {"name": ..., "args": {...}}}`.
//! The controller repairs the JSON locally (and asks the model to regenerate it via YAML when
//! repair fails), checks the action against the error rules, expands snapshot keys in the
//! arguments, runs the tool, and hands back the observation (cut to its head plus a key when
//! long, with JSON-sensitive characters sanitised). `finalize` ends the run with a
//! [`DiagnosisReport`]. Every step is recorded in the [`Trajectory`].

mod ask;
mod finalize;
mod obsk;
mod policy;
mod prompt;
mod rules;
mod turn;

pub use ask::{ActionMode, ReactEvent, RunObserver};
pub use finalize::{FINALIZE, FinalizeArgs, finalize_spec};
pub use obsk::{Obsk, ObskTokens, cut as obsk_cut, measure_prompt_tokens};
pub use policy::PlannedInvestigation;
pub use prompt::{
    FRAMEWORK_RULES, NATIVE_RULES, incident_message, native_system_prompt, system_prompt,
};
pub use rules::{ErrorRules, Violation, input_chars};
pub use turn::{TURN_SHAPE, Turn, parse_turn, render_turn};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rca_core::incident::{Evidence, Incident};
use rca_core::llm::{ChatModel, CompletionRequest, Message, ToolCall, ToolChoice};
use rca_core::memory::SnapshotStore;
use rca_core::tool::{ToolContext, ToolRegistry};
use rca_core::trajectory::{DiagnosisReport, Observation, Outcome, Step, Trajectory};
use rca_core::{ToolError, Usage};
use rca_llm::json::{JsonError, JsonRegen, repair, sanitize_for_prompt};
use serde::{Deserialize, Serialize};

use crate::consistency::{ConsistencySummary, SelfConsistency};
use crate::memory::InMemorySnapshotStore;
use ask::{ModelTurn, TurnForm};
use rca_core::embed::Embedder;
use rca_llm::HashingEmbedder;

/// Settings of the controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactConfig {
    /// Steps before the run stops (RCAgent: 15).
    pub max_steps: usize,
    /// Prompt tokens the whole run may consume (`None`: unlimited).
    pub max_prompt_tokens: Option<u64>,
    /// Wall time of the run (`None`: unlimited).
    pub max_wall_time: Option<Duration>,
    /// Observations longer than this many characters are cut to a head plus a snapshot key
    /// (`None`: observations are shown in full).
    pub obsk_head_chars: Option<usize>,
    /// Repair model output locally before giving up on it.
    pub json_repair: bool,
    /// Regenerate unparseable output via YAML (`None`: off).
    pub regen: Option<JsonRegen>,
    /// The error rules.
    pub rules: ErrorRules,
    /// Replace JSON-sensitive characters in observations placed in the prompt.
    pub sanitize_observations: bool,
    /// Sampling temperature of the greedy run (RCAgent decodes greedily: 0).
    pub temperature: Option<f32>,
    /// Seed of the greedy run.
    pub seed: Option<u64>,
    /// Token limit of each model turn.
    pub max_turn_tokens: Option<u32>,
    /// How the model is asked for its action (JSON in text or native tool calls).
    #[serde(default)]
    pub action_mode: ActionMode,
    /// Self-consistency over the final answer's text or over trajectories (off by default).
    #[serde(default)]
    pub self_consistency: SelfConsistency,
}

impl Default for ReactConfig {
    fn default() -> Self {
        ReactConfig {
            max_steps: 15,
            max_prompt_tokens: None,
            max_wall_time: None,
            obsk_head_chars: Some(2000),
            json_repair: true,
            regen: Some(JsonRegen::default()),
            rules: ErrorRules::default(),
            sanitize_observations: true,
            temperature: Some(0.0),
            seed: None,
            max_turn_tokens: None,
            action_mode: ActionMode::Auto,
            self_consistency: SelfConsistency::Off,
        }
    }
}

/// A cancellation flag a host can set from anywhere; the controller checks it before every
/// model call and every tool call.
#[derive(Debug, Clone, Default)]
pub struct Cancellation(Arc<AtomicBool>);

impl Cancellation {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the flag.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether it is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The result of a run: the trajectory and, when the agent finalized, its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactRun {
    /// Every step.
    pub trajectory: Trajectory,
    /// The diagnosis, when the run finalized.
    pub report: Option<DiagnosisReport>,
    /// The mistakes the controller caught, by step.
    #[serde(default)]
    pub violations: Vec<CaughtViolation>,
    /// What self-consistency did, when it is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<ConsistencySummary>,
}

/// A mistake caught at one step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaughtViolation {
    /// The step's index.
    pub step: usize,
    /// What was wrong.
    pub violation: Violation,
}

impl ReactRun {
    /// Steps whose action was invalid or refused (an error was recorded).
    pub fn invalid_actions(&self) -> usize {
        self.trajectory
            .steps
            .iter()
            .filter(|s| s.error.is_some())
            .count()
    }
}

/// How the next turns are decoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampling {
    pub temperature: Option<f32>,
    /// The seed of the first step after `branch_at`; later steps add `steps << 32`.
    pub seed: Option<u64>,
    /// The step this decoding starts at (0 for a whole run; the prefix length for a sample).
    pub branch_at: usize,
    /// Stop, before any tool runs, at a turn that is not `finalize` (step-wise
    /// self-consistency: a sample that would call more tools is discarded unspent).
    pub finalize_only: bool,
}

/// The state of a run between steps; cloned to branch trajectory-level samples.
#[derive(Debug, Clone)]
pub(crate) struct RunState {
    pub messages: Vec<Message>,
    pub trajectory: Trajectory,
    pub evidence: Vec<Evidence>,
    pub seen_calls: BTreeSet<(String, String)>,
    pub investigations: usize,
    pub violations: Vec<CaughtViolation>,
    /// The native tool call of the step being handled (its result goes into a tool message).
    pub pending_call: Option<ToolCall>,
    pub incident: Incident,
    pub started: Instant,
}

/// How driving a run ended.
#[derive(Debug)]
pub(crate) enum DriveEnd {
    /// `finalize` was accepted; the report.
    Finalized(DiagnosisReport),
    /// `finalize` was about to be accepted; the state is the prefix before that step, and
    /// the report the one it would have produced.
    AboutToFinalize(Box<RunState>, DiagnosisReport),
    /// A budget, the host or the model ended it.
    Stopped(Outcome),
}

/// What one step produced.
enum StepEnd {
    Continue,
    Finalize(DiagnosisReport),
    Stop(Outcome),
}

/// The ReAct controller.
#[derive(Clone)]
pub struct ReactAgent {
    model: Arc<dyn ChatModel>,
    tools: ToolRegistry,
    obsk: Option<Obsk>,
    task_requirements: String,
    config: ReactConfig,
    observer: Option<Arc<dyn RunObserver>>,
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for ReactAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactAgent")
            .field("model", &self.model.model_id())
            .field("tools", &self.tools)
            .field("config", &self.config)
            .finish()
    }
}

impl ReactAgent {
    /// A controller over `model` and `tools`, with snapshots in memory. `task_requirements`
    /// is the host's part of the prompt (RCA instructions, basic cloud knowledge).
    pub fn new(
        model: Arc<dyn ChatModel>,
        tools: ToolRegistry,
        task_requirements: impl Into<String>,
        config: ReactConfig,
    ) -> Self {
        let store: Arc<dyn SnapshotStore> = Arc::new(InMemorySnapshotStore::new());
        let obsk = config.obsk_head_chars.map(|h| Obsk::new(store, h));
        ReactAgent {
            model,
            tools,
            obsk,
            task_requirements: task_requirements.into(),
            config,
            observer: None,
            embedder: Arc::new(HashingEmbedder::default()),
        }
    }

    /// Tells `observer` of every step as it ends, and of the model's text as it streams
    /// (a model that streams is then read through its stream).
    pub fn with_observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Whether this controller's actions arrive as native tool calls (from the configured
    /// [`ActionMode`] and the model's capabilities).
    pub fn uses_native_tools(&self) -> bool {
        self.form().is_native()
    }

    fn form(&self) -> TurnForm {
        TurnForm::resolve(self.config.action_mode, &self.model.capabilities())
    }

    /// The specs the model may call: the tools and `finalize`.
    fn all_specs(&self) -> Vec<rca_core::tool::ToolSpec> {
        let mut specs = self.tools.specs();
        specs.push(finalize_spec());
        specs
    }

    /// Uses `store` for snapshots (for example a [`crate::memory::DiskSnapshotStore`]).
    pub fn with_snapshot_store(mut self, store: Arc<dyn SnapshotStore>) -> Self {
        self.obsk = self.config.obsk_head_chars.map(|h| Obsk::new(store, h));
        self
    }

    /// The settings.
    pub fn config(&self) -> &ReactConfig {
        &self.config
    }

    /// The model.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// The system prompt this controller sends.
    pub fn system_prompt(&self) -> String {
        let specs = self.all_specs();
        if self.form().is_native() {
            native_system_prompt(&self.task_requirements, &specs)
        } else {
            system_prompt(&self.task_requirements, &specs)
        }
    }

    /// Runs the controller on an incident until it finalizes or a budget ends it, with the
    /// configured self-consistency.
    pub async fn run(&self, incident: &Incident, cancel: &Cancellation) -> ReactRun {
        self.run_configured(incident, cancel).await
    }

    /// Uses `embedder` for self-consistency's embedding vote (default: [`HashingEmbedder`]).
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = embedder;
        self
    }

    /// The embedder of self-consistency's embedding vote.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    pub(crate) fn greedy(&self) -> Sampling {
        Sampling {
            temperature: self.config.temperature,
            seed: self.config.seed,
            branch_at: 0,
            finalize_only: false,
        }
    }

    pub(crate) fn start(&self, incident: &Incident) -> RunState {
        RunState {
            messages: vec![
                Message::system(self.system_prompt()),
                Message::user(incident_message(incident)),
            ],
            trajectory: Trajectory::new(),
            evidence: Vec::new(),
            seen_calls: BTreeSet::new(),
            investigations: 0,
            violations: Vec::new(),
            pending_call: None,
            incident: incident.clone(),
            started: Instant::now(),
        }
    }

    /// Closes a run: sets the outcome, totals and the report's accounting.
    pub(crate) fn finish(&self, mut state: RunState, end: DriveEnd) -> ReactRun {
        let elapsed = elapsed_ms(state.started);
        let mut usage = Usage::default();
        for s in &state.trajectory.steps {
            usage.add(&s.usage);
        }
        state.trajectory.usage = usage;
        state.trajectory.elapsed_ms = elapsed;
        let report = match end {
            DriveEnd::Finalized(mut r) | DriveEnd::AboutToFinalize(_, mut r) => {
                state.trajectory.outcome = Outcome::Finalized;
                r.usage = usage;
                r.elapsed_ms = elapsed;
                Some(r)
            }
            DriveEnd::Stopped(outcome) => {
                state.trajectory.outcome = outcome;
                None
            }
        };
        ReactRun {
            trajectory: state.trajectory,
            report,
            violations: state.violations,
            consistency: None,
        }
    }

    /// Runs steps until the run ends. With `stop_before_finalize`, an accepted `finalize`
    /// is not recorded: the prefix is handed back instead.
    pub(crate) async fn drive(
        &self,
        state: &mut RunState,
        sampling: Sampling,
        stop_before_finalize: bool,
        cancel: &Cancellation,
    ) -> DriveEnd {
        loop {
            let before = stop_before_finalize.then(|| state.clone());
            match self.step(state, sampling, cancel).await {
                StepEnd::Continue => {}
                StepEnd::Stop(outcome) => return DriveEnd::Stopped(outcome),
                StepEnd::Finalize(report) => {
                    return match before {
                        Some(prefix) => DriveEnd::AboutToFinalize(Box::new(prefix), report),
                        None => DriveEnd::Finalized(report),
                    };
                }
            }
        }
    }

    fn budget_left(&self, state: &RunState, cancel: &Cancellation) -> Result<(), Outcome> {
        if cancel.is_cancelled() {
            return Err(Outcome::Cancelled);
        }
        if state.trajectory.steps.len() >= self.config.max_steps {
            return Err(Outcome::StepBudgetExhausted);
        }
        if let Some(limit) = self.config.max_wall_time
            && state.started.elapsed() >= limit
        {
            return Err(Outcome::TimedOut);
        }
        Ok(())
    }

    /// Awaits `fut` within what is left of the wall-time budget.
    async fn within_budget<T>(
        &self,
        started: Instant,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, Outcome> {
        match self.config.max_wall_time {
            Some(limit) => {
                let left = limit.saturating_sub(started.elapsed());
                tokio::time::timeout(left, fut)
                    .await
                    .map_err(|_| Outcome::TimedOut)
            }
            None => Ok(fut.await),
        }
    }

    async fn complete(
        &self,
        state: &RunState,
        request: CompletionRequest,
    ) -> Result<rca_core::CompletionResponse, Outcome> {
        self.within_budget(state.started, self.model.complete(request))
            .await?
            .map_err(|e| Outcome::Failed(format!("model error: {e}")))
    }

    async fn step(
        &self,
        state: &mut RunState,
        sampling: Sampling,
        cancel: &Cancellation,
    ) -> StepEnd {
        if let Err(outcome) = self.budget_left(state, cancel) {
            return StepEnd::Stop(outcome);
        }
        let started = Instant::now();
        let index = state.trajectory.steps.len();
        let mut request = CompletionRequest::new(state.messages.clone());
        request.temperature = sampling.temperature;
        let since_branch = index.saturating_sub(sampling.branch_at) as u64;
        request.seed = sampling.seed.map(|s| s.wrapping_add(since_branch << 32));
        request.max_tokens = self.config.max_turn_tokens;
        if let Some(limit) = self.config.max_prompt_tokens {
            let used: u64 = state
                .trajectory
                .steps
                .iter()
                .map(|s| s.usage.prompt_tokens)
                .sum();
            if used + u64::from(request.estimated_prompt_tokens()) > limit {
                return StepEnd::Stop(Outcome::TokenBudgetExhausted);
            }
        }
        let turn = match self.ask(state, request, index).await {
            Ok(t) => t,
            Err(outcome) => return StepEnd::Stop(outcome),
        };
        let raw = turn.text.clone();
        let mut step = Step {
            index,
            usage: turn.usage,
            ..Default::default()
        };
        let started_run = state.started;
        let parsed = match turn.call {
            Some(call) => {
                let parsed = self.read_call(&call, &raw, &mut step);
                state.pending_call = Some(call);
                parsed
            }
            None => match self
                .within_budget(started_run, self.read_turn(&raw, &mut step))
                .await
            {
                Ok(Ok(p)) => p,
                Ok(Err(outcome)) | Err(outcome) => return StepEnd::Stop(outcome),
            },
        };
        if sampling.finalize_only {
            let would = match &parsed {
                Ok(turn) if turn.action.name == FINALIZE => None,
                Ok(turn) => Some(format!("it would call `{}`", turn.action.name)),
                Err(v) => Some(format!("its turn was invalid ({v})")),
            };
            if let Some(why) = would {
                step.error = Some(format!("discarded before acting: {why}"));
                step.elapsed_ms = elapsed_ms(started);
                state.trajectory.steps.push(step);
                return StepEnd::Stop(Outcome::Discarded(why));
            }
        }
        let end = match parsed {
            Err(violation) => {
                self.reject(state, &mut step, &raw, violation);
                StepEnd::Continue
            }
            Ok(turn) => {
                step.thought = turn.thought.clone();
                step.action = Some(turn.action.clone());
                // The tool call is bounded by the wall-time budget too; `act` changes the state
                // only after its awaits, so a timeout leaves the state as it was.
                match self
                    .within_budget(started_run, self.act(state, &mut step, &turn, cancel))
                    .await
                {
                    Ok(end) => end,
                    Err(outcome) => StepEnd::Stop(outcome),
                }
            }
        };
        step.elapsed_ms = elapsed_ms(started);
        state.pending_call = None;
        if let Some(observer) = &self.observer {
            observer.on_event(&ReactEvent::Step(step.clone()));
        }
        state.trajectory.steps.push(step);
        end
    }

    /// Asks the model for the turn in this run's form.
    async fn ask(
        &self,
        state: &RunState,
        request: CompletionRequest,
        index: usize,
    ) -> Result<ModelTurn, Outcome> {
        match self.form() {
            TurnForm::Text => {
                let request = request.json();
                let streams = self.model.capabilities().streaming;
                match (&self.observer, streams) {
                    (Some(observer), true) if observer.wants_tokens() => {
                        let collect = ask::collect_stream(self.model.as_ref(), request, |t| {
                            observer.on_event(&ReactEvent::Token {
                                step: index,
                                text: t.to_string(),
                            })
                        });
                        let (text, usage) = self
                            .within_budget(state.started, collect)
                            .await?
                            .map_err(|e| Outcome::Failed(format!("model error: {e}")))?;
                        Ok(ModelTurn {
                            text,
                            call: None,
                            usage,
                        })
                    }
                    _ => {
                        let r = self.complete(state, request).await?;
                        Ok(ModelTurn {
                            text: r.text().to_string(),
                            call: None,
                            usage: r.usage,
                        })
                    }
                }
            }
            TurnForm::ToolCalls => {
                let mut request = request;
                request.tools = ask::wire_specs(&self.all_specs());
                request.tool_choice = ToolChoice::Auto;
                let r = self.complete(state, request).await?;
                let call = r
                    .choices
                    .first()
                    .and_then(|c| c.message.tool_calls.first().cloned());
                Ok(ModelTurn {
                    text: r.text().to_string(),
                    call,
                    usage: r.usage,
                })
            }
            TurnForm::PickThenFill => {
                let specs = self.all_specs();
                let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
                let caps = self.model.capabilities();
                let pick = self
                    .complete(state, ask::pick_request(request.clone(), &names, &caps))
                    .await?;
                let mut usage = pick.usage;
                let pick_text = pick.text().to_string();
                let picked = repair(&pick_text).ok().and_then(|r| {
                    let tool = r.value.get("tool")?.as_str()?.trim().to_string();
                    let thought = r.value.get("thought").and_then(|t| t.as_str());
                    Some((tool, thought.unwrap_or_default().to_string()))
                });
                let Some((tool, thought)) = picked else {
                    // No tool named: the text goes to the JSON-in-text reader (and is invalid).
                    return Ok(ModelTurn {
                        text: pick_text,
                        call: None,
                        usage,
                    });
                };
                let Some(spec) = specs.iter().find(|s| s.name == tool) else {
                    return Ok(ModelTurn {
                        text: thought,
                        call: Some(ToolCall {
                            id: format!("call-{index}"),
                            name: tool,
                            arguments: "{}".into(),
                        }),
                        usage,
                    });
                };
                let fill = self
                    .complete(state, ask::fill_request(request, &pick_text, spec))
                    .await?;
                usage.add(&fill.usage);
                let call = fill
                    .choices
                    .first()
                    .and_then(|c| c.message.tool_calls.first().cloned())
                    .unwrap_or_else(|| ToolCall {
                        id: format!("call-{index}"),
                        name: tool.clone(),
                        arguments: fill.text().to_string(),
                    });
                Ok(ModelTurn {
                    text: thought,
                    call: Some(ToolCall { name: tool, ..call }),
                    usage,
                })
            }
        }
    }

    /// Reads a native tool call into a turn: its arguments repaired when configured.
    fn read_call(
        &self,
        call: &ToolCall,
        thought: &str,
        step: &mut Step,
    ) -> Result<Turn, Violation> {
        let arguments = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            call.arguments.as_str()
        };
        let parsed = if self.config.json_repair {
            repair(arguments)
        } else {
            strict(arguments)
        };
        let schema = || {
            self.all_specs()
                .into_iter()
                .find(|s| s.name == call.name)
                .map(|s| s.parameters.to_string())
                .unwrap_or_default()
        };
        match parsed {
            Ok(r) if r.value.is_object() => {
                step.repairs = u32::from(r.was_repaired());
                Ok(Turn {
                    thought: thought.to_string(),
                    action: rca_core::trajectory::Action {
                        name: call.name.clone(),
                        args: r.value,
                    },
                })
            }
            Ok(_) => Err(Violation::InvalidArgs {
                tool: call.name.clone(),
                message: "the arguments must be a JSON object".into(),
                schema: schema(),
            }),
            Err(e) => Err(Violation::InvalidArgs {
                tool: call.name.clone(),
                message: e.to_string(),
                schema: schema(),
            }),
        }
    }

    /// Records the model's turn and what came back, in the conversation's form: a tool-call
    /// message and a tool result when the turn was a native call, an assistant message and an
    /// `Observation:` user message otherwise. `observation` is `None` after an accepted
    /// `finalize`.
    fn push_exchange(&self, state: &mut RunState, assistant: &str, observation: Option<&str>) {
        match state.pending_call.take() {
            Some(call) => {
                let id = call.id.clone();
                let mut m = Message::assistant(state_thought(assistant));
                m.tool_calls = vec![call];
                state.messages.push(m);
                if let Some(text) = observation {
                    state.messages.push(Message::tool_result(id, text));
                }
            }
            None => {
                state.messages.push(Message::assistant(assistant));
                if let Some(text) = observation {
                    state
                        .messages
                        .push(Message::user(format!("Observation: {text}")));
                }
            }
        }
    }

    /// Parses the model output into a turn, repairing and regenerating as configured. The
    /// outer error ends the run (the model failed); the inner one is a violation to report.
    async fn read_turn(
        &self,
        raw: &str,
        step: &mut Step,
    ) -> Result<Result<Turn, Violation>, Outcome> {
        let first = if self.config.json_repair {
            repair(raw)
        } else {
            strict(raw)
        };
        let value = match first {
            Ok(r) => {
                step.repairs = u32::from(r.was_repaired());
                r.value
            }
            Err(e) => match &self.config.regen {
                None => {
                    return Ok(Err(Violation::InvalidTurn {
                        message: e.to_string(),
                    }));
                }
                Some(regen) => match regen
                    .recover(self.model.as_ref(), raw, Some(TURN_SHAPE))
                    .await
                {
                    Ok(g) => {
                        step.regenerations = g.rounds;
                        step.repairs += u32::from(!g.repairs.is_empty() || g.from_yaml);
                        step.usage.add(&g.usage);
                        g.value
                    }
                    Err(JsonError::Model(e)) => {
                        return Err(Outcome::Failed(format!(
                            "model error during regeneration: {e}"
                        )));
                    }
                    Err(e) => {
                        step.regenerations = match &e {
                            JsonError::RegenExhausted { rounds, .. } => *rounds,
                            _ => 0,
                        };
                        return Ok(Err(Violation::InvalidTurn {
                            message: e.to_string(),
                        }));
                    }
                },
            },
        };
        Ok(parse_turn(&value).map_err(|message| Violation::InvalidTurn { message }))
    }

    /// Records a violation as the step's error and observation.
    fn reject(&self, state: &mut RunState, step: &mut Step, assistant: &str, violation: Violation) {
        let text = violation.observation(self.config.rules.enabled);
        step.error = Some(violation.to_string());
        state.violations.push(CaughtViolation {
            step: step.index,
            violation,
        });
        step.observation = Some(Observation::full(text.clone()));
        self.push_exchange(state, assistant, Some(&text));
    }

    async fn act(
        &self,
        state: &mut RunState,
        step: &mut Step,
        turn: &Turn,
        cancel: &Cancellation,
    ) -> StepEnd {
        let rendered = render_turn(turn);
        let rules = &self.config.rules;
        let name = turn.action.name.as_str();
        if name == FINALIZE {
            let args = match FinalizeArgs::parse(&turn.action.args) {
                Ok(a) => a,
                Err(message) => {
                    let v = Violation::InvalidArgs {
                        tool: FINALIZE.into(),
                        message,
                        schema: finalize_spec().parameters.to_string(),
                    };
                    self.reject(state, step, &rendered, v);
                    return StepEnd::Continue;
                }
            };
            if rules.enabled
                && (state.investigations < rules.min_observations
                    || state.evidence.len() < rules.min_evidence)
            {
                let v = Violation::PrematureFinalize {
                    observations: state.investigations,
                    evidence: state.evidence.len(),
                    need_observations: rules.min_observations,
                    need_evidence: rules.min_evidence,
                };
                self.reject(state, step, &rendered, v);
                return StepEnd::Continue;
            }
            step.observation = Some(Observation::full("Diagnosis accepted."));
            self.push_exchange(state, &rendered, None);
            return StepEnd::Finalize(
                args.into_report(&state.evidence, state.incident.detected_at),
            );
        }
        let Some(tool) = self.tools.get(name).cloned() else {
            let available = self
                .tools
                .specs()
                .iter()
                .chain(std::iter::once(&finalize_spec()))
                .map(|s| format!("{} ({})", s.name, first_sentence(&s.description)))
                .collect();
            let v = Violation::UnknownTool {
                name: name.to_string(),
                available,
            };
            self.reject(state, step, &rendered, v);
            return StepEnd::Continue;
        };
        let mut args = turn.action.args.clone();
        if let Some(obsk) = &self.obsk
            && let Err(e) = obsk.expand(&mut args).await
        {
            return StepEnd::Stop(Outcome::Failed(format!("snapshot store failed: {e}")));
        }
        let call_key = (name.to_string(), args.to_string());
        if rules.enabled {
            if rules.repeated_call && tool.is_stateless() && state.seen_calls.contains(&call_key) {
                let v = Violation::RepeatedCall {
                    tool: name.to_string(),
                };
                self.reject(state, step, &rendered, v);
                return StepEnd::Continue;
            }
            let chars = input_chars(&args);
            if rules.expert_tools.iter().any(|t| t == name) && chars < rules.min_expert_input_chars
            {
                let v = Violation::TrivialExpertInput {
                    tool: name.to_string(),
                    chars,
                    min: rules.min_expert_input_chars,
                };
                self.reject(state, step, &rendered, v);
                return StepEnd::Continue;
            }
        }
        if cancel.is_cancelled() {
            return StepEnd::Stop(Outcome::Cancelled);
        }
        let ctx = ToolContext::default()
            .with_incident(state.incident.id.clone())
            .with_cutoff(state.incident.detected_at)
            .at_step(step.index);
        match tool.call(args, &ctx).await {
            Ok(output) => {
                let observation = match &self.obsk {
                    Some(obsk) => match obsk.observe(&output.text).await {
                        Ok(o) => o,
                        Err(e) => {
                            return StepEnd::Stop(Outcome::Failed(format!(
                                "snapshot store failed: {e}"
                            )));
                        }
                    },
                    None => Observation::full(output.text.clone()),
                };
                let shown = if self.config.sanitize_observations {
                    sanitize_for_prompt(&observation.text)
                } else {
                    observation.text.clone()
                };
                state.evidence.extend(output.evidence);
                state.seen_calls.insert(call_key);
                state.investigations += 1;
                step.observation = Some(Observation {
                    text: shown.clone(),
                    ..observation
                });
                self.push_exchange(state, &rendered, Some(&shown));
            }
            Err(ToolError::InvalidArgs {
                tool,
                message,
                schema,
            }) => {
                let v = Violation::InvalidArgs {
                    tool,
                    message,
                    schema,
                };
                self.reject(state, step, &rendered, v);
            }
            Err(e) => {
                // A tool that fails is an observation too; the model may try something else.
                let text = format!("Error: {e}");
                step.error = Some(e.to_string());
                step.observation = Some(Observation::full(text.clone()));
                self.push_exchange(state, &rendered, Some(&text));
            }
        }
        StepEnd::Continue
    }
}

fn strict(raw: &str) -> Result<rca_llm::json::Repaired, JsonError> {
    match serde_json::from_str::<serde_json::Value>(raw.trim()) {
        Ok(value) => Ok(rca_llm::json::Repaired {
            value,
            repairs: Vec::new(),
        }),
        Err(e) => Err(JsonError::Unrepairable {
            message: e.to_string(),
            raw: raw.to_string(),
        }),
    }
}

/// The thought of a rendered turn (the text of a tool-call message).
fn state_thought(rendered: &str) -> String {
    serde_json::from_str::<serde_json::Value>(rendered)
        .ok()
        .and_then(|v| {
            v.get("thought")
                .and_then(|t| t.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| rendered.to_string())
}

fn first_sentence(text: &str) -> &str {
    let t = text.trim();
    match t.find(". ") {
        Some(i) => &t[..=i],
        None => t,
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
