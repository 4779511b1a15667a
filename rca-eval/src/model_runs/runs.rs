//! One function per agent: build it on bundled data with the given model, run it within
//! [`RunBudgets`], and check what must hold whatever the model said.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rca_agents::consistency::SamplingConfig;
use rca_agents::consistency::{EmbeddingVote, TrajectoryConsistency, text_self_consistency};
use rca_agents::flash::{FlashAgent, FlashConfig, ModelPolicy};
use rca_agents::orchestra::{Decision, DiagnosisPipeline, PipelineConfig, RoleModels};
use rca_agents::react::{Cancellation, ErrorRules, ReactAgent, ReactConfig, ReactRun};
use rca_agents::stratus::Scenario;
use rca_agents::stratus::Stratus;
use rca_agents::stratus::agents::{ModelDiagnoser, ModelMitigator, PolicyDetector};
use rca_agents::stratus::sim::SimEnvironment;
use rca_agents::stratus::transaction::{Tnr, TnrConfig};
use rca_core::Modality;
use rca_core::llm::{ChatModel, CompletionRequest, Message};
use rca_core::trajectory::{Outcome, Trajectory};
use rca_llm::HashingEmbedder;
use rca_llm::json::JsonRegen;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::tools::IncidentTools;
use tokio::sync::RwLock;

use super::{AgentRun, BundledData, Invariant, RunBudgets, audited, folder_name};

/// The agents [`run_agent`] knows, in the order `rca bench agents` runs them.
pub const AGENTS: &[&str] = &[
    "react",
    "react-code",
    "flash",
    "orchestra",
    "stratus",
    #[cfg(feature = "sql")]
    "lifecycle",
    "text-sc",
];

/// The task requirements the RCAgent controller gets (the host's part of its prompt).
const REACT_TASK: &str = "Find the root cause of the incident: the component whose own \
behaviour is wrong, what kind of fault it is, and how to mitigate it. Gather evidence with \
the tools before you finalize.";

/// The prompt-token budget of one ReAct run.
const REACT_PROMPT_TOKENS: u64 = 60_000;

/// Runs agent `name` on its bundled data with `model`.
pub async fn run_agent(
    name: &str,
    model: Arc<dyn ChatModel>,
    data: &BundledData,
    budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    let started = Instant::now();
    let mut run = match name {
        "react" => {
            let dir = data.real_incident()?;
            react("react", model, &dir, &folder_name(&dir), budgets).await
        }
        "react-code" => {
            react(
                "react-code",
                model,
                &data.stream_job_incident(),
                "stream-job example (written for it)",
                budgets,
            )
            .await
        }
        "flash" => flash(model, &data.recurring_case()?, budgets).await,
        "orchestra" => orchestra(model, &data.real_incident()?, budgets).await,
        "stratus" => stratus(model, &data.heldout_scenario()?, budgets).await,
        #[cfg(feature = "sql")]
        "lifecycle" => lifecycle(model, &data.real_incident()?, budgets).await,
        "text-sc" => text_sc(model, budgets).await,
        other => Err(format!("no agent `{other}`; agents: {}", AGENTS.join(", "))),
    }?;
    run.seconds = started.elapsed().as_secs_f64();
    let within = run.seconds <= budgets.wall_time.as_secs_f64() + 1.0;
    run.invariants.push(Invariant::new(
        "within the wall-time budget",
        within,
        format!("{:.1} s of {} s", run.seconds, budgets.wall_time.as_secs()),
    ));
    Ok(run)
}

fn load(dir: &Path) -> Result<IncidentDir, String> {
    IncidentDir::open(dir).map_err(|e| format!("cannot load {}: {e}", dir.display()))
}

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Finalized => "finalized".into(),
        Outcome::StepBudgetExhausted => "step budget exhausted".into(),
        Outcome::TokenBudgetExhausted => "token budget exhausted".into(),
        Outcome::TimedOut => "timed out".into(),
        Outcome::Cancelled => "cancelled".into(),
        Outcome::Discarded(why) => format!("discarded: {why}"),
        Outcome::Failed(m) => format!("failed: {m}"),
    }
}

