//! The OTLP/HTTP endpoints as an axum router: `POST /v1/traces`, `/v1/logs`, `/v1/metrics`,
//! and `GET /otlp/stats` (what [`OtlpIntake::stats`] counts, as JSON).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::{OtlpError, OtlpIntake, OtlpReply, Signal};

/// The router of an intake. Bodies are read up to the intake's body limit (a longer one is
/// refused with 413 without reading the rest); decoding and storing run on the blocking pool.
pub fn router(intake: Arc<OtlpIntake>) -> Router {
    Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/logs", post(logs))
        .route("/v1/metrics", post(metrics))
        .route("/otlp/stats", get(stats))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(intake)
}

async fn traces(State(i): State<Arc<OtlpIntake>>, req: Request) -> Response {
    export(i, Signal::Traces, req).await
}

async fn logs(State(i): State<Arc<OtlpIntake>>, req: Request) -> Response {
    export(i, Signal::Logs, req).await
}

async fn metrics(State(i): State<Arc<OtlpIntake>>, req: Request) -> Response {
    export(i, Signal::Metrics, req).await
}

async fn stats(State(i): State<Arc<OtlpIntake>>) -> Response {
    axum::Json(i.stats()).into_response()
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

async fn export(intake: Arc<OtlpIntake>, signal: Signal, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let content_type = header_text(&parts.headers, header::CONTENT_TYPE);
    let content_encoding = header_text(&parts.headers, header::CONTENT_ENCODING);
    let limit = intake.limits().max_body_bytes;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => {
            // Over the limit, or the connection broke while the body was read.
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.to_string().contains("length limit"))
                || e.to_string().contains("length limit");
            let error = if too_large {
                OtlpError::TooLarge {
                    what: "the body",
                    limit: limit as u64,
                }
            } else {
                OtlpError::BadRequest {
                    message: format!("the body could not be read: {e}"),
                }
            };
            return reply(intake.refuse(&error, content_type.as_deref()));
        }
    };
    let worker = Arc::clone(&intake);
    let ct = content_type.clone();
    let done = tokio::task::spawn_blocking(move || {
        worker.receive(signal, ct.as_deref(), content_encoding.as_deref(), &bytes)
    })
    .await;
    match done {
        Ok(r) => reply(r),
        Err(e) => reply(intake.refuse(
            &OtlpError::StoreUnavailable {
                message: format!("the request was not handled: {e}"),
            },
            content_type.as_deref(),
        )),
    }
}

fn reply(r: OtlpReply) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = Response::new(Body::from(r.body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(r.content_type),
    );
    if let Some(s) = r.retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}
