//! The HTTP surface: `POST /alerts`, `GET /reports`, `GET /reports/{id}`, `GET /healthz`.
//!
//! `POST /alerts` answers once the notification's new firing alert group is safely in the
//! inbox (202), not when it is diagnosed; `?wait=SECONDS` waits (up to `max_wait_seconds`) for
//! the reports and returns them (200, or 202 if some are still running). A resolved group's
//! resolution is recorded beside its report before the answer.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rca_listen::Sender;
use serde::Deserialize;
use serde_json::json;

use crate::alert::{Alert, WebhookPayload};
use crate::diagnosis::{Diagnoser, DiagnosisError};
use crate::inbox::{Admission, Entry, Progress, now_ms};
use crate::queue::SharedQueue;
use crate::store::{RESOLUTION_FORMAT_VERSION, ReportStore, Resolution, StoreError};

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    diagnoser: Arc<Diagnoser>,
    store: ReportStore,
    inbox: SharedQueue,
    retry_after: Duration,
    max_wait: Duration,
}

impl AppState {
    /// State over a diagnoser, a store and the queue (the inbox) its workers drain.
    pub fn new(
        diagnoser: Arc<Diagnoser>,
        store: ReportStore,
        inbox: SharedQueue,
        retry_after: Duration,
        max_wait: Duration,
    ) -> Self {
        AppState {
            diagnoser,
            store,
            inbox,
            retry_after,
            max_wait,
        }
    }
}

/// A JSON error response: `{"error": {"status": 400, "message": "..."}}`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    // Every refusal is logged with its status: a server-side one (the disk, the database) as
    // a warning, a client's bad or oversized request as information.
    if status.is_server_error() {
        tracing::warn!(status = status.as_u16(), reason = %message, "request refused");
    } else {
        tracing::info!(status = status.as_u16(), reason = %message, "request refused");
    }
    let body = json!({"error": {"status": status.as_u16(), "message": message}});
    (status, Json(body)).into_response()
}

