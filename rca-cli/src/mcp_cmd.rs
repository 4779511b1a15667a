//! `rca mcp INCIDENTS`: the MCP server (rca-mcp) over stdio, or over Streamable HTTP with
//! `--http ADDR`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rca_mcp::{HttpOptions, McpLimits, McpServerConfig, RcaMcp};

use crate::diagnose::{load_config, pipeline_config, role_models};

/// Arguments of `rca mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// An incident directory, or a folder whose subfolders are incident directories (clients
    /// name them by their folder's name; paths are refused).
    pub incidents: PathBuf,
    /// Serve Streamable HTTP on this address (endpoint `/mcp`) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// A file holding the SHA-256 of the bearer token clients must send
    /// (`sha256:<64 hex digits>`; see docs/guides/mcp.md). Required with `--http` unless
    /// `--listener` names clients or `--allow-unauthenticated-loopback` is given.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A TOML file with a `[listener]` table: TLS, clients (route group `mcp`), deadlines,
    /// connection caps and rates (paths relative to the file).
    #[arg(long, value_name = "FILE")]
    pub listener: Option<PathBuf>,
    /// With `--http` on a loopback address: serve without a token, on purpose.
    #[arg(long)]
    pub allow_unauthenticated_loopback: bool,
    /// A host name (optionally `host:port`) accepted in the `Host` header besides loopback
    /// and the bound address; repeat for several.
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// Where `diagnose` stores trajectories and reports, served as resources.
    #[arg(long, value_name = "DIR", default_value = "rca-runs")]
    pub runs: PathBuf,
    /// Store nothing and serve no resources.
    #[arg(long)]
    pub no_runs: bool,
    /// A configuration file (models of the diagnosis roles, redaction, budgets). Its
    /// `[sources.prometheus]`, if any, gives the metrics of the live incident `live`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Read telemetry files that resolve outside their incident directory.
    #[arg(long)]
    pub allow_outside_links: bool,
    /// The bytes an incident's telemetry may hold once decompressed.
    #[arg(long, value_name = "BYTES", default_value_t = rca_tools::sources::DEFAULT_MAX_TELEMETRY_BYTES)]
    pub max_telemetry_bytes: u64,
    /// Characters of a result shown before it is cut to a snapshot key.
    #[arg(long, default_value_t = McpLimits::default().head_chars)]
    pub head_chars: usize,
    /// Deadline of a tool call, in seconds.
    #[arg(long, default_value_t = McpLimits::default().tool_timeout.as_secs())]
    pub tool_seconds: u64,
    /// Deadline of a `diagnose` call, in seconds.
    #[arg(long, default_value_t = McpLimits::default().diagnose_timeout.as_secs())]
    pub diagnose_seconds: u64,
    /// Stop after this many seconds (HTTP; for scripts and tests).
    #[arg(long)]
    pub for_seconds: Option<u64>,
    /// With `--http`: also receive OTLP/HTTP exports at `/v1/{traces,logs,metrics}` (route
    /// group `telemetry`) into a bounded in-memory buffer, served live as the incident `live`.
    #[cfg(feature = "otlp")]
    #[arg(long)]
    pub otlp: bool,
    /// How far back the live incident looks, in minutes.
    #[arg(long, default_value_t = 60)]
    pub live_minutes: u64,
}

