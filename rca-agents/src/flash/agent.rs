//! The FLASH loop: status reasoning, state-conditioned context, decision, action, reflection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, CompletionRequest, Message, ResponseFormat, Usage};
use rca_core::tool::{ToolContext, ToolRegistry, ToolSpec};
use rca_core::trajectory::{Action, Observation, Outcome, Step, Trajectory};
use rca_core::{DiagnosisReport, Evidence, Incident, Modality, Responsibility};
use serde::{Deserialize, Serialize};

use super::FlashError;
use super::hindsight::{HindsightBase, Hint};
use super::memory::GlobalMemory;
use super::state::{FlashState, detect_by_rules};
use super::supervision::{
    StatusDecision, allowed_states, check_plan, check_refinement, parse_state, supervise_status,
};
use super::tsg::{PlannedAction, fill_placeholders, parse_tsg};

/// Asks a human (an on-call engineer) for missing information. The CLI asks on the terminal;
/// tests answer by script.
#[async_trait]
pub trait HumanChannel: Send + Sync {
    /// Asks `question`, returns the answer.
    async fn ask(&self, question: &str) -> Result<String, FlashError>;
}

/// What a policy sees in one state: that state's instructions and tools, and nothing else.
#[derive(Debug, Clone)]
pub struct StateContext<'a> {
    /// The state.
    pub state: FlashState,
    /// The state's instructions.
    pub instructions: &'static str,
    /// The tools the state offers.
    pub tools: Vec<ToolSpec>,
    /// The working memory.
    pub memory: &'a GlobalMemory,
    /// Hindsight hints triggered by the previous action.
    pub hints: &'a [Hint],
    /// The incident, in a sentence or two.
    pub incident: String,
    /// The part of the troubleshooting guide this status needs
    /// ([`super::guide_view::guide_view`]).
    pub guide: String,
}

/// A decision: a thought and the action to take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Why.
    pub thought: String,
    /// What.
    pub action: Action,
    /// Tokens spent deciding.
    #[serde(default)]
    pub usage: Usage,
}

/// A policy's reading of the status (FLASH's status detection by the model).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatusReading {
    /// The status read.
    pub state: FlashState,
    /// Tokens spent reading it.
    pub usage: Usage,
}

