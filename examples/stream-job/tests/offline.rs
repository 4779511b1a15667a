//! Offline run of the example: the controller is a scripted model (canned turns written for
//! this test, model id `scripted-example-stream-job`, not a recording of any real model); the
//! tools read the bundled incident and the experts run their deterministic policies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rca_core::Modality;
use rca_core::tool::ToolContext;
use rca_core::trajectory::Outcome;
use rca_llm::ScriptedModel;

fn turn(name: &str, args: serde_json::Value) -> String {
    serde_json::json!({"thought": format!("next: {name}"), "action": {"name": name, "args": args}})
        .to_string()
}

const QUESTION: &str = "Why does task SessionWindow of job sessionizer fail with \
    java.lang.OutOfMemoryError: Java heap space in SessionState.append?";

async fn scripted() -> ScriptedModel {
    // The key under which the controller will store the full `get_logs` observation.
    let tools = example_stream_job::tools(None).await.unwrap();
    let sources = example_stream_job::incident_tools().unwrap();
    let ctx = ToolContext::default().with_cutoff(sources.incident.detected_at);
    let logs = tools
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "sessionizer"}),
            &ctx,
        )
        .await
        .unwrap()
        .text;
    let key = rca_core::memory::snapshot_key(&logs);
    ScriptedModel::from_texts(
        "scripted-example-stream-job",
        [
            turn("get_db_records", serde_json::json!({"entity": "job-5c1e"})),
            turn("get_metrics", serde_json::json!({"entity": "sessionizer"})),
            turn("get_logs", serde_json::json!({"entity": "sessionizer"})),
            turn(
                "analyze_logs",
                serde_json::json!({"text": key, "entity": "sessionizer", "question": QUESTION}),
            ),
            turn(
                "analyze_code",
                serde_json::json!({"question": QUESTION, "symbols": ["SessionWindowFunction"]}),
            ),
            turn(
                "finalize",
                serde_json::json!({
                    "root_cause": "SessionWindowFunction keeps every click of an open session in SessionState without a cap or state TTL; a bot user that never pauses (user-bot-0091) grew one session until task SessionWindow (2/4) ran out of heap (OutOfMemoryError in SessionState.append), was killed with exit code 137 three times and the job failed",
                    "solution": "cap events per session or keep a running aggregate instead of the clicks, add a state TTL, and filter or split bot traffic; then resubmit the job",
                    "responsibility": "user",
                    "confidence": 0.8,
                    "evidence": ["java.lang.OutOfMemoryError: Java heap space", "Session for key user-bot-0091 holds 750000 events"],
                    "components": ["sessionizer", "SessionWindowFunction", "SessionState"]
                }),
            ),
        ],
    )
}

#[tokio::test]
async fn policy_experts_establish_the_evidence_of_the_unbounded_session_state() {
    let model = scripted().await;
    let run = example_stream_job::diagnose(Arc::new(model.clone()), None)
        .await
        .unwrap();
    assert_eq!(
        run.trajectory.outcome,
        Outcome::Finalized,
        "{:?}",
        run.trajectory
    );
    assert_eq!(run.invalid_actions(), 0);
    assert_eq!(model.remaining(), 0);
    let steps = &run.trajectory.steps;
    let obs = |i: usize| steps[i].observation.as_ref().unwrap().text.clone();
    // Lifecycle events: the failures, never the resubmission after the detection time.
    assert!(
        obs(0).contains("TASK_FAILED") && !obs(0).contains("resubmitted"),
        "{}",
        obs(0)
    );
    // Metrics flag the heap.
    assert!(obs(1).contains("ANOMALY"), "{}", obs(1));
    // Logs: the long observation was cut and stored under a snapshot key; the line after the
    // detection time is not there.
    assert!(
        steps[2]
            .observation
            .as_ref()
            .unwrap()
            .snapshot_key
            .is_some()
    );
    assert!(!obs(2).contains("resubmission"));
    // The log expert read the full logs through the key and quoted them verbatim.
    assert!(obs(3).contains("Evidence:"), "{}", obs(3));
    let report = run.report.unwrap();
    // The log expert's verified findings quote the logs verbatim.
    assert!(
        report
            .evidence
            .iter()
            .any(|e| e.kind.as_deref() == Some("log_expert")
                && e.finding.contains("user-bot-0091 holds")),
        "{:?}",
        report.evidence
    );
    // The code expert followed SessionWindowFunction into SessionState.
    assert!(
        report
            .evidence
            .iter()
            .any(|e| e.modality == Modality::Code && e.component.contains("SessionState.java")),
        "{:?}",
        report.evidence
    );
    // (The root cause text is the scripted model's own words: nothing to assert there.)
    for m in [Modality::Records, Modality::Logs, Modality::Code] {
        assert!(
            report.evidence.iter().any(|e| e.modality == m),
            "no {m} evidence"
        );
    }
}

