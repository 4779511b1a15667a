//! The service over real HTTP on 127.0.0.1 (ephemeral port).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use example_diagnosis_service::load::{LoadPlan, run_load, synthetic_sources};
use example_diagnosis_service::{Service, ServiceConfig, Sources, serve};
use rca_core::source::{LogQuery, LogRecord, LogSource, RecordStream};
use rca_core::{SourceError, Timestamp};
use tokio::sync::{Notify, Semaphore, oneshot};

const START: &str = "2024-05-01T10:15:00Z";

fn t(min_before: i64) -> Timestamp {
    Timestamp::parse_rfc3339(START)
        .unwrap()
        .offset_millis(-min_before * 60_000)
}

/// The load module's synthetic telemetry (db goes bad in the last eight minutes before START).
fn telemetry() -> Sources {
    synthetic_sources(t(0))
}

/// A log source the test holds back: each query announces itself and waits for a permit.
struct GatedLogs {
    inner: Arc<dyn LogSource>,
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

/// The synthetic logs behind a gate: each query announces itself on the `Notify` and waits
/// for a permit of the `Semaphore` (none at first).
fn gated_logs() -> (Arc<dyn LogSource>, Arc<Notify>, Arc<Semaphore>) {
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let logs = GatedLogs {
        inner: telemetry().logs.unwrap(),
        entered: entered.clone(),
        gate: gate.clone(),
    };
    (Arc::new(logs), entered, gate)
}

/// `GET url` as JSON.
async fn get_json(url: String) -> serde_json::Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

struct Server {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    service: Option<Service>,
    store: Arc<tempfile::TempDir>,
}

fn config(store: &tempfile::TempDir, max_concurrent: usize, max_queued: usize) -> ServiceConfig {
    let mut config = ServiceConfig::new(store.path());
    config.max_concurrent = max_concurrent;
    config.max_queued = max_queued;
    config.max_body_bytes = 64 * 1024;
    config.retry_after_seconds = 7;
    config
}

/// The service over the synthetic telemetry (its logs replaced by `logs` when given), storing
/// in `store` (a new folder when `None`).
async fn start(
    max_concurrent: usize,
    max_queued: usize,
    logs: Option<Arc<dyn LogSource>>,
    store: Option<Arc<tempfile::TempDir>>,
) -> Server {
    let store = store.unwrap_or_else(|| Arc::new(tempfile::tempdir().unwrap()));
    let mut sources = telemetry();
    if let Some(logs) = logs {
        sources.logs = Some(logs);
    }
    let service = Service::start(&config(&store, max_concurrent, max_queued), sources)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, service.router(), async move {
        let _ = stopped.await;
    }));
    Server {
        base,
        stop: Some(stop),
        task,
        service: Some(service),
        store,
    }
}

fn payload(version: &str, alerts: usize) -> String {
    payload_with(version, alerts, "5f2c9a01d3e4b6a7")
}

fn payload_with(version: &str, alerts: usize, fingerprint: &str) -> String {
    let alert = format!(
        r#"{{"status":"firing","labels":{{"alertname":"HighLatency","service":"web","severity":"page"}},
            "annotations":{{"summary":"p99 above 2 s","description":"dashboard http://admin:s3cr3tpw@grafana.internal/d/1"}},
            "startsAt":"{START}","endsAt":"0001-01-01T00:00:00Z",
            "generatorURL":"http://prometheus:9090/graph","fingerprint":"{fingerprint}"}}"#
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
    post_to(&format!("{base}/alerts?wait=30"), body).await
}