/// An error response the sender should retry after `retry_after`.
fn retry_later(status: StatusCode, message: impl Into<String>, retry_after: Duration) -> Response {
    let mut response = error(status, message);
    if let Ok(v) = HeaderValue::from_str(&retry_after.as_secs().max(1).to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
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

/// `POST /alerts` parameters.
#[derive(Debug, Deserialize)]
struct ReceiveParams {
    /// Seconds to wait for the reports.
    wait: Option<u64>,
}

async fn receive(
    State(state): State<AppState>,
    sender: Option<Extension<Sender>>,
    params: Result<Query<ReceiveParams>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let sender = sender.map(|Extension(s)| s).unwrap_or_default();
    let body = match body {
        Ok(b) => b,
        // Over the size limit (413) or an unreadable body: the rejection knows the status.
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let wait = match params {
        Ok(Query(p)) => p.wait.map(|s| Duration::from_secs(s).min(state.max_wait)),
        Err(rejection) => return error(StatusCode::BAD_REQUEST, rejection.body_text()),
    };
    let payload = match WebhookPayload::parse(&body) {
        Ok(p) => p,
        Err(e @ crate::alert::PayloadError::Malformed(_)) => {
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    };
    // A notification that reports more groups than the whole inbox holds could never be
    // accepted: refused before any per-group work (a report id, a store read each).
    let capacity = state.inbox.capacity();
    let groups = if payload.group_key.is_empty() {
        payload.alerts.len()
    } else {
        1
    };
    if groups > capacity {
        return too_large(groups, capacity);
    }
    // One report per alert group: a firing group is queued under its id (one bad alert
    // refuses the notification whole); a resolved one is recorded after the admission. The
    // inbox and the records keep the alerts redacted, as the reports are.
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    let mut skipped = Vec::new();
    let mut resolved_groups = Vec::new();
    for mut group in payload.groups() {
        let mut id = match state.diagnoser.group_id(&group, sender.name()) {
            Ok(id) => id,
            Err(e @ DiagnosisError::BadAlert { .. }) => {
                return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
            }
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let firing = group.alerts.iter().any(Alert::is_firing);
        // An Alertmanager group keeps the report of its open episode, even when the alert
        // that started it resolves before the others: the episode is recorded under the
        // group's key and ends with the group's resolution.
        if !group.group_key.is_empty() {
            let key = id
                .split_once('-')
                .map_or(id.as_str(), |(k, _)| k)
                .to_string();
            match state.store.current_episode(&key).await {
                Ok(Some(open)) => id = open,
                Ok(None) if firing => {
                    if let Err(e) = state.store.open_episode(&key, &id).await {
                        return retry_later(
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("the alert group could not be recorded: {e}"),
                            state.retry_after,
                        );
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    return retry_later(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("the alert group's episode could not be read: {e}"),
                        state.retry_after,
                    );
                }
            }
        }
        if !firing {
            resolved_groups.push((id, group));
            continue;
        }
        // The resolved alerts of a firing group are not diagnosed.
        for alert in group.alerts.iter().filter(|a| !a.is_firing()) {
            skipped.push(json!({"alert": alert.name(), "reason": "resolved"}));
        }
        group.alerts.retain(Alert::is_firing);
        if seen.insert(id.clone()) {
            entries.push(Entry::new(id, &state.diagnoser.redact_payload(&group)));
        }
    }
    let (accepted, duplicates) = match state.inbox.admit(entries, &state.store).await {
        Ok(Admission::Queued {
            accepted,
            duplicates,
        }) => (accepted, duplicates),
        Ok(Admission::Full { capacity }) => {
            return retry_later(
                StatusCode::TOO_MANY_REQUESTS,
                format!("{capacity} alerts are waiting for diagnosis; retry later"),
                state.retry_after,
            );
        }
        Ok(Admission::TooLarge { groups, capacity }) => {
            return too_large(groups, capacity);
        }
        Err(e) => {
            return retry_later(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the alert could not be stored for diagnosis: {e}"),
                state.retry_after,
            );
        }
    };
    let (resolved, duplicates) =
        match record_resolutions(&state, resolved_groups, duplicates, &mut skipped).await {
            Ok(r) => r,
            Err(e) => {
                return retry_later(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the resolution could not be stored: {e}"),
                    state.retry_after,
                );
            }
        };
    let mut body = json!({
        "accepted": accepted,
        "duplicates": duplicates,
        "resolved": resolved,
        "skipped": skipped,
    });
    let Some(wait) = wait else {
        return (StatusCode::ACCEPTED, Json(body)).into_response();
    };
    let ids: Vec<String> = accepted.iter().chain(&duplicates).cloned().collect();
    let done = state.inbox.wait_for(&ids, wait).await;
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for id in &ids {
        match state.store.get(id).await {
            Ok(report) => reports.push(report),
            Err(e) => {
                let why = match state.inbox.progress(id).await {
                    Progress::Pending => "still waiting or running".to_string(),
                    Progress::Failed(message) => format!("the diagnosis failed: {message}"),
                    Progress::Unknown => e.to_string(),
                    Progress::Unavailable(message) => {
                        format!("the queue could not be read: {message}")
                    }
                };
                failed.push(json!({"id": id, "error": why}));
            }
        }
    }
    body["reports"] = json!(reports);
    body["unfinished"] = json!(failed);
    let status = if done && failed.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    (status, Json(body)).into_response()
}

/// 413: a notification that can never fit; Alertmanager does not retry a 4xx other than 429.
fn too_large(groups: usize, capacity: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the notification reports {groups} alert groups; the inbox holds at most {capacity} (max_queued): send them in smaller notifications (Alertmanager's max_alerts, or group_by) or raise max_queued"
        ),
    )
}

/// Records the resolution of each resolved group whose report the service knows (stored,
/// waiting, running or failed); returns the ids newly recorded and `duplicates` with the ids
/// whose resolution was recorded already. Unknown groups are listed in `skipped`.
async fn record_resolutions(
    state: &AppState,
    groups: Vec<(String, WebhookPayload)>,
    mut duplicates: Vec<String>,
    skipped: &mut Vec<serde_json::Value>,
) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let mut resolved = Vec::new();
    for (id, group) in groups {
        let known = state.store.exists(&id).await
            || match state.inbox.progress(&id).await {
                Progress::Unknown => false,
                Progress::Unavailable(message) => {
                    return Err(StoreError::Database { message });
                }
                Progress::Pending | Progress::Failed(_) => true,
            };
        if !known {
            for alert in &group.alerts {
                skipped.push(json!({
                    "alert": alert.name(),
                    "reason": "resolved",
                    "detail": format!("no report {id} of its group is known"),
                }));
            }
            continue;
        }
        let ends_at = group
            .alerts
            .iter()
            .filter_map(|a| {
                rca_core::Timestamp::parse_rfc3339(&a.ends_at).map(|t| (t, a.ends_at.clone()))
            })
            .max_by_key(|(t, _)| *t)
            .map(|(_, text)| text)
            .unwrap_or_default();
        let resolution = Resolution {
            format_version: RESOLUTION_FORMAT_VERSION,
            id: id.clone(),
            received_at_ms: now_ms(),
            ends_at,
            alerts: state.diagnoser.redact_payload(&group).alerts,
        };
        if state.store.put_resolution(&resolution).await? {
            resolved.push(id);
        } else if !duplicates.contains(&id) {
            duplicates.push(id);
        }
    }
    Ok((resolved, duplicates))
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
        Err(e @ StoreError::NotFound(_)) => match state.inbox.progress(&id).await {
            Progress::Pending => (
                StatusCode::ACCEPTED,
                Json(json!({"id": id, "status": "pending"})),
            )
                .into_response(),
            Progress::Failed(message) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the diagnosis of {id} failed: {message}"),
            ),
            Progress::Unknown => error(StatusCode::NOT_FOUND, e.to_string()),
            Progress::Unavailable(message) => retry_later(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the queue could not be read: {message}"),
                state.retry_after,
            ),
        },
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
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
