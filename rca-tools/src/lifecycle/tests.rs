//! Generation, refinement, escalation and the whole lifecycle over real DataFusion tables.
//! The scripted models' turns are written for these tests (model ids `scripted-<test>`).

use std::sync::Arc;
use std::time::Duration;

use rca_core::tool::{Tool, ToolContext};
use rca_llm::{ScriptedModel, ScriptedTurn};

use super::select::tests::Words;
use super::*;
use crate::tables::fixtures::{tables, window};
use crate::tables::{SandboxLimits, TableEngine, TelemetryTables};

fn engine() -> TelemetryTables {
    tables(SandboxLimits {
        max_rows: 1000,
        memory_bytes: 64 * 1024 * 1024,
        timeout: Duration::from_secs(20),
    })
}

const CONTRACT: &str = r#"Here is the contract:
```json
{"name": "errors_by_component", "purpose": "Counts error log lines per component in the window.",
 "parameters": [{"name": "start", "kind": "window_start"}, {"name": "end", "kind": "window_end"}],
 "output_columns": ["component", "errors"],
 "sanity_checks": [{"description": "counts are positive", "assertion": "errors > 0"}]}
```"#;

const FIXED_SQL: &str = r#"{"sql": "SELECT component, COUNT(*) AS errors FROM logs WHERE level = 'ERROR' AND timestamp >= $1 AND timestamp < $2 GROUP BY component"}"#;

fn forge_with(model: &Arc<ScriptedModel>) -> ToolForge {
    ToolForge::new(
        Arc::new(ModelContractWriter::new(model.clone())),
        Arc::new(ModelSqlWriter::new(model.clone())),
    )
}

fn task() -> ToolTask {
    ToolTask::new(
        "Which components log errors during the incident?",
        Some(window()),
    )
}

