//! The HTTP surface: `POST /alerts`, `GET /reports`, `GET /reports/{id}`, `GET /healthz`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::alert::WebhookPayload;
use crate::diagnosis::{Diagnoser, DiagnosisError};
use crate::store::{ReportStore, StoreError};

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    diagnoser: Arc<Diagnoser>,
    store: ReportStore,
    permits: Arc<Semaphore>,
    retry_after: Duration,
}

impl AppState {
    /// State over a diagnoser and a store, allowing `max_concurrent` diagnoses at once.
    pub fn new(
        diagnoser: Diagnoser,
        store: ReportStore,
        max_concurrent: usize,
        retry_after: Duration,
    ) -> Self {
        AppState {
            diagnoser: Arc::new(diagnoser),
            store,
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            retry_after,
        }
    }
}

/// A JSON error response: `{"error": {"status": 400, "message": "..."}}`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"error": {"status": status.as_u16(), "message": message.into()}});
    (status, Json(body)).into_response()
}

/// The router; `max_body_bytes` bounds request bodies (413 beyond it).
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/alerts", post(receive))
        .route("/reports", get(list))
        .route("/reports/{id}", get(fetch))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn receive(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match body {
        Ok(b) => b,
        // Over the size limit (413) or an unreadable body: the rejection knows the status.
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let payload = match WebhookPayload::parse(&body) {
        Ok(p) => p,
        Err(e @ crate::alert::PayloadError::Malformed(_)) => {
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    };
    // Bounded concurrency: refuse rather than queue without end.
    let Ok(_permit) = state.permits.clone().try_acquire_owned() else {
        let mut response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many diagnoses in progress; retry later",
        );
        if let Ok(v) = HeaderValue::from_str(&state.retry_after.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    };
    let mut reports = Vec::new();
    let mut skipped = Vec::new();
    for alert in &payload.alerts {
        if !alert.is_firing() {
            skipped.push(json!({"alert": alert.name(), "reason": "resolved"}));
            continue;
        }
        match state.diagnoser.diagnose(&payload, alert).await {
            Ok(report) => {
                if let Err(e) = state.store.put(&report).await {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
                }
                reports.push(report);
            }
            Err(e @ DiagnosisError::BadAlert { .. }) => {
                return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
    (
        StatusCode::OK,
        Json(json!({"reports": reports, "skipped": skipped})),
    )
        .into_response()
}

async fn list(State(state): State<AppState>) -> Response {
    match state.store.ids().await {
        Ok(ids) => Json(json!({"reports": ids})).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn fetch(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.store.get(&id).await {
        Ok(report) => Json(report).into_response(),
        Err(e @ StoreError::NotFound(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Resolves on ctrl-c or (on Unix) SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