/// The trajectory survives a JSON round trip and its steps are numbered in order.
fn trajectory_valid(t: &Trajectory) -> Invariant {
    let numbered = t.steps.iter().enumerate().all(|(i, s)| s.index == i);
    let round_trip = serde_json::to_string(t)
        .ok()
        .and_then(|s| serde_json::from_str::<Trajectory>(&s).ok())
        .is_some_and(|back| &back == t);
    Invariant::new(
        "trajectory valid (numbered steps, JSON round trip)",
        numbered && round_trip,
        format!("{} steps", t.steps.len()),
    )
}

fn server_counted(run: &AgentRun) -> Invariant {
    Invariant::new(
        "every model call carries the server's token counts",
        run.server_counted,
        format!(
            "{} calls, {} prompt + {} completion tokens",
            run.model_calls, run.prompt_tokens, run.completion_tokens
        ),
    )
}

fn react_config(budgets: &RunBudgets) -> ReactConfig {
    ReactConfig {
        max_steps: budgets.max_steps,
        max_prompt_tokens: Some(REACT_PROMPT_TOKENS),
        max_wall_time: Some(budgets.wall_time),
        max_turn_tokens: Some(budgets.max_turn_tokens),
        seed: Some(budgets.seed),
        obsk_head_chars: Some(1500),
        regen: Some(JsonRegen {
            max_rounds: 1,
            ..JsonRegen::default()
        }),
        rules: ErrorRules {
            min_evidence: 1,
            ..ErrorRules::default()
        },
        ..ReactConfig::default()
    }
}

fn react_invariants(run: &mut AgentRun, react: &ReactRun, budgets: &RunBudgets) {
    let t = &react.trajectory;
    run.outcome = outcome_text(&t.outcome);
    run.steps = t.steps.len();
    run.regenerations = t.steps.iter().map(|s| u64::from(s.regenerations)).sum();
    run.invariants.push(Invariant::new(
        "within the step budget",
        t.steps.len() <= budgets.max_steps,
        format!("{} of {} steps", t.steps.len(), budgets.max_steps),
    ));
    let prompt: u64 = t.steps.iter().map(|s| s.usage.prompt_tokens).sum();
    run.invariants.push(Invariant::new(
        "within the prompt-token budget",
        prompt <= REACT_PROMPT_TOKENS,
        format!("{prompt} of {REACT_PROMPT_TOKENS} prompt tokens"),
    ));
    run.invariants.push(trajectory_valid(t));
    run.invariants.push(Invariant::new(
        "ends by finalizing or a budget, never a model failure",
        !matches!(t.outcome, Outcome::Failed(_) | Outcome::Cancelled),
        run.outcome.clone(),
    ));
    let finalized_with_report = (t.outcome == Outcome::Finalized) == react.report.is_some();
    run.invariants.push(Invariant::new(
        "a report exactly when the run finalized",
        finalized_with_report,
        format!("report: {}", react.report.is_some()),
    ));
    run.invariants.push(server_counted(run));
}

/// The RCAgent controller with the real information-gathering tools and model-backed experts
/// (the code expert where the incident has code), as trajectory-level self-consistency: the
/// greedy run, then `samples` continuations when it is about to finalize.
async fn react(
    agent_name: &str,
    model: Arc<dyn ChatModel>,
    dir: &Path,
    label: &str,
    budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    let (audit, model) = audited(model);
    let loaded = load(dir)?;
    let tools = IncidentTools::from_dir(loaded.clone()).map_err(|e| e.to_string())?;
    let registry = tools
        .registry(Some(Arc::clone(&model)))
        .await
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = registry.specs().iter().map(|s| s.name.clone()).collect();
    let mut config = react_config(budgets);
    config.rules.expert_tools = vec!["analyze_logs".into(), "analyze_code".into()];
    let agent = ReactAgent::new(Arc::clone(&model), registry, REACT_TASK, config);
    let tsc = TrajectoryConsistency {
        sampling: SamplingConfig {
            k: budgets.samples,
            temperature: 0.7,
            base_seed: budgets.seed,
            concurrency: 1,
        },
        stepwise: true,
        aggregator: Arc::new(EmbeddingVote::new(Arc::new(HashingEmbedder::default()))),
    };
    let out = tsc
        .run(&agent, &loaded.incident, &Cancellation::new())
        .await;
    let mut run = AgentRun::from_calls(agent_name, label, model.as_ref(), &audit.calls());
    react_invariants(&mut run, &out.greedy, budgets);
    run.outcome = format!(
        "{}; {} trajectory samples, {} kept",
        run.outcome,
        out.samples.len(),
        out.kept.len()
    );
    let expert_tools: Vec<&String> = names.iter().filter(|n| n.starts_with("analyze_")).collect();
    run.invariants.push(Invariant::new(
        "the real tools and experts are offered",
        names.iter().any(|n| n == "get_logs") && !expert_tools.is_empty(),
        names.join(", "),
    ));
    Ok(run)
}

