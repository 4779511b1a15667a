//! Offline runs of the example: a scripted model (canned turns written for this test, not a
//! recording of any real model), and the same run recorded and replayed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rca_agents::react::ReactRun;
use rca_core::trajectory::Outcome;
use rca_llm::{RecordingModel, ReplayModel, ScriptedModel};

fn turn(name: &str, args: serde_json::Value) -> String {
    serde_json::json!({"thought": format!("next: {name}"), "action": {"name": name, "args": args}})
        .to_string()
}

/// The diagnosis the scripted model gives. Its wording is the test's own, so no test
/// asserts it back: the tests check what the controller and the tools did around it.
fn finalize_turn() -> String {
    turn(
        "finalize",
        serde_json::json!({
            "root_cause": "payments exhausted its database connection pool (20/20 in use) because slow queries on orders-db hold connections",
            "solution": "add the missing index on transactions.created_at and raise the pool size; restart payments",
            "responsibility": "platform",
            "confidence": 0.8,
            "evidence": ["payments: timeout acquiring database connection"],
            "components": ["payments", "orders-db"]
        }),
    )
}

/// The scripted investigation: metrics down the failing calls, the payments logs through the
/// log expert (by snapshot key), then the diagnosis; with `premature`, a diagnosis first,
/// before any tool ran.
async fn scripted_with(premature: bool) -> ScriptedModel {
    let tools = example_react_openai::tools().unwrap();
    let payments_logs = tools
        .dispatch(
            "get_logs",
            serde_json::json!({"service": "payments"}),
            &Default::default(),
        )
        .await
        .unwrap()
        .text;
    let key = rca_core::memory::snapshot_key(&payments_logs);
    let mut turns = Vec::new();
    if premature {
        turns.push(finalize_turn());
    }
    turns.extend([
        turn("get_metrics", serde_json::json!({"service": "checkout"})),
        turn("get_metrics", serde_json::json!({"service": "payments"})),
        turn("get_logs", serde_json::json!({"service": "payments"})),
        turn("log_expert", serde_json::json!({"text": key})),
        finalize_turn(),
    ]);
    ScriptedModel::from_texts("scripted-example-react-openai", turns)
}

async fn scripted() -> ScriptedModel {
    scripted_with(false).await
}

fn without_timings(mut run: ReactRun) -> ReactRun {
    run.trajectory.elapsed_ms = 0;
    for s in &mut run.trajectory.steps {
        s.elapsed_ms = 0;
    }
    if let Some(r) = &mut run.report {
        r.elapsed_ms = 0;
    }
    run
}

#[tokio::test]
async fn the_report_carries_what_the_tools_established_from_the_bundled_incident() {
    let model = scripted().await;
    let run = example_react_openai::diagnose(Arc::new(model.clone()))
        .await
        .unwrap();
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let report = run.report.clone().unwrap();
    // The log expert read the full logs through the snapshot key (the model passed only the
    // key) and found the error in the bundled incident's logs.
    let expert = run.trajectory.steps[3].observation.as_ref().unwrap();
    assert!(
        expert
            .text
            .contains("timeout acquiring database connection"),
        "{}",
        expert.text
    );
    // Besides the one finding the model cited, the report holds the evidence the tools
    // established, on the component whose logs hold the error.
    let cited = ["payments: timeout acquiring database connection"];
    let from_tools: Vec<_> = report
        .evidence
        .iter()
        .filter(|e| !cited.contains(&e.finding.as_str()))
        .collect();
    assert!(!from_tools.is_empty(), "{:?}", report.evidence);
    assert!(
        from_tools.iter().any(|e| e.component == "payments"),
        "{from_tools:?}"
    );
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn a_diagnosis_before_any_evidence_is_refused() {
    let model = scripted_with(true).await;
    let run = example_react_openai::diagnose(Arc::new(model.clone()))
        .await
        .unwrap();
    // The first finalize came before any tool: the error rules refused it and the
    // investigation went on; the diagnosis was accepted only at the end.
    let first = &run.trajectory.steps[0];
    assert!(first.error.is_some(), "{first:?}");
    assert!(
        !first
            .observation
            .as_ref()
            .is_some_and(|o| o.text.contains("Diagnosis accepted")),
        "{first:?}"
    );
    let last = run.trajectory.steps.last().unwrap();
    assert!(
        last.observation
            .as_ref()
            .is_some_and(|o| o.text.contains("Diagnosis accepted")),
        "{last:?}"
    );
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn recorded_run_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("react-openai.cassette.json");
    let recorder = Arc::new(RecordingModel::create(scripted().await, &cassette));
    let recorded = example_react_openai::diagnose(recorder.clone())
        .await
        .unwrap();
    assert_eq!(recorder.len(), 5);
    let replay = Arc::new(ReplayModel::open(&cassette).unwrap());
    let replayed = example_react_openai::diagnose(replay).await.unwrap();
    assert_eq!(without_timings(recorded), without_timings(replayed));
}

/// Prompt tokens of the scripted investigation with and without snapshot keys
/// (`cargo test -p example-react-openai obsk -- --nocapture` prints them).
#[tokio::test]
async fn obsk_tokens_on_the_bundled_incident() {
    use rca_agents::react::{ReactAgent, incident_message, measure_prompt_tokens};
    let tools = example_react_openai::tools().unwrap();
    let ctx = Default::default();
    let mut observations = Vec::new();
    for (name, args) in [
        ("get_metrics", serde_json::json!({"service": "checkout"})),
        ("get_metrics", serde_json::json!({"service": "payments"})),
        ("get_logs", serde_json::json!({"service": "payments"})),
    ] {
        observations.push(tools.dispatch(name, args, &ctx).await.unwrap().text);
    }
    let expert_args = serde_json::json!({"text": observations[2].clone()});
    observations.push(
        tools
            .dispatch("log_expert", expert_args, &ctx)
            .await
            .unwrap()
            .text,
    );
    let agent = ReactAgent::new(
        Arc::new(ScriptedModel::from_texts(
            "scripted-unused",
            Vec::<String>::new(),
        )),
        tools,
        example_react_openai::TASK,
        example_react_openai::config(),
    );
    let base = format!(
        "{}\n{}",
        agent.system_prompt(),
        incident_message(&example_react_openai::incident().unwrap())
    );
    let head = example_react_openai::config().obsk_head_chars.unwrap();
    let m = measure_prompt_tokens(&base, &observations, head);
    println!(
        "bundled incident: {} prompt tokens with OBSK (head {head}), {} without",
        m.with_snapshots, m.without_snapshots
    );
    assert!(m.with_snapshots < m.without_snapshots);
}
