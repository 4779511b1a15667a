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

#![deny(missing_docs)]

pub mod alert;
pub mod app;
pub mod config;
pub mod diagnosis;
pub mod inbox;
pub mod load;
pub mod store;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

pub use alert::{Alert, PayloadError, WebhookPayload};
pub use app::{AppState, router, serve, shutdown_signal};
pub use config::{ConfigError, DataConfig, ServiceConfig, Sources};
pub use diagnosis::{Diagnoser, DiagnosisError, StoredReport};
pub use inbox::Inbox;
pub use store::{ReportStore, StoreError};
pub use worker::Workers;

/// The inbox's folder inside the report store.
pub const INBOX_DIR: &str = "inbox";

/// A started service: its router and the workers that drain its inbox.
#[derive(Debug)]
pub struct Service {
    router: axum::Router,
    inbox: Inbox,
    workers: Workers,
    recovered: usize,
}

impl Service {
    /// Opens the inbox under `config.store_dir` (queuing what an earlier run left there) and
    /// starts `config.max_concurrent` workers. Needs a Tokio runtime. With an OTLP buffer in
    /// `sources` (`data.otlp`), the OTLP/HTTP routes are served too.
    pub async fn start(config: &ServiceConfig, sources: Sources) -> Result<Service, StoreError> {
        #[cfg(feature = "otlp")]
        let sources_otlp = sources.otlp.clone();
        let diagnoser = Arc::new(Diagnoser::new(
            config,
            sources,
            rca_llm::redact::Redactor::builtin(),
        ));
        let store = ReportStore::new(&config.store_dir);
        let (inbox, queue, recovered) =
            Inbox::open(&config.store_dir.join(INBOX_DIR), config.max_queued).await?;
        let retry_after = Duration::from_secs(config.retry_after_seconds);
        let workers = Workers::spawn(
            config.max_concurrent,
            queue,
            worker::WorkerContext {
                diagnoser: Arc::clone(&diagnoser),
                store: store.clone(),
                inbox: inbox.clone(),
                retry_pause: retry_after,
            },
        );
        let state = AppState::new(
            diagnoser,
            store,
            inbox.clone(),
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
        Ok(Service {
            router: routes,
            inbox,
            workers,
            recovered,
        })
    }

    /// The HTTP routes, to pass to [`serve`].
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// The inbox.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// How many accepted alert groups an earlier run had left in the inbox.
    pub fn recovered(&self) -> usize {
        self.recovered
    }

    /// Stops the workers, letting diagnoses in progress finish for up to `grace`; alerts not
    /// yet diagnosed stay in the inbox for the next start.
    pub async fn stop(self, grace: Duration) {
        self.workers.stop(grace).await;
    }

    /// Ends the workers at once, as a crash would (the inbox keeps what they had not done).
    pub fn crash(self) {
        self.workers.abort();
    }
}
