//! `rca cluster`: a Ballista scheduler and executors that know the workspace's functions,
//! template mining and frequency shift over Parquet telemetry (locally or on the cluster), a
//! generated data set, and the local-against-cluster benchmark.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::{Args, Subcommand};
use rca_core::seeded::SeededRng;
use rca_core::source::{LogRecord, Value};
use rca_core::time::Timestamp;
use rca_tools::tables::cluster::{ExecutorOptions, connect, run_executor, run_scheduler};
use rca_tools::tables::export::ParquetExport;
use rca_tools::tables::templates::{frequency_shift_sql, templates_sql};
use rca_tools::tables::{QueryResult, SandboxLimits, TelemetryTables};
use serde::Serialize;

/// `rca cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Run a Ballista scheduler (until stopped).
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor (until stopped).
    Executor(ExecutorArgs),
    /// Mine templates and the frequency shift over DIR/logs (Parquet, as `rca export parquet`
    /// writes it), locally or on a cluster; prints the result as JSON.
    Query(QueryArgs),
    /// Write a generated log data set (seeded) as Parquet into DIR/logs.
    Synth(SynthArgs),
    /// Lines per second and loopback bytes of the same query locally, on one executor and on
    /// two (processes started and stopped by the benchmark).
    Bench(BenchArgs),
}

/// Arguments of `rca cluster scheduler`.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub bind: SocketAddr,
}

/// Arguments of `rca cluster executor`.
#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// The address of its Arrow Flight service (data).
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub bind: SocketAddr,
    /// The port of its gRPC service (tasks).
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// The scheduler's address.
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub scheduler: SocketAddr,
    /// Tasks run at once.
    #[arg(long, default_value_t = 1)]
    pub tasks: usize,
    /// Where shuffle files go (nothing is written elsewhere).
    #[arg(long)]
    pub work_dir: PathBuf,
}

/// Arguments of `rca cluster query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The export directory (its `logs/` is read).
    pub dir: PathBuf,
    /// The cluster's scheduler (`df://host:port`); local when absent.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Where the window starts (epoch ms); lines before it are the baseline.
    #[arg(long, required_unless_present = "sql")]
    pub window_start: Option<i64>,
    /// Run this read-only query over the table `logs` instead, and print its rows.
    #[arg(long)]
    pub sql: Option<String>,
    /// Length of a mining chunk, in seconds (a chunk must lie within one Parquet file).
    #[arg(long, default_value_t = 300)]
    pub chunk_seconds: i64,
    /// Longest each query may run, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout_seconds: u64,
}

/// Arguments of `rca cluster synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The destination (empty or missing).
    pub dir: PathBuf,
    /// Log lines to write.
    #[arg(long, default_value_t = 3_000_000)]
    pub lines: u64,
    /// The seed of every choice.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// Arguments of `rca cluster bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A working directory (empty or missing): the data set and the executors' files.
    #[arg(long)]
    pub work: PathBuf,
    /// Log lines in the generated data set.
    #[arg(long, default_value_t = 3_000_000)]
    pub lines: u64,
    /// First of the loopback ports the cluster uses (five consecutive ports).
    #[arg(long, default_value_t = 50150)]
    pub port: u16,
    /// Also write the table into this Markdown file's `cluster` section (repeatable).
    #[arg(long)]
    pub write_docs: Vec<PathBuf>,
}

/// Runs `rca cluster`.
pub async fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Scheduler(args) => Ok(run_scheduler(args.bind).await?),
        ClusterCommand::Executor(args) => Ok(run_executor(ExecutorOptions {
            bind: args.bind,
            grpc_port: args.grpc_port,
            scheduler: args.scheduler,
            concurrent_tasks: args.tasks,
            work_dir: args.work_dir,
        })
        .await?),
        ClusterCommand::Query(args) if args.sql.is_some() => {
            let tables = open(&args).await?;
            let sql = args.sql.as_deref().unwrap_or_default();
            let result = tables.query(sql, &[]).await?;
            println!("{}", serde_json::to_string_pretty(&result)?);
            Ok(())
        }
        ClusterCommand::Query(args) => {
            let out = query(&args).await?;
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        ClusterCommand::Synth(args) => {
            let set = synth(&args.dir, args.lines, args.seed)?;
            println!("{}", serde_json::to_string_pretty(&set)?);
            Ok(())
        }
        ClusterCommand::Bench(args) => bench(args).await,
    }
}

