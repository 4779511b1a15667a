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

/// The scripted investigation: metrics down the failing calls, the payments logs through the
/// log expert (by snapshot key), then the diagnosis.
async fn scripted() -> ScriptedModel {
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
    ScriptedModel::from_texts(
        "scripted-example-react-openai",
        [
            turn("get_metrics", serde_json::json!({"service": "checkout"})),
            turn("get_metrics", serde_json::json!({"service": "payments"})),
            turn("get_logs", serde_json::json!({"service": "payments"})),
            turn("log_expert", serde_json::json!({"text": key})),
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
            ),
        ],
    )
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
async fn scripted_run_finalizes_with_the_bundled_root_cause() {
    let model = scripted().await;
    let run = example_react_openai::diagnose(Arc::new(model.clone()))
        .await
        .unwrap();
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    let report = run.report.clone().unwrap();
    assert!(report.root_cause.contains("connection pool"));
    // The log expert read the full logs through the snapshot key and established evidence.
    let expert = run.trajectory.steps[3].observation.as_ref().unwrap();
    assert!(
        expert
            .text
            .contains("timeout acquiring database connection"),
        "{}",
        expert.text
    );
    assert!(report.evidence.iter().any(|e| e.component == "payments"));
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
