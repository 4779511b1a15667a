//! Tests of the tools over in-memory and deliberately leaky sources, with scripted models
//! (canned turns written for these tests, named `scripted-...`).

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::source::{
    Level, LogQuery, LogRecord, LogSource, MetricQuery, MetricSample, MetricSource, RecordQuery,
    RecordStream, Row, Span, TableSource, TraceQuery, TraceSource, Value,
};
use rca_core::tool::{ToolContext, ToolRegistry};
use rca_core::{Modality, SourceError, Timestamp, ToolError};
use rca_llm::{HashingConfig, HashingEmbedder, ScriptedModel};

use super::*;
use crate::experts::code::{CodeExpert, CodeExpertLimits, ModelCodeAnalyst};
use crate::experts::logs::{
    HeuristicLogAnalyst, LogExample, LogExampleStore, LogExpert, LogExpertConfig, ModelLogAnalyst,
};
use crate::sources::{FileLogSource, FileMetricSource, FileTraceSource};

fn t(min: i64) -> Timestamp {
    Timestamp::from_secs(1_700_000_000 + min * 60)
}

fn cutoff() -> Timestamp {
    t(60)
}

fn ctx() -> ToolContext {
    ToolContext::default().with_cutoff(cutoff())
}

fn log(min: i64, level: Option<Level>, msg: &str) -> LogRecord {
    LogRecord {
        timestamp: t(min),
        component: "worker".into(),
        level,
        message: msg.into(),
        attributes: Default::default(),
    }
}

fn logs() -> Vec<LogRecord> {
    let mut v = Vec::new();
    for i in 0..40 {
        v.push(log(
            i,
            Some(Level::Info),
            &format!("processed batch {i} in {} ms", 10 + i),
        ));
    }
    for i in 0..7 {
        v.push(log(
            50 + i,
            Some(Level::Error),
            &format!(
                "checkpoint {} failed: state size {} MB exceeds quota",
                100 + i,
                900 + i
            ),
        ));
    }
    v.push(log(55, Some(Level::Warning), "heap usage above 90 percent"));
    v.push(log(
        58,
        None,
        "ERROR container killed by the kernel oom killer",
    ));
    // After the detection time: must never be shown.
    v.push(log(
        61,
        Some(Level::Fatal),
        "FUTURE job restarted after failure",
    ));
    v.push(log(90, Some(Level::Error), "FUTURE checkpoint 999 failed"));
    v
}

/// A source that ignores every query and returns everything it holds, future included: the
/// tools must enforce the cutoff themselves.
struct Leaky {
    logs: Vec<LogRecord>,
    samples: Vec<MetricSample>,
    spans: Vec<Span>,
    rows: Vec<Row>,
}

fn stream<T: Send + 'static>(items: Vec<T>) -> RecordStream<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

#[async_trait]
impl LogSource for Leaky {
    async fn logs(&self, _q: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
        Ok(stream(self.logs.clone()))
    }
    async fn components(&self) -> Result<Vec<String>, SourceError> {
        Ok(vec!["worker".into()])
    }
}

#[async_trait]
impl MetricSource for Leaky {
    async fn samples(&self, _q: &MetricQuery) -> Result<RecordStream<MetricSample>, SourceError> {
        Ok(stream(self.samples.clone()))
    }
    async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
        Ok(vec![("worker".into(), "heap_mb".into())])
    }
}

#[async_trait]
impl TraceSource for Leaky {
    async fn spans(&self, _q: &TraceQuery) -> Result<RecordStream<Span>, SourceError> {
        Ok(stream(self.spans.clone()))
    }
}

#[async_trait]
impl TableSource for Leaky {
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
        Ok(vec![(
            "job_events".into(),
            vec!["timestamp".into(), "job".into(), "event".into()],
        )])
    }
    async fn records(&self, _t: &str, _q: &RecordQuery) -> Result<RecordStream<Row>, SourceError> {
        Ok(stream(self.rows.clone()))
    }
}

fn samples() -> Vec<MetricSample> {
    (0..70)
        .map(|m| MetricSample {
            timestamp: t(m),
            component: "worker".into(),
            metric: "heap_mb".into(),
            value: if m >= 50 {
                1900.0 + m as f64
            } else {
                1000.0 + (m % 3) as f64
            },
            labels: Default::default(),
        })
        .collect()
}

