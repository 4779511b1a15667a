//! Several processes of the service (the `diagnosis-service` binary) sharing one PostgreSQL
//! schema (`[postgres]`, `--features postgres`): each alert group is claimed by one worker and
//! reported once; a worker killed mid-diagnosis has its group claimed again by the other
//! process once its lease runs out; the long-term memory of diagnoses is shared through the
//! table `diagnosis_memory`.
//!
//! They need `RCA_POSTGRES_URL` (`bash scripts/services.sh start`, `source .services/env`):
//! without it, or without a server answering, they skip, unless `RCA_REQUIRE_ALL` is set,
//! where they fail. Each test uses its own schema, dropped at the end.

use std::collections::{BTreeMap, BTreeSet};

use super::telemetry::write_telemetry;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use example_diagnosis_service::PostgresConfig;
use example_diagnosis_service::pg::Pg;
use example_diagnosis_service::pg_memory::PgLongTermMemory;
use rca_core::StoreError;
use rca_core::memory::{LongTermMemory, MemoryEntry};

use super::{START, payload_with, post, post_to};

/// The connection string and an open connection, or `None` (the test skips) when
/// `RCA_POSTGRES_URL` is unset or no server answers and `RCA_REQUIRE_ALL` is unset.
pub(super) async fn postgres() -> Option<(String, tokio_postgres::Client)> {
    let require = rca_core::testing::require_all();
    let Some(url) = std::env::var("RCA_POSTGRES_URL")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        assert!(
            !require,
            "RCA_POSTGRES_URL is not set: run `bash scripts/services.sh start` and source \
             .services/env (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: RCA_POSTGRES_URL is not set (run `bash scripts/services.sh start`)");
        return None;
    };
    let connecting = tokio_postgres::connect(&url, tokio_postgres::NoTls);
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            Some((url, client))
        }
        outcome => {
            let why = match outcome {
                Ok(Err(e)) => e.to_string(),
                _ => "no answer within 10 s".to_string(),
            };
            assert!(
                !require,
                "PostgreSQL at RCA_POSTGRES_URL does not answer (RCA_REQUIRE_ALL is set): {why}"
            );
            eprintln!("skipping: PostgreSQL at RCA_POSTGRES_URL does not answer: {why}");
            None
        }
    }
}

/// A schema no other test (nor run) uses.
pub(super) fn unique_schema(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("ds_{tag}_{}_{nanos}", std::process::id())
}

/// Drops the test's schema when the test ends (passed or failed).
pub(super) struct SchemaGuard {
    pub(super) url: String,
    pub(super) schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // A fresh runtime on its own thread: the test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let connecting = tokio_postgres::connect(&url, tokio_postgres::NoTls);
                if let Ok(Ok((client, connection))) =
                    tokio::time::timeout(Duration::from_secs(5), connecting).await
                {
                    tokio::spawn(connection);
                    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                    let dropping = client.batch_execute(&sql);
                    let _ = tokio::time::timeout(Duration::from_secs(10), dropping).await;
                }
            });
        })
        .join();
    }
}

/// One `diagnosis-service` process; killed (SIGKILL) when dropped.
struct Process {
    name: String,
    child: Child,
    base: String,
    log: PathBuf,
}

