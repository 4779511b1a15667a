//! The server's tools called as a client would (`RcaMcp::call`), without a transport: on the
//! bundled incident, and on a small incident holding a secret.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use rca_mcp::{McpError, McpLimits, McpServerConfig, RcaMcp};
use serde_json::{Value, json};

fn bundled() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/incidents/trainticket-cpu")
}

fn args(v: Value) -> rmcp::model::JsonObject {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("arguments are objects"),
    }
}

fn server(dir: &Path, runs: Option<&Path>, limits: McpLimits) -> RcaMcp {
    let mut config = McpServerConfig::new(dir);
    config.runs = runs.map(Path::to_path_buf);
    config.limits = limits;
    RcaMcp::new(config).unwrap()
}

async fn structured(server: &RcaMcp, tool: &str, a: Value) -> (Value, String) {
    let r = server.call(tool, args(a)).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    (r.structured_content.expect("structured content"), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_on_the_bundled_incident_are_bounded_and_the_diagnosis_is_stored() {
    let runs = tempfile::tempdir().unwrap();
    let limits = McpLimits {
        head_chars: 300,
        page_chars: 1000,
        ..McpLimits::default()
    };
    let s = server(&bundled(), Some(runs.path()), limits);
    let (comps, _) = structured(&s, "list_components", json!({})).await;
    let entity = comps["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["logs"] == true && c["traces"] == true)
        .expect("a component with logs and traces")["name"]
        .as_str()
        .unwrap()
        .to_string();
    let (logs, text) = structured(
        &s,
        "get_logs",
        json!({"entity": entity, "min_level": "INFO"}),
    )
    .await;
    assert_eq!(logs["cut"], true, "{logs}");
    let key = logs["snapshot_key"].as_str().unwrap().to_string();
    assert!(text.contains(&key), "the cut text names its key");
    // Paged back whole.
    let mut offset = Some(0u64);
    let mut whole = String::new();
    while let Some(o) = offset {
        let (page, _) = structured(&s, "read_snapshot", json!({"key": key, "offset": o})).await;
        whole.push_str(page["text"].as_str().unwrap());
        offset = page["next_offset"].as_u64();
    }
    assert_eq!(
        whole.chars().count() as u64,
        logs["full_chars"].as_u64().unwrap()
    );

    let (diagnosis, markdown) = structured(&s, "diagnose", json!({})).await;
    assert!(
        !diagnosis["report"]["candidates"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(markdown.starts_with('#'));
    let uri = diagnosis["trajectory_uri"].as_str().unwrap();
    // `rca://runs/<incident>/<run id>/trajectory.json`, the incident's latest run.
    let (run, file) = uri
        .trim_start_matches("rca://runs/")
        .rsplit_once('/')
        .unwrap();
    assert_eq!(file, "trajectory.json");
    assert!(runs.path().join(run).join(file).is_file());
    let (incident, run_id) = run.split_once('/').unwrap();
    assert_eq!(
        rca_agents::report::runs::latest(runs.path(), incident).as_deref(),
        Some(run_id)
    );

    // Refusals are errors the client reads.
    for (tool, a, says) in [
        (
            "get_metrics",
            json!({"entity": entity, "incident": "../x"}),
            "paths are refused",
        ),
        ("get_metrics", json!({"entity": entity, "sql": "1"}), "sql"),
        ("get_db_records", json!({"entity": entity}), "no data"),
        (
            "read_snapshot",
            json!({"key": "obs-0000000000000000"}),
            "unknown snapshot key",
        ),
        (
            "log_templates",
            json!({"entity": "no-such-component"}),
            "unknown entity",
        ),
    ] {
        let e = s.call(tool, args(a)).await.unwrap_err();
        assert!(matches!(e, McpError::Refused { .. }), "{tool}: {e}");
        assert!(e.to_string().contains(says), "{tool}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_redacted_and_calls_have_deadlines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("leaky");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("incident.json"),
        json!({
            "format_version": 1,
            "id": "leaky-1",
            "title": "errors",
            "detected_at": "2024-05-01T10:15:00Z",
            "window": {"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T10:15:00Z"},
            "telemetry": {"logs": ["logs.jsonl"], "metrics": [], "spans": []}
        })
        .to_string(),
    )
    .unwrap();
    let mut lines = String::new();
    for i in 0..20 {
        lines.push_str(
            &json!({
                "timestamp": format!("2024-05-01T10:{:02}:00Z", i % 15),
                "level": "ERROR",
                "component": "db-client",
                "message": format!("login failed for user {i} with password=hunter2secret"),
            })
            .to_string(),
        );
        lines.push('\n');
    }
    std::fs::write(dir.join("logs.jsonl"), lines).unwrap();
    let s = server(tmp.path(), None, McpLimits::default());
    let (logs, text) = structured(
        &s,
        "get_logs",
        json!({"incident": "leaky", "entity": "db-client"}),
    )
    .await;
    assert!(text.contains("login failed"), "{text}");
    let (templates, _) = structured(&s, "log_templates", json!({"incident": "leaky"})).await;
    for shown in [text, logs.to_string(), templates.to_string()] {
        assert!(!shown.contains("hunter2secret"), "{shown}");
    }
    assert!(templates.to_string().contains("REDACTED"), "{templates}");

    // A folder of incidents lists them; without a name the tools ask for one.
    let (listing, _) = structured(&s, "list_components", json!({})).await;
    assert_eq!(listing["incidents"], json!(["leaky"]));
    let e = s
        .call("get_logs", args(json!({"entity": "db-client"})))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("name an incident"), "{e}");

    // Loading the bundled incident alone takes far longer than a millisecond.
    let hasty = server(
        &bundled(),
        None,
        McpLimits {
            tool_timeout: Duration::from_millis(1),
            ..McpLimits::default()
        },
    );
    let e = hasty
        .call("log_templates", args(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(e, McpError::TimedOut { .. }), "{e}");
}

mod live {
    //! Live sources (here in memory, as a host's would be) served as the incident `live`.

    use std::sync::Arc;

    use async_trait::async_trait;
    use rca_core::SourceError;
    use rca_core::Timestamp;
    use rca_core::source::{
        Level, LogQuery, LogRecord, LogSource, MetricQuery, MetricSample, MetricSource,
        RecordStream,
    };
    use rca_mcp::{LIVE_INCIDENT, LiveSources, McpLimits, McpServerConfig, RcaMcp};
    use serde_json::json;

    struct Logs(Vec<LogRecord>);
    struct Metrics(Vec<MetricSample>);

    #[async_trait]
    impl LogSource for Logs {
        async fn logs(&self, q: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
            let hits: Vec<_> = self
                .0
                .iter()
                .filter(|r| q.matches(r))
                .cloned()
                .map(Ok)
                .collect();
            Ok(Box::pin(futures::stream::iter(hits)))
        }
        async fn components(&self) -> Result<Vec<String>, SourceError> {
            let mut c: Vec<String> = self.0.iter().map(|r| r.component.to_string()).collect();
            c.sort();
            c.dedup();
            Ok(c)
        }
    }

    #[async_trait]
    impl MetricSource for Metrics {
        async fn samples(
            &self,
            q: &MetricQuery,
        ) -> Result<RecordStream<MetricSample>, SourceError> {
            // As a server refuses too many points (Prometheus: 11 000 a series), refuse
            // more than a day: the live tools must cut queries to the live window.
            if q.range.start.millis() < now().millis() - 86_400_000 {
                return Err(SourceError::InvalidQuery {
                    message: format!("range {:?} is too long", q.range),
                });
            }
            let hits: Vec<_> = self
                .0
                .iter()
                .filter(|s| q.matches(s))
                .cloned()
                .map(Ok)
                .collect();
            Ok(Box::pin(futures::stream::iter(hits)))
        }
        async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
            let mut s: Vec<_> = self
                .0
                .iter()
                .map(|m| (m.component.clone(), m.metric.clone()))
                .collect();
            s.sort();
            s.dedup();
            Ok(s)
        }
    }

    fn now() -> Timestamp {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        Timestamp::from_nanos(ms * 1_000_000)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn live_sources_answer_as_the_incident_live() {
        let now = now();
        let mut lines = Vec::new();
        let mut samples = Vec::new();
        for minute in 1..50i64 {
            let at = now.offset_millis(-minute * 60_000);
            for component in ["front", "pay", "stock"] {
                let failing = component == "pay" && minute <= 8;
                lines.push(LogRecord {
                    timestamp: at,
                    component: component.into(),
                    level: Some(if failing { Level::Error } else { Level::Info }),
                    message: if failing {
                        format!("payment {minute} failed: connection refused by ledger")
                    } else {
                        format!("request {minute} served in 12 ms")
                    },
                    attributes: Default::default(),
                });
                samples.push(MetricSample {
                    timestamp: at,
                    component: component.into(),
                    metric: "latency_ms".into(),
                    value: if failing {
                        900.0 + minute as f64
                    } else {
                        12.0 + (minute % 3) as f64
                    },
                    labels: Default::default(),
                });
            }
        }
        // A record from the future is never read.
        lines.push(LogRecord {
            timestamp: now.offset_millis(3_600_000),
            component: "pay".into(),
            level: Some(Level::Error),
            message: "from the future".into(),
            attributes: Default::default(),
        });
        let runs = tempfile::tempdir().unwrap();
        let mut config = McpServerConfig::new(super::bundled());
        config.runs = Some(runs.path().to_path_buf());
        config.limits = McpLimits::default();
        config.live = Some(LiveSources {
            logs: Some(Arc::new(Logs(lines))),
            metrics: Some(Arc::new(Metrics(samples))),
            ..LiveSources::default()
        });
        let s = RcaMcp::new(config).unwrap();
        let (comps, _) =
            super::structured(&s, "list_components", json!({"incident": LIVE_INCIDENT})).await;
        assert_eq!(comps["incident"], LIVE_INCIDENT);
        assert_eq!(comps["components"].as_array().unwrap().len(), 3, "{comps}");
        assert_eq!(comps["incidents"][0], LIVE_INCIDENT);
        let (logs, text) = super::structured(
            &s,
            "get_logs",
            json!({"incident": LIVE_INCIDENT, "entity": "pay"}),
        )
        .await;
        assert!(text.contains("connection refused"), "{logs}");
        assert!(!text.contains("from the future"), "{text}");
        // No `start`: the query is cut to the live window, which the source accepts.
        let (_, text) = super::structured(
            &s,
            "get_metrics",
            json!({"incident": LIVE_INCIDENT, "entity": "pay"}),
        )
        .await;
        assert!(text.contains("ANOMALY latency_ms"), "{text}");
        let (templates, _) =
            super::structured(&s, "log_templates", json!({"incident": LIVE_INCIDENT})).await;
        assert!(
            templates["lines"].as_u64().unwrap() >= 3 * 49,
            "{templates}"
        );
        assert!(!templates.to_string().contains("from the future"));
        let (diagnosis, markdown) =
            super::structured(&s, "diagnose", json!({"incident": LIVE_INCIDENT})).await;
        assert!(markdown.starts_with('#'), "{markdown}");
        assert_eq!(diagnosis["incident"], LIVE_INCIDENT);
        let top = diagnosis["report"]["candidates"][0]["component"].clone();
        assert_eq!(top, "pay", "{diagnosis}");
        // The bundled incident is still served beside the live sources.
        let (bundled, _) = super::structured(&s, "list_components", json!({})).await;
        assert_eq!(bundled["incident"], "trainticket-cpu");
    }
}
