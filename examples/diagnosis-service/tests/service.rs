//! The service over real HTTP on 127.0.0.1 (ephemeral port).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use example_diagnosis_service::load::{LoadPlan, run_load, synthetic_sources};
use example_diagnosis_service::{Service, ServiceConfig, Sources};
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
    // Long-term memory in files (off by default there), so every test exercises it.
    config.memory = Some(true);
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
    let task = tokio::spawn(service.serve(listener, async move {
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
        r#"{{"version":"{version}","groupKey":"{{}}:{{alertname=\"HighLatency\", fp=\"{fingerprint}\"}}","truncatedAlerts":0,
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

/// A hand-written group in Alertmanager's shape: two firing alerts are one report; the group
/// notified again with a third alert joining is the same report; its resolution is recorded
/// once, redacted, and shown with the report; a resolution of an unknown group is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_report_per_alert_group_and_its_resolution() {
    let server = start(2, 8, None, None).await;
    let alert = |status: &str, path: &str, starts: &str, ends: &str| {
        format!(
            r#"{{"status":"{status}","labels":{{"alertname":"HighLatency","service":"web","path":"{path}",
                "url":"http://admin:s3cr3tpw@grafana.internal/d/1"}},"annotations":{{"summary":"slow"}},
                "startsAt":"{starts}","endsAt":"{ends}","fingerprint":"fp{path}"}}"#
        )
    };
    let group = |status: &str, key: &str, alerts: Vec<String>| {
        format!(
            r#"{{"version":"4","groupKey":"{{}}:{{service=\"{key}\"}}","status":"{status}","receiver":"rca",
                "groupLabels":{{"service":"{key}"}},"commonLabels":{{}},"commonAnnotations":{{}},
                "alerts":[{}]}}"#,
            alerts.join(",")
        )
    };
    let zero = "0001-01-01T00:00:00Z";
    let later = "2024-05-01T10:16:00Z";
    let first = group(
        "firing",
        "web",
        vec![
            alert("firing", "a", START, zero),
            alert("firing", "b", START, zero),
        ],
    );
    let response = post(&server.base, first).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["accepted"].as_array().unwrap().len(), 1, "{body}");
    let id = body["accepted"][0].as_str().unwrap().to_string();
    let report = &body["reports"][0];
    assert_eq!(
        report["alert"]["fingerprints"],
        serde_json::json!(["fpa", "fpb"])
    );
    assert_eq!(report["alert"]["component"], "web");
    let description = report["incident"]["description"].as_str().unwrap();
    assert!(
        description.contains("2 alerts in the group"),
        "{description}"
    );
    assert!(!report.to_string().contains("s3cr3tpw"));

    // Notified again, with one more alert: the same report.
    let again = group(
        "firing",
        "web",
        vec![
            alert("firing", "a", START, zero),
            alert("firing", "b", START, zero),
            alert("firing", "c", later, zero),
        ],
    );
    let again: serde_json::Value = post_to(&format!("{}/alerts", server.base), again)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["accepted"], serde_json::json!([]));
    assert_eq!(again["duplicates"], serde_json::json!([id]));

    // Resolved: recorded once, shown with the report, redacted on disk.
    let resolved = group(
        "resolved",
        "web",
        vec![
            alert("resolved", "a", START, later),
            alert("resolved", "b", START, "2024-05-01T10:17:00Z"),
            alert("resolved", "c", later, later),
        ],
    );
    let url = format!("{}/alerts", server.base);
    let answer: serde_json::Value = post_to(&url, resolved.clone()).await.json().await.unwrap();
    assert_eq!(answer["resolved"], serde_json::json!([id]), "{answer}");
    let answer: serde_json::Value = post_to(&url, resolved).await.json().await.unwrap();
    assert_eq!(answer["resolved"], serde_json::json!([]));
    assert_eq!(answer["duplicates"], serde_json::json!([id]));
    let fetched = get_json(format!("{}/reports/{id}", server.base)).await;
    assert_eq!(fetched["resolution"]["ends_at"], "2024-05-01T10:17:00Z");
    assert_eq!(fetched["resolution"]["alerts"].as_array().unwrap().len(), 3);
    let on_disk =
        std::fs::read_to_string(server.store.path().join(format!("resolved/{id}.json"))).unwrap();
    assert!(!on_disk.contains("s3cr3tpw"), "{on_disk}");
    let listed = get_json(format!("{}/reports", server.base)).await;
    assert_eq!(listed["reports"], serde_json::json!([id]));

    // A group the service never saw firing: nothing is recorded.
    let unknown = group("resolved", "db", vec![alert("resolved", "a", START, later)]);
    let answer: serde_json::Value = post_to(&url, unknown).await.json().await.unwrap();
    assert_eq!(answer["resolved"], serde_json::json!([]));
    assert_eq!(answer["skipped"][0]["reason"], "resolved");
}

