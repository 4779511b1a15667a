//! `rca otlp serve DIR`: an OTLP/HTTP receiver that writes what it receives into an incident
//! directory, which `rca diagnose DIR` then reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// A TOML file with a `[listener]` table: TLS, the clients allowed in (route groups
    /// `telemetry` for `/v1/*`, `operations` for the stats), deadlines, connection caps and
    /// rates (the diagnosis service's `[listener]`; paths relative to the file). Without it:
    /// no TLS, no authentication, so loopback only.
    #[arg(long)]
    pub listener: Option<PathBuf>,
}

/// `/v1/*` is `telemetry`; everything else (`/otlp/stats`, `/listener/stats`) `operations`.
fn route_group(path: &str) -> rca_listen::Access {
    if path.starts_with("/v1/") {
        rca_listen::Access::Group("telemetry")
    } else {
        rca_listen::Access::Group("operations")
    }
}

/// Runs `rca otlp`.
pub async fn run(command: OtlpCommand) -> anyhow::Result<()> {
    match command {
        OtlpCommand::Serve(args) => serve(args).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Structured logs on stderr (refusals, TLS failures, the listener's warnings), at `info`
    // unless RUST_LOG says otherwise; a host that installed its own subscriber keeps it.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let sink = IncidentDirSink::open(&args.dir, args.max_bytes)
        .with_context(|| format!("cannot write the incident directory {}", args.dir.display()))?;
    let limits = OtlpLimits {
        max_body_bytes: args.max_body_bytes,
        max_decoded_bytes: args.max_body_bytes.saturating_mul(4),
        ..OtlpLimits::default()
    };
    let intake = Arc::new(OtlpIntake::new(Arc::new(sink), limits));
    let config = match &args.listener {
        Some(path) => crate::serving::listener_config(path)?,
        None => rca_listen::ListenerConfig::default(),
    };
    let guard = rca_listen::Listener::new(&config, args.listen)?;
    let socket = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = socket.local_addr()?;
    println!("listening on {addr}");
    eprintln!(
        "rca otlp: OTLP/HTTP on {}://{addr}/v1/{{traces,logs,metrics}}, writing {}",
        guard.scheme(),
        args.dir.display()
    );
    let routes = router(Arc::clone(&intake)).route("/listener/stats", guard.stats_route());
    let routes = guard.protect(routes, route_group);
    guard
        .clone()
        .serve(
            socket,
            routes,
            crate::serving::stop_signal(args.for_seconds),
        )
        .await?;
    // The intake's counts, and the listener's under `listener`.
    let mut stats = serde_json::to_value(intake.stats())?;
    if let Some(map) = stats.as_object_mut() {
        map.insert("listener".into(), serde_json::to_value(guard.stats())?);
    }
    println!("{stats}");
    Ok(())
}
