//! An example service that diagnoses Alertmanager alerts.
//!
//! `POST /alerts` takes a webhook notification (payload version 4); its alert group, when
//! firing, is written to an on-disk inbox and answered with 202, then becomes an incident
//! (detected at the earliest `startsAt`, over a configurable lookback before it, the component
//! from a configurable label) that a worker diagnoses with the library's pipeline over the
//! configured telemetry. Reports are stored, redacted, one file per alert group
//! (`GET /reports/{id}`); the group notified again is grouped with the first (one report per
//! group), and its resolution is recorded beside the report. The inbox is bounded (429 with
//! `Retry-After` beyond it, nothing dropped), survives restarts, bodies are bounded (413), bad
//! payloads get a 4xx with a JSON error body, and shutdown lets in-flight requests finish.
//! [`load`] drives the service with a burst of good and bad alerts and measures it.
//!
//! With the `postgres` feature and a `[postgres]` table in the configuration, the queue and
//! the store live in PostgreSQL instead, so that several processes serve one service: each
//! accepted group is claimed by one worker under a renewed lease, claimed again by another
//! when its worker dies, and stored once (see `docs/guides/scale.md`).
//!
//! Diagnoses use long-term memory (setting `memory`, on by default, see [`memory`]): past
//! incidents with similar alerts are offered to each new diagnosis, which is remembered in
//! turn, in `store_dir/memory/` or, with `[postgres]`, in the shared database.

#![deny(missing_docs)]

pub mod alert;
pub mod app;
pub mod config;
pub mod diagnosis;
pub mod hostile;
pub mod inbox;
pub mod load;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "postgres")]
pub mod pg_memory;
#[cfg(feature = "postgres")]
pub mod pg_queue;
#[cfg(feature = "postgres")]
pub mod pg_store;
pub mod queue;
pub mod retention;
pub mod store;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

pub use alert::{Alert, PayloadError, WebhookPayload};
pub use app::{AppState, router, shutdown_signal};
pub use config::{ConfigError, DataConfig, PostgresConfig, ServiceConfig, Sources};
pub use diagnosis::{Diagnoser, DiagnosisError, StoredReport};
pub use inbox::Inbox;
pub use queue::{AlertQueue, Claim, FileQueue, Outcome, SharedQueue};
pub use store::{FileStore, ReportBackend, ReportStore, StoreError};
pub use worker::Workers;

/// The inbox's folder inside the report store.
pub const INBOX_DIR: &str = "inbox";