/// Chooses actions and, when it has a model, reads the status.
#[async_trait]
pub trait FlashPolicy: Send + Sync {
    /// The next action in this context.
    async fn decide(&self, ctx: &StateContext<'_>) -> Result<Decision, FlashError>;
    /// The policy's reading of the status from working memory, before each iteration;
    /// `allowed` lists the statuses the guide allows now. The rules check the reading and
    /// overrule one the guide does not allow ([`super::supervision::supervise_status`]).
    /// The default reads nothing and leaves the status to the rules.
    async fn read_status(
        &self,
        _memory: &GlobalMemory,
        _allowed: &[FlashState],
    ) -> Result<Option<StatusReading>, FlashError> {
        Ok(None)
    }
    /// The model behind the policy, if any: `llm_reasoning` steps ask it when the agent has
    /// no reasoner of its own.
    fn model(&self) -> Option<Arc<dyn ChatModel>> {
        None
    }
}

/// `text` with its `{fact}` placeholders filled from `facts`.
fn fill_text(text: &str, facts: &BTreeMap<String, serde_json::Value>) -> String {
    match fill_placeholders(&serde_json::Value::String(text.to_string()), facts) {
        serde_json::Value::String(s) => s,
        _ => text.to_string(),
    }
}

fn action(name: &str, args: serde_json::Value) -> Action {
    Action {
        name: name.to_string(),
        args,
    }
}

/// The deterministic policy: plan from the guide, refine each step into its prescribed
/// actions, run them in order (a hindsight hint's suggested action is put first by the
/// agent), and complete each step by its branches.
#[derive(Debug, Clone, Default)]
pub struct RulePolicy;

#[async_trait]
impl FlashPolicy for RulePolicy {
    async fn decide(&self, ctx: &StateContext<'_>) -> Result<Decision, FlashError> {
        let m = ctx.memory;
        let (thought, act) = match ctx.state {
            FlashState::DiagnosisPlanning => (
                "turn the troubleshooting guide into a plan".to_string(),
                action("diagnosis_planning", serde_json::json!({})),
            ),
            FlashState::StepInitialization => (
                format!("refine step {}", m.current + 1),
                action("plan_refining", serde_json::json!({"step": m.current + 1})),
            ),
            FlashState::StepExecution => match m.pending.as_ref().and_then(|p| p.first()) {
                Some(a) => (
                    format!("run the step's next action `{}`", a.tool),
                    action(&a.tool, fill_placeholders(&a.args, &m.facts)),
                ),
                None => (
                    "nothing left to run".to_string(),
                    action(
                        "dummy_action",
                        serde_json::json!({"reason": "no action left"}),
                    ),
                ),
            },
            FlashState::StepCompletion => {
                let step = m.plan.as_ref().and_then(|p| p.steps.get(m.current));
                let observations = m
                    .results
                    .iter()
                    .rev()
                    .find(|r| r.step == m.current + 1)
                    .map(|r| r.observations.clone())
                    .unwrap_or_default();
                let last = m
                    .plan
                    .as_ref()
                    .is_some_and(|p| m.current + 1 >= p.steps.len());
                let args = match step.and_then(|s| s.matching_branch(&observations)) {
                    // `{fact}` placeholders in a conclusion are filled from working memory,
                    // so a guide can name the component it diagnosed.
                    Some(b) => match (
                        &b.conclusion.as_ref().map(|c| fill_text(c, &m.facts)),
                        b.goto,
                    ) {
                        (c, Some(n)) => serde_json::json!({"next": n, "conclusion": c}),
                        (Some(c), None) => serde_json::json!({"next": "final", "answer": c}),
                        (None, None) => serde_json::json!({"next": "next"}),
                    },
                    None if last => serde_json::json!({"next": "final"}),
                    None => serde_json::json!({"next": "next"}),
                };
                (
                    "complete the step by its branches".to_string(),
                    action("step_complete", args),
                )
            }
            FlashState::Finished => (
                "finished".to_string(),
                action("step_complete", serde_json::json!({"next": "final"})),
            ),
        };
        Ok(Decision {
            thought,
            action: act,
            usage: Usage::default(),
        })
    }
}

/// The token limit of one decision of the model policy.
pub const DECISION_MAX_TOKENS: u32 = 256;

/// The token limit of a status reading (`{"status": "step_completion"}` is about a dozen).
pub const STATUS_MAX_TOKENS: u32 = 48;

/// The shape of a decision: a thought and one action with its arguments.
fn decision_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "action": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
                "required": ["name", "args"]
            }
        },
        "required": ["thought", "action"]
    })
}

/// The system prompt of the model's status reading.
const STATUS_PROMPT: &str = "You are FLASH, an agent diagnosing a recurring cloud incident \
    step by step. Read the working memory and name the current status: \
    \"diagnosis_planning\" (no plan yet), \"step_initialization\" (a plan step is next and \
    has no actions yet), \"step_execution\" (the step has actions to run, or its last action \
    failed and should be retried), \"step_completion\" (the step's actions are done and its \
    observations can be judged) or \"finished\" (the root cause is established). \
    Answer with one JSON object: {\"status\": \"...\"}.";

/// The shape of a status reading.
fn status_schema() -> serde_json::Value {
    let names: Vec<String> = FlashState::ALL
        .iter()
        .map(|s| s.to_string().to_ascii_lowercase().replace(' ', "_"))
        .collect();
    serde_json::json!({
        "type": "object",
        "properties": {"status": {"type": "string", "enum": names}},
        "required": ["status"]
    })
}