/// FLASH following a troubleshooting guide of the recurring-incident suite, the model
/// choosing within each status, on the case's bundled real incident with the live tools.
async fn flash(
    model: Arc<dyn ChatModel>,
    case: &Path,
    budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    let (audit, model) = audited(model);
    let read = |name: &str| {
        std::fs::read_to_string(case.join(name))
            .map_err(|e| format!("cannot read {}: {e}", case.join(name).display()))
    };
    let case_file: serde_json::Value =
        serde_json::from_str(&read("case.json")?).map_err(|e| format!("case.json: {e}"))?;
    let guide = read("guide.md")?;
    let incident_dir = case_file["incident_dir"]
        .as_str()
        .ok_or("case.json has no incident_dir")?;
    let loaded = load(&case.join(incident_dir))?;
    let tools = IncidentTools::from_dir(loaded.clone())
        .map_err(|e| e.to_string())?
        .registry(None)
        .await
        .map_err(|e| e.to_string())?;
    let facts = BTreeMap::from([
        (
            "component".to_string(),
            case_file["alert"]["component"].clone(),
        ),
        (
            "alert_start".to_string(),
            serde_json::json!(loaded.incident.window.start.to_string()),
        ),
    ]);
    let iterations = budgets.max_steps * 2;
    let agent = FlashAgent::new(Arc::new(ModelPolicy::new(Arc::clone(&model))), tools).with_config(
        FlashConfig {
            max_iterations: iterations,
            ..FlashConfig::default()
        },
    );
    let result = tokio::time::timeout(
        budgets.wall_time,
        agent.run(&loaded.incident, &guide, facts),
    )
    .await;
    let mut run = AgentRun::from_calls(
        "flash",
        &format!("{} case", folder_name(case)),
        model.as_ref(),
        &audit.calls(),
    );
    match result {
        Err(_) => run.outcome = "timed out (wall-time budget)".into(),
        Ok(Ok(f)) => {
            run.steps = f.trajectory.steps.len();
            run.outcome = match &f.answer {
                Some(a) => format!("answered: {}", short(a, 60)),
                None => outcome_text(&f.trajectory.outcome),
            };
            run.invariants.push(Invariant::new(
                "within the iteration budget",
                f.contexts.len() <= iterations,
                format!("{} of {iterations} iterations", f.contexts.len()),
            ));
            run.invariants.push(trajectory_valid(&f.trajectory));
            // Each status offers only its own tools.
            let confined = f
                .contexts
                .iter()
                .all(|c| !c.tools.is_empty() && c.tools.len() < 12);
            run.invariants.push(Invariant::new(
                "each status offers only its own tools",
                confined,
                format!("{} contexts", f.contexts.len()),
            ));
            // The model read every status; a reading the guide does not allow did not stand.
            let read = f
                .contexts
                .iter()
                .filter(|c| c.status.model.is_some() || c.status.model_error.is_some())
                .count();
            let overruled = f.contexts.iter().filter(|c| c.status.overruled).count();
            let supervised = f.contexts.iter().all(|c| {
                c.status
                    .model
                    .is_none_or(|m| c.status.overruled || m == c.status.chosen)
                    && (!c.status.overruled || c.status.model != Some(c.status.chosen))
            });
            run.invariants.push(Invariant::new(
                "the model reads each status, the guide's rules supervise it",
                read == f.contexts.len() && supervised,
                format!(
                    "{read} of {} statuses read by the model, {overruled} overruled",
                    f.contexts.len()
                ),
            ));
        }
        Ok(Err(e)) => {
            // A model failure ends the run with a typed error, never a panic.
            run.outcome = format!("error: {}", short(&e.to_string(), 80));
            run.invariants.push(Invariant::new(
                "a model failure is a typed error",
                matches!(e, rca_agents::flash::FlashError::Model(_)),
                e.to_string(),
            ));
        }
    }
    run.invariants.push(server_counted(&run));
    Ok(run)
}

