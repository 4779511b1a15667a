//! Controller tests with scripted models (canned turns written for each test) and small tools.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rca_core::incident::{Evidence, Incident, Modality};
use rca_core::llm::{ChatModel, CompletionRequest, CompletionResponse};
use rca_core::time::{TimeRange, Timestamp};
use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
use rca_core::trajectory::Outcome;
use rca_core::{LlmError, ToolError};
use rca_llm::{ScriptedModel, ScriptedTurn};
use schemars::JsonSchema;
use serde::Deserialize;

use super::*;

#[derive(Deserialize, JsonSchema)]
struct ComponentArgs {
    component: String,
}

/// Logs of a component: long for `db` (it holds the fault), short otherwise.
struct Logs;

#[async_trait]
impl TypedTool for Logs {
    type Args = ComponentArgs;
    fn name(&self) -> &str {
        "logs"
    }
    fn description(&self) -> &str {
        "Reads the recent log lines of a component."
    }
    async fn run(&self, args: ComponentArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.component == "db" {
            let mut text: String = (0..60).map(|i| format!("db: request {i} ok\n")).collect();
            text.push_str("db: write failed: \"disk full\" {volume: data}\n");
            Ok(ToolOutput {
                text,
                data: None,
                evidence: vec![Evidence::new(
                    Modality::Logs,
                    Timestamp(1),
                    "db",
                    "write failed",
                )],
            })
        } else {
            Ok(ToolOutput::text(format!(
                "{}: nothing unusual",
                args.component
            )))
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    text: String,
}

/// An expert that names the fault it finds in the text it is given.
struct LogExpert;

#[async_trait]
impl TypedTool for LogExpert {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "log_expert"
    }
    fn description(&self) -> &str {
        "Analyses log text and names the fault."
    }
    async fn run(&self, args: TextArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(if args.text.contains("disk full") {
            format!(
                "fault: disk full (read {} lines)",
                args.text.lines().count()
            )
        } else {
            "no fault found".to_string()
        }))
    }
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register_typed(Logs).unwrap();
    r.register_typed(LogExpert).unwrap();
    r
}

fn incident() -> Incident {
    Incident {
        id: "inc-1".into(),
        title: "api errors".into(),
        description: "writes fail".into(),
        detected_at: Timestamp(100),
        window: TimeRange::new(Timestamp(0), Timestamp(100)),
        system: "api -> db".into(),
        topology: vec![("api".into(), "db".into())],
        onset: None,
    }
}

fn config() -> ReactConfig {
    ReactConfig {
        obsk_head_chars: Some(200),
        rules: ErrorRules {
            expert_tools: vec!["log_expert".into()],
            min_expert_input_chars: 20,
            min_observations: 1,
            ..ErrorRules::default()
        },
        ..ReactConfig::default()
    }
}

fn turn(name: &str, args: serde_json::Value) -> String {
    serde_json::json!({"thought": format!("call {name}"), "action": {"name": name, "args": args}})
        .to_string()
}

fn finalize_turn() -> String {
    turn(
        "finalize",
        serde_json::json!({"root_cause": "db disk full", "solution": "free disk space on db",
            "responsibility": "platform", "confidence": 0.9, "evidence": ["write failed: disk full"],
            "components": ["db"]}),
    )
}

fn agent(model: ScriptedModel, cfg: ReactConfig) -> ReactAgent {
    ReactAgent::new(
        Arc::new(model),
        registry(),
        "Find the faulty component.",
        cfg,
    )
}

