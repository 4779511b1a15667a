//! Telemetry tables on a DataFusion Ballista cluster (feature `ballista`).
//!
//! [`connect`] gives [`TelemetryTables`] whose queries a Ballista scheduler plans and its
//! executors run; the tables must be files every executor can read (Parquet directories from
//! `rca export parquet`, registered with
//! [`TelemetryTables::register_parquet_dir`]). [`run_scheduler`] and [`run_executor`] are the
//! cluster's processes (`rca cluster scheduler` and `rca cluster executor`), built from
//! Ballista's own scheduler and executor with this workspace's session settings
//! ([`session_config`]) and functions (template mining, [`super::templates`]), so a query
//! plans and runs the same way as in a local session and returns the same rows.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ballista::prelude::SessionContextExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::{SessionConfig, SessionContext, SessionState};

use super::catalog::{TelemetryTables, session_config};
use super::error::TableError;
use super::sandbox::SandboxLimits;
use super::templates::log_templates_udaf;

/// How long [`connect`] waits for the scheduler's port to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn cluster_err(message: impl std::fmt::Display) -> TableError {
    TableError::Cluster {
        message: message.to_string(),
    }
}

/// A session state with `config` and every function of a telemetry session: DataFusion's
/// built-ins and template mining. The scheduler builds each job's session with it and the
/// executors take their function registry from it.
pub fn session_state(config: SessionConfig) -> datafusion::error::Result<SessionState> {
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    state.register_udaf(Arc::new(log_templates_udaf()))?;
    Ok(state)
}

/// Telemetry tables whose queries run on the Ballista cluster at `url`
/// (`df://host:port`), under `limits` (the row limit and timeout hold as locally; the memory
/// limit is each executor's own). Fails with [`TableError::Cluster`] when the scheduler's
/// port does not accept a connection within [`CONNECT_TIMEOUT`].
pub async fn connect(url: &str, limits: SandboxLimits) -> Result<TelemetryTables, TableError> {
    let authority = url
        .strip_prefix("df://")
        .ok_or_else(|| cluster_err(format!("`{url}` is not a df://host:port URL")))?
        .trim_end_matches('/');
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(authority)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(cluster_err(format!("scheduler {authority}: {e}"))),
        Err(_) => {
            return Err(cluster_err(format!(
                "scheduler {authority}: no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
    }
    let state = SessionStateBuilder::new()
        .with_config(session_config())
        .with_default_features()
        .build();
    let ctx = SessionContext::remote_with_state(url, state)
        .await
        .map_err(cluster_err)?;
    // Ballista's upgrade installs its own function lists; template mining joins them.
    ctx.register_udaf(log_templates_udaf());
    Ok(TelemetryTables::with_context(ctx, limits))
}

/// Runs a Ballista scheduler on `bind` until the process is stopped.
pub async fn run_scheduler(bind: SocketAddr) -> Result<(), TableError> {
    let config = SchedulerConfig::default()
        .with_hostname(bind.ip().to_string())
        .with_port(bind.port())
        .with_override_config_producer(Arc::new(session_config))
        .with_override_session_builder(Arc::new(session_state));
    let mut config = config;
    config.bind_host = bind.ip().to_string();
    config.bind_port = bind.port();
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(cluster_err)?;
    start_server(cluster, bind, Arc::new(config))
        .await
        .map_err(cluster_err)
}

/// Where an executor listens, whom it serves and where it keeps shuffle files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorOptions {
    /// The address its Arrow Flight service (shuffle data, results) binds to; the port of
    /// its gRPC service is `grpc_port`.
    pub bind: SocketAddr,
    /// Its gRPC port (task control).
    pub grpc_port: u16,
    /// The scheduler's address.
    pub scheduler: SocketAddr,
    /// Tasks it runs at once.
    pub concurrent_tasks: usize,
    /// The directory for its shuffle files (created; nothing is written elsewhere).
    pub work_dir: PathBuf,
}

/// Runs a Ballista executor until the process is stopped or the scheduler stops it.
pub async fn run_executor(options: ExecutorOptions) -> Result<(), TableError> {
    std::fs::create_dir_all(&options.work_dir).map_err(|e| {
        cluster_err(format!(
            "work directory {}: {e}",
            options.work_dir.display()
        ))
    })?;
    let state = session_state(session_config()).map_err(cluster_err)?;
    let config = ExecutorProcessConfig {
        bind_host: options.bind.ip().to_string(),
        external_host: Some(options.bind.ip().to_string()),
        port: options.bind.port(),
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler.ip().to_string(),
        scheduler_port: options.scheduler.port(),
        scheduler_connect_timeout_seconds: 30,
        vcores: options.concurrent_tasks.max(1),
        work_dir: Some(options.work_dir.to_string_lossy().to_string()),
        executor_heartbeat_interval_seconds: 5,
        print_thread_info: false,
        override_function_registry: Some(Arc::new(BallistaFunctionRegistry::from(&state))),
        override_config_producer: Some(Arc::new(session_config)),
        ..ExecutorProcessConfig::default()
    };
    start_executor_process(Arc::new(config))
        .await
        .map_err(cluster_err)
}