#[tokio::test]
async fn broken_sql_is_fixed_after_runtime_feedback() {
    let model = Arc::new(ScriptedModel::from_texts(
        "scripted-broken-then-fixed-sql",
        [
            CONTRACT,
            // Round 1: a column that does not exist.
            r#"{"sql": "SELECT service AS component, COUNT(*) AS errors FROM logs WHERE level = 'ERROR' GROUP BY service"}"#,
            // Round 2: fixed after the feedback.
            FIXED_SQL,
        ],
    ));
    let t = engine();
    let out = forge_with(&model).forge(&task(), &t).await.unwrap();
    let tool = match out {
        ForgeOutcome::Ready(tool) => tool,
        other => panic!("expected a tool, got {other:?}"),
    };
    assert_eq!((tool.rounds, tool.analysis_attempts), (2, 1));
    assert_eq!(tool.calls.model_calls, 3);
    assert_eq!(tool.feedback.len(), 1);
    assert_eq!(tool.feedback[0].kind, FeedbackKind::Runtime);
    assert_eq!(
        tool.sample.value(0, "component"),
        Some(&rca_core::source::Value::Text("cart".into()))
    );
    // The coding role saw the engine's error about the unknown column.
    let second_coder_prompt = &model.requests()[2].messages[1].content;
    assert!(
        second_coder_prompt.contains("service"),
        "{second_coder_prompt}"
    );
    assert!(second_coder_prompt.contains("Earlier queries failed"));
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn sanity_checks_and_empty_output_drive_refinement() {
    let model = Arc::new(ScriptedModel::from_texts(
        "scripted-heuristic-feedback",
        [
            CONTRACT,
            // Round 1: wrong time units (seconds), so no rows in the window.
            r#"{"sql": "SELECT component, COUNT(*) AS errors FROM logs WHERE level = 'ERROR' AND timestamp / 1000 >= $1 AND timestamp / 1000 < $2 GROUP BY component"}"#,
            // Round 2: counts every component, including ones with zero errors: check fails.
            r#"```sql
SELECT component, SUM(CASE WHEN level = 'ERROR' THEN 1 ELSE 0 END) AS errors FROM logs WHERE timestamp >= $1 AND timestamp < $2 GROUP BY component
```"#,
            FIXED_SQL,
        ],
    ));
    let t = engine();
    let ForgeOutcome::Ready(tool) = forge_with(&model).forge(&task(), &t).await.unwrap() else {
        panic!("expected a tool")
    };
    let kinds: Vec<FeedbackKind> = tool.feedback.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![FeedbackKind::EmptyOutput, FeedbackKind::Heuristic]
    );
    assert!(
        tool.feedback[1].message.contains("fails on 2 of 3 rows"),
        "{}",
        tool.feedback[1].message
    );
    assert_eq!(tool.rounds, 3);
}

#[tokio::test]
async fn refinement_then_analysis_retry_then_escalation() {
    // MG = 3 broken queries for each of 1 + MA = 3 contracts, then escalation.
    let mut turns = Vec::new();
    for attempt in 0..3 {
        turns.push(ScriptedTurn::Text(
            CONTRACT.replace("errors_by_component", &format!("errors_v{attempt}")),
        ));
        for round in 0..3 {
            turns.push(ScriptedTurn::Text(format!(
                "{{\"sql\": \"SELECT nothing_{attempt}_{round} AS component FROM logs\"}}"
            )));
        }
    }
    let model = Arc::new(ScriptedModel::new("scripted-always-broken", turns));
    let t = engine();
    let out = forge_with(&model).forge(&task(), &t).await.unwrap();
    let ForgeOutcome::Escalated(e) = out else {
        panic!("expected an escalation")
    };
    assert_eq!(
        e.contracts_tried,
        vec!["errors_v0", "errors_v1", "errors_v2"]
    );
    assert_eq!(
        (e.calls.reasoning, e.calls.coding, e.calls.model_calls),
        (3, 9, 12)
    );
    assert_eq!(
        e.feedback
            .iter()
            .filter(|f| f.kind == FeedbackKind::Contract)
            .count(),
        3
    );
    // The second contract request carried the analysis-level feedback of the first.
    let second_contract_prompt = &model.requests()[4].messages[1].content;
    assert!(
        second_contract_prompt.contains("[errors_v0] contract rejected"),
        "{second_contract_prompt}"
    );
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn unreadable_answers_and_bad_contracts_are_feedback_not_errors() {
    let model = Arc::new(ScriptedModel::from_texts(
        "scripted-unreadable",
        [
            "I think we should look at the logs.",
            r#"{"name": "Bad Name", "purpose": "", "output_columns": []}"#,
            CONTRACT,
            "The query would count errors.",
            FIXED_SQL,
        ],
    ));
    let t = engine();
    let ForgeOutcome::Ready(tool) = forge_with(&model).forge(&task(), &t).await.unwrap() else {
        panic!("expected a tool")
    };
    assert_eq!((tool.analysis_attempts, tool.rounds), (3, 2));
    let kinds: Vec<FeedbackKind> = tool.feedback.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![
            FeedbackKind::Contract,
            FeedbackKind::Contract,
            FeedbackKind::Unreadable
        ]
    );
}

#[tokio::test]
async fn template_policy_tools_pass_their_trials_in_datafusion() {
    let t = engine();
    let forge = ToolForge::new(Arc::new(TemplatePolicy), Arc::new(TemplatePolicy));
    for (description, name, top) in [
        (
            "Which components log errors?",
            "error_counts_per_component_logs",
            "cart",
        ),
        (
            "Which operations have high p99 latency?",
            "latency_percentiles_per_operation_spans",
            "db",
        ),
        (
            "Is there a CPU spike in the metrics?",
            "metric_zscores_per_component_metrics",
            "db",
        ),
    ] {
        let out = forge
            .forge(&ToolTask::new(description, Some(window())), &t)
            .await
            .unwrap();
        let tool = match out {
            ForgeOutcome::Ready(tool) => tool,
            other => panic!("{description}: {other:?}"),
        };
        assert_eq!(tool.contract.name, name);
        assert_eq!(
            (tool.rounds, tool.calls.model_calls),
            (1, 0),
            "{:?}",
            tool.feedback
        );
        assert_eq!(
            tool.sample.value(0, "component"),
            Some(&rca_core::source::Value::Text(top.into())),
            "{}",
            tool.sample.render(5)
        );
    }
    // Without a window the tool cannot be tried: analysis-level feedback, then escalation.
    let out = forge
        .forge(&ToolTask::new("errors in logs", None), &t)
        .await
        .unwrap();
    assert!(matches!(out, ForgeOutcome::Escalated(_)));
}

#[tokio::test]
async fn lifecycle_reuses_tools_records_runs_and_persists() {
    let t: Arc<dyn TableEngine> = Arc::new(engine());
    let forge = ToolForge::new(Arc::new(TemplatePolicy), Arc::new(TemplatePolicy));
    let lifecycle = Arc::new(ToolLifecycle::new(
        ToolInventory::new(),
        ToolSelector::new(Arc::new(Words)),
        forge,
    ));
    let warm = lifecycle
        .warm_up(
            &[
                ToolTask::new("error counts per component", Some(window())),
                ToolTask::new("error counts per component in logs", Some(window())),
                ToolTask::new("latency percentiles per operation", Some(window())),
            ],
            t.as_ref(),
        )
        .await
        .unwrap();
    assert_eq!((warm.generated, warm.reused, warm.escalated), (2, 1, 0));

    let got = lifecycle
        .acquire(
            &ToolTask::new("error counts per component", Some(window())),
            None,
            t.as_ref(),
        )
        .await
        .unwrap();
    assert!(matches!(got, Acquisition::Reused { .. }), "{got:?}");
    let name = got.tool_name().unwrap().to_string();
    assert_eq!(got.calls(), RoleCalls::default());

    let tool = lifecycle
        .as_tool(&name, Arc::clone(&t), Some(window()))
        .unwrap();
    let out = tool
        .call(serde_json::json!({}), &ToolContext::default())
        .await
        .unwrap();
    assert!(
        out.text.starts_with("component | total | errors"),
        "{}",
        out.text
    );
    let bad = tool
        .call(
            serde_json::json!({"window_start": "soon"}),
            &ToolContext::default(),
        )
        .await;
    assert!(matches!(bad, Err(rca_core::ToolError::InvalidArgs { .. })));
    let stored = lifecycle.tool(&name).unwrap();
    assert_eq!(
        (stored.successes, stored.failures),
        (2, 0),
        "trial + one run; bad args not counted"
    );

    lifecycle
        .record_diagnosis(
            &[
                name.clone(),
                "latency_percentiles_per_operation_spans".into(),
            ],
            true,
        )
        .unwrap();
    let next = lifecycle
        .candidates("p99 of slow calls", Some(&name))
        .await
        .unwrap();
    assert!(
        next.iter()
            .any(|c| c.name == "latency_percentiles_per_operation_spans")
    );

    // With nothing relevant enough on its own, the successor of the last tool is reused
    // instead of generating a tool; without a last tool, one is generated.
    let strict = ToolLifecycle::new(
        lifecycle.inventory().unwrap(),
        ToolSelector::new(Arc::new(Words)).with_policy(SelectionPolicy {
            min_relevance: 1.1,
            min_successor_relevance: 0.0,
            ..SelectionPolicy::default()
        }),
        ToolForge::new(Arc::new(TemplatePolicy), Arc::new(TemplatePolicy)),
    );
    let task = ToolTask::new("p99 of slow calls", Some(window()));
    let got = strict
        .acquire(&task, Some(&name), t.as_ref())
        .await
        .unwrap();
    match &got {
        Acquisition::Reused { name, .. } => {
            assert_eq!(name, "latency_percentiles_per_operation_spans")
        }
        other => panic!("the successor is reused: {other:?}"),
    }
    let got = strict.acquire(&task, None, t.as_ref()).await.unwrap();
    assert!(!matches!(got, Acquisition::Reused { .. }), "{got:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.json");
    lifecycle.save(&path).unwrap();
    let back = ToolInventory::load(&path).unwrap();
    assert_eq!(back, lifecycle.inventory().unwrap());
    assert_eq!(back.graph().len(), 1);
}
