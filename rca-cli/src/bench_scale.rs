//! `rca bench scale`: the bundled incident replicated to more traffic, and a large synthetic
//! incident, each diagnosed in a process of its own (so its peak memory is its own), bounded
//! in memory and time by this process.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use rca_eval::scale::{ScaleRun, Telemetry, measure, replicate, scale_table, synthetic};

/// Arguments of `rca bench scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// The incident directory replicated.
    #[arg(long, default_value = "examples/incidents/trainticket-cpu")]
    incident: PathBuf,
    /// How many copies of its traffic, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,10,50,100")]
    copies: Vec<usize>,
    /// Spans of the synthetic incident (0: none).
    #[arg(long, default_value_t = 10_000_000)]
    synthetic_spans: usize,
    /// A run whose process holds more than this many MiB is stopped (and reported so).
    #[arg(long, default_value_t = 16_384)]
    max_rss_mib: u64,
    /// A run still going after this many seconds is stopped (and reported so).
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Write the table into this Markdown file's `scale` section.
    #[arg(long)]
    write_docs: Option<PathBuf>,
    /// Run one size in this process and print its measurement as JSON (`bundled:N` or
    /// `synthetic:N`); what the parent process starts.
    #[arg(long, hide = true)]
    one: Option<String>,
}

fn load(args: &ScaleArgs) -> Result<Telemetry> {
    let dir = rca_tools::sources::incident::IncidentDir::open(&args.incident)
        .with_context(|| format!("opening {}", args.incident.display()))?;
    Ok(Telemetry {
        incident: dir.incident.clone(),
        logs: dir.logs.records().to_vec(),
        spans: dir.traces.spans_all().to_vec(),
        metrics: dir.metrics.samples_all().to_vec(),
    })
}

fn run_one(args: &ScaleArgs, spec: &str) -> Result<()> {
    let (kind, n) = spec
        .split_once(':')
        .and_then(|(k, n)| Some((k, n.parse::<usize>().ok()?)))
        .with_context(|| format!("--one takes bundled:N or synthetic:N, not {spec}"))?;
    let run = match kind {
        "bundled" => {
            let t = replicate(&load(args)?, n);
            measure(&format!("bundled x{n}"), t)
        }
        "synthetic" => measure("synthetic", synthetic(n, 7)),
        _ => bail!("--one takes bundled:N or synthetic:N, not {spec}"),
    }?;
    println!("{}", serde_json::to_string(&run)?);
    Ok(())
}

/// The resident memory of process `pid`, in bytes.
fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Runs one size in a child process, stopped past the memory or time limit.
fn child(
    args: &ScaleArgs,
    spec: &str,
    label: &str,
) -> Result<std::result::Result<ScaleRun, String>> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "scale", "--one", spec, "--incident"])
        .arg(&args.incident)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut proc = cmd.spawn().context("starting a measurement process")?;
    let started = Instant::now();
    let limit = args.max_rss_mib.saturating_mul(1024 * 1024);
    let mut peak = 0u64;
    loop {
        if let Some(status) = proc.try_wait()? {
            let mut out = String::new();
            if let Some(mut s) = proc.stdout.take() {
                s.read_to_string(&mut out)?;
            }
            if !status.success() {
                return Ok(Err(format!("{label}: the run failed ({status})")));
            }
            let run: ScaleRun = serde_json::from_str(out.trim())
                .with_context(|| format!("reading the measurement of {label}"))?;
            return Ok(Ok(run));
        }
        peak = peak.max(rss_of(proc.id()).unwrap_or(0));
        if peak > limit {
            let _ = proc.kill();
            let _ = proc.wait();
            return Ok(Err(format!(
                "{label}: stopped at {} MiB resident (the limit is {} MiB)",
                peak / (1024 * 1024),
                args.max_rss_mib
            )));
        }
        if started.elapsed() > Duration::from_secs(args.timeout_secs) {
            let _ = proc.kill();
            let _ = proc.wait();
            return Ok(Err(format!(
                "{label}: stopped after {} s (the limit)",
                args.timeout_secs
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `rca bench scale`.
pub fn run(args: ScaleArgs) -> Result<()> {
    if let Some(spec) = &args.one {
        return run_one(&args, spec);
    }
    let mut specs: Vec<(String, String)> = args
        .copies
        .iter()
        .map(|n| (format!("bundled:{n}"), format!("bundled x{n}")))
        .collect();
    if args.synthetic_spans > 0 {
        specs.push((
            format!("synthetic:{}", args.synthetic_spans),
            format!("synthetic ({} spans)", args.synthetic_spans),
        ));
    }
    let mut runs = Vec::new();
    let mut stopped = Vec::new();
    for (spec, label) in &specs {
        eprintln!("scale: {label}");
        match child(&args, spec, label)? {
            Ok(run) => runs.push(run),
            Err(why) => {
                eprintln!("{why}");
                stopped.push(why);
            }
        }
    }
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let mut table = scale_table(&runs, build);
    for why in &stopped {
        table.push_str(&format!("\nNot measured: {why}.\n"));
    }
    println!("{table}");
    if let Some(path) = &args.write_docs {
        let copies: Vec<String> = args.copies.iter().map(usize::to_string).collect();
        let command = format!(
            "rca bench scale --copies {} --synthetic-spans {} --max-rss-mib {} --timeout-secs {} --write-docs {}",
            copies.join(","),
            args.synthetic_spans,
            args.max_rss_mib,
            args.timeout_secs,
            path.display()
        );
        rca_eval::docs::write_section(path, "scale", &command, &table)?;
        eprintln!("updated {}", path.display());
    }
    Ok(())
}
