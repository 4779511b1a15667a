//! `diagnosis-service-load [--incident DIR] [--sends N] [--burst N] [--seed S] [--hostile]
//! [--hostile-seconds N] [--service-bin PATH] [--write-docs FILE]`
//!
//! Runs the service's load test on loopback (see `example_diagnosis_service::load`): over the
//! telemetry of an incident directory (default: the bundled `examples/incidents/trainticket-cpu`)
//! with every alert at its detection time, or over synthetic telemetry (`--synthetic`). With
//! `--hostile`, then the hostile mix against the real `diagnosis-service` binary (see
//! `example_diagnosis_service::hostile`; the binary beside this one unless `--service-bin`
//! names another, built with `--features otlp`, over the incident directory). Prints the
//! figures; `--write-docs FILE` writes them into FILE's `service-load` section.

use std::path::PathBuf;
use std::process::ExitCode;

use example_diagnosis_service::hostile::{
    HostilePlan, PEAK_MEMORY_LIMIT_MIB, SERVICE_BINARY, locate_service_binary, preflight,
    run_hostile,
};
use example_diagnosis_service::load::{LoadPlan, run_load, synthetic_sources};
use example_diagnosis_service::{DataConfig, ServiceConfig, Sources};
use rca_core::Timestamp;
use rca_tools::incident_dir::IncidentDir;

const USAGE: &str = "usage: diagnosis-service-load [--incident DIR | --synthetic] [--sends N] \
                     [--burst N] [--seed S] [--hostile] [--hostile-seconds N] \
                     [--service-bin PATH] [--write-docs FILE]";

/// The bundled incident the runs diagnose over by default.
const DEFAULT_INCIDENT: &str = "examples/incidents/trainticket-cpu";

struct Args {
    incident: Option<PathBuf>,
    sends: usize,
    burst: usize,
    seed: u64,
    write_docs: Option<PathBuf>,
    hostile: bool,
    hostile_seconds: u64,
    service_bin: Option<PathBuf>,
    command: String,
}

