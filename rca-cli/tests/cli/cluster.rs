//! A Ballista cluster on loopback: a scheduler and two executors as separate `rca cluster`
//! processes, millions of generated log lines in Parquet, and template mining and frequency
//! shift equal to the local run; `rca export parquet` from the bundled incident.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{export, rca, repo_root};

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(args: &[String], log: &Path) -> Process {
    let out = std::fs::File::create(log).unwrap();
    let child = rca()
        .args(args)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Process(child)
}

fn wait_for(addr: SocketAddr, what: &str, log: &Path) {
    let t0 = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what} does not listen on {addr}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn query(dir: &Path, window_start: i64, cluster: Option<&str>) -> serde_json::Value {
    let mut cmd: Command = rca();
    cmd.args(["cluster", "query"]).arg(dir);
    cmd.args(["--window-start", &window_start.to_string()]);
    if let Some(url) = cluster {
        cmd.args(["--cluster", url]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A scheduler and two executors, stopped when dropped.
struct Cluster {
    url: String,
    _processes: Vec<Process>,
}

fn start_cluster(dir: &Path) -> Cluster {
    let scheduler: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let sched_log = dir.join("scheduler.log");
    let mut processes = vec![start(
        &[
            "cluster".into(),
            "scheduler".into(),
            "--bind".into(),
            scheduler.to_string(),
        ],
        &sched_log,
    )];
    wait_for(scheduler, "the scheduler", &sched_log);
    for n in 0..2 {
        let bind: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = dir.join(format!("executor-{n}.log"));
        processes.push(start(
            &[
                "cluster".into(),
                "executor".into(),
                "--bind".into(),
                bind.to_string(),
                "--grpc-port".into(),
                free_port().to_string(),
                "--scheduler".into(),
                scheduler.to_string(),
                "--work-dir".into(),
                dir.join(format!("work-{n}")).display().to_string(),
            ],
            &log,
        ));
        wait_for(bind, "an executor", &log);
    }
    // Executors register with the scheduler on start; let both be known before a query.
    std::thread::sleep(Duration::from_secs(2));
    Cluster {
        url: format!("df://{scheduler}"),
        _processes: processes,
    }
}

#[test]
fn a_two_executor_cluster_mines_millions_of_lines_exactly_as_the_local_run() {
    const LINES: u64 = 3_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = rca()
        .args(["cluster", "synth"])
        .arg(&data)
        .args(["--lines", &LINES.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let set: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(set["lines"], LINES);
    let window_start = set["window_start_ms"].as_i64().unwrap();
    let cluster = start_cluster(tmp.path());

    let local = query(&data, window_start, None);
    let remote = query(&data, window_start, Some(&cluster.url));
    assert_eq!(local["lines"], LINES);
    assert_eq!(remote["lines"], LINES);
    assert_eq!(local["templates"], remote["templates"]);
    assert_eq!(local["shift"], remote["shift"]);

    // Every line is in exactly one template of its component.
    let templates = local["templates"].as_array().unwrap();
    let counted: i64 = templates.iter().map(|r| r[2].as_i64().unwrap()).sum();
    assert_eq!(counted as u64, LINES);
    // The degraded component's new failure shapes lead the shift.
    let shift = local["shift"].as_array().unwrap();
    let top: Vec<String> = shift
        .iter()
        .take(3)
        .map(|r| format!("{} {}", r[0].as_str().unwrap(), r[1].as_str().unwrap()))
        .collect();
    for row in &top {
        assert!(row.starts_with("svc-03 "), "{top:?}");
    }
    assert!(
        top.iter().any(|r| r.contains("circuit breaker open")),
        "{top:?}"
    );

    // Both executors ran tasks: each wrote shuffle files into its own work directory.
    for n in 0..2 {
        let work = tmp.path().join(format!("work-{n}"));
        let files = walk(&work);
        assert!(
            files > 0,
            "executor {n} wrote nothing in {}",
            work.display()
        );
    }
}

/// The generated SQL tools (the deterministic policy's templates) over the bundled incident's
/// export return the same rows on the cluster as locally.
#[test]
fn generated_sql_tools_return_the_same_rows_on_the_cluster() {
    use rca_core::source::Value;
    use rca_core::time::{TimeRange, Timestamp};
    use rca_tools::lifecycle::{SqlWriter, Template, TemplatePolicy};
    use rca_tools::tables::{SandboxLimits, TelemetryTables, cluster};

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    export(
        &repo_root().join("examples/incidents/trainticket-cpu"),
        &out,
    );
    let cluster = start_cluster(tmp.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let local = TelemetryTables::new(SandboxLimits::default()).unwrap();
        let remote = cluster::connect(&cluster.url, SandboxLimits::default())
            .await
            .unwrap();
        for tables in [&local, &remote] {
            for signal in ["logs", "metrics", "spans"] {
                tables
                    .register_parquet_dir(signal, &out.join(signal))
                    .await
                    .unwrap();
            }
        }
        let span = local
            .query(
                "SELECT min(timestamp) AS a, max(timestamp) AS b FROM logs",
                &[],
            )
            .await
            .unwrap();
        let (Some(Value::Int(a)), Some(Value::Int(b))) = (span.value(0, "a"), span.value(0, "b"))
        else {
            panic!("{}", span.render(2));
        };
        // The last quarter is the window.
        let window = TimeRange {
            start: Timestamp(b - (b - a) / 4),
            end: Timestamp(b + 1),
        };
        let schemas = local.schemas().await.unwrap();
        let description: String = Template::ALL
            .iter()
            .flat_map(|t| t.keywords().iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let contracts = TemplatePolicy.candidates(&description, &schemas);
        assert!(contracts.len() >= 3, "{contracts:?}");
        for contract in contracts {
            let sql = TemplatePolicy
                .write_sql(&contract, &schemas, &[])
                .await
                .unwrap();
            let args = contract
                .bind(&serde_json::Value::Null, Some(window))
                .unwrap();
            let here = local.query(&sql, &args).await.unwrap();
            let there = remote.query(&sql, &args).await.unwrap();
            assert!(!here.is_empty(), "{} returned nothing", contract.name);
            assert_eq!(here, there, "{}", contract.name);
        }
    });
}

fn walk(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() { walk(&p) } else { 1 }
        })
        .sum()
}

#[test]
fn export_parquet_writes_the_bundled_incident_and_refuses_a_foreign_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let incident = repo_root().join("examples/incidents/trainticket-cpu");
    let run = rca()
        .args(["export", "parquet"])
        .arg(&out)
        .arg("--incident")
        .arg(&incident)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("log lines"), "{text}");
    for signal in ["logs", "metrics", "spans"] {
        assert!(walk(&out.join(signal)) > 0, "no {signal} in {text}");
    }
    // The export reads back: as many log lines as the incident's sources load.
    let q = rca()
        .args(["cluster", "query"])
        .arg(&out)
        .args(["--window-start", "0"])
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let v: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap();
    assert!(v["lines"].as_i64().unwrap() > 0);
    assert!(
        text.contains(&format!("{} log lines", v["lines"])),
        "{text} / {v}"
    );

    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("keep.txt"), "mine").unwrap();
    let run = rca()
        .args(["export", "parquet"])
        .arg(&foreign)
        .arg("--incident")
        .arg(&incident)
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("keep.txt"));
    assert_eq!(
        std::fs::read_to_string(foreign.join("keep.txt")).unwrap(),
        "mine"
    );
}