/// What a status reading is shown: the memory, the actions pending and whether the last
/// action failed.
fn status_view(memory: &GlobalMemory) -> String {
    let mut out = memory.summary();
    match &memory.pending {
        None => out.push_str("Actions of the current step: not refined yet.\n"),
        Some(p) if p.is_empty() => out.push_str("Actions of the current step: none left.\n"),
        Some(p) => out.push_str(&format!(
            "Actions of the current step still to run: {}.\n",
            p.iter()
                .map(|a| a.tool.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    if memory.last_action_failed {
        out.push_str("The last action failed.\n");
    }
    out
}

/// A policy backed by a chat model; the prompt holds only the current state's instructions
/// and tools.
pub struct ModelPolicy {
    model: Arc<dyn ChatModel>,
}

impl ModelPolicy {
    /// A policy asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelPolicy { model }
    }

    async fn ask(
        &self,
        system: String,
        user: String,
    ) -> Result<(serde_json::Value, Usage), FlashError> {
        self.ask_json(
            system,
            user,
            ("decision", DECISION_MAX_TOKENS),
            decision_schema(),
            r#"{"thought": "...", "action": {"name": "...", "args": {}}}"#,
        )
        .await
    }

    /// Asks for one JSON object of `schema` (named `name`, at most `max_tokens`), repairing
    /// it locally or asking again for `shape`.
    async fn ask_json(
        &self,
        system: String,
        user: String,
        (name, max_tokens): (&str, u32),
        schema: serde_json::Value,
        shape: &str,
    ) -> Result<(serde_json::Value, Usage), FlashError> {
        let mut request =
            CompletionRequest::new(vec![Message::system(system), Message::user(user)])
                .with_temperature(0.0)
                .with_max_tokens(max_tokens);
        request.response_format = ResponseFormat::JsonSchema {
            name: name.into(),
            schema,
        };
        let response = self
            .model
            .complete(request)
            .await
            .map_err(|e| FlashError::Model(e.to_string()))?;
        let mut usage = response.usage;
        let value = match rca_llm::json::repair(response.text()) {
            Ok(r) => r.value,
            Err(_) => {
                let regen = rca_llm::json::JsonRegen::default()
                    .recover(self.model.as_ref(), response.text(), Some(shape))
                    .await
                    .map_err(|e| FlashError::Model(e.to_string()))?;
                usage.add(&regen.usage);
                regen.value
            }
        };
        Ok((value, usage))
    }
}

/// The system prompt of a state: its instructions and its tools only.
pub fn state_prompt(ctx: &StateContext<'_>) -> String {
    let tools: Vec<String> = ctx
        .tools
        .iter()
        .map(|t| {
            format!(
                "- {}: {} Arguments schema: {}",
                t.name, t.description, t.parameters
            )
        })
        .collect();
    format!(
        "You are FLASH, an agent diagnosing a recurring cloud incident step by step.\n\
         Current status: {}.\n{}\n\nTools available now:\n{}\n\n\
         Answer with one JSON object: {{\"thought\": \"...\", \"action\": {{\"name\": \"<tool>\", \"args\": {{...}}}}}}.",
        ctx.state,
        ctx.instructions,
        tools.join("\n")
    )
}

#[async_trait]
impl FlashPolicy for ModelPolicy {
    async fn decide(&self, ctx: &StateContext<'_>) -> Result<Decision, FlashError> {
        let mut user = format!("Incident: {}\n\n{}", ctx.incident, ctx.memory.summary());
        if !ctx.guide.is_empty() {
            user.push('\n');
            user.push_str(&ctx.guide);
        }
        if !ctx.hints.is_empty() {
            user.push_str("\nHindsight from similar situations:\n");
            for h in ctx.hints {
                user.push_str(&format!("- {}\n", h.text));
                if let Some(a) = &h.suggested_action {
                    user.push_str(&format!("  suggested action: {} {}\n", a.tool, a.args));
                }
            }
        }
        let (value, usage) = self.ask(state_prompt(ctx), user).await?;
        let name = value["action"]["name"]
            .as_str()
            .ok_or_else(|| FlashError::Model(format!("no action name in {value}")))?;
        Ok(Decision {
            thought: value["thought"].as_str().unwrap_or_default().to_string(),
            action: action(name, value["action"]["args"].clone()),
            usage,
        })
    }

    async fn read_status(
        &self,
        memory: &GlobalMemory,
        _allowed: &[FlashState],
    ) -> Result<Option<StatusReading>, FlashError> {
        let (value, usage) = self
            .ask_json(
                STATUS_PROMPT.to_string(),
                status_view(memory),
                ("status", STATUS_MAX_TOKENS),
                status_schema(),
                r#"{"status": "..."}"#,
            )
            .await?;
        let text = value["status"]
            .as_str()
            .or_else(|| value["state"].as_str())
            .unwrap_or_default();
        let state =
            parse_state(text).ok_or_else(|| FlashError::Model(format!("not a status: {value}")))?;
        Ok(Some(StatusReading { state, usage }))
    }

    fn model(&self) -> Option<Arc<dyn ChatModel>> {
        Some(Arc::clone(&self.model))
    }
}

/// Limits of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlashConfig {
    /// Iterations before the run stops (40 by default).
    pub max_iterations: usize,
    /// Characters of a tool observation kept in memory (4,000 by default).
    pub observation_chars: usize,
    /// How long a `human_query` waits for the human's answer, in milliseconds (five minutes
    /// by default); past it the query fails and the run goes on.
    #[serde(default = "default_human_timeout_ms")]
    pub human_timeout_ms: u64,
    /// The run's wall-time budget in milliseconds (none by default): no step starts past it,
    /// and the run ends with [`Outcome::TimedOut`]. A model call that would outlive it is
    /// for the host to bound (run the agent inside
    /// [`crate::orchestra::deadline::within`] with its models wrapped in
    /// [`crate::orchestra::deadline::DeadlineModel`], as `rca flash` does).
    #[serde(default)]
    pub wall_ms: Option<u64>,
}

fn default_human_timeout_ms() -> u64 {
    300_000
}

impl Default for FlashConfig {
    fn default() -> Self {
        FlashConfig {
            max_iterations: 40,
            observation_chars: 4_000,
            human_timeout_ms: default_human_timeout_ms(),
            wall_ms: None,
        }
    }
}

/// What a state saw, for inspection and tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRecord {
    /// The state.
    pub state: FlashState,
    /// The tools it offered.
    pub tools: Vec<String>,
    /// The hints it carried.
    pub hints: Vec<String>,
    /// How its status was decided (the rules' and the model's readings).
    pub status: StatusDecision,
}

/// The result of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlashRun {
    /// The final answer, when one was reached.
    pub answer: Option<String>,
    /// Whether the run established a root cause: its final answer is a conclusion (a
    /// branch's, or the one the policy gave), not the note that the guide ended without one.
    pub established: bool,
    /// The report.
    pub report: DiagnosisReport,
    /// The working memory at the end.
    pub memory: GlobalMemory,
    /// Every step, with the state in its thought.
    pub trajectory: Trajectory,
    /// The context of every iteration.
    pub contexts: Vec<ContextRecord>,
}

