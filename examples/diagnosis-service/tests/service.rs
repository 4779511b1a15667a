//! The service over real HTTP on 127.0.0.1 (ephemeral port).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use example_diagnosis_service::{ServiceConfig, Sources, app, serve};
use rca_core::source::{LogQuery, LogRecord, LogSource, MetricSample, RecordStream};
use rca_core::{SourceError, Timestamp};
use rca_tools::sources::{FileLogSource, FileMetricSource};
use tokio::sync::{Notify, Semaphore, oneshot};

const START: &str = "2024-05-01T10:15:00Z";

fn t(min_before: i64) -> Timestamp {
    Timestamp::parse_rfc3339(START)
        .unwrap()
        .offset_millis(-min_before * 60_000)
}

/// Metrics for web and db over the hour before the alert: db's latency and CPU jump in the
/// last ten minutes; logs: db starts failing in the same minutes.
fn telemetry() -> (FileMetricSource, FileLogSource) {
    let mut samples = Vec::new();
    let mut logs = Vec::new();
    for m in (1..=60).rev() {
        let hot = m <= 8;
        for (component, metric, calm, bad) in [
            ("db", "cpu_usage", 0.30, 0.95),
            ("db", "latency_p90", 20.0, 900.0),
            ("web", "cpu_usage", 0.40, 0.41),
        ] {
            let wobble = ((m * 7) % 5) as f64 * 0.01 * calm;
            samples.push(MetricSample {
                timestamp: t(m),
                component: component.into(),
                metric: metric.into(),
                value: if hot && component == "db" {
                    bad
                } else {
                    calm + wobble
                },
                labels: Default::default(),
            });
        }
        logs.push(LogRecord {
            timestamp: t(m),
            component: "web".into(),
            level: Some(rca_core::source::Level::Info),
            message: format!("GET /checkout 200 in {} ms", 20 + m % 3),
            attributes: Default::default(),
        });
        if hot {
            for _ in 0..5 {
                logs.push(LogRecord {
                    timestamp: t(m),
                    component: "db".into(),
                    level: Some(rca_core::source::Level::Error),
                    message: "connection pool exhausted, waited 5000 ms".into(),
                    attributes: Default::default(),
                });
            }
        }
    }
    (
        FileMetricSource::from_samples(samples, None),
        FileLogSource::from_records(logs, None),
    )
}

/// A log source the test holds back: each query announces itself and waits for a permit.
struct GatedLogs {
    inner: FileLogSource,
    entered: Arc<Notify>,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl LogSource for GatedLogs {
    async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
        self.entered.notify_one();
        self.gate.acquire().await.unwrap().forget();
        self.inner.logs(query).await
    }
    async fn components(&self) -> Result<Vec<String>, SourceError> {
        self.inner.components().await
    }
}

struct Server {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _store: tempfile::TempDir,
}

async fn start(max_concurrent: usize, logs: Option<Arc<dyn LogSource>>) -> Server {
    let store = tempfile::tempdir().unwrap();
    let mut config = ServiceConfig::new(store.path());
    config.max_concurrent = max_concurrent;
    config.max_body_bytes = 64 * 1024;
    config.retry_after_seconds = 7;
    let (metrics, file_logs) = telemetry();
    let sources = Sources {
        metrics: Some(Arc::new(metrics)),
        logs: Some(logs.unwrap_or_else(|| Arc::new(file_logs))),
        topology: vec![("web".into(), "db".into())],
        ..Sources::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, app(&config, sources), async move {
        let _ = stopped.await;
    }));
    Server {
        base,
        stop: Some(stop),
        task,
        _store: store,
    }
}

fn payload(version: &str, alerts: usize) -> String {
    let alert = format!(
        r#"{{"status":"firing","labels":{{"alertname":"HighLatency","service":"web","severity":"page"}},
            "annotations":{{"summary":"p99 above 2 s","description":"dashboard http://admin:s3cr3tpw@grafana.internal/d/1"}},
            "startsAt":"{START}","endsAt":"0001-01-01T00:00:00Z",
            "generatorURL":"http://prometheus:9090/graph","fingerprint":"5f2c9a01d3e4b6a7"}}"#
    );
    let resolved = r#"{"status":"resolved","labels":{"alertname":"DiskFull","service":"db"},"annotations":{},
        "startsAt":"2024-05-01T09:00:00Z","endsAt":"2024-05-01T09:05:00Z","fingerprint":"77"}"#;
    let mut list: Vec<String> = (0..alerts).map(|_| alert.clone()).collect();
    if alerts > 0 {
        list.push(resolved.to_string());
    }
    format!(
        r#"{{"version":"{version}","groupKey":"{{}}:{{alertname=\"HighLatency\"}}","truncatedAlerts":0,
            "status":"firing","receiver":"rca","groupLabels":{{"alertname":"HighLatency"}},
            "commonLabels":{{"alertname":"HighLatency"}},"commonAnnotations":{{}},
            "externalURL":"http://alertmanager:9093","alerts":[{}]}}"#,
        list.join(",")
    )
}