/// The same investigation with model-backed experts: a second scripted model (canned answers
/// written for this test, model id `scripted-example-stream-job-experts`) answers the log
/// expert (one answer per analysed block, each with a verbatim and an invented quote) and the
/// code expert (one answer per file, then the summaries).
#[tokio::test]
async fn scripted_experts_keep_only_verbatim_evidence() {
    let controller = scripted().await;
    // How many blocks the log expert will analyse (segmentation does not depend on the analyst).
    let policy = example_stream_job::tools(None).await.unwrap();
    let sources = example_stream_job::incident_tools().unwrap();
    let ctx = ToolContext::default().with_cutoff(sources.incident.detected_at);
    let logs = policy
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "sessionizer"}),
            &ctx,
        )
        .await
        .unwrap()
        .text;
    let probe = policy
        .dispatch("analyze_logs", serde_json::json!({"text": logs}), &ctx)
        .await
        .unwrap();
    let blocks = probe.data.unwrap()["analysed"].as_array().unwrap().len();
    assert!(blocks >= 1);
    let block_answer = serde_json::json!({"explanations": [
        {"explanation": "one bot user keeps a session open and its state keeps growing",
         "evidence": ["Session for key user-bot-0091 holds 250000 events and is still open"]},
        {"explanation": "the disk failed",
         "evidence": ["disk /dev/sda1 failed with an unrecoverable I/O error"]}
    ]})
    .to_string();
    let mut answers: Vec<String> = vec![block_answer; blocks];
    answers.push("A bot session grows without bound until the task runs out of heap.".into());
    answers.push(r#"{"analysis": "process() appends every click to SessionState and never caps a session.", "related": ["SessionState"]}"#.into());
    answers.push(
        r#"{"analysis": "append() keeps whole clicks in an unbounded list.", "related": []}"#
            .into(),
    );
    answers.push(
        "Unbounded per-session state in SessionState.append causes the heap exhaustion.".into(),
    );
    let experts = ScriptedModel::from_texts("scripted-example-stream-job-experts", answers);
    let run = example_stream_job::diagnose(
        Arc::new(controller.clone()),
        Some(Arc::new(experts.clone())),
    )
    .await
    .unwrap();
    assert_eq!(run.trajectory.outcome, Outcome::Finalized);
    assert_eq!(run.invalid_actions(), 0);
    assert_eq!(controller.remaining(), 0);
    assert_eq!(experts.remaining(), 0);
    let report = run.report.unwrap();
    let log_findings: Vec<_> = report
        .evidence
        .iter()
        .filter(|e| e.kind.as_deref() == Some("log_expert"))
        .collect();
    assert!(!log_findings.is_empty());
    assert!(
        log_findings.iter().all(|e| !e.finding.contains("sda1")),
        "{log_findings:?}"
    );
    assert!(
        report
            .evidence
            .iter()
            .any(|e| e.modality == Modality::Code && e.finding.contains("unbounded list"))
    );
}