fn system_spec(name: &str) -> ToolSpec {
    let (description, parameters) = match name {
        "diagnosis_planning" => (
            "Turns the troubleshooting guide into an ordered plan: `steps` lists the numbers of the guide's steps to follow, in order (omit it to follow them all).",
            serde_json::json!({"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "integer"}}}}),
        ),
        "plan_refining" => (
            "Turns a plan step into executable tool calls (its prescribed actions, or the `actions` you give).",
            serde_json::json!({"type": "object", "properties": {"step": {"type": "integer"}, "actions": {"type": "array", "items": {"type": "object", "properties": {"tool": {"type": "string"}, "args": {"type": "object"}}}}}, "required": ["step"]}),
        ),
        "human_query" => (
            "Asks the on-call engineer a question and records the answer as a fact.",
            serde_json::json!({"type": "object", "properties": {"question": {"type": "string"}, "fact": {"type": "string"}}, "required": ["question"]}),
        ),
        "dummy_action" => (
            "Marks the current step as needing no action.",
            serde_json::json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
        ),
        "llm_reasoning" => (
            "Reasons over the working memory to answer a question.",
            serde_json::json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
        ),
        _ => (
            "Completes the current step: next = \"next\", a later step number, or \"final\" with the answer.",
            serde_json::json!({"type": "object", "properties": {"next": {}, "conclusion": {"type": "string"}, "answer": {"type": "string"}, "solution": {"type": "string"}}, "required": ["next"]}),
        ),
    };
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters,
    }
}

fn modality_of(tool: &str) -> Modality {
    let t = tool.to_ascii_lowercase();
    if t.contains("log") {
        Modality::Logs
    } else if t.contains("metric") {
        Modality::Metrics
    } else if t.contains("trace") || t.contains("span") {
        Modality::Traces
    } else if t.contains("code") {
        Modality::Code
    } else if t.contains("record") || t.contains("db") || t.contains("table") {
        Modality::Records
    } else {
        Modality::Other(tool.to_string())
    }
}

/// The FLASH agent.
pub struct FlashAgent {
    policy: Arc<dyn FlashPolicy>,
    tools: ToolRegistry,
    hindsight: HindsightBase,
    human: Option<Arc<dyn HumanChannel>>,
    reasoner: Option<Arc<dyn ChatModel>>,
    config: FlashConfig,
    progress: Option<StepObserver>,
}

/// Called with every step as soon as it is recorded (what a command prints live).
pub type StepObserver = Arc<dyn Fn(&Step) + Send + Sync>;

impl std::fmt::Debug for FlashAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlashAgent")
            .field("tools", &self.tools.names())
            .field("lessons", &self.hindsight.lessons().len())
            .finish()
    }
}