/// What `rca cluster query` prints.
#[derive(Debug, Serialize)]
pub struct QueryOutput {
    /// Lines in the table.
    pub lines: i64,
    /// (component, template, lines), by component, then most lines first.
    pub templates: Vec<Vec<Value>>,
    /// (component, template, baseline, window, shift), most shifted first.
    pub shift: Vec<Vec<Value>>,
    /// Wall seconds of the templates and the shift query together.
    pub seconds: f64,
}

/// The export's logs as table `logs`, locally or on the cluster.
async fn open(args: &QueryArgs) -> anyhow::Result<TelemetryTables> {
    let limits = SandboxLimits {
        max_rows: 1_000_000,
        timeout: Duration::from_secs(args.timeout_seconds),
        ..SandboxLimits::default()
    };
    let tables = match &args.cluster {
        Some(url) => connect(url, limits).await?,
        None => TelemetryTables::new(limits)?,
    };
    tables
        .register_parquet_dir("logs", &args.dir.join("logs"))
        .await?;
    Ok(tables)
}

async fn query(args: &QueryArgs) -> anyhow::Result<QueryOutput> {
    let Some(window_start) = args.window_start else {
        bail!("--window-start is required");
    };
    let tables = open(args).await?;
    let count = tables.query("SELECT count(*) AS n FROM logs", &[]).await?;
    let lines = match count.value(0, "n") {
        Some(Value::Int(n)) => *n,
        _ => bail!("cannot count the lines of {}", args.dir.display()),
    };
    let chunk_ms = args.chunk_seconds.saturating_mul(1000);
    let t0 = Instant::now();
    let templates = tables.query(&templates_sql("logs", chunk_ms), &[]).await?;
    let shift = tables
        .query(&frequency_shift_sql("logs", window_start, chunk_ms), &[])
        .await?;
    Ok(QueryOutput {
        lines,
        templates: rows(templates),
        shift: rows(shift),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

fn rows(result: QueryResult) -> Vec<Vec<Value>> {
    result.rows
}

/// The generated data set's shape.
#[derive(Debug, Clone, Serialize)]
pub struct SynthSet {
    /// Lines written.
    pub lines: u64,
    /// First line's time (epoch ms).
    pub start_ms: i64,
    /// Where the window (the last eighth, when one component degrades) starts.
    pub window_start_ms: i64,
    /// Parquet files written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Message shapes of the generated services; `#` is replaced by a generated value.
const SHAPES: [&str; 16] = [
    "request # served in # ms",
    "GET /api/v1/items/# returned 200 in # ms",
    "POST /api/v1/orders/# returned 201 in # ms",
    "cache hit for key user:# after # lookups",
    "cache miss for key session:#",
    "opened connection # to 10.0.#.# port #",
    "closed connection # after # requests",
    "worker # picked job # from queue #",
    "job # finished in # ms with status ok",
    "flushed # records to segment # in # ms",
    "heartbeat from node-# lag # ms",
    "user # logged in from 192.168.#.#",
    "rotated log file # size # bytes",
    "scheduled retry # for task # in # s",
    "config reloaded version # by admin #",
    "gc pause # ms heap # MB",
];

/// Shapes only the degraded component writes in the window.
const FAULT_SHAPES: [&str; 3] = [
    "upstream # reset connection after # ms",
    "timeout waiting for lock # on table # after # ms",
    "circuit breaker open for dependency # failures #",
];

fn fill(shape: &str, rng: &mut SeededRng) -> String {
    let mut out = String::with_capacity(shape.len() + 16);
    for (i, part) in shape.split('#').enumerate() {
        if i > 0 {
            out.push_str(&rng.below(5000).to_string());
        }
        out.push_str(part);
    }
    out
}

/// Writes `lines` generated lines over eight hours, half-hour Parquet files, twelve
/// components; in the last hour one component writes three new failure shapes and its
/// retries quadruple.
pub fn synth(dir: &Path, lines: u64, seed: u64) -> anyhow::Result<SynthSet> {
    const HOURS: i64 = 8;
    const PARTITION_MS: i64 = 1_800_000;
    let start_ms = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    let span_ms = HOURS * 3_600_000;
    let window_start_ms = start_ms + span_ms - 3_600_000;
    let mut export = ParquetExport::create(dir, PARTITION_MS)?;
    let mut rng = SeededRng::new(seed);
    let partitions = span_ms / PARTITION_MS;
    let per_partition = lines / partitions as u64;
    let mut written = 0u64;
    for p in 0..partitions {
        let count = if p == partitions - 1 {
            lines - written
        } else {
            per_partition
        };
        let base = start_ms + p * PARTITION_MS;
        let step = PARTITION_MS as f64 / count.max(1) as f64;
        let mut batch = Vec::with_capacity(count as usize);
        for i in 0..count {
            let t = base + (i as f64 * step) as i64;
            let component = rng.below(12);
            let degraded = component == 3 && t >= window_start_ms;
            // Zipf-like: lower shapes are more frequent.
            let a = rng.below(SHAPES.len());
            let b = rng.below(a + 1);
            let mut shape = SHAPES.get(b).copied().unwrap_or(SHAPES[0]);
            if degraded && rng.below(4) == 0 {
                let k = rng.below(FAULT_SHAPES.len());
                shape = FAULT_SHAPES.get(k).copied().unwrap_or(FAULT_SHAPES[0]);
            } else if degraded && rng.below(4) == 0 {
                shape = SHAPES[13];
            }
            batch.push(LogRecord {
                timestamp: Timestamp(t),
                component: format!("svc-{component:02}").into(),
                level: None,
                message: fill(shape, &mut rng),
                attributes: Default::default(),
            });
        }
        written += count;
        export.write_logs(&batch)?;
    }
    let summary = export.finish();
    Ok(SynthSet {
        lines: written,
        start_ms,
        window_start_ms,
        files: summary.files.len(),
        bytes: summary.bytes,
    })
}

/// Bytes received on the loopback interface so far (Linux `/proc/net/dev`).
fn loopback_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("lo:"))?;
    line.split_once(':')?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[String], log: &Path) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?;
    let out = std::fs::File::create(log)?;
    let err = out.try_clone()?;
    let child = std::process::Command::new(exe)
        .args(args)
        .stdout(out)
        .stderr(err)
        .spawn()?;
    Ok(Child(child))
}

/// Waits until `addr` accepts connections (at most `limit`).
async fn wait_for_port(addr: SocketAddr, limit: Duration) -> anyhow::Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("nothing listens on {addr} after {} s", limit.as_secs())
}