/// Why a service could not start, by what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// `[listener]` is wrong or its files unreadable (a certificate, a secret), or the
    /// address is reachable from other hosts without authentication: fix the configuration.
    #[error("listener: {0}")]
    Listener(#[from] rca_listen::ListenError),
    /// The store, the queue or the database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Which route group a path belongs to: `/healthz` is open; `/alerts` is `alerts`; the OTLP
/// routes `/v1/*` are `telemetry`; `/reports` and `/reports/{id}` are `reports`; everything
/// else (`/listener/stats`, `/otlp/stats`, unknown paths) is `operations`.
pub fn route_group(path: &str) -> rca_listen::Access {
    use rca_listen::Access;
    if path == "/healthz" {
        Access::Open
    } else if path == "/alerts" {
        Access::Group("alerts")
    } else if path.starts_with("/v1/") {
        Access::Group("telemetry")
    } else if path == "/reports" || path.starts_with("/reports/") {
        Access::Group("reports")
    } else {
        Access::Group("operations")
    }
}

/// A started service: its router and the workers that drain its queue.
#[derive(Debug)]
pub struct Service {
    /// The store's lock (file mode): one store, one running service.
    _store_lock: Option<std::fs::File>,
    listener: rca_listen::Listener,
    /// Ends the retention task.
    retention_stop: tokio::sync::watch::Sender<bool>,
    router: axum::Router,
    inbox: SharedQueue,
    store: ReportStore,
    workers: Workers,
    recovered: usize,
}

/// Where a service keeps its reports, its queue and its long-term memory.
struct Backends {
    store: ReportStore,
    queue: SharedQueue,
    /// How many groups wait from an earlier run.
    recovered: usize,
    /// `None` with `memory = false`.
    memory: Option<memory::SharedMemory>,
    /// The store directory's lock (file mode; PostgreSQL shares one store on purpose).
    lock: Option<std::fs::File>,
}

/// The backends in `store_dir`.
#[cfg(not(feature = "postgres"))]
async fn open_backends(
    config: &ServiceConfig,
    redactor: &rca_llm::redact::Redactor,
) -> Result<Backends, StoreError> {
    if config.postgres.is_some() {
        return Err(StoreError::Database {
            message: "`[postgres]` needs the service built with `--features postgres`".into(),
        });
    }
    open_files(config, redactor).await
}

/// The backends in PostgreSQL with `[postgres]`, else in `store_dir`.
#[cfg(feature = "postgres")]
async fn open_backends(
    config: &ServiceConfig,
    redactor: &rca_llm::redact::Redactor,
) -> Result<Backends, StoreError> {
    let Some(settings) = &config.postgres else {
        return open_files(config, redactor).await;
    };
    let pg = pg::Pg::connect(settings).await?;
    let store = ReportStore::with_backend(Arc::new(pg_store::PgStore::new(Arc::clone(&pg))));
    let memory = config
        .uses_memory()
        .then(|| pg_memory::shared_memory(&pg, redactor));
    let queue = pg_queue::PgQueue::new(pg, config.max_queued);
    let recovered = queue.left_over().await?;
    Ok(Backends {
        store,
        queue: Arc::new(queue),
        recovered,
        memory,
        lock: None,
    })
}

async fn open_files(
    config: &ServiceConfig,
    redactor: &rca_llm::redact::Redactor,
) -> Result<Backends, StoreError> {
    tokio::fs::create_dir_all(&config.store_dir)
        .await
        .map_err(|e| StoreError::Io {
            path: config.store_dir.display().to_string(),
            message: e.to_string(),
        })?;
    let lock = inbox::lock_store(&config.store_dir).await?;
    let (queue, recovered) =
        FileQueue::open(&config.store_dir.join(INBOX_DIR), config.max_queued).await?;
    let memory = if config.uses_memory() {
        let dir = config.store_dir.join(memory::MEMORY_DIR);
        Some(
            memory::open_files(&dir, redactor).map_err(|e| StoreError::Io {
                path: dir.display().to_string(),
                message: e.to_string(),
            })?,
        )
    } else {
        None
    };
    Ok(Backends {
        store: ReportStore::new(&config.store_dir),
        queue: Arc::new(queue),
        recovered,
        memory,
        lock: Some(lock),
    })
}

impl Service {
    /// Opens the queue and the store (under `config.store_dir`, queuing what an earlier run
    /// left in the inbox; or, with `[postgres]`, in the shared database) and starts
    /// `config.max_concurrent` workers. Needs a Tokio runtime. With an OTLP buffer in
    /// `sources` (`data.otlp`), the OTLP/HTTP routes are served too. The listener of
    /// `config.listener` is made ready first (its certificate and secret files read; an
    /// address other hosts can reach refused without clients).
    pub async fn start(config: &ServiceConfig, sources: Sources) -> Result<Service, StartError> {
        let listener = rca_listen::Listener::new(&config.listener, config.listen)?;
        #[cfg(feature = "otlp")]
        let sources_otlp = sources.otlp.clone();
        let redactor = rca_llm::redact::Redactor::builtin();
        let backends = open_backends(config, &redactor).await?;
        let mut diagnoser = Diagnoser::new(config, sources, redactor);
        if let Some(memory) = backends.memory {
            diagnoser = diagnoser.with_memory(memory);
        }
        let diagnoser = Arc::new(diagnoser);
        let (store, inbox, recovered, lock) = (
            backends.store,
            backends.queue,
            backends.recovered,
            backends.lock,
        );
        let retry_after = Duration::from_secs(config.retry_after_seconds);
        let workers = Workers::spawn(
            config.max_concurrent,
            worker::WorkerContext {
                diagnoser: Arc::clone(&diagnoser),
                store: store.clone(),
                queue: Arc::clone(&inbox),
                retry_pause: retry_after,
                test_delay: Duration::from_millis(config.test_delay_ms),
            },
        );
        let state = AppState::new(
            diagnoser,
            store.clone(),
            Arc::clone(&inbox),
            retry_after,
            Duration::from_secs(config.max_wait_seconds),
        );
        #[allow(unused_mut)]
        let mut routes = router(state, config.max_body_bytes);
        #[cfg(feature = "otlp")]
        if let Some(buffer) = &sources_otlp {
            let intake = rca_tools::otlp::OtlpIntake::new(
                Arc::clone(buffer) as Arc<dyn rca_tools::otlp::TelemetrySink>,
                rca_tools::otlp::OtlpLimits::default(),
            );
            routes = routes.merge(rca_tools::otlp::router(Arc::new(intake)));
        }
        let routes = routes.route("/listener/stats", listener.stats_route());
        let routes = listener.protect(routes, route_group);
        let (retention_stop, stop_retention) = tokio::sync::watch::channel(false);
        tokio::spawn(retention::run(
            store.clone(),
            config.retention,
            stop_retention,
        ));
        Ok(Service {
            _store_lock: lock,
            listener,
            retention_stop,
            router: routes,
            inbox,
            store,
            workers,
            recovered,
        })
    }

    /// The HTTP routes, behind the listener's authentication and rates (a host that serves
    /// them on its own listener gets no TLS, deadlines or connection caps: use
    /// [`Service::serve`]).
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// Serves the routes on `socket` with the configured listener (TLS, deadlines, caps)
    /// until `shutdown` resolves; then lets requests in flight finish.
    pub fn serve(
        &self,
        socket: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send + 'static {
        self.listener.clone().serve(socket, self.router(), shutdown)
    }

    /// `https` with `[listener.tls]`, else `http`.
    pub fn scheme(&self) -> &'static str {
        self.listener.scheme()
    }

    /// The queue of accepted alerts (the inbox, or the shared queue with `[postgres]`).
    pub fn inbox(&self) -> &SharedQueue {
        &self.inbox
    }

    /// The report store.
    pub fn store(&self) -> &ReportStore {
        &self.store
    }

    /// How many accepted alert groups an earlier run had left in the inbox (with `[postgres]`:
    /// the groups of the shared queue waiting for a worker when this process started).
    pub fn recovered(&self) -> usize {
        self.recovered
    }

    /// Stops the workers, letting diagnoses in progress finish for up to `grace`; alerts not
    /// yet diagnosed stay in the inbox for the next start (in the shared queue: for any
    /// process, once the abandoned claims' leases run out).
    pub async fn stop(self, grace: Duration) {
        let _ = self.retention_stop.send(true);
        self.workers.stop(grace).await;
    }

    /// Ends the workers at once, as a crash would (the inbox keeps what they had not done).
    pub fn crash(self) {
        let _ = self.retention_stop.send(true);
        self.workers.abort();
    }
}