async fn post_to(url: &str, body: String) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnoses_stores_and_serves_reports() {
    let server = start(2, 8, None, None).await;
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
    let fetched: serde_json::Value = get_json(format!("{}/reports/{id}", server.base)).await;
    assert_eq!(&fetched, report);
    let listed: serde_json::Value = get_json(format!("{}/reports", server.base)).await;
    assert_eq!(listed["reports"][0], id);
    let missing = reqwest::get(format!("{}/reports/nope", server.base))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let on_disk = std::fs::read_to_string(server.store.path().join(format!("{id}.json"))).unwrap();
    assert!(!on_disk.contains("s3cr3tpw"));
    assert!(report["received_at_ms"].as_i64() <= report["reported_at_ms"].as_i64());

    // The same alert again is grouped with the first: no second diagnosis, the same report.
    let again = post_to(&format!("{}/alerts", server.base), payload("4", 1)).await;
    assert_eq!(again.status(), 202);
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again["accepted"], serde_json::json!([]));
    assert_eq!(again["duplicates"], serde_json::json!([id]));
    let listed: serde_json::Value = get_json(format!("{}/reports", server.base)).await;
    assert_eq!(listed["reports"], serde_json::json!([id]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payloads_get_clear_json_errors() {
    let server = start(2, 8, None, None).await;
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

/// The inbox is bounded: past it a notification with new alerts gets 429 and `Retry-After`
/// and nothing of it is accepted, while a repeat of a waiting alert is grouped; `GET` says
/// pending; shutdown lets a waiting request finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbox_is_429_and_shutdown_finishes_in_flight_requests() {
    let (logs, entered, gate) = gated_logs();
    let mut server = start(1, 2, Some(logs), None).await;
    let base = server.base.clone();
    // The first alert is being diagnosed (held at its log query), the second waits.
    let in_flight = tokio::spawn(async move { post(&base, payload("4", 1)).await });
    entered.notified().await;
    let url = format!("{}/alerts", server.base);
    let second = post_to(&url, payload_with("4", 1, "second")).await;
    assert_eq!(second.status(), 202);
    let second: serde_json::Value = second.json().await.unwrap();
    let waiting = second["accepted"][0].as_str().unwrap().to_string();
    let pending = reqwest::get(format!("{}/reports/{waiting}", server.base))
        .await
        .unwrap();
    assert_eq!(pending.status(), 202);

    // Two alerts wait or run: a third is refused, a repeat of the second is grouped.
    let refused = post_to(&url, payload_with("4", 1, "third")).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "7");
    let repeat = post_to(&url, payload_with("4", 1, "second")).await;
    assert_eq!(repeat.status(), 202);
    let repeat: serde_json::Value = repeat.json().await.unwrap();
    assert_eq!(repeat["duplicates"], serde_json::json!([waiting]));

    // Shut down while the first request still waits for its report, then let it go on.
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
    server
        .service
        .take()
        .unwrap()
        .stop(Duration::from_secs(10))
        .await;
}

/// A crash loses no accepted alert: what was accepted but not diagnosed is found in the
/// inbox by the next start and reported once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_loses_no_accepted_alert() {
    let (logs, entered, _gate) = gated_logs();
    let mut server = start(1, 8, Some(logs), None).await;
    let url = format!("{}/alerts", server.base);
    let mut accepted = Vec::new();
    for name in ["a", "b", "c"] {
        let r = post_to(&url, payload_with("4", 1, name)).await;
        assert_eq!(r.status(), 202);
        let r: serde_json::Value = r.json().await.unwrap();
        accepted.push(r["accepted"][0].as_str().unwrap().to_string());
    }
    entered.notified().await;
    // Crash mid-diagnosis: nothing is reported yet.
    server.task.abort();
    server.service.take().unwrap().crash();
    let store = Arc::clone(&server.store);
    assert!(!store.path().join(format!("{}.json", accepted[0])).exists());

    let again = start(2, 8, None, Some(Arc::clone(&store))).await;
    assert_eq!(again.service.as_ref().unwrap().recovered(), 3);
    let inbox = again.service.as_ref().unwrap().inbox().clone();
    assert!(inbox.wait_for(&accepted, Duration::from_secs(30)).await);
    let listed: serde_json::Value = get_json(format!("{}/reports", again.base)).await;
    let mut want = accepted.clone();
    want.sort();
    assert_eq!(listed["reports"], serde_json::json!(want));
    assert_eq!(
        std::fs::read_dir(store.path().join("inbox"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_file())
            .count(),
        0,
        "the inbox is empty"
    );
}

/// The load test (`diagnosis-service-load` runs the same with its figures): 500 notifications
/// in bursts, with repeats, malformed and oversized bodies and a crash mid-run. No log query
/// answers in the first two seconds (so the first burst of 50 meets an inbox of 16 that does
/// not drain: 429s are sure), and each takes 5 ms after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_every_accepted_alert_gets_exactly_one_report() {
    struct SlowLogs(Arc<dyn LogSource>, tokio::time::Instant);
    #[async_trait]
    impl LogSource for SlowLogs {
        async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
            tokio::time::sleep_until(self.1).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.0.logs(query).await
        }
        async fn components(&self) -> Result<Vec<String>, SourceError> {
            self.0.components().await
        }
    }
    let store = tempfile::tempdir().unwrap();
    let mut config = config(&store, 2, 16);
    config.retry_after_seconds = 1;
    let mut sources = telemetry();
    let opens = tokio::time::Instant::now() + Duration::from_secs(2);
    sources.logs = Some(Arc::new(SlowLogs(sources.logs.unwrap(), opens)));
    let mut plan = LoadPlan::new(t(0));
    plan.time_limit = Duration::from_secs(300);
    let f = run_load(&config, &sources, &plan).await.unwrap();
    eprintln!("{}", f.to_markdown());
    assert_eq!(f.sent, 500);
    assert_eq!(f.new_alerts + f.repeats + f.malformed + f.oversized, 500);
    assert!(f.repeats > 0 && f.malformed > 0 && f.oversized > 0, "{f:?}");
    assert_eq!(f.malformed_refused, f.malformed);
    assert_eq!(f.oversized_refused, f.oversized);
    assert_eq!((f.unexpected, f.given_up), (0, 0));
    assert_eq!(f.accepted, f.new_alerts, "{f:?}");
    assert_eq!(f.grouped, f.repeats, "{f:?}");
    assert!(f.busy > 0 && f.busy_with_retry_after == f.busy, "{f:?}");
    assert_eq!(f.restarts, 1);
    assert_eq!((f.missing, f.extra), (0, 0), "{f:?}");
    assert_eq!(f.reports_stored, f.accepted);
    assert!(f.p50_ms <= f.p99_ms);
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
    let service = Service::start(&config, sources).await.unwrap();
    tokio::spawn(serve(listener, service.router(), std::future::pending()));
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
