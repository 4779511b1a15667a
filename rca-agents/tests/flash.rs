//! FLASH end to end with test tools: state-conditioned contexts, skip-ahead, hindsight
//! changing the next action, a scripted model policy, human queries, and ToolStub replay.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rca_agents::flash::{
    FlashAgent, FlashError, FlashState, HindsightBase, Hint, HumanChannel, Lesson, ModelPolicy,
    PlannedAction, RulePolicy, Trigger,
};
use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
use rca_core::{Incident, TimeRange, Timestamp, ToolError};
use rca_llm::redact::Redactor;
use rca_llm::{ScriptedModel, ScriptedTurn};
use rca_tools::stub::{StubFallback, StubWriter, ToolRecorder, ToolStub, read_stub};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct QueryArgs {
    component: String,
    #[serde(default)]
    metric: Option<String>,
}

/// A test tool answering from a fixed table of (component, metric) -> text.
struct Canned {
    name: &'static str,
    answers: BTreeMap<String, String>,
    calls: Mutex<Vec<String>>,
}

#[async_trait]
impl TypedTool for Canned {
    type Args = QueryArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Test data tool."
    }
    async fn run(&self, a: QueryArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let key = format!("{}/{}", a.component, a.metric.unwrap_or_default());
        self.calls.lock().unwrap().push(key.clone());
        self.answers
            .get(&key)
            .map(|t| ToolOutput::text(t.clone()))
            .ok_or_else(|| ToolError::failed(format!("no data for {key}")))
    }
}