fn span(id: usize, min: i64, component: &str, op: &str, us: u64, error: bool) -> Span {
    Span {
        trace_id: format!("trace-{id}").into(),
        span_id: format!("span-{id}").into(),
        parent_id: None,
        component: component.into(),
        operation: op.into(),
        start: t(min),
        duration_us: us,
        error,
        attributes: Default::default(),
    }
}

fn spans() -> Vec<Span> {
    let mut v: Vec<Span> = (0..60)
        .map(|m| {
            let slow = m >= 48;
            span(
                m as usize,
                m,
                "worker",
                "process",
                if slow {
                    900_000
                } else {
                    20_000 + (m as u64 % 3) * 1000
                },
                slow && m % 2 == 0,
            )
        })
        .collect();
    v.push(span(777, 65, "worker", "process", 99_000_000, true));
    v
}

fn rows() -> Vec<Row> {
    let row = |min: i64, event: &str| -> Row {
        vec![
            ("timestamp".into(), Value::Text(t(min).to_string())),
            ("job".into(), Value::Text("job-42".into())),
            ("event".into(), Value::Text(event.into())),
        ]
    };
    vec![
        row(0, "SUBMITTED"),
        row(1, "RUNNING"),
        row(58, "TASK_FAILED exit 137"),
        row(62, "RESTARTED"),
    ]
}

fn leaky() -> Arc<Leaky> {
    Arc::new(Leaky {
        logs: logs(),
        samples: samples(),
        spans: spans(),
        rows: rows(),
    })
}

fn registry_over(l: Arc<Leaky>) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register_typed(GetLogs::new(l.clone())).unwrap();
    r.register_typed(GetMetrics::new(l.clone())).unwrap();
    r.register_typed(GetTraces::new(l.clone())).unwrap();
    r.register_typed(GetDbRecords::new(l)).unwrap();
    r
}

#[tokio::test]
async fn the_time_cutoff_holds_even_when_the_source_leaks() {
    let r = registry_over(leaky());
    for (tool, args) in [
        (
            "get_logs",
            serde_json::json!({"entity": "worker", "min_level": "TRACE"}),
        ),
        ("get_metrics", serde_json::json!({"entity": "worker"})),
        (
            "get_traces",
            serde_json::json!({"entity": "worker", "end": "2100-01-01T00:00:00Z"}),
        ),
        ("get_db_records", serde_json::json!({"entity": "job-42"})),
    ] {
        let out = r.dispatch(tool, args, &ctx()).await.unwrap();
        assert!(!out.text.contains("FUTURE"), "{tool}: {}", out.text);
        assert!(!out.text.contains("RESTARTED"), "{tool}: {}", out.text);
        assert!(!out.text.contains("trace-777"), "{tool}: {}", out.text);
        assert!(
            out.evidence.iter().all(|e| e.observed_at < cutoff()),
            "{tool}"
        );
    }
    let m = r
        .dispatch(
            "get_metrics",
            serde_json::json!({"entity": "worker"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(m.text.contains("(60 samples)"), "{}", m.text);
    // Without a cutoff the same leaky source shows the future (the check above is not vacuous).
    let open = r
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "worker", "min_level": "TRACE"}),
            &ToolContext::default(),
        )
        .await
        .unwrap();
    assert!(open.text.contains("FUTURE"));
}

#[tokio::test]
async fn get_logs_dedups_with_counts_and_drops_below_warning() {
    let r = registry_over(leaky());
    let out = r
        .dispatch("get_logs", serde_json::json!({"entity": "Worker"}), &ctx())
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["lines"], 49);
    assert_eq!(data["shown_lines"], 9, "{}", out.text);
    let groups = data["groups"].as_array().unwrap();
    let counts: Vec<u64> = groups
        .iter()
        .map(|g| g["count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![7, 1, 1], "{}", out.text);
    assert!(
        out.text.contains("ERROR [x7] checkpoint 100 failed"),
        "{}",
        out.text
    );
    assert!(
        groups
            .iter()
            .all(|g| !g["example"].as_str().unwrap().contains("processed batch"))
    );
    assert!(
        out.evidence
            .iter()
            .any(|e| e.modality == Modality::Logs && e.component == "worker")
    );

    let all = r
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "worker", "min_level": "info"}),
            &ctx(),
        )
        .await
        .unwrap();
    let data = all.data.unwrap();
    assert_eq!(data["shown_lines"], 49);
    assert_eq!(data["groups"][0]["count"], 40, "{}", all.text);

    let narrow = r
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "worker", "start": t(56).to_string()}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(narrow.data.unwrap()["lines"], 2);
}

