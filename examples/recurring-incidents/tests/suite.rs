//! The recurring-incident suite: committed recordings match the recorder, the deterministic
//! policy solves every incident type from its guide, and scripted models (canned turns written
//! for these tests, model ids `scripted-<test>`) show state-conditioned contexts, a hindsight
//! hint changing the next action, and a replay reproducing a live run exactly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use example_recurring_incidents::nezha_eval::EvalOptions;
use example_recurring_incidents::{
    Case, HINDSIGHT_FILE, comparable_steps, default_cases_dir, find_case, guide_plans, learn,
    live_tools, load_suite, record, recorded, recording_path, replay_tools, run_case, triage_guide,
};
use rca_agents::flash::{FlashState, HindsightBase, ModelPolicy, RulePolicy, RuleReviewer};
use rca_core::llm::CompletionRequest;
use rca_llm::redact::Redactor;
use rca_llm::scripted::RequestCheck;
use rca_llm::{ScriptedModel, ScriptedTurn};
use rca_tools::stub::{StubFallback, StubWriter, ToolRecorder, ToolStub};

fn suite() -> Vec<Case> {
    load_suite(&default_cases_dir()).unwrap()
}

fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.insert(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out
}

#[tokio::test]
async fn committed_recordings_are_what_the_recorder_writes_today() {
    let cases = suite();
    assert!(cases.len() >= 3, "at least three incident types");
    let tmp = tempfile::tempdir().unwrap();
    let written = record(&cases, tmp.path()).await.unwrap();
    // One context file and one recording per guide, for every case.
    assert_eq!(written.len(), cases.len() * (cases.len() + 1));
    for case in &cases {
        let fresh = tmp.path().join(&case.name).join("recordings");
        let committed = case.dir.join("recordings");
        assert_eq!(
            files_under(&fresh),
            files_under(&committed),
            "{}: the committed recordings are not the recorder's files; run `cargo run -p example-recurring-incidents -- record`",
            case.name
        );
        for file in files_under(&fresh) {
            let a = std::fs::read_to_string(fresh.join(&file)).unwrap();
            let b = std::fs::read_to_string(committed.join(&file)).unwrap();
            assert!(
                a == b,
                "{}/{}: the committed recording drifted from what the tools answer today; re-record with `cargo run -p example-recurring-incidents -- record`",
                case.name,
                file.display()
            );
        }
    }
}

/// The fault-type label a conclusion starts with (`cpu_contention: ...`), if any.
fn label(answer: &str, labels: &[String]) -> Option<String> {
    labels
        .iter()
        .find(|l| answer.starts_with(&format!("{l}:")))
        .cloned()
}

#[tokio::test]
async fn the_rule_policy_solves_each_incident_type_from_its_guide_and_the_stub() {
    let cases = suite();
    let root = default_cases_dir();
    let labels: Vec<String> = cases
        .iter()
        .map(|c| c.expected.fault_type.clone())
        .collect();
    let types: BTreeSet<&String> = labels.iter().collect();
    assert_eq!(
        types.len(),
        cases.len(),
        "each case is a different fault type"
    );
    for case in &cases {
        for guide in &cases {
            let (incident, stub) =
                replay_tools(&root, &case.name, &guide.name, StubFallback::Error).unwrap();
            let run = run_case(
                case,
                guide,
                &incident,
                Arc::new(RulePolicy),
                stub.registry(),
                HindsightBase::new(),
            )
            .await
            .unwrap();
            let answer = run.answer.clone().unwrap();
            assert!(
                stub.unused().is_empty(),
                "{} under {}: the replay used every recorded call",
                case.name,
                guide.name
            );
            assert!(
                run.trajectory.steps.iter().all(|s| s.error.is_none()),
                "{} under {}: no tool failed",
                case.name,
                guide.name
            );
            if guide.name == case.name {
                // Its own guide names the injected fault and the pod.
                assert_eq!(
                    label(&answer, &labels).as_deref(),
                    Some(case.expected.fault_type.as_str()),
                    "{}: {answer}",
                    case.name
                );
                assert!(
                    answer.contains(&case.expected.pod),
                    "{}: {answer}",
                    case.name
                );
            } else {
                // Another type's guide never names a wrong fault.
                let named = label(&answer, &labels);
                assert!(
                    named.is_none() || named.as_deref() == Some(case.expected.fault_type.as_str()),
                    "{} under the {} guide named a wrong fault: {answer}",
                    case.name,
                    guide.name
                );
            }
        }
    }
}