impl Process {
    /// Starts the binary on `schema` with `lease_seconds` and `test_delay_ms`, and waits (at
    /// most 60 s) until it listens.
    fn start(
        dir: &Path,
        name: &str,
        url: &str,
        schema: &str,
        lease_seconds: u64,
        test_delay_ms: u64,
    ) -> Process {
        let (metrics, logs) = write_telemetry(dir);
        let config = format!(
            "listen = \"127.0.0.1:0\"\n\
             max_concurrent = 2\n\
             max_queued = 64\n\
             test_delay_ms = {test_delay_ms}\n\
             [data]\n\
             metrics = [{metrics:?}]\n\
             logs = [{:?}, {:?}]\n\
             topology = [[\"web\", \"db\"]]\n\
             [postgres]\n\
             url = {url:?}\n\
             schema = {schema:?}\n\
             lease_seconds = {lease_seconds}\n\
             poll_millis = 50\n\
             worker_name = {name:?}\n",
            logs[0], logs[1]
        );
        let config_path = dir.join(format!("{name}.toml"));
        std::fs::write(&config_path, config).unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_diagnosis-service"))
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut process = Process {
            name: name.to_string(),
            child,
            base: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&process.log).unwrap_or_default();
            if let Some(rest) = text.split("listening on ").nth(1) {
                let base = rest.split_whitespace().next().unwrap_or_default();
                process.base = base.to_string();
                return process;
            }
            if let Ok(Some(status)) = process.child.try_wait() {
                panic!("{name} exited with {status}:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not listen within 60 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: the process ends at once, whatever it holds.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the process wrote to stderr, headed by its name.
    fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        format!("--- {} ---\n{text}", self.name)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One row of `diagnosis_claims`: (attempt, worker, finished, outcome).
type ClaimRow = (i32, String, bool, Option<String>);

/// The claims of every job, by job id, in attempt order.
async fn claims(db: &tokio_postgres::Client, schema: &str) -> BTreeMap<String, Vec<ClaimRow>> {
    let rows = db
        .query(
            &format!(
                "SELECT job_id, attempt, worker, finished_at IS NOT NULL, outcome
                 FROM {schema}.diagnosis_claims ORDER BY job_id, attempt"
            ),
            &[],
        )
        .await
        .unwrap();
    let mut out: BTreeMap<String, Vec<ClaimRow>> = BTreeMap::new();
    for r in rows {
        out.entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2), r.get(3), r.get(4)));
    }
    out
}

/// (state, attempts, worker) of each job.
async fn jobs(
    db: &tokio_postgres::Client,
    schema: &str,
) -> BTreeMap<String, (String, i32, Option<String>)> {
    db.query(
        &format!("SELECT id, state, attempts, worker FROM {schema}.diagnosis_jobs"),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
    .collect()
}

/// The ids of the stored reports, each as often as it is stored.
async fn report_ids(db: &tokio_postgres::Client, schema: &str) -> Vec<String> {
    db.query(
        &format!("SELECT id FROM {schema}.diagnosis_reports ORDER BY id"),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Waits (at most `limit`) until no job waits or runs.
async fn drained(db: &tokio_postgres::Client, schema: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let open = jobs(db, schema)
            .await
            .values()
            .filter(|(state, _, _)| state == "queued" || state == "running")
            .count();
        if open == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn status_and_json(url: String) -> (u16, serde_json::Value) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

/// Twenty distinct alert groups, each posted to both processes at once: one of them accepts
/// it, the other answers that it is a duplicate; every group is claimed once, by a worker of
/// either process, and has exactly one report, which both processes serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_diagnose_each_alert_group_exactly_once() {
    let Some((url, db)) = postgres().await else {
        return;
    };
    let schema = unique_schema("once");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    // Each diagnosis holds its claim 200 ms more: two workers of one process cannot take
    // all twenty before the other process's workers look.
    let a = Process::start(dir.path(), "a", &url, &schema, 5, 200);
    let b = Process::start(dir.path(), "b", &url, &schema, 5, 200);

    let mut accepted = BTreeSet::new();
    let mut group_of = BTreeMap::new();
    let mut duplicates = 0;
    for i in 0..20 {
        // Each group's alert is told apart by a word of its summary (for long-term memory).
        let body = burst_payload(i, &format!("burst{i:02}"));
        // Both processes get the group at the same moment, the first one first for even i.
        let (first, second) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (first, second) = (
            format!("{}/alerts", first.base),
            format!("{}/alerts", second.base),
        );
        let (x, y) = tokio::join!(post_to(&first, body.clone()), post_to(&second, body));
        for response in [x, y] {
            assert_eq!(response.status(), 202);
            let answer: serde_json::Value = response.json().await.unwrap();
            for id in answer["accepted"].as_array().unwrap() {
                assert!(
                    accepted.insert(id.as_str().unwrap().to_string()),
                    "{answer}"
                );
                group_of.insert(id.as_str().unwrap().to_string(), i);
            }
            duplicates += answer["duplicates"].as_array().unwrap().len();
        }
    }
    assert_eq!(accepted.len(), 20, "each group accepted by one process");
    assert_eq!(duplicates, 20, "and answered as a duplicate by the other");

    assert!(
        drained(&db, &schema, Duration::from_secs(120)).await,
        "not drained in 120 s:\n{}\n{}",
        a.log_text(),
        b.log_text()
    );
    // One report per group, no more.
    let reports = report_ids(&db, &schema).await;
    assert_eq!(reports, accepted.iter().cloned().collect::<Vec<_>>());
    // One claim per group, completed with its report; no group claimed twice.
    let jobs = jobs(&db, &schema).await;
    let claims = claims(&db, &schema).await;
    assert_eq!(claims.len(), 20);
    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for id in &accepted {
        assert_eq!(jobs[id].0, "done", "{id}: {:?}", jobs[id]);
        assert_eq!(jobs[id].1, 1, "{id} claimed once");
        let [(attempt, worker, finished, outcome)] = claims[id].as_slice() else {
            panic!("{id}: {:?}", claims[id]);
        };
        assert_eq!(*attempt, 1);
        assert!(*finished, "{id}: the claim completed");
        assert_eq!(outcome.as_deref(), Some("reported"));
        *by_worker.entry(worker.clone()).or_default() += 1;
    }
    eprintln!("claims by process: {by_worker:?}");
    assert_eq!(
        by_worker.len(),
        2,
        "both processes diagnosed: {by_worker:?}"
    );

    // Either process serves every report, the same one.
    for id in &accepted {
        let (sa, ra) = status_and_json(format!("{}/reports/{id}", a.base)).await;
        let (sb, rb) = status_and_json(format!("{}/reports/{id}", b.base)).await;
        assert_eq!((sa, sb), (200, 200), "{id}");
        assert_eq!(ra, rb);
        assert_eq!(ra["id"], id.as_str());
        assert_eq!(ra["alert"]["starts_at"], START);
        assert_eq!(ra["report"]["candidates"][0]["component"], "db", "{ra}");
        assert!(!ra.to_string().contains("s3cr3tpw"), "redacted");
    }
    let (_, listed) = status_and_json(format!("{}/reports", b.base)).await;
    assert_eq!(listed["reports"].as_array().unwrap().len(), 20);

    // A group's resolution recorded by one process is known to the other: it answers the
    // resolution again as a duplicate and shows it with the report.
    let (id, i) = group_of.iter().next().unwrap();
    let mut resolved: serde_json::Value =
        serde_json::from_str(&payload_with("4", 1, &format!("burst{i:02}"))).unwrap();
    resolved["status"] = "resolved".into();
    // Only the alert that fired: the group's report id is its `startsAt`'s.
    resolved["alerts"].as_array_mut().unwrap().truncate(1);
    for alert in resolved["alerts"].as_array_mut().unwrap() {
        alert["status"] = "resolved".into();
        alert["endsAt"] = "2024-05-01T10:45:00Z".into();
    }
    let answer: serde_json::Value = post_to(&format!("{}/alerts", b.base), resolved.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["resolved"], serde_json::json!([id]), "{answer}");
    let answer: serde_json::Value = post_to(&format!("{}/alerts", a.base), resolved.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["resolved"], serde_json::json!([]), "{answer}");
    assert_eq!(answer["duplicates"], serde_json::json!([id]), "{answer}");
    let (_, report) = status_and_json(format!("{}/reports/{id}", a.base)).await;
    assert_eq!(report["resolution"]["id"], id.as_str(), "{report}");
    assert_eq!(report["resolution"]["ends_at"], "2024-05-01T10:45:00Z");

    // Long-term memory: each diagnosed group is one past incident in the shared table,
    // remembered by the process whose worker diagnosed it, redacted.
    let remembered = memory_rows(&db, &schema, "incidents").await;
    assert_eq!(
        remembered.keys().cloned().collect::<BTreeSet<_>>(),
        accepted,
        "one past incident per group"
    );
    for (id, (writer, text)) in &remembered {
        let [(_, claimed_by, _, _)] = claims[id].as_slice() else {
            panic!("{id}: {:?}", claims[id]);
        };
        assert_eq!(
            writer, claimed_by,
            "{id} remembered by its diagnosing process"
        );
        assert!(!text.contains("s3cr3tpw"), "{text}");
    }
    let writers: BTreeSet<&String> = remembered.values().map(|(w, _)| w).collect();
    assert_eq!(writers.len(), 2, "both processes remember: {writers:?}");
    let namespaces: Vec<String> = db
        .query(
            &format!("SELECT DISTINCT namespace FROM {schema}.diagnosis_memory ORDER BY 1"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        namespaces.iter().any(|n| n.starts_with("explorer-")),
        "the explorers' past actions too: {namespaces:?}"
    );
    let leaked: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM {schema}.diagnosis_memory
                 WHERE text LIKE '%s3cr3tpw%' OR payload::text LIKE '%s3cr3tpw%'"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaked, 0, "memory entries are redacted");

    // A later alert like one `a` diagnosed (the same summary, another group), diagnosed by
    // `b` alone (`a` is stopped): `b` recalls `a`'s incident first.
    let (a_id, a_group) = group_of
        .iter()
        .find(|(id, _)| remembered[*id].0 == "a")
        .map(|(id, i)| (id.clone(), *i))
        .unwrap();
    let mut a = a;
    a.kill();
    let response = post(&b.base, burst_payload(a_group, "later")).await;
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    let later = &answer["reports"][0];
    let later_id = later["id"].as_str().unwrap();
    assert!(!accepted.contains(later_id), "a new group: {later_id}");
    let recall = later["trajectory"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"]["name"] == "recall")
        .unwrap_or_else(|| panic!("no recall step: {later}"));
    let recalled = recall["action"]["args"].as_array().unwrap();
    assert_eq!(recalled[0]["incident"], a_id.as_str(), "{recalled:?}");
    assert_eq!(recalled[0]["root_cause"], "db");
    assert!(recalled[0]["similarity"].as_f64().unwrap() > 0.99);
    if let Some(next) = recalled.get(1) {
        assert!(next["similarity"].as_f64() < recalled[0]["similarity"].as_f64());
    }
    let remembered = memory_rows(&db, &schema, "incidents").await;
    assert_eq!(remembered.len(), 21);
    assert_eq!(remembered[later_id].0, "b");
}

/// Words that tell the burst's alert groups apart (the hashing embedder masks digits).
const WORDS: [&str; 20] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
];

/// The burst's group `i` (fingerprint `fingerprint`): its summary names `WORDS[i]`.
fn burst_payload(i: usize, fingerprint: &str) -> String {
    payload_with("4", 1, fingerprint).replace(
        "p99 above 2 s",
        &format!("p99 above 2 s in zone {}", WORDS[i]),
    )
}

/// The entries of `namespace` in `diagnosis_memory`: id -> (writer, text).
async fn memory_rows(
    db: &tokio_postgres::Client,
    schema: &str,
    namespace: &str,
) -> BTreeMap<String, (String, String)> {
    db.query(
        &format!("SELECT id, writer, text FROM {schema}.diagnosis_memory WHERE namespace = $1"),
        &[&namespace],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), (r.get(1), r.get(2))))
    .collect()
}

fn entry(id: &str, vector: Vec<f32>) -> MemoryEntry {
    MemoryEntry {
        id: id.into(),
        text: format!("action {id}"),
        vector,
        payload: serde_json::json!({"id": id}),
    }
}

/// `PgLongTermMemory` answers as the library's in-memory index (the same checks as its
/// `exercise` test), keeps namespaces apart, is seen by another connection (another process),
/// and searches only the most recent entries when bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_long_term_memory_behaves_as_the_in_memory_index() {
    let Some((url, db)) = postgres().await else {
        return;
    };
    let schema = unique_schema("ltm");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let config = PostgresConfig {
        schema: Some(schema.clone()),
        worker_name: Some("tester".into()),
        ..PostgresConfig::new(url.clone())
    };
    let pg = Pg::connect(&config).await.unwrap();
    let m = PgLongTermMemory::new(Arc::clone(&pg), "explorer-logs");
    assert_eq!(m.count().await.unwrap(), 0);
    assert!(m.nearest(&[1.0, 0.0], 3).await.unwrap().is_empty());

    // The in-memory index's checks.
    m.insert(entry("a", vec![1.0, 0.0])).await.unwrap();
    m.insert(entry("b", vec![0.0, 1.0])).await.unwrap();
    m.insert(entry("c", vec![0.7, 0.7])).await.unwrap();
    m.insert(entry("a", vec![1.0, 0.1])).await.unwrap();
    assert_eq!(m.count().await.unwrap(), 3);
    let near = m.nearest(&[1.0, 0.0], 2).await.unwrap();
    assert_eq!(near[0].0.id, "a");
    assert_eq!(near[1].0.id, "c");
    assert!(near[0].1 > near[1].1);
    assert_eq!(near[0].0.vector, vec![1.0, 0.1], "replaced");
    assert_eq!(near[0].0.payload, serde_json::json!({"id": "a"}));
    assert!(matches!(
        m.insert(entry("d", vec![1.0])).await,
        Err(StoreError::DimensionMismatch {
            expected: 2,
            found: 1
        })
    ));
    // Replacing an entry with a vector of another dimension is refused as well.
    assert!(matches!(
        m.insert(entry("a", vec![1.0, 0.0, 0.0])).await,
        Err(StoreError::DimensionMismatch { .. })
    ));
    assert!(m.nearest(&[1.0, 2.0, 3.0], 1).await.is_err());
    assert_eq!(m.count().await.unwrap(), 3);

    // Ties keep insertion order; k bounds the answer.
    let ties = m.nearest(&[0.0, 0.0], 5).await.unwrap();
    assert_eq!(
        ties.iter().map(|(e, _)| e.id.as_str()).collect::<Vec<_>>(),
        vec!["a", "b", "c"]
    );
    assert!(m.nearest(&[1.0, 0.0], 0).await.unwrap().is_empty());

    // Another namespace is another store, of its own dimension.
    let other = PgLongTermMemory::new(Arc::clone(&pg), "incidents");
    assert_eq!(other.count().await.unwrap(), 0);
    other.insert(entry("x", vec![1.0, 0.0, 0.0])).await.unwrap();
    assert_eq!(other.nearest(&[1.0, 0.0, 0.0], 5).await.unwrap().len(), 1);
    assert_eq!(m.count().await.unwrap(), 3);

    // Another process's connection sees the same entries.
    let second = Pg::connect(&PostgresConfig {
        worker_name: Some("second".into()),
        ..config.clone()
    })
    .await
    .unwrap();
    let seen = PgLongTermMemory::new(Arc::clone(&second), "explorer-logs");
    assert_eq!(seen.count().await.unwrap(), 3);
    assert_eq!(seen.nearest(&[0.0, 1.0], 1).await.unwrap()[0].0.id, "b");
    seen.insert(entry("e", vec![0.0, 1.0])).await.unwrap();
    let writers: BTreeMap<String, String> = db
        .query(
            &format!(
                "SELECT id, writer FROM {schema}.diagnosis_memory WHERE namespace = 'explorer-logs'"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(writers["a"], "tester");
    assert_eq!(writers["e"], "second");

    // Bounded: a search reads the two most recent entries only (c and e; `a` replaced keeps
    // its first place).
    let bounded = PgLongTermMemory::new(Arc::clone(&pg), "explorer-logs").with_search_limit(2);
    let near = bounded.nearest(&[1.0, 0.0], 5).await.unwrap();
    assert_eq!(
        near.iter().map(|(e, _)| e.id.as_str()).collect::<Vec<_>>(),
        vec!["c", "e"]
    );
    assert_eq!(bounded.count().await.unwrap(), 4, "count is not bounded");

    // A broken store is an error, not a panic: the table gone.
    db.batch_execute(&format!("DROP TABLE {schema}.diagnosis_memory"))
        .await
        .unwrap();
    assert!(matches!(
        m.insert(entry("f", vec![1.0, 0.0])).await,
        Err(StoreError::Io { .. })
    ));
    assert!(matches!(m.count().await, Err(StoreError::Io { .. })));
}

/// Process `a` claims the one alert and is killed (SIGKILL) while it holds the claim; `b`,
/// started meanwhile, does not take the group while `a` renews its lease, and claims it once
/// the lease has run out after the kill; the group ends with exactly one report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_alert_is_claimed_again_after_its_lease() {
    let Some((url, db)) = postgres().await else {
        return;
    };
    let schema = unique_schema("kill");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    let lease = Duration::from_secs(2);
    // `a` holds every claim for ten minutes after its diagnosis: it is killed first.
    let mut a = Process::start(dir.path(), "a", &url, &schema, lease.as_secs(), 600_000);
    let response = post_to(
        &format!("{}/alerts", a.base),
        payload_with("4", 1, "killed"),
    )
    .await;
    assert_eq!(response.status(), 202);
    let answer: serde_json::Value = response.json().await.unwrap();
    let id = answer["accepted"][0].as_str().unwrap().to_string();

    // `a` claims it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = jobs(&db, &schema).await;
        if jobs
            .get(&id)
            .is_some_and(|(state, _, _)| state == "running")
        {
            assert_eq!(jobs[&id].2.as_deref(), Some("a"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a did not claim {id}:\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // `b` starts, and for more than a lease leaves the group to `a`, which renews its lease.
    let b = Process::start(dir.path(), "b", &url, &schema, lease.as_secs(), 0);
    tokio::time::sleep(lease + lease / 2).await;
    assert_eq!(jobs(&db, &schema).await[&id].1, 1, "still the first claim");
    let (status, pending) = status_and_json(format!("{}/reports/{id}", b.base)).await;
    assert_eq!(status, 202, "{pending}");
    assert_eq!(pending["status"], "pending");

    a.kill();
    let killed = Instant::now();
    assert!(
        drained(&db, &schema, Duration::from_secs(60)).await,
        "b did not finish {id}:\n{}",
        b.log_text()
    );
    let waited = killed.elapsed();
    // The lease ran out first: it was renewed (every lease / 4) until the kill.
    assert!(
        waited >= lease / 2,
        "claimed again {waited:?} after the kill, before the lease ran out"
    );

    let claims = claims(&db, &schema).await;
    assert_eq!(
        claims[&id],
        vec![
            (1, "a".to_string(), false, None),
            (2, "b".to_string(), true, Some("reported".to_string())),
        ]
    );
    assert_eq!(report_ids(&db, &schema).await, vec![id.clone()]);
    let (status, report) = status_and_json(format!("{}/reports/{id}", b.base)).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["id"], id.as_str());
    eprintln!("claimed again {waited:?} after the kill (lease {lease:?})");
}
