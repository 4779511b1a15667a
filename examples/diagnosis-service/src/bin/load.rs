//! `diagnosis-service-load [--incident DIR] [--sends N] [--burst N] [--seed S] [--write-docs FILE]`
//!
//! Runs the service's load test on loopback (see `example_diagnosis_service::load`): over the
//! telemetry of an incident directory (default: the bundled `examples/incidents/trainticket-cpu`)
//! with every alert at its detection time, or over synthetic telemetry (`--synthetic`). Prints
//! the figures; `--write-docs FILE` writes them into FILE's `service-load` section.

use std::path::PathBuf;
use std::process::ExitCode;

use example_diagnosis_service::load::{LoadPlan, run_load, synthetic_sources};
use example_diagnosis_service::{DataConfig, ServiceConfig, Sources};
use rca_core::Timestamp;
use rca_tools::incident_dir::IncidentDir;

const USAGE: &str = "usage: diagnosis-service-load [--incident DIR | --synthetic] [--sends N] \
                     [--burst N] [--seed S] [--write-docs FILE]";

struct Args {
    incident: Option<PathBuf>,
    sends: usize,
    burst: usize,
    seed: u64,
    write_docs: Option<PathBuf>,
    command: String,
}

fn parse() -> Result<Args, String> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut args = Args {
        incident: Some(PathBuf::from("examples/incidents/trainticket-cpu")),
        sends: 500,
        burst: 50,
        seed: 7,
        write_docs: None,
        command: format!(
            "cargo run -p example-diagnosis-service --bin diagnosis-service-load -- {}",
            raw.join(" ")
        ),
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
            "--write-docs" => {
                args.write_docs = Some(PathBuf::from(value()?));
                // The documented command names the file as given.
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    args.command = args.command.trim_end_matches([' ', '-']).to_string();
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
    let body = format!(
        "### The diagnosis service under load\n\n\
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
    println!("{body}");
    let broken = figures.missing + figures.extra + figures.unexpected + figures.given_up;
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
    ExitCode::SUCCESS
}