/// The alert that started a group resolves while another fires on: the group's notifications
/// (first with it resolved, then without it) keep the report, and the group's resolution is
/// recorded on it. The group firing again afterwards is a new episode, with a new report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_keeps_its_report_when_its_first_alert_resolves_first() {
    let server = start(2, 8, None, None).await;
    let alert = |status: &str, path: &str, starts: &str, ends: &str| {
        format!(
            r#"{{"status":"{status}","labels":{{"alertname":"HighLatency","service":"web","path":"{path}"}},
                "annotations":{{}},"startsAt":"{starts}","endsAt":"{ends}","fingerprint":"fp{path}"}}"#
        )
    };
    let group = |status: &str, alerts: Vec<String>| {
        format!(
            r#"{{"version":"4","groupKey":"{{}}:{{service=\"web\"}}","status":"{status}","receiver":"rca",
                "groupLabels":{{"service":"web"}},"commonLabels":{{}},"commonAnnotations":{{}},
                "alerts":[{}]}}"#,
            alerts.join(",")
        )
    };
    let (zero, second, gone) = (
        "0001-01-01T00:00:00Z",
        "2024-05-01T10:16:00Z",
        "2024-05-01T10:18:00Z",
    );
    let url = format!("{}/alerts", server.base);
    let send = |body: String| {
        let url = url.clone();
        async move {
            let r = post_to(&url, body).await;
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let first = send(group(
        "firing",
        vec![
            alert("firing", "a", START, zero),
            alert("firing", "b", second, zero),
        ],
    ))
    .await;
    let id = first["accepted"][0].as_str().unwrap().to_string();
    // a resolves, b fires on: the notification carries a as resolved, the next one not at all.
    let a_resolved = send(group(
        "firing",
        vec![
            alert("resolved", "a", START, second),
            alert("firing", "b", second, zero),
        ],
    ))
    .await;
    assert_eq!(
        a_resolved["accepted"],
        serde_json::json!([]),
        "{a_resolved}"
    );
    assert_eq!(a_resolved["duplicates"], serde_json::json!([id]));
    let b_only = send(group("firing", vec![alert("firing", "b", second, zero)])).await;
    assert_eq!(b_only["accepted"], serde_json::json!([]), "{b_only}");
    assert_eq!(b_only["duplicates"], serde_json::json!([id]));
    let done = send(group(
        "resolved",
        vec![alert("resolved", "b", second, gone)],
    ))
    .await;
    assert_eq!(done["resolved"], serde_json::json!([id]), "{done}");
    // The diagnosis may still be running: the report is read once it is stored (bounded).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let fetched = loop {
        let fetched = get_json(format!("{}/reports/{id}", server.base)).await;
        if fetched["status"] != "pending" || tokio::time::Instant::now() > deadline {
            break fetched;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(fetched["resolution"]["ends_at"], gone, "{fetched}");
    // Firing again later: a new episode.
    let again = send(group("firing", vec![alert("firing", "a", gone, zero)])).await;
    let new_id = again["accepted"][0].as_str().unwrap_or_default();
    assert!(!new_id.is_empty() && new_id != id, "{again}");
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

/// The past incidents a report's diagnosis recalled from long-term memory (its `recall`
/// step), or none.
fn recalled(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["trajectory"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"]["name"] == "recall")
        .map(|s| s["action"]["args"].as_array().unwrap().clone())
        .unwrap_or_default()
}

/// Without `[postgres]`, long-term memory lives in `store_dir/memory/`: a second group with
/// the alert of the first recalls the first's incident; everything kept is redacted; a store
/// file that cannot be read costs later diagnoses their memory, not their reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_term_memory_in_files_recalls_past_incidents() {
    let mut server = start(2, 8, None, None).await;
    let first: serde_json::Value = post(&server.base, payload("4", 1))
        .await
        .json()
        .await
        .unwrap();
    let first = &first["reports"][0];
    assert!(recalled(first).is_empty(), "nothing to recall yet");
    let second: serde_json::Value = post(&server.base, payload_with("4", 1, "another"))
        .await
        .json()
        .await
        .unwrap();
    let second = &second["reports"][0];
    assert_ne!(second["id"], first["id"]);
    let past = recalled(second);
    assert_eq!(past[0]["incident"], first["id"], "{past:?}");
    assert_eq!(past[0]["root_cause"], "db");

    let dir = server.store.path().join("memory");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(files.contains(&"incidents.json".to_string()), "{files:?}");
    let explorer = files
        .iter()
        .find(|f| f.starts_with("explorer-"))
        .unwrap_or_else(|| panic!("no explorer store: {files:?}"))
        .clone();
    for f in &files {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(!text.contains("s3cr3tpw"), "{f} is not redacted");
    }
    // Listing reports ignores the memory folder.
    let listed: serde_json::Value = get_json(format!("{}/reports", server.base)).await;
    assert_eq!(listed["reports"].as_array().unwrap().len(), 2, "{listed}");

    // A broken explorer store: the next start diagnoses without memory.
    server.task.abort();
    server
        .service
        .take()
        .unwrap()
        .stop(Duration::from_secs(5))
        .await;
    std::fs::write(dir.join(&explorer), "[").unwrap();
    let again = start(2, 8, None, Some(Arc::clone(&server.store))).await;
    let third: serde_json::Value = post(&again.base, payload_with("4", 1, "third"))
        .await
        .json()
        .await
        .unwrap();
    let third = &third["reports"][0];
    assert_eq!(
        third["report"]["candidates"][0]["component"], "db",
        "{third}"
    );
    assert!(recalled(third).is_empty());
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
            !rca_core::testing::require_all(),
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
    tokio::spawn(service.serve(listener, std::future::pending()));
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

/// The whole path on real servers (`bash scripts/services.sh start`): values pushed to the
/// Pushgateway, scraped by Prometheus, whose rule fires; Alertmanager groups the alerts per
/// (alertname, instance) and posts each group to the service listening on the webhook's port;
/// the service diagnoses over Prometheus and stores one redacted report per group; the values
/// pushed back to 0 resolve the alerts, and the resolutions are recorded.
#[cfg(feature = "prometheus")]
mod alertmanager {
    use super::*;
    use example_diagnosis_service::DataConfig;

    /// What `scripts/services.sh start` writes to `.services/env` for this test.
    struct Env {
        prometheus: String,
        pushgateway: String,
        webhook: String,
        metric: String,
        alertname: String,
        /// The TLS material and Alertmanager's secrets (`.services/tls`).
        tls: std::path::PathBuf,
    }

    /// The environment, or `None` (the test skips) when it is not set and `RCA_REQUIRE_ALL`
    /// is not either.
    fn env() -> Option<Env> {
        let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let names = [
            "RCA_PROMETHEUS_URL",
            "RCA_PUSHGATEWAY_URL",
            "RCA_ALERT_WEBHOOK_URL",
            "RCA_ALERT_TEST_METRIC",
            "RCA_ALERT_TEST_ALERTNAME",
            "RCA_ALERT_TLS_DIR",
        ];
        let missing: Vec<&str> = names.iter().copied().filter(|n| get(n).is_none()).collect();
        if !missing.is_empty() {
            assert!(
                !rca_core::testing::require_all(),
                "{} not set: run `bash scripts/services.sh start; source .services/env` \
                 (RCA_REQUIRE_ALL is set)",
                missing.join(", ")
            );
            eprintln!(
                "skipping: {} not set (run `bash scripts/services.sh start; source .services/env`)",
                missing.join(", ")
            );
            return None;
        }
        let value = |n: &str| get(n).unwrap_or_default();
        Some(Env {
            prometheus: value("RCA_PROMETHEUS_URL"),
            pushgateway: value("RCA_PUSHGATEWAY_URL"),
            webhook: value("RCA_ALERT_WEBHOOK_URL"),
            metric: value("RCA_ALERT_TEST_METRIC"),
            alertname: value("RCA_ALERT_TEST_ALERTNAME"),
            tls: value("RCA_ALERT_TLS_DIR").into(),
        })
    }

    /// Replaces the Pushgateway group of `instance` (job `rca-e2e`) with two series of
    /// `metric` at `value`; one carries a secret in a label, which reaches the alert. With
    /// `basic`, both carry `rca_auth="basic"`: Alertmanager posts their group with basic auth.
    async fn push(client: &reqwest::Client, env: &Env, instance: &str, value: f64, basic: bool) {
        let auth = if basic { ",rca_auth=\"basic\"" } else { "" };
        let body = format!(
            "{m}{{path=\"/checkout\",url=\"http://admin:s3cr3tpw@grafana.internal/d/1\"{auth}}} {value}\n\
             {m}{{path=\"/search\"{auth}}} {value}\n",
            m = env.metric
        );
        let url = format!(
            "{}/metrics/job/rca-e2e/instance/{instance}",
            env.pushgateway
        );
        let response = client.put(&url).body(body).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "PUT {url}: {}",
            response.status()
        );
    }

    /// The stored reports, by the instance their group is about.
    async fn reports_by_instance(
        client: &reqwest::Client,
        base: &str,
    ) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
        let mut out: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
            Default::default();
        let listed: serde_json::Value = client
            .get(format!("{base}/reports"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for id in listed["reports"].as_array().cloned().unwrap_or_default() {
            let id = id.as_str().unwrap_or_default();
            let response = client
                .get(format!("{base}/reports/{id}"))
                .send()
                .await
                .unwrap();
            if response.status() != 200 {
                continue;
            }
            let report: serde_json::Value = response.json().await.unwrap();
            let instance = report["alert"]["component"].as_str().unwrap_or_default();
            out.entry(instance.to_string()).or_default().push(report);
        }
        out
    }

    /// Every file under `dir`, read as text.
    fn all_files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(all_files(&path));
            } else {
                out.push((
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                ));
            }
        }
        out
    }

    /// Polls `check` every 250 ms until it returns `Some`, for at most `limit`.
    async fn wait_until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(found) = check().await {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn alertmanager_groups_reach_the_service_and_resolve() {
        let Some(env) = env() else { return };
        let webhook = reqwest::Url::parse(&env.webhook).unwrap();
        assert_eq!(
            webhook.path(),
            "/alerts",
            "the webhook must be the service's alert path"
        );
        let addr = format!(
            "{}:{}",
            webhook.host_str().unwrap(),
            webhook.port_or_known_default().unwrap()
        );
        let store = tempfile::tempdir().unwrap();
        let mut config = ServiceConfig::new(store.path());
        // Alertmanager's two receivers (bearer token, basic auth), both over TLS with a client
        // certificate, and the test as a reader; the secret files hold hashes only.
        let secrets = tempfile::tempdir().unwrap();
        let hashed = |name: &str, secret_file: &str| {
            let secret = std::fs::read_to_string(env.tls.join(secret_file)).unwrap();
            let path = secrets.path().join(name);
            std::fs::write(&path, rca_listen::hash_secret(secret.trim())).unwrap();
            path
        };
        let reader_token = "reader-of-the-e2e-test";
        let reader_file = secrets.path().join("reader");
        std::fs::write(&reader_file, rca_listen::hash_secret(reader_token)).unwrap();
        config.listener.tls = Some(rca_listen::TlsConfig {
            cert_file: env.tls.join("server.pem"),
            key_file: env.tls.join("server-key.pem"),
            client_ca_file: Some(env.tls.join("ca.pem")),
        });
        config.listener.clients = vec![
            rca_listen::ClientConfig {
                name: "alertmanager".into(),
                routes: vec!["alerts".into()],
                bearer_token_file: Some(hashed("am-token.sha256", "am-token")),
                username: None,
                password_file: None,
            },
            rca_listen::ClientConfig {
                name: "alertmanager-basic".into(),
                routes: vec!["alerts".into()],
                bearer_token_file: None,
                username: Some("alertmanager-basic".into()),
                password_file: Some(hashed("am-password.sha256", "am-password")),
            },
            rca_listen::ClientConfig {
                name: "reader".into(),
                routes: vec!["reports".into(), "operations".into()],
                bearer_token_file: Some(reader_file),
                username: None,
                password_file: None,
            },
        ];
        config.component_label = "instance".into();
        config.scope_labels = vec!["job".into()];
        config.min_modalities = 1;
        config.lookback_minutes = 2;
        config.current_minutes = 1;
        config.data = DataConfig {
            prometheus_url: Some(env.prometheus.clone()),
            prometheus_step_seconds: Some(1),
            ..DataConfig::default()
        };
        config.validate().unwrap();
        let sources = Sources::open(&config.data, &config.component_label).unwrap();
        let service = Service::start(&config, sources).await.unwrap();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .unwrap_or_else(|e| panic!("cannot listen on the webhook's address {addr}: {e}"));
        let base = format!("https://{addr}");
        let server = tokio::spawn(service.serve(listener, std::future::pending()));
        let mut identity = std::fs::read(env.tls.join("client.pem")).unwrap();
        identity.extend(std::fs::read(env.tls.join("client-key.pem")).unwrap());
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {reader_token}").parse().unwrap(),
        );
        let reader = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(env.tls.join("ca.pem")).unwrap())
                    .unwrap(),
            )
            .identity(reqwest::Identity::from_pem(&identity).unwrap())
            .default_headers(headers)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();

        // Two groups (one per instance), each of two alerts (one per path); unique per run.
        let run = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        );
        let instances = [format!("e2e-{run}-a"), format!("e2e-{run}-b")];
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        // Healthy first, so that the incident window (which ends where the alert starts) holds
        // samples of the series: the rule would fire on the first scrape of a bad value.
        // The second instance's group goes through the basic-auth receiver.
        for (i, instance) in instances.iter().enumerate() {
            push(&client, &env, instance, 0.0, i == 1).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        for (i, instance) in instances.iter().enumerate() {
            push(&client, &env, instance, 0.9, i == 1).await;
        }

        // Prometheus fires, Alertmanager groups and posts, the service diagnoses.
        let reports = wait_until(Duration::from_secs(60), "a report per group", || {
            let (client, base, instances) = (&reader, &base, &instances);
            async move {
                let by = reports_by_instance(client, base).await;
                instances.iter().all(|i| by.contains_key(i)).then_some(by)
            }
        })
        .await;
        for instance in &instances {
            let report = &reports[instance][0];
            assert_eq!(report["alert"]["name"], env.alertname.as_str());
            let key = report["alert"]["group_key"].as_str().unwrap();
            assert!(key.contains(instance.as_str()), "{key}");
            // Both paths' alerts are in the group.
            assert_eq!(
                report["alert"]["fingerprints"].as_array().unwrap().len(),
                2,
                "{report}"
            );
            // The metrics explorer read the (job-scoped) samples from Prometheus.
            let trajectory = report["trajectory"].to_string();
            let read: usize = trajectory
                .split("metrics analyzer over ")
                .skip(1)
                .filter_map(|rest| rest.split(' ').next().and_then(|n| n.parse::<usize>().ok()))
                .max()
                .unwrap_or(0);
            assert!(read > 0, "no metric samples read: {trajectory}");
        }

        // Back to 0: the alerts resolve and each group's resolution is recorded.
        for (i, instance) in instances.iter().enumerate() {
            push(&client, &env, instance, 0.0, i == 1).await;
        }
        let resolved = wait_until(Duration::from_secs(60), "the resolutions", || {
            let (client, base, instances) = (&reader, &base, &instances);
            async move {
                let by = reports_by_instance(client, base).await;
                instances
                    .iter()
                    .all(|i| {
                        by.get(i)
                            .is_some_and(|r| r.iter().all(|r| r["resolution"].is_object()))
                    })
                    .then_some(by)
            }
        })
        .await;
        for instance in &instances {
            // Exactly one report per group, through firing, any repeat and the resolution.
            assert_eq!(
                resolved[instance].len(),
                1,
                "{instance}: {:?}",
                resolved[instance]
            );
            let resolution = &resolved[instance][0]["resolution"];
            assert_eq!(
                resolution["alerts"].as_array().unwrap().len(),
                2,
                "{resolution}"
            );
            assert!(!resolution["ends_at"].as_str().unwrap().starts_with("0001"));
        }
        // Alertmanager authenticated every post (both receivers); an unauthenticated post
        // is refused and counted.
        let anonymous = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(env.tls.join("ca.pem")).unwrap())
                    .unwrap(),
            )
            .identity(reqwest::Identity::from_pem(&identity).unwrap())
            .build()
            .unwrap();
        let refused = anonymous
            .post(format!("{base}/alerts"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
        let stats: serde_json::Value = reader
            .get(format!("{base}/listener/stats"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(stats["unauthenticated"], 1, "{stats}");
        assert_eq!(stats["forbidden"], 0, "{stats}");
        // Nothing stored (reports, resolutions, the inbox) holds the secret.
        for (path, text) in all_files(store.path()) {
            assert!(
                !text.contains("s3cr3tpw"),
                "{} is not redacted",
                path.display()
            );
        }
        for instance in &instances {
            let url = format!(
                "{}/metrics/job/rca-e2e/instance/{instance}",
                env.pushgateway
            );
            let _ = client.delete(url).send().await;
        }
        server.abort();
        service.stop(Duration::from_secs(10)).await;
    }
}

/// OpenTelemetry into the service: the shop of `rca-cli/tests/otel/shop.py`, instrumented with
/// the real OpenTelemetry Python SDK (installed from PyPI by scripts/fetch-otel.sh), exports to
/// the service's own address; an alert on the shop's front end is then diagnosed over what was
/// received, and names the broken service.
#[cfg(feature = "postgres")]
#[path = "service/workers.rs"]
mod workers;

#[cfg(feature = "postgres")]
#[path = "service/pg_retention.rs"]
mod pg_retention;

#[cfg(feature = "postgres")]
#[path = "service/pg_tls.rs"]
mod pg_tls;

#[path = "service/telemetry.rs"]
mod telemetry;

#[path = "service/binary.rs"]
mod binary;

#[path = "service/hostile.rs"]
mod hostile;

#[path = "service/security.rs"]
mod security;

#[path = "service/recovery.rs"]
mod recovery;

#[cfg(feature = "otlp")]
mod otlp {
    use super::*;
    use std::path::PathBuf;

    fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The SDK's PYTHONPATH; `None` (skip) when it cannot be installed and `RCA_REQUIRE_ALL`
    /// is unset.
    fn otel_python() -> Option<String> {
        let out = std::process::Command::new("bash")
            .arg(repo_root().join("scripts/fetch-otel.sh"))
            .output()
            .expect("bash runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().find_map(|l| l.strip_prefix("PYTHONPATH=")) {
            Some(p) if out.status.success() => Some(p.to_string()),
            _ => {
                let why = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !rca_core::testing::require_all(),
                    "the OpenTelemetry SDK could not be installed (RCA_REQUIRE_ALL is set): {why}"
                );
                eprintln!("skipping: the OpenTelemetry SDK could not be installed: {why}");
                None
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn otlp_exports_feed_the_diagnosis_of_an_alert() {
        let Some(python_path) = otel_python() else {
            return;
        };
        let store = Arc::new(tempfile::tempdir().unwrap());
        let mut config = ServiceConfig::new(store.path());
        config.data.otlp = true;
        config.validate().unwrap();
        let sources = Sources::open(&config.data, &config.component_label).unwrap();
        let service = Service::start(&config, sources).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(service.serve(listener, async move {
            let _ = stopped.await;
        }));

        let shop_base = base.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("python3")
                .env("PYTHONPATH", python_path)
                .arg(repo_root().join("rca-cli/tests/otel/shop.py"))
                .args([shop_base.as_str(), "stock", "slow", "300"])
                .output()
                .expect("python3 runs")
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let made: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let stats = get_json(format!("{base}/otlp/stats")).await;
        assert_eq!(stats["spans"], made["spans"], "{stats} {made}");
        assert_eq!(stats["logs"], made["logs"], "{stats} {made}");

        // The alert fires now, on the front end: its latency rose.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let starts_at = Timestamp::from_nanos(i64::try_from(now.as_nanos()).unwrap()).to_string();
        let payload = serde_json::json!({
            "version": "4",
            "groupKey": "{}:{alertname=\"FrontendSlow\"}",
            "status": "firing",
            "receiver": "rca",
            "groupLabels": {"alertname": "FrontendSlow"},
            "commonLabels": {"alertname": "FrontendSlow", "service": "frontend"},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "truncatedAlerts": 0,
            "alerts": [{
                "status": "firing",
                "labels": {"alertname": "FrontendSlow", "service": "frontend"},
                "annotations": {"summary": "p99 latency of the front end above 500 ms"},
                "startsAt": starts_at,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": "0f0e0d0c0b0a0908"
            }]
        });
        let response = post(&base, payload.to_string()).await;
        assert_eq!(response.status(), 200);
        let body: serde_json::Value = response.json().await.unwrap();
        let report = &body["reports"][0];
        assert_eq!(
            report["report"]["candidates"][0]["component"],
            "stock",
            "{}",
            serde_json::to_string_pretty(&report["report"]["candidates"]).unwrap()
        );
        let modalities: std::collections::BTreeSet<&str> = report["report"]["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["modality"].as_str())
            .collect();
        assert!(modalities.contains("traces"), "{modalities:?}");

        let _ = stop.send(());
        task.await.unwrap().unwrap();
        service.stop(Duration::from_secs(5)).await;
    }
}

/// A notification that reports more alert groups than the whole inbox holds is refused in
/// full with 413 and an exact answer (not let in because the inbox happens to be empty), and
/// the inbox is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_larger_than_the_inbox_is_refused_whole() {
    let mut server = start(1, 2, None, None).await;
    let url = format!("{}/alerts", server.base);
    let alerts: Vec<String> = (0..300)
        .map(|i| {
            format!(
                r#"{{"status":"firing","labels":{{"alertname":"A{i}","service":"web"}},"annotations":{{}},"startsAt":"{START}","fingerprint":"{i}"}}"#
            )
        })
        .collect();
    let body = format!(
        r#"{{"version":"4","status":"firing","receiver":"rca","alerts":[{}]}}"#,
        alerts.join(",")
    );
    let refused = post_to(&url, body).await;
    assert_eq!(refused.status(), 413);
    let json: serde_json::Value = refused.json().await.unwrap();
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("300 alert groups") && message.contains("at most 2"),
        "{message}"
    );
    // Nothing of it was accepted: the inbox still takes a notification of its size.
    let ok = post_to(&url, payload("4", 1)).await;
    assert_eq!(ok.status(), 202);
    server.stop.take().unwrap().send(()).unwrap();
    server
        .service
        .take()
        .unwrap()
        .stop(Duration::from_secs(10))
        .await;
}