/// Bytes of the files under `dir` (0 when it does not exist).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// One measured run of the benchmark.
#[derive(Debug, Serialize)]
struct BenchRun {
    setup: String,
    seconds: f64,
    lines_per_second: f64,
    loopback_bytes: Option<u64>,
    shuffle_bytes: Option<u64>,
    same_result: bool,
}

async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let work = &args.work;
    if work.exists() && std::fs::read_dir(work)?.next().is_some() {
        bail!(
            "{} is not empty; the benchmark needs its own directory",
            work.display()
        );
    }
    let data = work.join("data");
    let set = synth(&data, args.lines, 7)?;
    let query_args = |cluster: Option<String>| QueryArgs {
        dir: data.clone(),
        cluster,
        window_start: Some(set.window_start_ms),
        sql: None,
        chunk_seconds: 300,
        timeout_seconds: 3600,
    };
    let mut runs = Vec::new();
    let before = loopback_bytes();
    let local = query(&query_args(None)).await?;
    let lo = loopback_bytes()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(b));
    runs.push(BenchRun {
        setup: "local (one process)".into(),
        seconds: local.seconds,
        lines_per_second: local.lines as f64 / local.seconds.max(1e-9),
        loopback_bytes: lo,
        shuffle_bytes: None,
        same_result: true,
    });
    let port = |k: u16| args.port.saturating_add(k);
    let scheduler: SocketAddr = format!("127.0.0.1:{}", port(0)).parse()?;
    let _sched = spawn(
        &[
            "cluster".into(),
            "scheduler".into(),
            "--bind".into(),
            scheduler.to_string(),
        ],
        &work.join("scheduler.log"),
    )?;
    wait_for_port(scheduler, Duration::from_secs(30)).await?;
    let mut executors = Vec::new();
    for n in 1..=2u16 {
        let bind: SocketAddr = format!("127.0.0.1:{}", port(2 * n - 1)).parse()?;
        let executor_args = vec![
            "cluster".into(),
            "executor".into(),
            "--bind".into(),
            bind.to_string(),
            "--grpc-port".into(),
            port(2 * n).to_string(),
            "--scheduler".into(),
            scheduler.to_string(),
            "--work-dir".into(),
            work.join(format!("executor-{n}")).display().to_string(),
        ];
        executors.push(spawn(
            &executor_args,
            &work.join(format!("executor-{n}.log")),
        )?);
        wait_for_port(bind, Duration::from_secs(30)).await?;
        // The executor registers with its first heartbeat; give it a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let shuffled = || dir_bytes(&work.join("executor-1")) + dir_bytes(&work.join("executor-2"));
        let shuffle_before = shuffled();
        let before = loopback_bytes();
        let remote = query(&query_args(Some(format!("df://{scheduler}")))).await?;
        let lo = loopback_bytes()
            .zip(before)
            .map(|(a, b)| a.saturating_sub(b));
        let shuffle = shuffled().saturating_sub(shuffle_before);
        runs.push(BenchRun {
            setup: format!("Ballista, {n} executor{}", if n == 1 { "" } else { "s" }),
            seconds: remote.seconds,
            lines_per_second: remote.lines as f64 / remote.seconds.max(1e-9),
            loopback_bytes: lo,
            shuffle_bytes: Some(shuffle),
            same_result: remote.templates == local.templates && remote.shift == local.shift,
        });
    }
    drop(executors);
    let profile = if cfg!(debug_assertions) {
        "a debug build (dependencies optimised, workspace crates not)"
    } else {
        "a release build"
    };
    let mut table = format!(
        "{} generated log lines ({} Parquet files, {} bytes); the templates query and the \
         frequency-shift query, each reading every line; {profile}, {} cores.\n\n\
         | setup | seconds | lines/s | loopback bytes | shuffle bytes | same result as local |\n\
         |---|---:|---:|---:|---:|---|\n",
        set.lines,
        set.files,
        set.bytes,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let bytes = |b: Option<u64>| b.map_or_else(|| "-".to_string(), |b| b.to_string());
    for r in &runs {
        // Both queries read every line once.
        table.push_str(&format!(
            "| {} | {:.2} | {:.0} | {} | {} | {} |\n",
            r.setup,
            r.seconds,
            2.0 * r.lines_per_second,
            bytes(r.loopback_bytes),
            bytes(r.shuffle_bytes),
            if r.same_result { "yes" } else { "NO" }
        ));
    }
    table.push_str(
        "\nMeasures the distributed queries against the same queries in one process on the \
         same machine. Baseline: the `local (one process)` row. \
         Loopback bytes: what the loopback interface received during the run, from every \
         process on the machine (task control, shuffle, results, and anything else running). \
         Shuffle bytes: the files the executors wrote between stages, which is what the other \
         stages fetch: partial aggregates, so templates and counts, never lines. Each executor \
         runs one task at a time, so one executor has one core's worth of tasks and two have \
         as many as the local run's partitions.\n",
    );
    print!("{table}");
    let mut command = format!(
        "rca cluster bench --work DIR --lines {} --port {}",
        args.lines, args.port
    );
    for path in &args.write_docs {
        command.push_str(&format!(" --write-docs {}", path.display()));
    }
    for path in &args.write_docs {
        rca_eval::docs::write_section(path, "cluster", &command, &table)?;
    }
    if runs.iter().any(|r| !r.same_result) {
        bail!("a cluster run differs from the local run");
    }
    Ok(())
}