/// The cargo flags this build was made with: `--release` and the enabled features.
fn cargo_flags() -> String {
    let mut flags = String::new();
    if !cfg!(debug_assertions) {
        flags.push_str(" --release");
    }
    let features: Vec<&str> = [
        ("otlp", cfg!(feature = "otlp")),
        ("postgres", cfg!(feature = "postgres")),
        ("prometheus", cfg!(feature = "prometheus")),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect();
    if !features.is_empty() {
        flags.push_str(&format!(" --features {}", features.join(",")));
    }
    flags
}

fn parse() -> Result<Args, String> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut args = Args {
        incident: Some(PathBuf::from(DEFAULT_INCIDENT)),
        sends: 500,
        burst: 50,
        seed: 7,
        write_docs: None,
        hostile: false,
        hostile_seconds: 20,
        service_bin: None,
        command: String::new(),
    };
    let mut it = raw.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        let count = |v: String| -> Result<usize, String> {
            match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{flag} takes a count of at least 1, not {v:?}")),
            }
        };
        match flag.as_str() {
            "--incident" => args.incident = Some(PathBuf::from(value()?)),
            "--synthetic" => args.incident = None,
            "--sends" => args.sends = count(value()?)?,
            "--burst" => args.burst = count(value()?)?,
            "--seed" => {
                let v = value()?;
                args.seed = v
                    .parse()
                    .map_err(|_| format!("--seed takes a number, not {v:?}"))?;
            }
            "--hostile" => args.hostile = true,
            "--hostile-seconds" => {
                let v = value()?;
                args.hostile_seconds = count(v)? as u64;
            }
            "--service-bin" => args.service_bin = Some(PathBuf::from(value()?)),
            "--write-docs" => {
                args.write_docs = Some(PathBuf::from(value()?));
                // The documented command names the file as given.
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    // The documented command: with --hostile the service binary must be built too (with the
    // same flags), since `cargo run` builds only the binary it runs.
    let flags = cargo_flags();
    let run = format!(
        "cargo run -p example-diagnosis-service{flags} --bin diagnosis-service-load -- {}",
        raw.join(" ")
    );
    let run = run.trim_end_matches([' ', '-']).to_string();
    args.command = if args.hostile && args.service_bin.is_none() {
        format!("cargo build -p example-diagnosis-service{flags} --bins && {run}")
    } else {
        run
    };
    if args.hostile && !cfg!(feature = "otlp") {
        return Err(format!(
            "--hostile posts OTLP bodies to the service: build with `--features otlp`\n{USAGE}"
        ));
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let store = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary report store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bin_dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary folder: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The hostile run's binary, found before the load run rather than after it.
    let hostile = if args.hostile {
        let Some(bin) = args.service_bin.clone().or_else(locate_service_binary) else {
            eprintln!(
                "error: no `diagnosis-service` binary beside this one: build it with \
                 `cargo build -p example-diagnosis-service{} --bins`, or name it with --service-bin",
                cargo_flags()
            );
            return ExitCode::FAILURE;
        };
        // A copy, taken now: a build of the package with other features while the load run
        // goes on (a shared target folder) would replace the binary beside this one.
        let copy = bin_dir
            .path()
            .join(format!("{SERVICE_BINARY}{}", std::env::consts::EXE_SUFFIX));
        let copied = std::fs::copy(&bin, &copy);
        if let Err(e) = copied {
            eprintln!("error: cannot copy {}: {e}", bin.display());
            return ExitCode::FAILURE;
        }
        eprintln!(
            "the hostile mix will run {} (copied from {})",
            copy.display(),
            bin.display()
        );
        let bin = copy;
        let incident = args
            .incident
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_INCIDENT));
        let mut plan = HostilePlan::new(bin, incident);
        plan.duration = std::time::Duration::from_secs(args.hostile_seconds);
        plan.time_limit = plan.duration + std::time::Duration::from_secs(300);
        if let Err(e) = preflight(&plan).await {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        Some(plan)
    } else {
        None
    };
    let mut config = ServiceConfig::new(store.path());
    config.max_queued = 64;
    config.max_body_bytes = 64 * 1024;
    config.retry_after_seconds = 1;
    let (sources, alert_time, telemetry) = match &args.incident {
        Some(dir) => {
            let detected = match IncidentDir::open(dir) {
                Ok(d) => d.incident.detected_at,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let data = DataConfig {
                incident_dir: Some(dir.clone()),
                ..DataConfig::default()
            };
            config.data = data.clone();
            match Sources::open(&data, &config.component_label) {
                Ok(s) => (s, detected, format!("the incident `{}`", dir.display())),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => {
            let at = Timestamp::from_secs(1_714_558_500);
            (synthetic_sources(at), at, "synthetic telemetry".to_string())
        }
    };
    let mut plan = LoadPlan::new(alert_time);
    plan.sends = args.sends;
    plan.burst = args.burst;
    plan.seed = args.seed;
    eprintln!(
        "sending {} notifications in bursts of {} to a service on loopback over {telemetry}",
        plan.sends, plan.burst
    );
    let figures = match run_load(&config, &sources, &plan).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut body = format!(
        "### The diagnosis service under load\n\n\
         Measures the service under load and under a hostile mix. No trivial baseline \
         applies: the goals are absolute (every accepted alert reported, nothing lost across a \
         crash; under the hostile mix no failed health probe, no hostile request answered 2xx, \
         peak memory under the limit).\n\n\
         {} notifications in bursts of {} on loopback (seed {}): {:.0}% repeat an earlier alert, \
         {:.0}% are malformed, {:.0}% exceed the body limit of {} bytes; the service (inbox of {}, \
         {} workers) is crashed and restarted after burst {}. Diagnoses run over {telemetry}. The \
         client sends again after `Retry-After` on 429/503, as Alertmanager does.\n\n{}",
        plan.sends,
        plan.burst,
        plan.seed,
        plan.duplicate_share * 100.0,
        plan.malformed_share * 100.0,
        plan.oversized_share * 100.0,
        config.max_body_bytes,
        config.max_queued,
        config.max_concurrent,
        plan.restart_after_bursts.unwrap_or(0),
        figures.to_markdown()
    );
    let broken = figures.missing + figures.extra + figures.unexpected + figures.given_up;
    let mut problems = Vec::new();
    if let Some(plan) = &hostile {
        eprintln!(
            "running the hostile mix for {} s against {}",
            plan.duration.as_secs(),
            plan.service_bin.display()
        );
        let figures = match run_hostile(plan).await {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        let listener = rca_listen::ListenerConfig::default();
        body.push_str(&format!(
            "\n### The diagnosis service under a hostile mix\n\n\
             The `diagnosis-service` binary (a child process, so that its peak memory is its own), \
             over the incident `{}` with `data.otlp` on, two clients with bearer tokens and the \
             listener's defaults (header deadline {} s, {} connections in all and {} per client \
             address, {} requests/s and a burst of {} per client address), `max_body_bytes` {}. \
             For {} s at once, on loopback, each kind from its own address: {} posts without \
             credentials and {} with a wrong token ({} senders each, 127.0.0.3); {} slow clients \
             sending half a request line and stalling (127.0.0.1); {} OTLP amplification bodies, \
             {} at once (127.0.0.4); {} alert lists with more groups than the inbox holds \
             (127.0.0.5). Meanwhile `GET /healthz` is probed every {} ms from 127.0.0.2 ({} s \
             timeout). Then one real alert is posted and waited for. Must hold: peak memory under \
             {:.0} MiB, no failed health probe, no hostile request answered 2xx.\n\n{}",
            plan.incident_dir.display(),
            listener.header_timeout_seconds,
            listener.max_connections,
            listener.max_connections_per_client,
            listener.requests_per_second_per_client,
            listener.burst_per_client,
            plan.max_body_bytes,
            plan.duration.as_secs(),
            plan.unauthenticated_posts,
            plan.wrong_token_posts,
            plan.flood_workers,
            plan.slow_clients,
            plan.amplification_posts,
            plan.amplification_workers,
            plan.oversized_posts,
            plan.health_every.as_millis(),
            plan.health_timeout.as_secs(),
            PEAK_MEMORY_LIMIT_MIB,
            figures.to_markdown()
        ));
        problems = figures.problems();
    }
    println!("{body}");
    if let Some(path) = &args.write_docs {
        if let Err(e) = rca_eval::docs::write_section(path, "service-load", &args.command, &body) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("wrote section service-load of {}", path.display());
    }
    if broken > 0 {
        eprintln!("error: {broken} alerts were lost, refused or reported without being accepted");
        return ExitCode::FAILURE;
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("error: hostile mix: {p}");
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
