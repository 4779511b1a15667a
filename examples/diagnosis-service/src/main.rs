//! `diagnosis-service CONFIG.toml`: serve until ctrl-c or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use std::time::Duration;

use example_diagnosis_service::{Service, ServiceConfig, Sources, shutdown_signal};

#[tokio::main]
async fn main() -> ExitCode {
    // Structured logs on stderr (refusals, disk errors, entries set aside, retries), at `info`
    // unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: diagnosis-service CONFIG.toml");
        return ExitCode::from(2);
    };
    let config = match ServiceConfig::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let sources = match Sources::open(&config.data, &config.component_label) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let service = match Service::start(&config, sources).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if service.recovered() > 0 && config.postgres.is_some() {
        eprintln!(
            "{} accepted alerts wait in the shared queue",
            service.recovered()
        );
    } else if service.recovered() > 0 {
        eprintln!(
            "{} accepted alerts from an earlier run are queued again",
            service.recovered()
        );
    }
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        eprintln!(
            "listening on {}://{addr} (POST /alerts, GET /reports/{{id}})",
            service.scheme()
        );
    }
    let served = service.serve(listener, shutdown_signal()).await;
    // Diagnoses in progress get a grace period; what waits stays in the inbox.
    service.stop(Duration::from_secs(30)).await;
    match served {
        Ok(()) => {
            eprintln!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