#[tokio::test]
async fn output_is_bounded() {
    let l = leaky();
    let mut tool = GetLogs::new(l);
    tool.max_chars = 200;
    let mut r = ToolRegistry::new();
    r.register_typed(tool).unwrap();
    let out = r
        .dispatch(
            "get_logs",
            serde_json::json!({"entity": "worker", "min_level": "INFO"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(out.text.chars().count() <= 200 + 100, "{}", out.text);
    assert!(out.text.contains("cut"));
}

#[tokio::test]
async fn arguments_that_fail_validation_come_back_with_the_schema() {
    let r = registry_over(leaky());
    for (tool, args, field) in [
        ("get_logs", serde_json::json!({"entity": 7}), "entity"),
        (
            "get_logs",
            serde_json::json!({"component": "worker"}),
            "entity",
        ),
        (
            "get_logs",
            serde_json::json!({"entity": "worker", "min_level": "LOUD"}),
            "min_level",
        ),
        (
            "get_metrics",
            serde_json::json!({"entity": "worker", "start": "last tuesday"}),
            "start",
        ),
        (
            "get_traces",
            serde_json::json!({"entity": "worker", "sql": "SELECT *"}),
            "entity",
        ),
        (
            "get_db_records",
            serde_json::json!({"entity": "job-42", "table": "nope"}),
            "table",
        ),
    ] {
        let err = r.dispatch(tool, args.clone(), &ctx()).await.unwrap_err();
        match &err {
            ToolError::InvalidArgs {
                tool: name, schema, ..
            } => {
                assert_eq!(name, tool);
                let schema: serde_json::Value = serde_json::from_str(schema).unwrap();
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{tool} {args}: {schema}"
                );
            }
            other => panic!("{tool} {args}: {other:?}"),
        }
        assert!(err.to_string().contains("JSON schema"));
    }
    let unknown = r
        .dispatch("get_logs", serde_json::json!({"entity": "nobody"}), &ctx())
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("worker"), "{unknown}");
}

#[tokio::test]
async fn metrics_traces_and_records_summaries() {
    let r = registry_over(leaky());
    let m = r
        .dispatch(
            "get_metrics",
            serde_json::json!({"entity": "worker"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(m.text.contains("ANOMALY heap_mb"), "{}", m.text);
    assert!(
        m.evidence
            .iter()
            .any(|e| e.kind.as_deref() == Some("metric_shift:heap_mb"))
    );
    let series = &m.data.unwrap()["series"][0];
    assert_eq!(series["max"], 1959.0);

    let tr = r
        .dispatch(
            "get_traces",
            serde_json::json!({"entity": "worker"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(
        tr.text.contains("process: 60 calls, 6 errors"),
        "{}",
        tr.text
    );
    assert!(tr.text.contains("Slowest spans"));
    assert!(!tr.evidence.is_empty(), "{}", tr.text);

    let db = r
        .dispatch(
            "get_db_records",
            serde_json::json!({"entity": "job-42"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(db.text.contains("3 row(s)"), "{}", db.text);
    assert_eq!(db.evidence.len(), 1);
    assert_eq!(db.evidence[0].modality, Modality::Records);
    assert!(db.evidence[0].finding.contains("TASK_FAILED"));
}

#[tokio::test]
async fn file_sources_work_through_the_tools() {
    let l = Arc::new(FileLogSource::from_records(logs(), Some(cutoff())));
    let m = Arc::new(FileMetricSource::from_samples(samples(), Some(cutoff())));
    let s = Arc::new(FileTraceSource::from_spans(spans(), Some(cutoff())));
    let mut r = ToolRegistry::new();
    r.register_typed(GetLogs::new(l)).unwrap();
    r.register_typed(GetMetrics::new(m)).unwrap();
    r.register_typed(GetTraces::new(s)).unwrap();
    for name in ["get_logs", "get_metrics", "get_traces"] {
        let out = r
            .dispatch(name, serde_json::json!({"entity": "worker"}), &ctx())
            .await
            .unwrap();
        assert!(!out.evidence.is_empty(), "{name}: {}", out.text);
    }
}

fn block_lines() -> Vec<String> {
    let mut v: Vec<String> = (0..6)
        .map(|i| format!("2024-05-01T10:0{i}:00Z INFO processed batch {i}"))
        .collect();
    v.push(
        "2024-05-01T10:07:00Z ERROR checkpoint 17 failed: state size 950 MB exceeds quota".into(),
    );
    v.push("2024-05-01T10:08:00Z ERROR container killed by the kernel oom killer".into());
    v
}

fn store_examples() -> Vec<LogExample> {
    vec![
        LogExample {
            log: "ERROR checkpoint 3 failed: state size 700 MB exceeds quota".into(),
            analysis: "state grew past the checkpoint quota".into(),
        },
        LogExample {
            log: "WARN disk latency high on volume".into(),
            analysis: "slow disk".into(),
        },
        LogExample {
            log: "INFO user logged in".into(),
            analysis: "nothing wrong".into(),
        },
    ]
}

async fn expert_with(
    analyst: Arc<dyn crate::experts::logs::LogAnalyst>,
    config: LogExpertConfig,
) -> LogExpert {
    let embedder = Arc::new(HashingEmbedder::new(HashingConfig::default()));
    let mut store = LogExampleStore::new(embedder.clone());
    store.add_all(store_examples()).await.unwrap();
    LogExpert::semantic(embedder, Arc::new(store), analyst, config)
}

#[tokio::test]
async fn invented_evidence_is_filtered_out() {
    // Canned turns written for this test: every block gets the same answer, one explanation
    // with a verbatim quote and one with an invented one; then the summary.
    let answer = r#"{"explanations": [
        {"explanation": "checkpoints exceed the state quota", "evidence": ["checkpoint 17 failed: state size 950 MB exceeds quota"]},
        {"explanation": "the network partitioned", "evidence": ["network partition detected between zone a and zone b"]}
    ]}"#;
    let lines = block_lines();
    let config = LogExpertConfig {
        max_blocks: 1,
        examples_per_block: 2,
        ..Default::default()
    };
    let model = ScriptedModel::from_texts(
        "scripted-log-expert-invented",
        [answer, "Checkpoints exceed the state quota."],
    );
    let expert = expert_with(
        Arc::new(ModelLogAnalyst::new(Arc::new(model.clone()))),
        config,
    )
    .await;
    let out = expert
        .analyse("why did the job fail?", &lines)
        .await
        .unwrap();
    assert_eq!(out.analysed.len(), 1);
    assert_eq!(out.findings.len(), 1, "{out:?}");
    assert!(out.findings[0].explanation.contains("quota"));
    assert_eq!(out.dropped_explanations, 1);
    assert_eq!(out.dropped_quotes, 1);
    assert!(!out.summary.contains("network"));
    assert_eq!(model.remaining(), 0);
    // The two most similar past analyses are in the prompt, the most similar first; the third
    // is not.
    let requests = model.requests();
    let prompt = &requests[0].messages[1].content;
    let first = prompt.find("Past analysis 1:\nLog:\n```\nERROR checkpoint 3 failed");
    assert!(first.is_some(), "{prompt}");
    assert!(
        prompt.contains("Past analysis 2:") && !prompt.contains("Past analysis 3:"),
        "{prompt}"
    );
    // The summary prompt holds only the supported finding.
    assert!(
        !requests[1].messages[1]
            .content
            .contains("network partition")
    );
}

#[tokio::test]
async fn prompts_are_bounded() {
    let mut lines = block_lines();
    for i in 0..400 {
        lines.push(format!(
            "2024-05-01T10:09:00Z ERROR request {i} to shard {} timed out after {} ms",
            i % 7,
            1000 + i
        ));
    }
    let config = LogExpertConfig {
        max_blocks: 2,
        max_block_chars: 1500,
        max_prompt_chars: 2500,
        ..Default::default()
    };
    let model = ScriptedModel::from_texts(
        "scripted-log-expert-bounded",
        [r#"{"explanations": []}"#, r#"{"explanations": []}"#],
    );
    let expert = expert_with(
        Arc::new(ModelLogAnalyst::new(Arc::new(model.clone()))),
        config,
    )
    .await;
    let out = expert.analyse("why?", &lines).await.unwrap();
    assert!(out.findings.is_empty());
    for req in model.requests() {
        let chars: usize = req.messages.iter().map(|m| m.content.chars().count()).sum();
        assert!(chars <= 2500, "prompt of {chars} characters");
    }
}

#[tokio::test]
async fn deterministic_log_expert_and_tool() {
    let expert = expert_with(
        Arc::new(HeuristicLogAnalyst::default()),
        LogExpertConfig::default(),
    )
    .await;
    let mut r = ToolRegistry::new();
    r.register_typed(AnalyzeLogs::new(Arc::new(expert)))
        .unwrap();
    let text = block_lines().join("\n");
    let ctx = ToolContext::default()
        .with_cutoff(Timestamp::parse_rfc3339("2024-05-01T10:15:00Z").unwrap());
    let out = r
        .dispatch(
            "analyze_logs",
            serde_json::json!({"text": text, "entity": "worker"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(out.text.contains("oom killer"), "{}", out.text);
    assert!(!out.evidence.is_empty());
    assert!(
        out.evidence
            .iter()
            .all(|e| e.component == "worker" && e.modality == Modality::Logs)
    );
    assert_eq!(
        out.evidence[0].observed_at,
        Timestamp::parse_rfc3339("2024-05-01T10:07:00Z").unwrap()
    );
    // Trivial input is refused with advice.
    let err = r
        .dispatch("analyze_logs", serde_json::json!({"text": "ok"}), &ctx)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Refused { reason } if reason.contains("snapshot key")),
        "{err:?}"
    );
}

#[tokio::test]
async fn analyze_code_recursion_stops_and_trivial_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (p, text) in [
        (
            "Job.java",
            "public class Job {\n  Sink sink;\n  void run() { sink.write(); }\n}\n",
        ),
        (
            "Sink.java",
            "public class Sink {\n  Job owner;\n  void write() { throw new IllegalStateException(\"full\"); }\n}\n",
        ),
    ] {
        std::fs::write(dir.path().join(p), text).unwrap();
    }
    // Canned turns written for this test: the second analysis proposes going back to `Job`
    // (already visited) and an external type, so the queue runs dry.
    let model = ScriptedModel::from_texts(
        "scripted-analyze-code",
        [
            r#"{"analysis": "Job writes to Sink.", "related": ["Sink"]}"#,
            r#"{"analysis": "write() throws when full.", "related": ["Job", "IllegalStateException"]}"#,
            "Sink.write throws IllegalStateException when full.",
        ],
    );
    let expert = CodeExpert::new(
        Arc::new(crate::code::CodeDirectory::new(dir.path()).unwrap()),
        Arc::new(ModelCodeAnalyst::new(Arc::new(model.clone()))),
        CodeExpertLimits::default(),
    );
    let mut r = ToolRegistry::new();
    r.register_typed(AnalyzeCode::new(Arc::new(expert)))
        .unwrap();
    let out = r
        .dispatch(
            "analyze_code",
            serde_json::json!({"question": "why does the job fail?", "symbols": ["Job"]}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(out.text.contains("Exhausted"), "{}", out.text);
    assert!(
        out.text.contains("external: IllegalStateException"),
        "{}",
        out.text
    );
    assert_eq!(out.evidence.len(), 2);
    assert_eq!(model.remaining(), 0);
    let err = r
        .dispatch(
            "analyze_code",
            serde_json::json!({"question": "why does it fail?", "symbols": []}),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Refused { .. }), "{err:?}");
    let err = r
        .dispatch(
            "analyze_code",
            serde_json::json!({"question": "why", "symbols": "Job"}),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArgs { .. }), "{err:?}");
}

#[tokio::test]
async fn incident_directory_becomes_a_registry() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("incident.json"),
        r#"{"format_version": 1, "id": "x", "title": "job failed", "detected_at": "2024-05-01T10:15:00Z",
            "window": {"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T10:15:00Z"},
            "telemetry": {"logs": ["job.log"]}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("job.log"),
        "2024-05-01T10:01:00Z ERROR task failed\n2024-05-01T10:20:00Z ERROR FUTURE task failed\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("tables")).unwrap();
    std::fs::write(
        root.join("tables/events.csv"),
        "timestamp,job,event\n2024-05-01T10:02:00Z,job-1,FAILED\n2024-05-01T10:16:00Z,job-1,RESTARTED\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("code")).unwrap();
    std::fs::write(root.join("code/Job.java"), "public class Job {}\n").unwrap();
    let tools =
        IncidentTools::from_dir(crate::incident_dir::IncidentDir::open(root).unwrap()).unwrap();
    let r = tools.registry(None).await.unwrap();
    assert_eq!(
        r.names(),
        ["get_logs", "get_db_records", "analyze_logs", "analyze_code"]
    );
    let ctx = ToolContext::default().with_cutoff(tools.incident.detected_at);
    let db = r
        .dispatch(
            "get_db_records",
            serde_json::json!({"entity": "job-1"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(
        db.text.contains("FAILED") && !db.text.contains("RESTARTED"),
        "{}",
        db.text
    );
    let logs = r
        .dispatch("get_logs", serde_json::json!({"entity": "job"}), &ctx)
        .await
        .unwrap();
    assert!(!logs.text.contains("FUTURE"));
}