fn shared_dir() -> PathBuf {
    std::env::var_os("RCA_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

#[test]
fn expected_answers_are_the_nezha_fault_list() {
    let list =
        shared_dir().join("data/nezha-trainticket/rca_data/2023-01-29/2023-01-29-fault_list.json");
    let Ok(text) = std::fs::read_to_string(&list) else {
        if rca_core::testing::require_all() {
            panic!("{} is missing (set RCA_SHARED_DIR)", list.display());
        }
        eprintln!("skipped: {} not found (set RCA_SHARED_DIR)", list.display());
        return;
    };
    // Case ids number the day's faults in inject_time order, as `rca eval nezha` does.
    let raw: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
        serde_json::from_str(&text).unwrap();
    let mut faults: Vec<serde_json::Value> = raw.into_values().flatten().collect();
    faults.sort_by_key(|f| f["inject_time"].as_str().unwrap().to_string());
    for case in suite() {
        let (day, index) = case.file.nezha_case.split_once('/').unwrap();
        assert_eq!(day, "2023-01-29");
        let fault = &faults[index.parse::<usize>().unwrap()];
        assert_eq!(
            fault["inject_pod"],
            case.expected.pod.as_str(),
            "{}",
            case.name
        );
        assert_eq!(
            fault["inject_type"],
            case.expected.fault_type.as_str(),
            "{}",
            case.name
        );
        // The bundled incidents follow the alert protocol: the window holds the injection
        // but does not open at it, the alert fires 60-300 s after it, and the onset is not
        // stated.
        let rec = recorded(&default_cases_dir(), &case.name).unwrap();
        let inject_time = fault["inject_time"].as_str().unwrap().replace(' ', "T") + "Z";
        let inject = rca_core::Timestamp::parse_rfc3339(&inject_time)
            .unwrap()
            .millis();
        let window = rec.incident.window;
        assert!(
            window.start.millis() < inject && inject < window.end.millis(),
            "{}: {window} holds {inject}",
            case.name
        );
        let lag = rec.incident.detected_at.millis() - inject;
        assert!(
            (60_000..=300_000).contains(&lag),
            "{}: lag {lag}",
            case.name
        );
        assert!(rec.incident.onset.is_none(), "{}", case.name);
    }
}

fn decision(thought: &str, name: &str, args: serde_json::Value) -> String {
    serde_json::json!({"thought": thought, "action": {"name": name, "args": args}}).to_string()
}

/// A model's status reading (asked before each decision).
fn status(state: &str) -> String {
    serde_json::json!({ "status": state }).to_string()
}

/// The status a FLASH prompt is in, read from its system message.
fn status_of(request: &CompletionRequest) -> FlashState {
    let system = &request.messages[0].content;
    *FlashState::ALL
        .iter()
        .find(|s| system.contains(&format!("Current status: {s}.")))
        .unwrap_or_else(|| panic!("no status in {system}"))
}

/// The tool names a FLASH prompt lists.
fn listed_tools(request: &CompletionRequest) -> BTreeSet<String> {
    let system = &request.messages[0].content;
    let (_, list) = system.split_once("Tools available now:\n").unwrap();
    list.lines()
        .take_while(|l| l.starts_with("- "))
        .map(|l| l[2..].split(':').next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn each_status_prompt_holds_only_its_own_instructions_and_tools() {
    let cases = suite();
    let root = default_cases_dir();
    let case = find_case(&cases, "cpu-contention").unwrap();
    let (incident, stub) =
        replay_tools(&root, &case.name, &case.name, StubFallback::Error).unwrap();
    let pod = &case.file.alert.component;
    let since = case.facts(&incident)["alert_start"]
        .as_str()
        .unwrap()
        .to_string();
    // Canned turns written for this test: a model following the CPU guide, each decision
    // after its status reading.
    let decisions = [
        decision(
            "plan from the guide",
            "diagnosis_planning",
            serde_json::json!({}),
        ),
        decision(
            "refine step 1",
            "plan_refining",
            serde_json::json!({"step": 1}),
        ),
        decision(
            "read the CPU",
            "get_metrics",
            serde_json::json!({"entity": pod}),
        ),
        decision(
            "CPU flagged",
            "step_complete",
            serde_json::json!({"next": 2, "conclusion": "CPU saturated"}),
        ),
        decision(
            "refine step 2",
            "plan_refining",
            serde_json::json!({"step": 2}),
        ),
        decision(
            "read the requests",
            "get_traces",
            serde_json::json!({"entity": pod, "start": since}),
        ),
        decision(
            "slow requests confirm it",
            "step_complete",
            serde_json::json!({"next": "final", "answer": format!("cpu_contention: the CPU of {pod} is saturated")}),
        ),
    ];
    let readings = [
        "diagnosis_planning",
        "step_initialization",
        "step_execution",
        "step_completion",
        "step_initialization",
        "step_execution",
        "step_completion",
    ];
    let model = ScriptedModel::from_texts(
        "scripted-state-contexts",
        readings
            .iter()
            .zip(decisions)
            .flat_map(|(r, d)| [status(r), d]),
    );
    let run = run_case(
        case,
        case,
        &incident,
        Arc::new(ModelPolicy::new(Arc::new(model.clone()))),
        stub.registry(),
        HindsightBase::new(),
    )
    .await
    .unwrap();
    assert_eq!(model.remaining(), 0);
    assert!(run.answer.unwrap().contains(pod));
    let data_tools: BTreeSet<String> = recorded(&root, &case.name)
        .unwrap()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(data_tools.contains("get_metrics") && data_tools.contains("get_traces"));
    // Every other request is a status reading; the decisions' prompts are checked here.
    let requests: Vec<CompletionRequest> =
        model.requests().into_iter().skip(1).step_by(2).collect();
    let statuses: Vec<FlashState> = requests.iter().map(status_of).collect();
    use FlashState::*;
    assert_eq!(
        statuses,
        [
            DiagnosisPlanning,
            StepInitialization,
            StepExecution,
            StepCompletion,
            StepInitialization,
            StepExecution,
            StepCompletion
        ]
    );
    for (request, status) in requests.iter().zip(&statuses) {
        let system = &request.messages[0].content;
        let whole: String = request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        // Its own instructions, and no other status's.
        assert!(system.contains(status.instructions()));
        for other in FlashState::ALL.iter().filter(|s| *s != status) {
            assert!(
                !whole.contains(other.instructions()),
                "{status} prompt holds the instructions of {other}"
            );
        }
        // Exactly its own tools: the data tools only while executing a step.
        let mut expected: BTreeSet<String> = status
            .system_tools()
            .iter()
            .map(|s| s.to_string())
            .collect();
        if *status == StepExecution {
            expected.extend(data_tools.iter().cloned());
        }
        assert_eq!(listed_tools(request), expected, "{status}");
        let foreign = FlashState::ALL
            .iter()
            .flat_map(|s| s.system_tools().iter().map(|t| t.to_string()))
            .chain(data_tools.iter().cloned())
            .filter(|t| !expected.contains(t));
        for tool in foreign {
            assert!(!system.contains(&tool), "{status} prompt mentions `{tool}`");
        }
    }
}

/// The suite's hindsight base (`hindsight.json`, written by `recurring-incidents learn`):
/// its first lesson says that an error alert whose logs are clean since the alert may be a
/// starved pod, so read its CPU before closing the step.
fn clean_logs_lesson() -> HindsightBase {
    let base =
        HindsightBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(HINDSIGHT_FILE)).unwrap();
    let first = &base.lessons()[0];
    assert_eq!(first.trigger.tool.as_deref(), Some("get_logs"));
    assert_eq!(
        first
            .hint
            .suggested_action
            .as_ref()
            .map(|a| a.tool.as_str()),
        Some("get_metrics")
    );
    base
}

/// Nothing in the shipped hindsight base is written by hand: `learn` (every case under every
/// guide, the rule reviewer on each failure) collects exactly it, and the lesson it learns
/// from one failure reaches the runs after it.
#[tokio::test]
async fn the_shipped_lessons_are_what_learn_collects() {
    let cases = suite();
    let reviewer = RuleReviewer::new(guide_plans(&cases).unwrap());
    let mut base = HindsightBase::new();
    let runs = learn(&cases, &reviewer, &mut base).await.unwrap();
    assert_eq!(runs.len(), cases.len() * cases.len());
    // Each case is solved under its own guide; failures under the others teach lessons.
    for r in &runs {
        assert_eq!(r.solved, r.case == r.guide, "{r:?}");
    }
    assert!(runs.iter().any(|r| r.lesson.is_some()));
    let later = runs.iter().filter(|r| r.lessons_before > 0).count();
    assert!(
        later > 0,
        "later runs are offered the lessons collected before them"
    );
    let shipped =
        HindsightBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(HINDSIGHT_FILE)).unwrap();
    assert_eq!(
        base.lessons(),
        shipped.lessons(),
        "hindsight.json is stale: rerun `cargo run -p example-recurring-incidents -- learn`"
    );
}

fn action_after(run: &rca_agents::flash::FlashRun, tool: &str) -> String {
    let names: Vec<String> = run
        .trajectory
        .steps
        .iter()
        .filter_map(|s| s.action.as_ref().map(|a| a.name.clone()))
        .collect();
    let at = names.iter().position(|n| n == tool).unwrap();
    names[at + 1].clone()
}

#[tokio::test]
async fn a_hindsight_hint_changes_the_next_action() {
    let cases = suite();
    let root = default_cases_dir();
    // The CPU incident under the exception guide: the guide reads the logs, finds them clean.
    let case = find_case(&cases, "cpu-contention").unwrap();
    let guide = find_case(&cases, "exception").unwrap();
    let tools = |fallback| {
        let (incident, stub) = replay_tools(&root, &case.name, &guide.name, fallback).unwrap();
        (incident, stub.registry())
    };
    // A call the guide's recording lacks is served from the same incident's other
    // recordings, as `recurring-incidents run` does (a fresh stub per run: replayed calls are
    // consumed).
    let other = || {
        example_recurring_incidents::all_recordings(&root, &case.name, &cases)
            .unwrap()
            .registry()
    };

    // 1. The deterministic policy, identical in both runs.
    let (incident, plain_tools) = tools(StubFallback::Error);
    let plain = run_case(
        case,
        guide,
        &incident,
        Arc::new(RulePolicy),
        plain_tools,
        HindsightBase::new(),
    )
    .await
    .unwrap();
    let (incident, hinted_tools) = tools(StubFallback::Live(other()));
    let hinted = run_case(
        case,
        guide,
        &incident,
        Arc::new(RulePolicy),
        hinted_tools,
        clean_logs_lesson(),
    )
    .await
    .unwrap();
    assert_eq!(action_after(&plain, "get_logs"), "step_complete");
    assert_eq!(action_after(&hinted, "get_logs"), "get_metrics");
    assert!(hinted.contexts.iter().any(|c| {
        c.hints
            .iter()
            .any(|h| h.contains("the fault was cpu_contention"))
    }));
    assert!(plain.contexts.iter().all(|c| c.hints.is_empty()));
    assert!(
        hinted.memory.results[0]
            .observations
            .iter()
            .any(|o| o.contains("ANOMALY CpuUsage")),
        "the hinted action found the saturated CPU"
    );

    // 2. A model policy: the same canned turns up to the log read. After it, the agent puts
    // the run in a different status with the lesson (the hint's action is pending) and shows
    // the hint; each run's next canned turn checks the prompt it gets before answering.
    let pod = case.file.alert.component.clone();
    let since = case.facts(&incident)["alert_start"]
        .as_str()
        .unwrap()
        .to_string();
    let common = || {
        vec![
            ScriptedTurn::Text(status("diagnosis_planning")),
            ScriptedTurn::Text(decision(
                "plan",
                "diagnosis_planning",
                serde_json::json!({}),
            )),
            ScriptedTurn::Text(status("step_initialization")),
            ScriptedTurn::Text(decision(
                "refine",
                "plan_refining",
                serde_json::json!({"step": 1}),
            )),
            ScriptedTurn::Text(status("step_execution")),
            ScriptedTurn::Text(decision(
                "read the logs since the alert",
                "get_logs",
                serde_json::json!({"entity": pod, "start": since, "min_level": "ERROR"}),
            )),
        ]
    };
    let completing: RequestCheck = Arc::new(|r| {
        let ok = status_of(r) == FlashState::StepCompletion
            && !r.messages[1].content.contains("Hindsight");
        ok.then_some(())
            .ok_or_else(|| "expected a Step Completion prompt without hints".into())
    });
    let executing_with_hint: RequestCheck = Arc::new(|r| {
        let user = &r.messages[1].content;
        let ok = status_of(r) == FlashState::StepExecution
            && user.contains("the fault was cpu_contention")
            && user.contains("suggested action: get_metrics");
        ok.then_some(())
            .ok_or_else(|| "expected a Step Execution prompt with the hint".into())
    });
    let mut without = common();
    without.push(ScriptedTurn::Text(status("step_completion")));
    without.push(ScriptedTurn::Checked(
        completing,
        Box::new(ScriptedTurn::Text(decision(
            "nothing logged",
            "step_complete",
            serde_json::json!({"next": "final", "answer": "no errors logged"}),
        ))),
    ));
    let mut with = common();
    with.push(ScriptedTurn::Text(status("step_execution")));
    with.push(ScriptedTurn::Checked(
        executing_with_hint,
        Box::new(ScriptedTurn::Text(decision(
            "follow the hint",
            "get_metrics",
            serde_json::json!({"entity": pod}),
        ))),
    ));
    with.push(ScriptedTurn::Text(status("step_completion")));
    with.push(ScriptedTurn::Text(decision(
        "CPU saturated",
        "step_complete",
        serde_json::json!({"next": "final", "answer": format!("cpu_contention: the CPU of {pod} is saturated")}),
    )));
    let model_without = ScriptedModel::new("scripted-hindsight-without-lesson", without);
    let model_with = ScriptedModel::new("scripted-hindsight-with-lesson", with);
    let (incident, t1) = tools(StubFallback::Error);
    let run_without = run_case(
        case,
        guide,
        &incident,
        Arc::new(ModelPolicy::new(Arc::new(model_without.clone()))),
        t1,
        HindsightBase::new(),
    )
    .await
    .unwrap();
    let (incident, t2) = tools(StubFallback::Live(other()));
    let run_with = run_case(
        case,
        guide,
        &incident,
        Arc::new(ModelPolicy::new(Arc::new(model_with.clone()))),
        t2,
        clean_logs_lesson(),
    )
    .await
    .unwrap();
    assert_eq!(model_without.remaining(), 0);
    assert_eq!(model_with.remaining(), 0);
    // The first three decisions (and their status readings) saw the same prompts; the
    // fourth status reading differed by the pending hinted action.
    assert_eq!(model_without.requests()[..6], model_with.requests()[..6]);
    assert_eq!(action_after(&run_without, "get_logs"), "step_complete");
    assert_eq!(action_after(&run_with, "get_logs"), "get_metrics");
    assert!(run_with.answer.unwrap().starts_with("cpu_contention:"));
}

#[tokio::test]
async fn a_replay_reproduces_a_live_run_exactly() {
    let cases = suite();
    let case = find_case(&cases, "exception").unwrap();
    let (incident, live) = live_tools(case).await.unwrap();
    let pod = case.file.alert.component.clone();
    let since = case.facts(&incident)["alert_start"]
        .as_str()
        .unwrap()
        .to_string();
    // Canned turns written for this test, served to the live run and to the replay alike.
    let turns = || {
        [
            status("diagnosis_planning"),
            decision("plan", "diagnosis_planning", serde_json::json!({})),
            status("step_initialization"),
            decision(
                "refine into the logs and the spans",
                "plan_refining",
                serde_json::json!({"step": 1, "actions": [
                    {"tool": "get_logs", "args": {"entity": pod, "start": since}},
                    {"tool": "get_traces", "args": {"entity": pod}},
                ]}),
            ),
            status("step_execution"),
            decision(
                "read the logs since the alert",
                "get_logs",
                serde_json::json!({"entity": pod, "start": since}),
            ),
            status("step_execution"),
            decision(
                "and the spans",
                "get_traces",
                serde_json::json!({"entity": pod}),
            ),
            status("step_completion"),
            decision(
                "exceptions logged",
                "step_complete",
                serde_json::json!({"next": "final", "answer": format!("exception: {pod} throws")}),
            ),
        ]
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("live.stub.jsonl");
    let writer = Arc::new(StubWriter::create(&path, Redactor::default()).unwrap());
    let live_model = ScriptedModel::from_texts("scripted-replay-live-run", turns());
    let live_run = run_case(
        case,
        case,
        &incident,
        Arc::new(ModelPolicy::new(Arc::new(live_model.clone()))),
        ToolRecorder::wrap_registry(&live, writer),
        HindsightBase::new(),
    )
    .await
    .unwrap();

    let stub = ToolStub::load(&path, live.specs(), StubFallback::Error).unwrap();
    let replay_model = ScriptedModel::from_texts("scripted-replay-stub-run", turns());
    let replayed = run_case(
        case,
        case,
        &incident,
        Arc::new(ModelPolicy::new(Arc::new(replay_model.clone()))),
        stub.registry(),
        HindsightBase::new(),
    )
    .await
    .unwrap();
    assert_eq!(comparable_steps(&live_run), comparable_steps(&replayed));
    assert_eq!(live_run.answer, replayed.answer);
    assert_eq!(live_run.memory, replayed.memory);
    // The model saw the very same prompts, observations included.
    assert_eq!(live_model.requests(), replay_model.requests());
    assert!(stub.unused().is_empty());
    assert_eq!(live_run.trajectory.steps.len(), 5);
    assert_eq!(live_model.remaining(), 0);
    assert!(live_run.trajectory.steps.iter().all(|s| s.error.is_none()));

    // The committed recordings replay the deterministic policy's live run as exactly.
    let root = default_cases_dir();
    for case in &cases {
        let (incident, live) = live_tools(case).await.unwrap();
        let live_run = run_case(
            case,
            case,
            &incident,
            Arc::new(RulePolicy),
            live,
            HindsightBase::new(),
        )
        .await
        .unwrap();
        let (recorded_incident, stub) =
            replay_tools(&root, &case.name, &case.name, StubFallback::Error).unwrap();
        assert_eq!(recorded_incident, incident);
        let replayed = run_case(
            case,
            case,
            &incident,
            Arc::new(RulePolicy),
            stub.registry(),
            HindsightBase::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            comparable_steps(&live_run),
            comparable_steps(&replayed),
            "{}",
            case.name
        );
        assert!(recording_path(&root, &case.name, &case.name).is_file());
    }
}

/// The Nezha data folder, or `None` (the test skips) when it is missing and
/// `RCA_REQUIRE_ALL` is unset.
fn nezha_data() -> Option<PathBuf> {
    let data = shared_dir().join("data/nezha-trainticket");
    if data.join("rca_data").is_dir() {
        return Some(data);
    }
    if rca_core::testing::require_all() {
        panic!("{} is missing (set RCA_SHARED_DIR)", data.display());
    }
    eprintln!("skipped: {} not found (set RCA_SHARED_DIR)", data.display());
    None
}

/// Every case of the day whose type a guide covers (28), pod and guide given and as the full
/// job: the table must be the committed `flash-suite` section of docs/benchmarks.md, so a
/// change in what the guides solve fails here until the section is rewritten by its
/// command. (An in-sample figure: the triggers were written on this day.)
#[tokio::test]
async fn the_guides_on_every_case_of_their_types_match_the_committed_table() {
    let Some(data) = nezha_data() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let triage = triage_guide(&default_cases_dir()).unwrap();
    let options = EvalOptions {
        triage: &triage,
        ..EvalOptions::default()
    };
    let results = example_recurring_incidents::nezha_eval::evaluate(
        &data,
        &suite(),
        work.path(),
        &options,
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(results.len(), 28);
    // The full job: the alert names the entry point, never the pod.
    for r in &results {
        assert_eq!(r.answers.len(), 3, "{}", r.id);
        let alert = r.full_job_alert.as_deref().unwrap();
        assert!(alert.starts_with("SLO alert at the entry point"), "{alert}");
        assert!(!alert.contains(&r.pod), "{alert}");
    }
    let table = example_recurring_incidents::nezha_eval::markdown_table(&results);
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md"),
    )
    .unwrap();
    let section = docs
        .split("<!-- BEGIN flash-suite -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- END flash-suite -->").next())
        .unwrap();
    assert!(
        section.contains(table.trim()),
        "the committed flash-suite table differs from this run:\n{table}"
    );
}

/// Hindsight collecting itself on two cases not bundled with the suite (another CPU
/// contention and another wrong return value, on other pods): the first case's failures
/// under the other guides teach lessons that the second case's runs are offered.
#[tokio::test]
async fn lessons_from_one_case_reach_the_next() {
    let Some(data) = nezha_data() else {
        return;
    };
    let only = ["2023-01-29/25".to_string(), "2023-01-29/03".to_string()];
    let work = tempfile::tempdir().unwrap();
    let triage = triage_guide(&default_cases_dir()).unwrap();
    let reviewer = RuleReviewer::new(guide_plans(&suite()).unwrap());
    let options = EvalOptions {
        triage: &triage,
        only: &only,
        reviewer: Some(&reviewer),
        ..EvalOptions::default()
    };
    let learned = example_recurring_incidents::nezha_eval::evaluate(
        &data,
        &suite(),
        work.path(),
        &options,
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(learned.len(), 2);
    assert_eq!(learned[0].lessons_before, 0);
    assert!(learned[1].lessons_before > 0, "{learned:?}");
    assert!(learned.iter().all(|r| r.own_guide_right), "{learned:?}");
}

#[test]
fn a_recurrence_can_point_at_another_case_s_guide() {
    let cases = suite();
    let cpu = find_case(&cases, "cpu-contention").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cpu-again");
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = cpu.file.clone();
    file.incident_dir = cpu.incident_dir().display().to_string();
    file.guide = Some(cpu.dir.join("guide.md").display().to_string());
    std::fs::write(dir.join("case.json"), serde_json::to_string(&file).unwrap()).unwrap();
    std::fs::write(
        dir.join("expected.json"),
        serde_json::to_string(&cpu.expected).unwrap(),
    )
    .unwrap();
    let loaded = load_suite(tmp.path()).unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].name, "cpu-again");
    assert_eq!(loaded[0].guide, cpu.guide);
    assert!(loaded[0].incident_dir().join("incident.json").is_file());
    // A folder without case.json is not a case; a broken case.json is an error.
    std::fs::create_dir_all(tmp.path().join("notes")).unwrap();
    assert_eq!(load_suite(tmp.path()).unwrap().len(), 1);
    std::fs::write(dir.join("case.json"), "{").unwrap();
    let err = load_suite(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("case.json"), "{err}");
}

#[tokio::test]
async fn the_full_job_finds_the_pod_and_picks_the_guide_on_the_cpu_incident() {
    use rca_agents::flash::{FlashAgent, run_triaged};
    let cases = suite();
    let case = find_case(&cases, "cpu-contention").unwrap();
    let (mut incident, tools) = example_recurring_incidents::full_job_tools(case)
        .await
        .unwrap();
    // `rank_components` ranks from the telemetry alone.
    let ranked = tools
        .dispatch(
            "rank_components",
            serde_json::json!({"top": 3}),
            &rca_core::tool::ToolContext::default(),
        )
        .await
        .unwrap()
        .text;
    assert!(
        ranked.starts_with("Components the telemetry points at"),
        "{ranked}"
    );
    assert_eq!(
        ranked
            .lines()
            .filter(|l| l.starts_with(char::is_numeric))
            .count(),
        3
    );
    // The alert names a symptom at an entry point, not the pod; the triage finds the pod and
    // the triggers pick the CPU guide, whose answer the case's verdict accepts.
    let alert = "SLO alert at the entry point: median latency up";
    incident.title = alert.to_string();
    let mut facts = case.facts(&incident);
    facts.remove("component");
    let catalog = example_recurring_incidents::catalog(&cases).unwrap();
    let triage = triage_guide(&default_cases_dir()).unwrap();
    let agent = FlashAgent::new(Arc::new(RulePolicy), tools);
    let run = run_triaged(&agent, &incident, alert, &triage, &catalog, facts)
        .await
        .unwrap();
    assert_eq!(
        run.triage.memory.facts["component"],
        serde_json::json!(case.file.alert.component)
    );
    assert_eq!(run.guide(), Some("cpu-contention"), "{:?}", run.matches);
    assert!(case.verdict().accepts(run.answer()), "{:?}", run.answer());
}