impl FlashAgent {
    /// An agent with this policy and these data tools.
    pub fn new(policy: Arc<dyn FlashPolicy>, tools: ToolRegistry) -> Self {
        FlashAgent {
            policy,
            tools,
            hindsight: HindsightBase::new(),
            human: None,
            reasoner: None,
            config: FlashConfig::default(),
            progress: None,
        }
    }

    /// Uses this hindsight knowledge base.
    pub fn with_hindsight(mut self, base: HindsightBase) -> Self {
        self.hindsight = base;
        self
    }

    /// Lets `human_query` reach a human.
    pub fn with_human(mut self, human: Arc<dyn HumanChannel>) -> Self {
        self.human = Some(human);
        self
    }

    /// Lets `llm_reasoning` use a model (without one it summarises the memory).
    pub fn with_reasoner(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.reasoner = Some(model);
        self
    }

    /// Sets the limits.
    pub fn with_config(mut self, config: FlashConfig) -> Self {
        self.config = config;
        self
    }

    /// Calls `observer` with every step as soon as it is recorded.
    pub fn with_progress(mut self, observer: StepObserver) -> Self {
        self.progress = Some(observer);
        self
    }

    fn record(&self, trajectory: &mut Trajectory, step: Step) {
        if let Some(observer) = &self.progress {
            observer(&step);
        }
        trajectory.usage.add(&step.usage);
        trajectory.steps.push(step);
    }

