//! `rca otlp serve DIR`: an OTLP/HTTP receiver that writes what it receives into an incident
//! directory, which `rca diagnose DIR` then reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use rca_tools::otlp::{IncidentDirSink, OtlpIntake, OtlpLimits, router};

/// What `rca otlp` does.
#[derive(Debug, Subcommand)]
pub enum OtlpCommand {
    /// Receive OTLP/HTTP exports (traces, logs, metrics; protobuf or JSON) into an incident
    /// directory until interrupted (Ctrl-C, SIGTERM) or `--for-seconds` pass.
    Serve(ServeArgs),
}

/// Arguments of `rca otlp serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The incident directory to write (created; one this command wrote before is resumed;
    /// any other non-empty directory is refused).
    pub dir: PathBuf,
    /// Address to listen on (OTLP/HTTP's port is 4318).
    #[arg(long, default_value = "127.0.0.1:4318")]
    pub listen: SocketAddr,
    /// The most bytes of telemetry the directory may hold; exports past it get 507.
    #[arg(long, default_value_t = 1 << 30)]
    pub max_bytes: u64,
    /// The largest request body accepted, as sent; larger ones get 413.
    #[arg(long, default_value_t = OtlpLimits::default().max_body_bytes)]
    pub max_body_bytes: usize,
    /// Stop after this many seconds (for scripts and tests).
    #[arg(long)]
    pub for_seconds: Option<u64>,
}

/// Runs `rca otlp`.
pub async fn run(command: OtlpCommand) -> anyhow::Result<()> {
    match command {
        OtlpCommand::Serve(args) => serve(args).await,
    }
}

async fn stop_signal(for_seconds: Option<u64>) {
    let deadline = async {
        match for_seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
        () = deadline => {}
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let sink = IncidentDirSink::open(&args.dir, args.max_bytes)
        .with_context(|| format!("cannot write the incident directory {}", args.dir.display()))?;
    let limits = OtlpLimits {
        max_body_bytes: args.max_body_bytes,
        max_decoded_bytes: args.max_body_bytes.saturating_mul(4),
        ..OtlpLimits::default()
    };
    let intake = Arc::new(OtlpIntake::new(Arc::new(sink), limits));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("listening on {addr}");
    eprintln!(
        "rca otlp: OTLP/HTTP on http://{addr}/v1/{{traces,logs,metrics}}, writing {}",
        args.dir.display()
    );
    axum::serve(listener, router(Arc::clone(&intake)))
        .with_graceful_shutdown(stop_signal(args.for_seconds))
        .await?;
    let stats = serde_json::to_string(&intake.stats())?;
    println!("{stats}");
    Ok(())
}
