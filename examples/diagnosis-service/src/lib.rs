//! An example service that diagnoses Alertmanager alerts.
//!
//! `POST /alerts` takes a webhook notification (payload version 4); every firing alert
//! becomes an incident (detected at `startsAt`, over a configurable lookback before it, the
//! component from a configurable label) that the orchestra diagnoses with deterministic
//! policies over the configured telemetry. The reports come back as JSON and are stored,
//! redacted, one file per alert (`GET /reports/{id}`). Diagnoses run at most
//! `max_concurrent` at once (503 with `Retry-After` beyond), bodies are bounded (413), bad
//! payloads get a 4xx with a JSON error body, and shutdown lets in-flight requests finish.

#![deny(missing_docs)]

pub mod alert;
pub mod app;
pub mod config;
pub mod diagnosis;
pub mod store;

use std::time::Duration;

pub use alert::{Alert, PayloadError, WebhookPayload};
pub use app::{AppState, router, serve, shutdown_signal};
pub use config::{ConfigError, DataConfig, ServiceConfig, Sources};
pub use diagnosis::{Diagnoser, DiagnosisError, StoredReport};
pub use store::{ReportStore, StoreError};

/// The router a configuration describes, over already-opened sources.
pub fn app(config: &ServiceConfig, sources: Sources) -> axum::Router {
    let diagnoser = Diagnoser::new(config, sources, rca_llm::redact::Redactor::builtin());
    let state = AppState::new(
        diagnoser,
        ReportStore::new(&config.store_dir),
        config.max_concurrent,
        Duration::from_secs(config.retry_after_seconds),
    );
    router(state, config.max_body_bytes)
}