/// Runs `rca mcp`.
pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    // Logs go to stderr: on stdio, stdout carries the protocol.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let config = load_config(args.config.as_deref())?;
    let defaults = McpLimits::default();
    let limits = McpLimits {
        head_chars: args.head_chars.max(200),
        tool_timeout: Duration::from_secs(args.tool_seconds.max(1)),
        diagnose_timeout: Duration::from_secs(args.diagnose_seconds.max(1)),
        max_telemetry_bytes: args.max_telemetry_bytes,
        ..defaults
    };
    #[cfg(feature = "otlp")]
    let (live, telemetry_routes) = if args.otlp {
        if args.http.is_none() {
            anyhow::bail!("--otlp needs --http: the exports arrive on the same listener");
        }
        let (live, routes) = otlp_live(Duration::from_secs(args.live_minutes.max(1) * 60));
        (Some(live), Some(routes))
    } else {
        (None, None)
    };
    #[cfg(not(feature = "otlp"))]
    let (live, telemetry_routes): (Option<rca_mcp::LiveSources>, Option<axum::Router>) =
        (None, None);
    let live = with_prometheus(
        live,
        &config,
        Duration::from_secs(args.live_minutes.max(1) * 60),
        limits.tool_timeout,
    )?;
    let server = RcaMcp::new(McpServerConfig {
        incidents: args.incidents.clone(),
        runs: (!args.no_runs).then(|| args.runs.clone()),
        allow_outside_links: args.allow_outside_links,
        limits,
        redactor: config.redactor(),
        models: role_models(&config)?,
        pipeline: pipeline_config(
            &config,
            config.diagnosis.current_minutes,
            config.diagnosis.min_modalities,
        ),
        live,
    })?;
    let Some(addr) = args.http else {
        if args.token_file.is_some() || args.listener.is_some() {
            anyhow::bail!("--token-file and --listener apply to --http only");
        }
        return Ok(rca_mcp::serve_stdio(server).await?);
    };
    let mut listener = match &args.listener {
        Some(path) => crate::serving::listener_config(path)?,
        None => rca_listen::ListenerConfig::default(),
    };
    if let Some(token) = &args.token_file {
        listener = rca_mcp::token_client(listener, "mcp-client", token.clone());
    }
    let options = HttpOptions {
        listener,
        allow_unauthenticated_loopback: args.allow_unauthenticated_loopback,
        allowed_hosts: args.allowed_host.clone(),
        max_body_bytes: 0,
        telemetry_routes,
    };
    // Refuse before binding: an unauthenticated transport is a configuration error.
    rca_mcp::check_auth(&options, addr)?;
    let socket = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = socket.local_addr()?;
    println!("listening on {bound}");
    eprintln!(
        "rca mcp: Streamable HTTP on {bound}{} serving {}",
        rca_mcp::MCP_PATH,
        args.incidents.display()
    );
    let stats = rca_mcp::serve_http(
        server,
        socket,
        options,
        crate::serving::stop_signal(args.for_seconds),
    )
    .await?;
    println!("{}", serde_json::to_string(&stats)?);
    Ok(())
}

/// The live sources with the metrics of the configuration's `[sources.prometheus]`, if it
/// names one: alone, or in place of the OTLP buffer's metrics (its logs and traces stay). Each
/// request to Prometheus is bounded by the client's timeout, at most a tool call's deadline.
fn with_prometheus(
    live: Option<rca_mcp::LiveSources>,
    config: &crate::config::Config,
    lookback: Duration,
    tool_timeout: Duration,
) -> anyhow::Result<Option<rca_mcp::LiveSources>> {
    use std::sync::Arc;

    use rca_tools::prometheus::{PrometheusConfig, PrometheusSource};

    let Some(p) = &config.sources.prometheus else {
        return Ok(live);
    };
    let mut prometheus = PrometheusConfig::new(p.url.clone());
    prometheus.component_label = p.component_label.clone();
    prometheus.timeout_seconds = prometheus
        .timeout_seconds
        .min(tool_timeout.as_secs())
        .max(1);
    let source = PrometheusSource::new(prometheus)
        .with_context(|| format!("sources.prometheus: cannot use {}", p.url))?;
    let mut live = live.unwrap_or_else(|| rca_mcp::LiveSources {
        lookback,
        ..rca_mcp::LiveSources::default()
    });
    live.metrics = Some(Arc::new(source));
    Ok(Some(live))
}

/// A bounded OTLP buffer as live sources, and the OTLP/HTTP routes that fill it.
#[cfg(feature = "otlp")]
fn otlp_live(lookback: Duration) -> (rca_mcp::LiveSources, axum::Router) {
    use std::sync::Arc;

    use rca_core::source::{LogSource, MetricSource, TraceSource};
    use rca_tools::otlp::{OtlpIntake, OtlpLimits, TelemetryBuffer, TelemetrySink};

    let buffer = Arc::new(TelemetryBuffer::new(1_000_000));
    let intake = Arc::new(OtlpIntake::new(
        Arc::clone(&buffer) as Arc<dyn TelemetrySink>,
        OtlpLimits::default(),
    ));
    let live = rca_mcp::LiveSources {
        logs: Some(Arc::clone(&buffer) as Arc<dyn LogSource>),
        metrics: Some(Arc::clone(&buffer) as Arc<dyn MetricSource>),
        traces: Some(buffer as Arc<dyn TraceSource>),
        lookback,
        ..rca_mcp::LiveSources::default()
    };
    (live, rca_tools::otlp::router(intake))
}
