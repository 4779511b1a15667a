//! The OTLP/HTTP endpoints as an axum router: `POST /v1/traces`, `/v1/logs`, `/v1/metrics`,
//! and `GET /otlp/stats` (what [`OtlpIntake::stats`] counts, as JSON).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;

use super::{OtlpError, OtlpIntake, OtlpReply, Signal};

/// The router of an intake. Bodies are read up to the intake's body limit within a minute; a
/// longer one is refused with 413 once read out and discarded (up to four times the limit,
/// so that a sender still writing hears the answer; past that, or declared longer, at once).
/// Decoding and storing run on the blocking pool.
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
    // A body declared longer than would be read to its end is refused before any of it.
    let declared = header_text(&parts.headers, header::CONTENT_LENGTH)
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit.saturating_mul(4) as u64) {
        let error = OtlpError::TooLarge {
            what: "the body",
            limit: limit as u64,
        };
        return reply(intake.refuse(&error, content_type.as_deref()));
    }
    let bytes = match read_body(body, limit).await {
        Ok(b) => b,
        Err(error) => return reply(intake.refuse(&error, content_type.as_deref())),
    };
    // At most `max_concurrent_decodes` bodies are decoded at once; past that the sender is
    // told to retry, before any memory is spent on decoding.
    let permit = match intake.decode_permit() {
        Ok(p) => p,
        Err(error) => return reply(intake.refuse(&error, content_type.as_deref())),
    };
    let worker = Arc::clone(&intake);
    let ct = content_type.clone();
    let done = tokio::task::spawn_blocking(move || {
        let reply = worker.receive(signal, ct.as_deref(), content_encoding.as_deref(), &bytes);
        drop(permit);
        reply
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

/// The longest a request body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads a body of at most `limit` bytes. A longer one is refused with 413, but read to its
/// end (discarded, up to four times the limit) first, so that a sender still writing it gets
/// the answer rather than a reset connection; past that the connection is dropped.
async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, OtlpError> {
    let too_large = || OtlpError::TooLarge {
        what: "the body",
        limit: limit as u64,
    };
    let drain_limit = limit.saturating_mul(4);
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    let mut seen = 0usize;
    let read = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| OtlpError::BadRequest {
                message: format!("the body could not be read: {e}"),
            })?;
            seen = seen.saturating_add(chunk.len());
            if seen > drain_limit {
                return Err(too_large());
            }
            if seen <= limit {
                kept.extend_from_slice(&chunk);
            }
        }
        Ok(())
    };
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Err(_) => Err(OtlpError::BadRequest {
            message: format!(
                "the body did not arrive within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        }),
        Ok(Err(e)) => Err(e),
        Ok(Ok(())) if seen > limit => Err(too_large()),
        Ok(Ok(())) => Ok(kept),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bodies_over_the_limit_are_read_out_then_refused() {
        let ok = read_body(Body::from(vec![1u8; 100]), 100).await.unwrap();
        assert_eq!(ok.len(), 100);
        let over = read_body(Body::from(vec![1u8; 101]), 100).await;
        assert!(matches!(over, Err(OtlpError::TooLarge { .. })), "{over:?}");
        let far_over = read_body(Body::from(vec![1u8; 1000]), 100).await;
        assert!(matches!(far_over, Err(OtlpError::TooLarge { .. })));
    }
}