#[tokio::test]
async fn snapshot_keys_reach_the_expert_and_the_run_finalizes() {
    let model = ScriptedModel::from_texts(
        "scripted-react-happy-path",
        [turn("logs", serde_json::json!({"component": "db"}))],
    );
    let m2 = model.clone();
    let agent = agent(model, config());
    // The key is only known after the first observation: script the rest from it.
    let key = rca_core::memory::snapshot_key(
        &Logs
            .run(
                ComponentArgs {
                    component: "db".into(),
                },
                &ToolContext::default(),
            )
            .await
            .unwrap()
            .text,
    );
    m2.push(ScriptedTurn::Text(turn(
        "log_expert",
        serde_json::json!({"text": key}),
    )));
    m2.push(ScriptedTurn::Text(finalize_turn()));
    let run = agent.run(&incident(), &Cancellation::new()).await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let steps = &run.trajectory.steps;
    assert_eq!(steps.len(), 3);
    let first = steps[0].observation.as_ref().unwrap();
    assert_eq!(first.snapshot_key.as_deref(), Some(key.as_str()));
    assert!(first.text.len() < first.full_chars);
    // Sanitised: the quotes and braces of the log line cannot reach the prompt.
    assert!(!first.text.contains('"'));
    let expert = steps[1].observation.as_ref().unwrap();
    assert!(
        expert.text.contains("fault: disk full (read 61 lines)"),
        "{}",
        expert.text
    );
    let report = run.report.clone().unwrap();
    assert_eq!(report.root_cause, "db disk full");
    assert_eq!(report.evidence[0].component, "db");
    assert_eq!(report.evidence.len(), 2);
    assert!(report.usage.total() > 0);
    // The prompt holds the framework rules, the task and every tool's schema.
    let reqs = m2.requests();
    let system = &reqs[0].messages[0].content;
    assert!(system.contains("Find the faulty component.") && system.contains("### log_expert"));
    assert!(system.contains("\"component\"") && system.contains("### finalize"));
    assert_eq!(reqs[0].temperature, Some(0.0));
    // The trajectory serialises and reads back.
    let json = serde_json::to_string(&run).unwrap();
    let back: ReactRun = serde_json::from_str(&json).unwrap();
    assert_eq!(back, run);
}

#[tokio::test]
async fn repairs_and_regenerations_are_counted() {
    let model = ScriptedModel::from_texts(
        "scripted-react-stabilisation",
        [
            // Repairable: a fence, single quotes, a trailing comma.
            "Sure:\n```json\n{'thought': 'read logs', 'action': {'name': 'logs', 'args': {'component': 'api'},},}\n```".to_string(),
            // Not repairable: the regeneration rounds follow.
            "{\"thought\": \"read db\", \"action\": {\"name\": \"logs\" \"args\" :: db".to_string(),
            "thought: read db\naction:\n  name: logs\n  args:\n    component: db".to_string(),
            turn("logs", serde_json::json!({"component": "db"})),
            finalize_turn(),
        ],
    );
    let run = agent(model, config())
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let steps = &run.trajectory.steps;
    assert_eq!(steps[0].repairs, 1);
    assert_eq!(steps[0].regenerations, 0);
    assert_eq!(steps[1].regenerations, 1);
    assert_eq!(steps[1].action.as_ref().unwrap().args["component"], "db");
    assert_eq!(run.trajectory.repairs(), 1);
    assert_eq!(run.trajectory.regenerations(), 1);
    assert_eq!(run.invalid_actions(), 0);
}

