//! `diagnosis-service CONFIG.toml`: serve until ctrl-c or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use example_diagnosis_service::{ServiceConfig, Sources, app, serve, shutdown_signal};

#[tokio::main]
async fn main() -> ExitCode {
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
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        eprintln!("listening on http://{addr} (POST /alerts, GET /reports/{{id}})");
    }
    match serve(listener, app(&config, sources), shutdown_signal()).await {
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