    fn context_tools(&self, state: FlashState) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = state
            .system_tools()
            .iter()
            .map(|n| system_spec(n))
            .collect();
        if state.offers_data_tools() {
            specs.extend(self.tools.specs());
        }
        specs
    }

    /// Runs a diagnosis of `incident` following the troubleshooting `guide` (Markdown).
    /// `facts` seed the working memory (e.g. `component`).
    pub async fn run(
        &self,
        incident: &Incident,
        guide: &str,
        facts: BTreeMap<String, serde_json::Value>,
    ) -> Result<FlashRun, FlashError> {
        let started = Instant::now();
        let mut memory = GlobalMemory::with_facts(facts);
        memory
            .facts
            .entry("incident_id".into())
            .or_insert_with(|| serde_json::json!(incident.id));
        let mut trajectory = Trajectory::new();
        let mut contexts = Vec::new();
        let mut hints: Vec<Hint> = Vec::new();
        let mut evidence: Vec<Evidence> = Vec::new();
        let mut solution: Option<String> = None;
        let mut concluded_by_rule = false;
        let mut established = false;
        let mut injected: Vec<(usize, String, String)> = Vec::new();
        // The facts each step's `Fact:` lines have read (the first matching observation wins).
        let mut captured: Vec<(usize, String)> = Vec::new();
        let tool_ctx = ToolContext::default()
            .with_cutoff(incident.detected_at)
            .with_incident(incident.id.clone());
        let incident_text = format!("{} ({})", incident.title, incident.description);
        let wall = self.config.wall_ms.map(std::time::Duration::from_millis);
        for iteration in 0..self.config.max_iterations {
            if wall.is_some_and(|w| started.elapsed() >= w) {
                trajectory.outcome = Outcome::TimedOut;
                break;
            }
            if detect_by_rules(&memory) == Some(FlashState::Finished) {
                trajectory.outcome = Outcome::Finalized;
                break;
            }
            // Status detection: the policy's reading (a model's), supervised by the rules.
            let (reading, status_usage) = match self
                .policy
                .read_status(&memory, &allowed_states(&memory))
                .await
            {
                Ok(Some(r)) => (Ok(Some(r.state)), r.usage),
                Ok(None) => (Ok(None), Usage::default()),
                Err(e) => (Err(e.to_string()), Usage::default()),
            };
            let status = supervise_status(&memory, reading);
            let state = status.chosen;
            if state == FlashState::Finished {
                trajectory.outcome = Outcome::Finalized;
                break;
            }
            if state == FlashState::StepExecution
                && memory.pending.as_ref().is_some_and(|p| p.is_empty())
            {
                // The model fallback chose to retry the step: let it pick new actions.
                memory.last_action_failed = false;
            }
            let tools = self.context_tools(state);
            contexts.push(ContextRecord {
                state,
                tools: tools.iter().map(|t| t.name.clone()).collect(),
                hints: hints.iter().map(|h| h.text.clone()).collect(),
                status: status.clone(),
            });
            let ctx = StateContext {
                state,
                instructions: state.instructions(),
                tools: tools.clone(),
                memory: &memory,
                hints: &hints,
                incident: incident_text.clone(),
                guide: super::guide_view::guide_view(state, guide, &memory),
            };
            let t0 = Instant::now();
            let mut step = Step {
                index: iteration,
                usage: status_usage,
                ..Default::default()
            };
            let note = status.note();
            let decision = match self.policy.decide(&ctx).await {
                Ok(d) => d,
                Err(e) => {
                    step.thought = format!("[{state}] {note}").trim_end().to_string();
                    step.error = Some(e.to_string());
                    self.record(&mut trajectory, step);
                    continue;
                }
            };
            step.thought = format!("[{state}] {note}{}", decision.thought);
            step.usage.add(&decision.usage);
            step.action = Some(decision.action.clone());
            let name = decision.action.name.as_str();
            let args = decision.action.args.clone();
            let (observation, failed) = if !tools.iter().any(|t| t.name == name) {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                (
                    format!(
                        "`{name}` is not available in status {state}; available: {}",
                        names.join(", ")
                    ),
                    true,
                )
            } else {
                match name {
                    "diagnosis_planning" => match parse_tsg(guide) {
                        Ok(guide_plan) => {
                            // The policy's plan (a model's selection of the guide's steps),
                            // checked against the guide parsed by rules.
                            let check = check_plan(&guide_plan, &args["steps"]);
                            let plan = check.plan;
                            let mut text = format!(
                                "plan with {} steps: {}",
                                plan.steps.len(),
                                plan.steps
                                    .iter()
                                    .map(|s| format!("{}. {}", s.number, s.title))
                                    .collect::<Vec<_>>()
                                    .join("; ")
                            );
                            if check.from_model && plan.steps.len() < guide_plan.steps.len() {
                                text.push_str(&format!(
                                    " (the policy's selection of the guide's {} steps)",
                                    guide_plan.steps.len()
                                ));
                            }
                            if !check.notes.is_empty() {
                                text.push_str(&format!(
                                    " (the guide check: {})",
                                    check.notes.join("; ")
                                ));
                            }
                            memory.plan = Some(plan);
                            memory.advance_to(0);
                            (text, false)
                        }
                        Err(e) => (e.to_string(), true),
                    },
                    "plan_refining" => {
                        let given: Option<Vec<PlannedAction>> =
                            serde_json::from_value(args["actions"].clone()).ok();
                        let step_def = memory
                            .plan
                            .as_ref()
                            .and_then(|p| p.steps.get(memory.current))
                            .cloned();
                        // The policy's actions, checked against the guide's step and the
                        // tools of the run.
                        let mut known = self.tools.names();
                        known.extend(["llm_reasoning".to_string(), "human_query".to_string()]);
                        let (checked, notes) = check_refinement(step_def.as_ref(), given, &known);
                        let actions: Vec<PlannedAction> = checked
                            .into_iter()
                            .map(|a| PlannedAction {
                                args: fill_placeholders(&a.args, &memory.facts),
                                tool: a.tool,
                            })
                            .collect();
                        let mut text = format!(
                            "step {} ({}) refined into {} action(s): {}",
                            memory.current + 1,
                            step_def.map(|s| s.title).unwrap_or_default(),
                            actions.len(),
                            actions
                                .iter()
                                .map(|a| format!("{} {}", a.tool, a.args))
                                .collect::<Vec<_>>()
                                .join("; ")
                        );
                        if !notes.is_empty() {
                            text.push_str(&format!(" (the guide check: {})", notes.join("; ")));
                        }
                        memory.current_result();
                        memory.pending = Some(actions);
                        (text, false)
                    }
                    "human_query" => {
                        let question = args["question"].as_str().unwrap_or_default().to_string();
                        memory.complete_pending("human_query");
                        let wait = std::time::Duration::from_millis(self.config.human_timeout_ms);
                        match &self.human {
                            Some(h) => match tokio::time::timeout(wait, h.ask(&question))
                                .await
                                .unwrap_or_else(|_| {
                                    Err(FlashError::Human(format!(
                                        "no answer within {} s",
                                        wait.as_secs_f64()
                                    )))
                                }) {
                                Ok(answer) => {
                                    let key = args["fact"]
                                        .as_str()
                                        .map(str::to_string)
                                        .unwrap_or_else(|| format!("answer: {question}"));
                                    memory.facts.insert(key, serde_json::json!(answer.clone()));
                                    memory
                                        .current_result()
                                        .observations
                                        .push(format!("[human_query] answered: {answer}"));
                                    (format!("human answered: {answer}"), false)
                                }
                                Err(e) => (e.to_string(), true),
                            },
                            None => ("no human is reachable in this run".to_string(), true),
                        }
                    }
                    "dummy_action" => {
                        memory.current_result();
                        memory.pending = Some(Vec::new());
                        (
                            format!("step {} needs no action", memory.current + 1),
                            false,
                        )
                    }
                    "llm_reasoning" => {
                        let question = args["question"].as_str().unwrap_or_default().to_string();
                        let model = self.reasoner.clone().or_else(|| self.policy.model());
                        let answer = match &model {
                            Some(model) => {
                                let req = CompletionRequest::new(vec![
                                    Message::system(
                                        "Answer the question from the diagnosis notes, briefly.",
                                    ),
                                    Message::user(format!(
                                        "Question: {question}\n\nNotes:\n{}",
                                        memory.summary()
                                    )),
                                ])
                                .with_temperature(0.0);
                                match model.complete(req).await {
                                    Ok(r) => {
                                        step.usage.add(&r.usage);
                                        Ok(r.text().to_string())
                                    }
                                    Err(e) => Err(e.to_string()),
                                }
                            }
                            None => Ok(format!(
                                "notes so far: {}",
                                memory.summary().replace('\n', " ")
                            )),
                        };
                        match answer {
                            Ok(a) => {
                                memory.complete_pending("llm_reasoning");
                                memory
                                    .current_result()
                                    .observations
                                    .push(format!("[llm_reasoning] {a}"));
                                (a, false)
                            }
                            Err(e) => (e, true),
                        }
                    }
                    "step_complete" => {
                        let conclusion = args["conclusion"].as_str().map(str::to_string);
                        if let Some(c) = &conclusion {
                            memory.current_result().conclusion = Some(c.clone());
                            concluded_by_rule = true;
                        }
                        if let Some(s) = args["solution"].as_str() {
                            solution = Some(s.to_string());
                        }
                        let total = memory.plan.as_ref().map(|p| p.steps.len()).unwrap_or(0);
                        let text = match &args["next"] {
                            serde_json::Value::String(s) if s == "final" => {
                                let given =
                                    args["answer"].as_str().map(str::to_string).or_else(|| {
                                        memory
                                            .results
                                            .iter()
                                            .rev()
                                            .find_map(|r| r.conclusion.clone())
                                    });
                                established = given.is_some();
                                let answer = given.unwrap_or_else(|| {
                                    "no root cause was established by the guide".to_string()
                                });
                                if args["answer"].is_string() && !concluded_by_rule {
                                    concluded_by_rule = memory
                                        .plan
                                        .as_ref()
                                        .and_then(|p| p.steps.get(memory.current))
                                        .is_some_and(|s| !s.branches.is_empty());
                                }
                                memory.final_answer = Some(answer.clone());
                                format!("final answer: {answer}")
                            }
                            serde_json::Value::Number(n) => {
                                let target = n.as_u64().unwrap_or(0) as usize;
                                // Past the last step ends the plan (a jump to a step a
                                // selected plan dropped, with none kept after it).
                                let next = if target > total {
                                    total
                                } else if target > memory.current + 1 {
                                    target - 1
                                } else {
                                    memory.current + 1
                                };
                                memory.advance_to(next);
                                format!("moving to step {}", next + 1)
                            }
                            _ => {
                                let next = memory.current + 1;
                                memory.advance_to(next);
                                if next >= total {
                                    "all steps done".to_string()
                                } else {
                                    format!("moving to step {}", next + 1)
                                }
                            }
                        };
                        (text, false)
                    }
                    data_tool => {
                        let result = self
                            .tools
                            .dispatch(
                                data_tool,
                                args.clone(),
                                &tool_ctx.clone().at_step(iteration),
                            )
                            .await;
                        memory.complete_pending(data_tool);
                        let (text, failed) = match result {
                            Ok(out) => {
                                evidence.extend(out.evidence.iter().cloned());
                                (out.text, false)
                            }
                            Err(e) => (e.to_string(), true),
                        };
                        let kept: String =
                            text.chars().take(self.config.observation_chars).collect();
                        memory
                            .current_result()
                            .observations
                            .push(format!("[{data_tool}] {kept}"));
                        // The step's `Fact:` lines read facts from its observations.
                        let captures = memory
                            .plan
                            .as_ref()
                            .and_then(|p| p.steps.get(memory.current))
                            .map(|st| st.captures.clone())
                            .unwrap_or_default();
                        for c in captures {
                            let key = (memory.current, c.name.clone());
                            if captured.contains(&key) {
                                continue;
                            }
                            if let Some(v) = c.capture(std::slice::from_ref(&kept)) {
                                memory.facts.insert(c.name.clone(), serde_json::json!(v));
                                captured.push(key);
                            }
                        }
                        if !failed {
                            let component = memory
                                .facts
                                .get("component")
                                .and_then(|v| v.as_str())
                                .unwrap_or(&incident.id)
                                .to_string();
                            evidence.push(Evidence::new(
                                modality_of(data_tool),
                                incident.detected_at,
                                component,
                                kept.chars().take(300).collect::<String>(),
                            ));
                        }
                        (text, failed)
                    }
                }
            };
            memory.last_action_failed = failed;
            // Reflection: hindsight lessons whose trigger matches this action shape the next
            // context.
            hints = self.hindsight.hints_for(state, name, &args, &observation);
            // A hint's suggested action becomes the step's next action (once per step), so
            // the lesson changes what happens next whatever the policy.
            for hint in &hints {
                let Some(suggested) = &hint.suggested_action else {
                    continue;
                };
                let filled = PlannedAction {
                    tool: suggested.tool.clone(),
                    args: fill_placeholders(&suggested.args, &memory.facts),
                };
                let key = (memory.current, filled.tool.clone(), filled.args.to_string());
                if injected.contains(&key) || memory.final_answer.is_some() {
                    continue;
                }
                if let Some(pending) = memory.pending.as_mut() {
                    pending.insert(0, filled);
                    injected.push(key);
                }
            }
            if failed {
                step.error = Some(observation.clone());
            }
            step.observation = Some(Observation::full(observation));
            step.elapsed_ms = t0.elapsed().as_millis() as u64;
            self.record(&mut trajectory, step);
        }
        if memory.final_answer.is_none()
            && !matches!(trajectory.outcome, Outcome::Finalized | Outcome::TimedOut)
        {
            trajectory.outcome = Outcome::StepBudgetExhausted;
        }
        if detect_by_rules(&memory) == Some(FlashState::Finished) && memory.final_answer.is_none() {
            // Every step ran without a branch concluding.
            trajectory.outcome = Outcome::Finalized;
        }
        trajectory.elapsed_ms = started.elapsed().as_millis() as u64;
        let answer = memory.final_answer.clone();
        let report = DiagnosisReport {
            root_cause: answer
                .clone()
                .unwrap_or_else(|| "the guide did not establish a root cause".into()),
            solution: solution.unwrap_or_else(|| {
                let title = memory
                    .plan
                    .as_ref()
                    .map(|p| p.title.clone())
                    .unwrap_or_default();
                format!(
                    "apply the mitigation of the troubleshooting guide{}",
                    if title.is_empty() {
                        String::new()
                    } else {
                        format!(" \"{title}\"")
                    }
                )
            }),
            evidence,
            responsibility: Responsibility::Platform,
            confidence: match (&answer, concluded_by_rule) {
                _ if !established => 0.1,
                (Some(_), true) => 0.8,
                (Some(_), false) => 0.5,
                (None, _) => 0.1,
            },
            candidates: Vec::new(),
            usage: trajectory.usage,
            elapsed_ms: trajectory.elapsed_ms,
        };
        Ok(FlashRun {
            established: established && answer.is_some(),
            answer,
            report,
            memory,
            trajectory,
            contexts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rule_policy_fills_placeholders_in_conclusions() {
        let mut memory = GlobalMemory::with_facts(BTreeMap::from([(
            "component".to_string(),
            serde_json::json!("db-1"),
        )]));
        memory.plan =
            Some(parse_tsg("## Check\nIf `hot`: conclude \"{component} is hot\"\n").unwrap());
        memory.pending = Some(Vec::new());
        memory.current_result().observations.push("cpu hot".into());
        let ctx = StateContext {
            state: FlashState::StepCompletion,
            instructions: FlashState::StepCompletion.instructions(),
            tools: Vec::new(),
            memory: &memory,
            hints: &[],
            incident: String::new(),
            guide: String::new(),
        };
        let decision = RulePolicy.decide(&ctx).await.unwrap();
        assert_eq!(decision.action.args["answer"], "db-1 is hot");
        assert_eq!(
            fill_text("{missing} stays", &memory.facts),
            "{missing} stays"
        );
    }
}