#[tokio::test]
async fn without_stabilisation_broken_output_is_an_invalid_action() {
    let model = ScriptedModel::from_texts(
        "scripted-react-no-stabilisation",
        [
            "```json\n{\"thought\": \"x\", \"action\": {\"name\": \"logs\", \"args\": {\"component\": \"db\"}}}\n```".to_string(),
            turn("logs", serde_json::json!({"component": "db"})),
            finalize_turn(),
        ],
    );
    let cfg = ReactConfig {
        json_repair: false,
        regen: None,
        ..config()
    };
    let run = agent(model, cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    assert_eq!(run.invalid_actions(), 1);
    let obs = &run.trajectory.steps[0].observation.as_ref().unwrap().text;
    assert!(obs.contains("not a valid turn") && obs.contains("Advice"));
}

#[tokio::test]
async fn error_rules_answer_with_advice() {
    let model = ScriptedModel::from_texts(
        "scripted-react-error-rules",
        [
            finalize_turn(),                                        // premature
            turn("grep", serde_json::json!({"pattern": "x"})),      // unknown tool
            turn("logs", serde_json::json!({"service": "db"})),     // invalid args
            turn("logs", serde_json::json!({"component": "api"})),  // ok
            turn("logs", serde_json::json!({"component": "api"})),  // repeated
            turn("log_expert", serde_json::json!({"text": "err"})), // trivial input
            finalize_turn(),
        ],
    );
    let run = agent(model, config())
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let obs: Vec<String> = run
        .trajectory
        .steps
        .iter()
        .map(|s| s.observation.as_ref().unwrap().text.clone())
        .collect();
    assert!(obs[0].contains("at least 1 successful") && obs[0].contains("Advice"));
    assert!(obs[1].contains("`grep`") && obs[1].contains("logs (Reads the recent log lines"));
    assert!(obs[2].contains("invalid arguments") && obs[2].contains("\"component\""));
    assert!(obs[3].contains("nothing unusual"));
    assert!(obs[4].contains("already called"));
    assert!(obs[5].contains("only 3 characters"));
    assert_eq!(run.invalid_actions(), 5);
}

#[tokio::test]
async fn without_rules_a_premature_finalize_is_accepted() {
    let model = ScriptedModel::from_texts("scripted-react-rules-off", [finalize_turn()]);
    let cfg = ReactConfig {
        rules: ErrorRules::disabled(),
        ..config()
    };
    let run = agent(model, cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    assert_eq!(run.trajectory.steps.len(), 1);
}

#[tokio::test]
async fn budgets_end_runs() {
    let looping = || {
        ScriptedModel::from_texts(
            "scripted-react-budget",
            (0..5).map(|i| turn("logs", serde_json::json!({"component": format!("c{i}")}))),
        )
    };
    let cfg = ReactConfig {
        max_steps: 3,
        ..config()
    };
    let run = agent(looping(), cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::StepBudgetExhausted);
    assert_eq!(run.trajectory.steps.len(), 3);
    assert!(run.report.is_none());

    let cfg = ReactConfig {
        max_prompt_tokens: Some(10),
        ..config()
    };
    let run = agent(looping(), cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::TokenBudgetExhausted);

    let cancel = Cancellation::new();
    cancel.cancel();
    let run = agent(looping(), config()).run(&incident(), &cancel).await;
    assert_eq!(run.trajectory.outcome, Outcome::Cancelled);

    let failing = ScriptedModel::new(
        "scripted-react-model-error",
        [ScriptedTurn::Error(LlmError::permanent("bad key"))],
    );
    let run = agent(failing, config())
        .run(&incident(), &Cancellation::new())
        .await;
    assert!(matches!(run.trajectory.outcome, Outcome::Failed(ref m) if m.contains("bad key")));
}

/// A model that never answers in time.
struct Slow;

#[async_trait]
impl ChatModel for Slow {
    fn model_id(&self) -> &str {
        "slow-test-model"
    }
    async fn complete(&self, _r: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Err(LlmError::permanent("unreachable in the test"))
    }
}

#[tokio::test(start_paused = true)]
async fn wall_time_budget_times_out() {
    let cfg = ReactConfig {
        max_wall_time: Some(Duration::from_secs(5)),
        ..config()
    };
    let agent = ReactAgent::new(Arc::new(Slow), registry(), "", cfg);
    let run = agent.run(&incident(), &Cancellation::new()).await;
    assert_eq!(run.trajectory.outcome, Outcome::TimedOut);
}

#[tokio::test]
async fn disk_snapshot_store_serves_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(crate::memory::DiskSnapshotStore::new(dir.path()));
    let model = ScriptedModel::from_texts(
        "scripted-react-disk-snapshots",
        [
            turn("logs", serde_json::json!({"component": "db"})),
            finalize_turn(),
        ],
    );
    let run = agent(model, config())
        .with_snapshot_store(store.clone())
        .run(&incident(), &Cancellation::new())
        .await;
    let key = run.trajectory.steps[0]
        .observation
        .as_ref()
        .unwrap()
        .snapshot_key
        .clone()
        .unwrap();
    use rca_core::memory::SnapshotStore;
    assert!(
        store
            .get(&key)
            .await
            .unwrap()
            .unwrap()
            .contains("disk full")
    );
}

#[tokio::test]
async fn finalize_waits_for_evidence_when_configured() {
    let model = ScriptedModel::from_texts(
        "scripted-react-min-evidence",
        [
            turn("logs", serde_json::json!({"component": "api"})),
            finalize_turn(),
            turn("logs", serde_json::json!({"component": "db"})),
            finalize_turn(),
        ],
    );
    let mut cfg = config();
    cfg.rules.min_evidence = 1;
    let run = agent(model, cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    assert_eq!(run.trajectory.steps.len(), 4);
    let rejected = run.trajectory.steps[1].error.clone().unwrap();
    assert!(rejected.contains("0 piece(s) of evidence"), "{rejected}");
}

#[test]
fn config_round_trips_through_json() {
    let cfg = config();
    let text = serde_json::to_string(&cfg).unwrap();
    let back: ReactConfig = serde_json::from_str(&text).unwrap();
    assert_eq!(back, cfg);
    assert!(back.regen.is_some());
}

/// A tool that never returns in time.
struct Hang;

#[async_trait]
impl TypedTool for Hang {
    type Args = ComponentArgs;
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "Never answers."
    }
    async fn run(&self, _a: ComponentArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Err(ToolError::failed("unreachable in the test"))
    }
}

#[tokio::test(start_paused = true)]
async fn wall_time_budget_bounds_tool_calls() {
    let mut tools = registry();
    tools.register_typed(Hang).unwrap();
    let model = ScriptedModel::from_texts(
        "scripted-react-hanging-tool",
        [turn("hang", serde_json::json!({"component": "db"}))],
    );
    let cfg = ReactConfig {
        max_wall_time: Some(Duration::from_secs(5)),
        ..config()
    };
    let run = ReactAgent::new(Arc::new(model), tools, "", cfg)
        .run(&incident(), &Cancellation::new())
        .await;
    assert_eq!(run.trajectory.outcome, Outcome::TimedOut);
}

fn call(id: &str, name: &str, args: serde_json::Value) -> rca_core::llm::ToolCall {
    rca_core::llm::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

fn finalize_args() -> serde_json::Value {
    serde_json::json!({"root_cause": "db disk full", "solution": "free disk space on db",
        "responsibility": "platform", "confidence": 0.9, "evidence": ["write failed"],
        "components": ["db"]})
}

#[tokio::test]
async fn native_tool_calls_with_empty_text_are_valid_turns_and_results_go_back_as_tool_messages() {
    let caps = rca_core::llm::Capabilities {
        tool_calls: true,
        ..Default::default()
    };
    let model = ScriptedModel::new(
        "scripted-react-native",
        [
            ScriptedTurn::ToolCalls(vec![call(
                "c1",
                "logs",
                serde_json::json!({"component": "api"}),
            )]),
            ScriptedTurn::ToolCalls(vec![call("c2", "finalize", finalize_args())]),
        ],
    )
    .with_capabilities(caps);
    let seen = model.clone();
    let agent = agent(model, config());
    assert!(agent.uses_native_tools());
    let run = agent.run(&incident(), &Cancellation::new()).await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized, "{run:#?}");
    assert_eq!(run.invalid_actions(), 0);
    let reqs = seen.requests();
    // Tools travel with the request, without annotations; the prompt lists them in one line.
    let names: Vec<&str> = reqs[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["logs", "log_expert", "finalize"]);
    assert!(
        !reqs[0].tools[2]
            .parameters
            .to_string()
            .contains("description")
    );
    assert_eq!(reqs[0].tool_choice, ToolChoice::Auto);
    assert!(reqs[0].messages[0].content.contains("- logs: Reads"));
    // The second request holds the call and its result as a tool message.
    let msgs = &reqs[1].messages;
    let call_msg = &msgs[msgs.len() - 2];
    assert_eq!(call_msg.tool_calls[0].id, "c1");
    let result = msgs.last().unwrap();
    assert_eq!(result.role, rca_core::llm::Role::Tool);
    assert_eq!(result.tool_call_id.as_deref(), Some("c1"));
    assert!(result.content.contains("api: nothing unusual"));
}

#[tokio::test]
async fn a_named_choice_server_picks_under_a_schema_then_fills_the_arguments() {
    let caps = rca_core::llm::Capabilities {
        named_tool_choice: true,
        json_schema: true,
        ..Default::default()
    };
    let pick = |tool: &str| {
        ScriptedTurn::Text(serde_json::json!({"thought": "look", "tool": tool}).to_string())
    };
    let model = ScriptedModel::new(
        "scripted-react-pick-then-fill",
        [
            pick("logs"),
            ScriptedTurn::ToolCalls(vec![call(
                "f1",
                "logs",
                serde_json::json!({"component": "api"}),
            )]),
            pick("no_such_tool"),
            pick("finalize"),
            // Arguments that need repair (a trailing comma).
            ScriptedTurn::ToolCalls(vec![rca_core::llm::ToolCall {
                id: "f3".into(),
                name: "finalize".into(),
                arguments: format!("{},", finalize_args()).replace("}},", "},"),
            }]),
        ],
    )
    .with_capabilities(caps);
    let seen = model.clone();
    let cfg = ReactConfig {
        action_mode: ActionMode::NativeTools,
        ..config()
    };
    let agent = agent(model, cfg);
    assert!(agent.uses_native_tools());
    let run = agent.run(&incident(), &Cancellation::new()).await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized, "{run:#?}");
    let steps = &run.trajectory.steps;
    assert_eq!(steps.len(), 3);
    assert!(steps[1].error.as_deref().unwrap().contains("no_such_tool"));
    assert!(matches!(
        run.violations[0].violation,
        Violation::UnknownTool { .. }
    ));
    let reqs = seen.requests();
    // The pick is constrained to the tool names; the fill names the picked tool.
    match &reqs[0].response_format {
        rca_core::llm::ResponseFormat::JsonSchema { schema, .. } => {
            assert_eq!(schema["properties"]["tool"]["enum"][0], "logs");
        }
        other => panic!("pick without a schema: {other:?}"),
    }
    assert_eq!(reqs[1].tool_choice, ToolChoice::Function("logs".into()));
    assert_eq!(reqs[1].tools.len(), 1);
    // Both calls' tokens count for the step.
    assert!(steps[0].usage.prompt_tokens > 0);
}

#[tokio::test]
async fn an_observer_sees_every_step_and_the_streamed_text() {
    let caps = rca_core::llm::Capabilities {
        streaming: true,
        ..Default::default()
    };
    let model = ScriptedModel::from_texts(
        "scripted-react-observed",
        [
            turn("logs", serde_json::json!({"component": "api"})),
            finalize_turn(),
        ],
    )
    .with_capabilities(caps);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let agent = agent(model, config()).with_observer(Arc::new(tx));
    let run = agent.run(&incident(), &Cancellation::new()).await;
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let mut steps = Vec::new();
    let mut streamed = String::new();
    while let Ok(event) = rx.try_recv() {
        match event {
            ReactEvent::Step(s) => steps.push(s),
            ReactEvent::Token { step: 0, text } => streamed.push_str(&text),
            _ => {}
        }
    }
    assert_eq!(steps, run.trajectory.steps);
    assert!(streamed.contains("\"logs\""), "{streamed}");
}