fn tools(answers: &[(&'static str, &str, &str)]) -> ToolRegistry {
    let mut by_tool: BTreeMap<&'static str, BTreeMap<String, String>> = BTreeMap::new();
    for (tool, key, text) in answers {
        by_tool
            .entry(tool)
            .or_default()
            .insert(key.to_string(), text.to_string());
    }
    let mut r = ToolRegistry::new();
    for name in ["get_metrics", "get_logs"] {
        r.register_typed(Canned {
            name,
            answers: by_tool.remove(name).unwrap_or_default(),
            calls: Mutex::new(vec![]),
        })
        .unwrap();
    }
    r
}

fn incident() -> Incident {
    Incident {
        id: "inc-42".into(),
        title: "checkout timeouts".into(),
        description: "p99 latency above 3 s".into(),
        detected_at: Timestamp(10_000),
        window: TimeRange::new(Timestamp(0), Timestamp(10_000)),
        system: String::new(),
        topology: vec![],
        onset: None,
    }
}

const GUIDE: &str = "# Checkout timeouts
## Check the connection pool
Action: get_metrics {\"component\": \"{component}\", \"metric\": \"pool\"}
If `saturated`: conclude \"connection pool exhausted\" and go to step 3
## Check error logs
Action: get_logs {\"component\": \"{component}\"}
If `deadlock`: conclude \"lock contention\"
## Confirm
Action: llm_reasoning {\"question\": \"what exhausted the pool?\"}
If `.`: conclude \"connection pool exhausted\"
";

fn facts() -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([("component".to_string(), serde_json::json!("orders"))])
}

#[tokio::test]
async fn deterministic_run_follows_the_guide_with_state_conditioned_contexts() {
    let registry = tools(&[(
        "get_metrics",
        "orders/pool",
        "pool saturated: 100/100 in use",
    )]);
    let agent = FlashAgent::new(Arc::new(RulePolicy), registry);
    let run = agent.run(&incident(), GUIDE, facts()).await.unwrap();
    assert_eq!(run.answer.as_deref(), Some("connection pool exhausted"));
    assert!(run.established);
    // Step 2 was skipped: the observation of step 1 settled it.
    let actions: Vec<String> = run
        .trajectory
        .steps
        .iter()
        .filter_map(|s| s.action.as_ref().map(|a| a.name.clone()))
        .collect();
    assert!(!actions.contains(&"get_logs".to_string()), "{actions:?}");
    assert!(actions.contains(&"llm_reasoning".to_string()));
    // Each state saw only its own tools.
    for c in &run.contexts {
        match c.state {
            FlashState::DiagnosisPlanning => assert_eq!(c.tools, ["diagnosis_planning"]),
            FlashState::StepInitialization => assert!(
                c.tools.contains(&"plan_refining".into())
                    && !c.tools.contains(&"get_metrics".into())
            ),
            FlashState::StepExecution => assert!(
                c.tools.contains(&"get_metrics".into())
                    && !c.tools.contains(&"step_complete".into())
            ),
            FlashState::StepCompletion => assert_eq!(c.tools, ["step_complete"]),
            FlashState::Finished => panic!("no context is built once finished"),
        }
    }
    assert!(
        run.trajectory.steps[0]
            .thought
            .starts_with("[Diagnosis Planning]")
    );
    assert_eq!(
        run.memory.results[0].conclusion.as_deref(),
        Some("connection pool exhausted")
    );
    assert!(run.report.confidence >= 0.8);
}

fn logs_first_guide() -> &'static str {
    "## Look at the logs\nAction: get_logs {\"component\": \"{component}\"}\nIf `saturated`: conclude \"connection pool exhausted\"\n"
}

#[tokio::test]
async fn a_hindsight_hint_changes_the_next_action() {
    let answers = [
        ("get_logs", "orders/", "no lines in window"),
        (
            "get_metrics",
            "orders/pool",
            "pool saturated: 100/100 in use",
        ),
    ];
    // Without hindsight: the logs say nothing and the guide ends without a root cause.
    let plain = FlashAgent::new(Arc::new(RulePolicy), tools(&answers));
    let run = plain
        .run(&incident(), logs_first_guide(), facts())
        .await
        .unwrap();
    assert_eq!(
        run.answer.as_deref(),
        Some("no root cause was established by the guide")
    );
    assert!(
        !run.established,
        "a guide that ends without a conclusion establishes nothing"
    );

    // A lesson learned earlier: when the logs come back empty, query the pool metric.
    let mut base = HindsightBase::new();
    base.add(Lesson {
        trigger: Trigger {
            state: Some(FlashState::StepExecution),
            tool: Some("get_logs".into()),
            args_pattern: None,
            observation_pattern: Some("no lines".into()),
        },
        hint: Hint {
            text: "Empty logs here mean the pool is starved: query the pool metric instead.".into(),
            suggested_action: Some(PlannedAction {
                tool: "get_metrics".into(),
                args: serde_json::json!({"component": "{component}", "metric": "pool"}),
            }),
        },
        embedding: vec![],
    });
    let agent = FlashAgent::new(Arc::new(RulePolicy), tools(&answers)).with_hindsight(base);
    let run = agent
        .run(&incident(), logs_first_guide(), facts())
        .await
        .unwrap();
    let actions: Vec<String> = run
        .trajectory
        .steps
        .iter()
        .filter_map(|s| s.action.as_ref().map(|a| a.name.clone()))
        .collect();
    let after_logs = actions.iter().position(|a| a == "get_logs").unwrap() + 1;
    assert_eq!(actions[after_logs], "get_metrics", "{actions:?}");
    assert_eq!(run.answer.as_deref(), Some("connection pool exhausted"));
    assert!(
        run.contexts
            .iter()
            .any(|c| c.hints.iter().any(|h| h.contains("pool is starved")))
    );
}

#[tokio::test]
async fn model_policy_sees_only_the_state_context_and_hints() {
    let check_planning: rca_llm::scripted::RequestCheck = Arc::new(|r| {
        let system = &r.messages[0].content;
        if system.contains("diagnosis_planning")
            && !system.contains("get_metrics")
            && !system.contains("step_complete")
        {
            Ok(())
        } else {
            Err(format!("planning context leaks other tools: {system}"))
        }
    });
    let check_execution: rca_llm::scripted::RequestCheck = Arc::new(|r| {
        let system = &r.messages[0].content;
        if system.contains("get_metrics") && !system.contains("diagnosis_planning") {
            Ok(())
        } else {
            Err("execution context must offer data tools only with its system tools".into())
        }
    });
    let check_hint: rca_llm::scripted::RequestCheck = Arc::new(|r| {
        if r.messages[1]
            .content
            .contains("A saturated pool in the logs is the root cause")
        {
            Ok(())
        } else {
            Err("the triggered hint must be in the next context".into())
        }
    });
    let status = |s: &str| ScriptedTurn::Text(format!(r#"{{"status": "{s}"}}"#));
    // Canned turns written for this test: before each decision, the status reading.
    let model = ScriptedModel::new(
        "scripted-flash-model-policy",
        [
            status("diagnosis_planning"),
            ScriptedTurn::Checked(check_planning, Box::new(ScriptedTurn::Text(r#"{"thought": "plan", "action": {"name": "diagnosis_planning", "args": {}}}"#.into()))),
            status("step_initialization"),
            ScriptedTurn::Text(r#"{"thought": "refine", "action": {"name": "plan_refining", "args": {"step": 1}}}"#.into()),
            // The model jumps to completion with the step's action pending and nothing
            // observed: the rules overrule it.
            status("Step Completion"),
            ScriptedTurn::Checked(check_execution, Box::new(ScriptedTurn::Text(r#"```json
{"thought": "try a tool from another state", "action": {"name": "step_complete", "args": {"next": "final"}}}
```"#.into()))),
            status("step_execution"),
            ScriptedTurn::Text(r#"{"thought": "query", "action": {"name": "get_logs", "args": {"component": "orders"}}}"#.into()),
            status("step_completion"),
            ScriptedTurn::Checked(check_hint, Box::new(ScriptedTurn::Text(r#"{'thought': 'done', 'action': {'name': 'step_complete', 'args': {'next': 'final', 'answer': 'connection pool exhausted', 'solution': 'raise the pool size'},},}"#.into()))),
        ],
    );
    let mut base = HindsightBase::new();
    base.add(Lesson {
        trigger: Trigger {
            tool: Some("get_logs".into()),
            observation_pattern: Some("saturated".into()),
            ..Default::default()
        },
        hint: Hint {
            text: "A saturated pool in the logs is the root cause; finish.".into(),
            suggested_action: None,
        },
        embedding: vec![],
    });
    let agent = FlashAgent::new(
        Arc::new(ModelPolicy::new(Arc::new(model.clone()))),
        tools(&[("get_logs", "orders/", "pool saturated")]),
    )
    .with_hindsight(base);
    let run = agent
        .run(&incident(), logs_first_guide(), facts())
        .await
        .unwrap();
    assert_eq!(run.answer.as_deref(), Some("connection pool exhausted"));
    assert_eq!(run.report.solution, "raise the pool size");
    // The out-of-state tool came back as an error observation, not a crash.
    let refused = run
        .trajectory
        .steps
        .iter()
        .find(|s| {
            s.error
                .as_deref()
                .is_some_and(|e| e.contains("not available in status Step Execution"))
        })
        .unwrap();
    assert_eq!(refused.action.as_ref().unwrap().name, "step_complete");
    // The status of every iteration was the model's reading, checked by the rules; the one
    // the guide did not allow was overruled, and the trajectory says so.
    let readings: Vec<_> = run.contexts.iter().map(|c| c.status.model).collect();
    assert!(readings.iter().all(Option::is_some), "{readings:?}");
    let overruled: Vec<usize> = run
        .contexts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.status.overruled)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(overruled, [2]);
    assert_eq!(run.contexts[2].state, FlashState::StepExecution);
    assert!(
        run.trajectory.steps[2]
            .thought
            .contains("the model said Step Completion, not allowed here"),
        "{}",
        run.trajectory.steps[2].thought
    );
    assert_eq!(model.remaining(), 0);
}

struct ScriptedHuman(Mutex<Vec<String>>);

#[async_trait]
impl HumanChannel for ScriptedHuman {
    async fn ask(&self, _q: &str) -> Result<String, FlashError> {
        self.0
            .lock()
            .unwrap()
            .pop()
            .ok_or_else(|| FlashError::Human("no more answers".into()))
    }
}

#[tokio::test]
async fn human_query_records_a_fact() {
    let model = ScriptedModel::from_texts(
        "scripted-flash-human",
        [
            r#"{"status": "diagnosis_planning"}"#,
            r#"{"thought": "plan", "action": {"name": "diagnosis_planning", "args": {}}}"#,
            r#"{"status": "step_initialization"}"#,
            r#"{"thought": "need the component", "action": {"name": "human_query", "args": {"question": "Which service alerted?", "fact": "component"}}}"#,
            r#"{"status": "step_initialization"}"#,
            r#"{"thought": "refine", "action": {"name": "plan_refining", "args": {"step": 1}}}"#,
            r#"{"status": "step_execution"}"#,
            r#"{"thought": "query", "action": {"name": "get_logs", "args": {"component": "orders"}}}"#,
            r#"{"status": "step_completion"}"#,
            r#"{"thought": "done", "action": {"name": "step_complete", "args": {"next": "final", "answer": "pool"}}}"#,
        ],
    );
    let agent = FlashAgent::new(
        Arc::new(ModelPolicy::new(Arc::new(model))),
        tools(&[("get_logs", "orders/", "x")]),
    )
    .with_human(Arc::new(ScriptedHuman(Mutex::new(vec!["orders".into()]))));
    let run = agent
        .run(&incident(), logs_first_guide(), BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(run.memory.facts["component"], "orders");
    assert_eq!(run.answer.as_deref(), Some("pool"));
}

/// A human who never answers.
struct SilentHuman;

#[async_trait]
impl HumanChannel for SilentHuman {
    async fn ask(&self, _q: &str) -> Result<String, FlashError> {
        std::future::pending::<()>().await;
        Ok(String::new())
    }
}

#[tokio::test]
async fn a_guide_step_asks_the_human_and_a_silent_one_times_out() {
    let guide = "## Ask who owns it
Action: human_query {\"question\": \"Who owns {component}?\", \"fact\": \"owner\"}\nIf `answered: (team|nobody)`: conclude \"owned\"\n";
    let agent = FlashAgent::new(Arc::new(RulePolicy), tools(&[]))
        .with_human(Arc::new(ScriptedHuman(Mutex::new(vec!["team-a".into()]))));
    let run = agent.run(&incident(), guide, facts()).await.unwrap();
    assert_eq!(run.memory.facts["owner"], "team-a");
    assert_eq!(
        run.answer.as_deref(),
        Some("owned"),
        "the answer is the step's observation"
    );
    assert!(run.trajectory.steps.iter().any(|s| {
        s.observation
            .as_ref()
            .is_some_and(|o| o.text == "human answered: team-a")
    }));
    let config = rca_agents::flash::FlashConfig {
        human_timeout_ms: 50,
        ..Default::default()
    };
    let silent = FlashAgent::new(Arc::new(RulePolicy), tools(&[]))
        .with_human(Arc::new(SilentHuman))
        .with_config(config);
    let run = silent.run(&incident(), guide, facts()).await.unwrap();
    assert!(!run.memory.facts.contains_key("owner"));
    let failed = run
        .trajectory
        .steps
        .iter()
        .find_map(|s| s.error.clone())
        .unwrap();
    assert!(failed.contains("no answer within 0.05 s"), "{failed}");
    assert_ne!(run.answer.as_deref(), Some("owned"));
}

#[tokio::test]
async fn the_model_plans_refines_and_reasons_under_the_guide_check() {
    let check_reasoning: rca_llm::scripted::RequestCheck = Arc::new(|r| {
        if r.messages[1]
            .content
            .contains("Question: what exhausted the pool?")
        {
            Ok(())
        } else {
            Err(format!(
                "llm_reasoning must ask its question: {:?}",
                r.messages
            ))
        }
    });
    let status = |s: &str| ScriptedTurn::Text(format!(r#"{{"status": "{s}"}}"#));
    let text = |s: &str| ScriptedTurn::Text(s.to_string());
    // Canned turns written for this test: the model skips step 2, refines step 1 with a tool
    // the run does not have, and answers the guide's `llm_reasoning` step.
    let model = ScriptedModel::new(
        "scripted-flash-planner",
        [
            status("diagnosis_planning"),
            text(
                r#"{"thought": "logs will not help", "action": {"name": "diagnosis_planning", "args": {"steps": [1, 3, 9]}}}"#,
            ),
            status("step_initialization"),
            text(
                r#"{"thought": "refine", "action": {"name": "plan_refining", "args": {"step": 1, "actions": [{"tool": "ssh", "args": {}}]}}}"#,
            ),
            status("step_execution"),
            text(
                r#"{"thought": "pool", "action": {"name": "get_metrics", "args": {"component": "orders", "metric": "pool"}}}"#,
            ),
            status("step_completion"),
            text(
                r#"{"thought": "saturated", "action": {"name": "step_complete", "args": {"next": 2, "conclusion": "pool saturated"}}}"#,
            ),
            status("step_initialization"),
            text(
                r#"{"thought": "refine", "action": {"name": "plan_refining", "args": {"step": 2}}}"#,
            ),
            status("step_execution"),
            text(
                r#"{"thought": "reason", "action": {"name": "llm_reasoning", "args": {"question": "what exhausted the pool?"}}}"#,
            ),
            ScriptedTurn::Checked(check_reasoning, Box::new(text("a leak of connections"))),
            status("step_completion"),
            text(
                r#"{"thought": "done", "action": {"name": "step_complete", "args": {"next": "final", "answer": "connection pool exhausted"}}}"#,
            ),
        ],
    );
    let agent = FlashAgent::new(
        Arc::new(ModelPolicy::new(Arc::new(model.clone()))),
        tools(&[("get_metrics", "orders/pool", "pool saturated")]),
    );
    let run = agent.run(&incident(), GUIDE, facts()).await.unwrap();
    assert_eq!(run.answer.as_deref(), Some("connection pool exhausted"));
    let plan = run.memory.plan.as_ref().unwrap();
    let titles: Vec<&str> = plan.steps.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["Check the connection pool", "Confirm"]);
    let observations: Vec<String> = run
        .trajectory
        .steps
        .iter()
        .filter_map(|s| s.observation.as_ref().map(|o| o.text.clone()))
        .collect();
    assert!(
        observations[0].contains("the guide check: the guide has no step 9"),
        "{observations:?}"
    );
    assert!(
        observations[1].contains("`ssh` is not a tool of this run")
            && observations[1].contains("the guide's `get_metrics` added"),
        "{observations:?}"
    );
    assert!(observations.iter().any(|o| o == "a leak of connections"));
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn toolstub_replay_reproduces_a_run_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkout.stub.jsonl");
    let live = tools(&[(
        "get_metrics",
        "orders/pool",
        "pool saturated: 100/100 in use",
    )]);
    let writer = Arc::new(StubWriter::create(&path, Redactor::default()).unwrap());
    let recorded = FlashAgent::new(
        Arc::new(RulePolicy),
        ToolRecorder::wrap_registry(&live, writer),
    )
    .run(&incident(), GUIDE, facts())
    .await
    .unwrap();
    let stub = ToolStub::load(&path, live.specs(), StubFallback::Error).unwrap();
    assert_eq!(read_stub(&path).unwrap().len(), 1);
    let replayed = FlashAgent::new(Arc::new(RulePolicy), stub.registry())
        .run(&incident(), GUIDE, facts())
        .await
        .unwrap();
    let strip = |t: &rca_core::Trajectory| {
        t.steps
            .iter()
            .map(|s| {
                (
                    s.thought.clone(),
                    s.action.clone(),
                    s.observation.clone(),
                    s.error.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&recorded.trajectory), strip(&replayed.trajectory));
    assert_eq!(recorded.answer, replayed.answer);
    assert!(stub.unused().is_empty());
}

/// Embeds by letter counts: enough to tell near-identical hints apart from different ones.
struct Letters;

#[async_trait]
impl rca_core::embed::Embedder for Letters {
    fn dimension(&self) -> usize {
        26
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, rca_core::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 26];
                for c in t
                    .to_ascii_lowercase()
                    .bytes()
                    .filter(u8::is_ascii_lowercase)
                {
                    v[(c - b'a') as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

#[tokio::test]
async fn lessons_are_collected_from_failed_runs_and_deduplicated() {
    let plain = FlashAgent::new(
        Arc::new(RulePolicy),
        tools(&[("get_logs", "orders/", "no lines in window")]),
    );
    let failed = plain
        .run(&incident(), logs_first_guide(), facts())
        .await
        .unwrap();
    let trajectory = serde_json::to_string(&failed.trajectory).unwrap();
    // Canned reviewer turns written for this test: a lesson, then the same lesson reworded.
    let reviewer = ScriptedModel::from_texts(
        "scripted-flash-reviewer",
        [
            r#"{"trigger": {"state": "step_execution", "tool": "get_logs", "observation_pattern": "no lines"}, "hint": {"text": "Empty logs: query the pool metric instead.", "suggested_action": {"tool": "get_metrics", "args": {"component": "{component}", "metric": "pool"}}}}"#,
            r#"{"trigger": {"state": "step_execution", "tool": "get_logs", "observation_pattern": "no lines at all"}, "hint": {"text": "Empty logs: query the pool metric instead!"}}"#,
            r#"{"lesson": null}"#,
        ],
    );
    let mut base = HindsightBase::new();
    let first = rca_agents::flash::hindsight::collect_lesson(
        &reviewer,
        &Letters,
        &mut base,
        &trajectory,
        "connection pool exhausted",
    )
    .await
    .unwrap();
    assert!(first.is_some());
    let second = rca_agents::flash::hindsight::collect_lesson(
        &reviewer,
        &Letters,
        &mut base,
        &trajectory,
        "connection pool exhausted",
    )
    .await
    .unwrap();
    assert!(second.is_none(), "a reworded duplicate is not added");
    let third = rca_agents::flash::hindsight::collect_lesson(
        &reviewer,
        &Letters,
        &mut base,
        &trajectory,
        "x",
    )
    .await
    .unwrap();
    assert!(third.is_none());
    assert_eq!(base.lessons().len(), 1);

    // The collected lesson fixes the next run of the same incident.
    let agent = FlashAgent::new(
        Arc::new(RulePolicy),
        tools(&[
            ("get_logs", "orders/", "no lines in window"),
            ("get_metrics", "orders/pool", "pool saturated"),
        ]),
    )
    .with_hindsight(base);
    let run = agent
        .run(&incident(), logs_first_guide(), facts())
        .await
        .unwrap();
    assert_eq!(run.answer.as_deref(), Some("connection pool exhausted"));
}

/// Without a model: the rule reviewer takes the failing step's tool and the pattern that
/// ended it as the trigger, and a known guide's check for the verdict's fault as the hint;
/// the next run of the same incident follows it and is right.
#[tokio::test]
async fn a_rule_reviewer_learns_from_a_failed_run_without_a_model() {
    use rca_agents::flash::{RuleReviewer, Verdict, learn, parse_tsg};
    let guide = "## Look at the logs\nAction: get_logs {\"component\": \"{component}\"}\n\
                 If `saturated`: conclude \"pool_exhausted: the pool of {component} is full\"\n\
                 If `no lines`: conclude \"quiet: {component} logged nothing\"\n";
    let known = "## Check the pool\nAction: get_metrics {\"component\": \"{component}\", \"metric\": \"pool\"}\n\
                 If `saturated`: conclude \"pool_exhausted: the pool of {component} is full\"\n";
    let answers = [
        ("get_logs", "orders/", "no lines in window"),
        (
            "get_metrics",
            "orders/pool",
            "pool saturated: 100/100 in use",
        ),
    ];
    let failed = FlashAgent::new(Arc::new(RulePolicy), tools(&answers))
        .run(&incident(), guide, facts())
        .await
        .unwrap();
    assert_eq!(
        failed.answer.as_deref(),
        Some("quiet: orders logged nothing")
    );
    let verdict = Verdict::new("pool_exhausted", "orders");
    assert!(!verdict.accepts(failed.answer.as_deref()));
    let reviewer = RuleReviewer::new(vec![parse_tsg(known).unwrap()]);
    let mut base = HindsightBase::new();
    let lesson = learn(&reviewer, Some(&Letters), &mut base, &failed, &verdict)
        .await
        .unwrap()
        .expect("a lesson");
    assert_eq!(lesson.trigger.tool.as_deref(), Some("get_logs"));
    assert_eq!(
        lesson.trigger.observation_pattern.as_deref(),
        Some("no lines")
    );
    let suggested = lesson.hint.suggested_action.clone().unwrap();
    assert_eq!(suggested.tool, "get_metrics");
    assert_eq!(suggested.args["metric"], "pool");
    assert_eq!(
        suggested.args["component"], "{component}",
        "no incident's names"
    );
    assert!(!lesson.embedding.is_empty());
    // The same failure again teaches nothing new.
    assert!(
        learn(&reviewer, Some(&Letters), &mut base, &failed, &verdict)
            .await
            .unwrap()
            .is_none()
    );
    // The next run of the incident gets the lesson and is right; a right run teaches nothing.
    let next = FlashAgent::new(Arc::new(RulePolicy), tools(&answers))
        .with_hindsight(base.clone())
        .run(&incident(), guide, facts())
        .await
        .unwrap();
    assert!(verdict.accepts(next.answer.as_deref()), "{:?}", next.answer);
    assert!(
        learn(&reviewer, None, &mut base, &next, &verdict)
            .await
            .unwrap()
            .is_none()
    );
    // A guide that knows no check for the fault gives nothing to learn.
    let ignorant = RuleReviewer::new(Vec::new());
    let unknown = Verdict::new("disk_full", "orders");
    assert!(
        learn(
            &ignorant,
            None,
            &mut HindsightBase::new(),
            &failed,
            &unknown
        )
        .await
        .unwrap()
        .is_none()
    );
}

/// The model reviewer behind the same trait: the model's lesson (canned turns written for this
/// test) joins the base through `learn`, and "nothing to learn" adds nothing.
#[tokio::test]
async fn a_model_reviewer_writes_the_lesson_through_the_same_trait() {
    use rca_agents::flash::{ModelReviewer, Verdict, learn};
    let failed = FlashAgent::new(
        Arc::new(RulePolicy),
        tools(&[("get_logs", "orders/", "no lines in window")]),
    )
    .run(&incident(), logs_first_guide(), facts())
    .await
    .unwrap();
    let model = ScriptedModel::from_texts(
        "scripted-flash-reviewer",
        [
            r#"{"trigger": {"state": "step_execution", "tool": "get_logs", "observation_pattern": "no lines"}, "hint": {"text": "Empty logs: query the pool metric instead."}}"#,
            r#"{"lesson": null}"#,
        ],
    );
    let reviewer = ModelReviewer::new(Arc::new(model.clone()));
    let verdict = Verdict::new("pool_exhausted", "orders");
    let mut base = HindsightBase::new();
    let lesson = learn(&reviewer, Some(&Letters), &mut base, &failed, &verdict)
        .await
        .unwrap()
        .expect("the model's lesson");
    assert_eq!(
        lesson.trigger.observation_pattern.as_deref(),
        Some("no lines")
    );
    assert!(!lesson.embedding.is_empty());
    let asked = &model.requests()[0];
    assert!(
        asked.messages[1]
            .content
            .contains("Correct answer: pool_exhausted: orders")
    );
    assert!(
        learn(&reviewer, None, &mut base, &failed, &verdict)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(base.lessons().len(), 1);
}

#[tokio::test]
async fn triage_finds_the_component_and_picks_the_guide_by_its_triggers() {
    use rca_agents::flash::{GuideCatalog, run_triaged};
    // The triage reads a ranking (a test tool's canned text) and keeps its first component.
    let triage = "# Triage\n## Find the component\n\
        Action: get_metrics {\"component\": \"{entry_point}\", \"metric\": \"ranking\"}\n\
        Fact: component = `^1\\. (\\S+)`\n\
        ## Read its logs\nAction: get_logs {\"component\": \"{component}\"}\n";
    let catalog = GuideCatalog::new([
        (
            "pool".to_string(),
            "Trigger: `saturated`\n## Check the pool\n\
             Action: get_metrics {\"component\": \"{component}\", \"metric\": \"pool\"}\n\
             If `saturated`: conclude \"pool: {component} is out of connections\"\n"
                .to_string(),
        ),
        (
            "disk".to_string(),
            "Trigger: `disk full`\n## Check the disk\nIf `.`: conclude \"disk\"\n".to_string(),
        ),
    ])
    .unwrap();
    let registry = tools(&[
        (
            "get_metrics",
            "gateway/ranking",
            "1. orders (score 3.1)\n2. gateway (score 1.0)",
        ),
        ("get_logs", "orders/", "ERROR pool saturated"),
        ("get_metrics", "orders/pool", "pool saturated: 100/100"),
    ]);
    let agent = FlashAgent::new(Arc::new(RulePolicy), registry);
    let facts = BTreeMap::from([("entry_point".to_string(), serde_json::json!("gateway"))]);
    let run = run_triaged(
        &agent,
        &incident(),
        "latency SLO breached at gateway",
        triage,
        &catalog,
        facts,
    )
    .await
    .unwrap();
    assert_eq!(run.triage.memory.facts["component"], "orders");
    assert_eq!(run.guide(), Some("pool"));
    assert_eq!(run.matches.len(), 1);
    assert_eq!(run.answer(), Some("pool: orders is out of connections"));
    // Nothing matches: no guide runs, and the run says so rather than guessing.
    let quiet = FlashAgent::new(
        Arc::new(RulePolicy),
        tools(&[("get_metrics", "gateway/ranking", "1. orders (score 3.1)")]),
    );
    let facts = BTreeMap::from([("entry_point".to_string(), serde_json::json!("gateway"))]);
    let run = run_triaged(&quiet, &incident(), "alert", triage, &catalog, facts)
        .await
        .unwrap();
    assert_eq!((run.guide(), run.answer()), (None, None));
}

/// The rules, each decision after a pause (a slow model's stand-in).
struct SlowRules(std::time::Duration);

#[async_trait]
impl rca_agents::flash::FlashPolicy for SlowRules {
    async fn decide(
        &self,
        ctx: &rca_agents::flash::agent::StateContext<'_>,
    ) -> Result<rca_agents::flash::agent::Decision, rca_agents::flash::FlashError> {
        tokio::time::sleep(self.0).await;
        RulePolicy.decide(ctx).await
    }
}

#[tokio::test]
async fn the_wall_budget_ends_the_run_and_every_step_is_seen_as_it_happens() {
    let seen: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let observer = {
        let seen = Arc::clone(&seen);
        Arc::new(move |s: &rca_core::trajectory::Step| seen.lock().unwrap().push(s.index))
    };
    let registry = || {
        tools(&[(
            "get_metrics",
            "orders/pool",
            "pool saturated: 100/100 in use",
        )])
    };
    // Unbounded, the slow policy finishes the guide.
    let whole = FlashAgent::new(
        Arc::new(SlowRules(std::time::Duration::from_millis(40))),
        registry(),
    )
    .with_progress(observer.clone())
    .run(&incident(), GUIDE, facts())
    .await
    .unwrap();
    assert!(whole.established);
    let indices: Vec<usize> = whole.trajectory.steps.iter().map(|s| s.index).collect();
    assert_eq!(
        *seen.lock().unwrap(),
        indices,
        "the observer saw every step in order"
    );
    assert!(indices.len() >= 4, "{indices:?}");
    // Within a budget of about two decisions it stops early, timed out, with no answer.
    seen.lock().unwrap().clear();
    let bounded = FlashAgent::new(
        Arc::new(SlowRules(std::time::Duration::from_millis(40))),
        registry(),
    )
    .with_config(rca_agents::flash::FlashConfig {
        wall_ms: Some(100),
        ..Default::default()
    })
    .with_progress(observer)
    .run(&incident(), GUIDE, facts())
    .await
    .unwrap();
    assert_eq!(
        bounded.trajectory.outcome,
        rca_core::trajectory::Outcome::TimedOut
    );
    assert!(!bounded.established);
    assert!(
        bounded.trajectory.steps.len() < indices.len(),
        "{} of {} steps",
        bounded.trajectory.steps.len(),
        indices.len()
    );
    assert_eq!(seen.lock().unwrap().len(), bounded.trajectory.steps.len());
}