/// The orchestration with the model as planner, controller and reasoner (what
/// `rca diagnose --config` runs), on the bundled real incident.
async fn orchestra(
    model: Arc<dyn ChatModel>,
    dir: &Path,
    budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    let (audit, model) = audited(model);
    let loaded = load(dir)?;
    // The reasoner's last answer, to tell what the model concluded from what the
    // deterministic ranking filled in.
    let reasoner = Arc::new(LastAnswer::new(Arc::clone(&model)));
    let reasoner_model: Arc<dyn ChatModel> = reasoner.clone();
    let pipeline = DiagnosisPipeline::new(
        &loaded,
        RoleModels {
            reasoner: Some(reasoner_model),
            ..RoleModels::all(Arc::clone(&model))
        },
        PipelineConfig {
            wall_time: Some(budgets.wall_time),
            ..PipelineConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let record = pipeline
        .run(&loaded.incident)
        .await
        .map_err(|e| format!("diagnosis failed: {e}"))?;
    let mut run = AgentRun::from_calls(
        "orchestra",
        &folder_name(dir),
        model.as_ref(),
        &audit.calls(),
    );
    let fell_back: Vec<&str> = record.fallbacks().iter().map(|(role, _)| *role).collect();
    run.steps = record.events.len();
    let top = record
        .report
        .candidates
        .first()
        .map(|c| c.component.as_str())
        .unwrap_or("-");
    run.outcome = format!(
        "controller (model): {}; {}; roles that fell back to their policy: {}",
        match &record.decision {
            Some(Decision::Conclude { component, .. }) => format!("concluded on {component}"),
            Some(Decision::Escalate { .. }) => "escalated".to_string(),
            _ => "no decision".to_string(),
        },
        reasoner_conclusion(
            fell_back.contains(&"reasoner"),
            &record.report.root_cause,
            top,
            reasoner.last().as_deref(),
        ),
        if fell_back.is_empty() {
            "none".to_string()
        } else {
            fell_back.join(", ")
        }
    );
    // Two-modality convergence: a conclusion names a component that evidence from at least
    // two modalities points at.
    let converged = match &record.decision {
        Some(Decision::Conclude {
            component,
            modalities,
        }) => {
            let seen: Vec<&Modality> = record
                .evidence
                .iter()
                .filter(|e| &e.component == component && e.score > 0.0)
                .map(|e| &e.modality)
                .collect();
            modalities.len() >= 2 && modalities.iter().all(|m| seen.contains(&m))
        }
        _ => true,
    };
    run.invariants.push(Invariant::new(
        "a conclusion rests on evidence from two modalities",
        converged,
        format!("{:?}", record.decision),
    ));
    let named = record
        .report
        .candidates
        .iter()
        .all(|c| record.evidence.iter().any(|e| e.component == c.component));
    run.invariants.push(Invariant::new(
        "every candidate is named by evidence",
        named,
        format!("{} candidates", record.report.candidates.len()),
    ));
    run.invariants.push(trajectory_valid(&record.trajectory()));
    run.invariants.push(server_counted(&run));
    Ok(run)
}

/// What the reasoner concluded, saying which part is the model's and which the
/// deterministic ranking's: the root cause text is the model's unless the reasoner fell back;
/// the top candidate is the model's only when its answer names it (otherwise the ranking's
/// order filled the list).
fn reasoner_conclusion(
    fell_back: bool,
    root_cause: &str,
    top: &str,
    answer: Option<&str>,
) -> String {
    if fell_back {
        return format!(
            "reasoner fell back: root cause and top candidate {top} by its policy (deterministic)"
        );
    }
    let said: String = root_cause.chars().take(80).collect();
    let cut = if said.len() < root_cause.len() {
        "..."
    } else {
        ""
    };
    let source = if answer.is_some_and(|a| a.contains(top)) {
        "named by the model"
    } else {
        "from the evidence ranking (deterministic; the model named no candidate)"
    };
    format!("reasoner (model): root cause \"{said}{cut}\"; top candidate {top}, {source}")
}

/// A model that remembers the text of its last answer.
struct LastAnswer {
    inner: Arc<dyn ChatModel>,
    last: std::sync::Mutex<Option<String>>,
}

impl LastAnswer {
    fn new(inner: Arc<dyn ChatModel>) -> Self {
        LastAnswer {
            inner,
            last: std::sync::Mutex::new(None),
        }
    }

    fn last(&self) -> Option<String> {
        self.last.lock().ok().and_then(|l| l.clone())
    }
}

#[async_trait::async_trait]
impl ChatModel for LastAnswer {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    async fn complete(
        &self,
        req: CompletionRequest,
    ) -> Result<rca_core::llm::CompletionResponse, rca_core::LlmError> {
        let r = self.inner.complete(req).await?;
        if let Ok(mut last) = self.last.lock() {
            *last = Some(r.text().to_string());
        }
        Ok(r)
    }
}

/// STRATUS with model-backed diagnosis and mitigation agents on a simulated scenario none of
/// the agents was written for (the first held-out scenario file), under Transactional
/// No-Regression.
async fn stratus(
    model: Arc<dyn ChatModel>,
    file: &Path,
    budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    let (audit, model) = audited(model);
    let s = Scenario::from_file(file).map_err(|e| e.to_string())?;
    let env = Arc::new(RwLock::new(SimEnvironment::new(
        s.build().map_err(|e| e.to_string())?,
    )));
    let tnr = Tnr::new(Arc::clone(&env), TnrConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    let attempts = budgets.max_steps.clamp(1, 2);
    let machine = Stratus::new(
        Arc::new(PolicyDetector),
        Arc::new(ModelDiagnoser::new(Arc::clone(&model), 1)),
        Arc::new(ModelMitigator::new(Arc::clone(&model))),
    )
    .with_max_attempts(attempts);
    let result = tokio::time::timeout(budgets.wall_time, machine.run(&tnr)).await;
    let mut run = AgentRun::from_calls(
        "stratus",
        &format!("{} (simulated, held out)", s.name),
        model.as_ref(),
        &audit.calls(),
    );
    let paths = tnr.paths();
    match &result {
        Err(_) => run.outcome = "timed out (wall-time budget)".into(),
        Ok(Ok(r)) => {
            run.steps = r.diagnoses.len();
            run.outcome = format!(
                "{}; {} transactions ({} committed)",
                if r.resolved {
                    "mitigated"
                } else {
                    "not mitigated"
                },
                r.transactions.len(),
                r.transactions.iter().filter(|t| t.committed()).count()
            );
        }
        Ok(Err(e)) => run.outcome = format!("error: {}", short(&e.to_string(), 80)),
    }
    let start = paths.visible.first().copied().flatten();
    let no_rise = paths
        .visible
        .iter()
        .all(|m| matches!((m, start), (Some(m), Some(s)) if *m <= s));
    run.invariants.push(Invariant::new(
        "visible severity never rose above its start and never crashed",
        no_rise,
        format!("visible mu {:?}", paths.visible),
    ));
    run.invariants.push(Invariant::new(
        "one writer at a time",
        tnr.max_concurrent_writers() <= 1,
        format!("{} writers at most", tnr.max_concurrent_writers()),
    ));
    run.invariants.push(server_counted(&run));
    Ok(run)
}

/// The tool lifecycle with the model writing a SQL tool for a task over the bundled incident's
/// telemetry tables, checked by the sandbox and refined by feedback.
#[cfg(feature = "sql")]
async fn lifecycle(
    model: Arc<dyn ChatModel>,
    dir: &Path,
    _budgets: &RunBudgets,
) -> Result<AgentRun, String> {
    use rca_tools::lifecycle::{
        ForgeLimits, ForgeOutcome, ModelContractWriter, ModelSqlWriter, ToolForge, ToolTask,
    };
    use rca_tools::tables::{SandboxLimits, TelemetryTables, check_read_only};

    let (audit, model) = audited(model);
    let loaded = load(dir)?;
    let tables = TelemetryTables::new(SandboxLimits::default()).map_err(|e| e.to_string())?;
    tables
        .register_incident(&loaded)
        .map_err(|e| e.to_string())?;
    // Two contracts, two coding rounds each: the model writes, the sandbox judges, the model
    // gets the feedback.
    let forge = ToolForge::new(
        Arc::new(ModelContractWriter::new(Arc::clone(&model))),
        Arc::new(ModelSqlWriter::new(Arc::clone(&model))),
    )
    .with_limits(ForgeLimits {
        max_rounds: 2,
        max_analysis_retries: 1,
    });
    let task = ToolTask::new(
        "Which components log the most errors during the incident window?",
        Some(loaded.incident.window),
    );
    let outcome = forge.forge(&task, &tables).await;
    let mut run = AgentRun::from_calls(
        "lifecycle",
        &format!("{} tables", folder_name(dir)),
        model.as_ref(),
        &audit.calls(),
    );
    match outcome {
        Ok(ForgeOutcome::Ready(tool)) => {
            run.steps = tool.rounds + tool.analysis_attempts;
            run.outcome = format!(
                "tool `{}` passed its trial ({} rows) after {} rounds",
                tool.contract.name,
                tool.sample.rows.len(),
                tool.rounds
            );
            run.invariants.push(Invariant::new(
                "an admitted tool is read-only SQL",
                check_read_only(&tool.sql).is_ok(),
                short(&tool.sql, 80),
            ));
        }
        Ok(ForgeOutcome::Escalated(e)) => {
            run.steps = e.feedback.len();
            run.outcome = format!(
                "escalated after {} contracts and {} pieces of feedback",
                e.contracts_tried.len(),
                e.feedback.len()
            );
            run.invariants.push(Invariant::new(
                "a failed generation escalates with the sandbox's feedback",
                !e.feedback.is_empty(),
                short(&e.reason, 80),
            ));
        }
        Err(e) => {
            run.outcome = format!("error: {}", short(&e.to_string(), 80));
            run.invariants.push(Invariant::new(
                "a model failure is a typed error",
                true,
                e.to_string(),
            ));
        }
    }
    run.invariants.push(server_counted(&run));
    Ok(run)
}

/// Text self-consistency: `samples` answers to one question (seeds `seed + i`), aggregated by
/// embedding vote.
async fn text_sc(model: Arc<dyn ChatModel>, budgets: &RunBudgets) -> Result<AgentRun, String> {
    let (audit, model) = audited(model);
    let request = CompletionRequest::new(vec![
        Message::system("You are an SRE. Answer in one sentence."),
        Message::user(
            "A pod's CPU usage rose from 20% to 98% and requests to it slowed down. What is the \
             most likely root cause?",
        ),
    ])
    .with_max_tokens(budgets.max_turn_tokens.min(48));
    let sampling = SamplingConfig {
        k: budgets.samples,
        temperature: 0.7,
        base_seed: budgets.seed,
        concurrency: 1,
    };
    let vote = EmbeddingVote::new(Arc::new(HashingEmbedder::default()));
    let out = text_self_consistency(model.as_ref(), &request, &sampling, &vote)
        .await
        .map_err(|e| e.to_string())?;
    let mut run = AgentRun::from_calls("text-sc", "one question", model.as_ref(), &audit.calls());
    run.steps = out.candidates.len();
    let distinct = {
        let mut c = out.candidates.clone();
        c.sort();
        c.dedup();
        c.len()
    };
    run.outcome = format!(
        "{} samples ({distinct} distinct), chose sample {}",
        out.candidates.len(),
        out.chosen.map_or("-".into(), |c| c.to_string())
    );
    run.invariants.push(Invariant::new(
        "the vote picks one of the samples",
        out.chosen
            .is_some_and(|c| out.candidates.get(c) == Some(&out.answer)),
        short(&out.answer, 60),
    ));
    run.invariants.push(server_counted(&run));
    Ok(run)
}

fn short(text: &str, max: usize) -> String {
    let one_line = text.replace(['\n', '|'], " ");
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conclusion_says_which_part_is_the_model_s() {
        let named = reasoner_conclusion(
            false,
            "cpu saturation",
            "pod-a",
            Some(r#"{"candidates": ["pod-a"]}"#),
        );
        assert!(named.contains("root cause \"cpu saturation\""), "{named}");
        assert!(named.contains("pod-a, named by the model"), "{named}");
        let filled = reasoner_conclusion(false, "x", "pod-a", Some(r#"{"candidates": []}"#));
        assert!(
            filled.contains("from the evidence ranking (deterministic"),
            "{filled}"
        );
        let long = "y".repeat(100);
        assert!(
            reasoner_conclusion(false, &long, "p", None)
                .contains(&format!("{}...", "y".repeat(80)))
        );
        let policy = reasoner_conclusion(true, "by policy", "pod-a", None);
        assert!(policy.starts_with("reasoner fell back"), "{policy}");
        assert!(!policy.contains("(model)"), "{policy}");
    }
}