async fn post(base: &str, body: String) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/alerts"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnoses_stores_and_serves_reports() {
    let server = start(2, None).await;
    let response = post(&server.base, payload("4", 1)).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    let reports = body["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{body}");
    assert_eq!(body["skipped"][0]["reason"], "resolved");
    let report = &reports[0];
    // The incident window: the lookback (60 min) before startsAt.
    assert_eq!(
        report["incident"]["detected_at"].as_i64(),
        Some(t(0).millis())
    );
    assert_eq!(report["alert"]["component"], "web");
    // The telemetry points at db, not at the alerting web.
    let top = report["report"]["candidates"][0]["component"].as_str();
    assert_eq!(top, Some("db"), "{report}");
    assert!(!report["report"]["evidence"].as_array().unwrap().is_empty());
    // Redacted before it was returned and stored.
    let text = report.to_string();
    assert!(!text.contains("s3cr3tpw"), "{text}");

    let id = report["id"].as_str().unwrap();
    let fetched: serde_json::Value = reqwest::get(format!("{}/reports/{id}", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(&fetched, report);
    let listed: serde_json::Value = reqwest::get(format!("{}/reports", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["reports"][0], id);
    let missing = reqwest::get(format!("{}/reports/nope", server.base))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let on_disk = std::fs::read_to_string(server._store.path().join(format!("{id}.json"))).unwrap();
    assert!(!on_disk.contains("s3cr3tpw"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payloads_get_clear_json_errors() {
    let server = start(2, None).await;
    for (body, status, needle) in [
        (
            "{\"version\": \"4\", ".to_string(),
            400,
            "not an Alertmanager",
        ),
        (payload("3", 1), 422, "version"),
        (payload("4", 0), 422, "no alerts"),
        (payload("4", 1).replace(START, "yesterday"), 422, "startsAt"),
        ("x".repeat(100 * 1024), 413, ""),
    ] {
        let response = post(&server.base, body).await;
        assert_eq!(response.status(), status);
        let json: serde_json::Value = response.json().await.unwrap();
        assert_eq!(json["error"]["status"], status);
        let message = json["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturation_is_503_and_shutdown_finishes_in_flight_requests() {
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let logs = GatedLogs {
        inner: telemetry().1,
        entered: entered.clone(),
        gate: gate.clone(),
    };
    let mut server = start(1, Some(Arc::new(logs))).await;
    let base = server.base.clone();
    let in_flight = tokio::spawn(async move { post(&base, payload("4", 1)).await });
    entered.notified().await;

    // The one permit is taken: the next request is refused at once.
    let refused = post(&server.base, payload("4", 1)).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "7");

    // Shut down while the first request is still diagnosing, then let it go on.
    server.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !server.task.is_finished(),
        "shutdown must wait for the in-flight request"
    );
    gate.add_permits(100);
    let response = tokio::time::timeout(Duration::from_secs(30), in_flight)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["reports"].as_array().unwrap().len(), 1);
    tokio::time::timeout(Duration::from_secs(10), server.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The listener is closed.
    assert!(
        reqwest::Client::new()
            .get(format!("{}/healthz", server.base))
            .send()
            .await
            .is_err()
    );
}

/// Against the real Prometheus that `scripts/services.sh start` backfills (svc-a's latency
/// jumps in the last ten minutes of a two-hour fixture). Needs `--features prometheus`.
#[cfg(feature = "prometheus")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnoses_over_a_real_prometheus() {
    use example_diagnosis_service::DataConfig;
    let vars = (
        std::env::var("RCA_PROMETHEUS_URL"),
        std::env::var("RCA_PROMETHEUS_FIXTURE_START"),
    );
    let (Ok(url), Ok(start)) = vars else {
        assert!(
            std::env::var_os("RCA_REQUIRE_ALL").is_none(),
            "RCA_PROMETHEUS_URL is not set: run `bash scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: RCA_PROMETHEUS_URL is not set (run `bash scripts/services.sh start`)");
        return;
    };
    let start = Timestamp::from_secs(start.parse().unwrap());
    let store = tempfile::tempdir().unwrap();
    let mut config = ServiceConfig::new(store.path());
    config.component_label = "instance".into();
    config.min_modalities = 1;
    config.data = DataConfig {
        prometheus_url: Some(url),
        ..DataConfig::default()
    };
    config.validate().unwrap();
    let sources = Sources::open(&config.data, &config.component_label).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(
        listener,
        app(&config, sources),
        std::future::pending(),
    ));
    let starts_at = start.offset_millis(120 * 60_000).to_string();
    let body = format!(
        r#"{{"version":"4","status":"firing","alerts":[{{"status":"firing",
            "labels":{{"alertname":"SlowRequests","instance":"svc-a"}},"annotations":{{}},
            "startsAt":"{starts_at}","fingerprint":"prom"}}]}}"#
    );
    let response = post(&base, body).await;
    assert_eq!(response.status(), 200);
    let json: serde_json::Value = response.json().await.unwrap();
    let report = &json["reports"][0]["report"];
    assert_eq!(report["candidates"][0]["component"], "svc-a", "{json}");
}
