//! The layer in front of a router: per-client rate limits, then authentication, for every
//! route but the open ones.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{Access, Authenticator, Sender, Verdict};
use crate::rate::RateLimiter;
use crate::serve::ClientAddr;
use crate::stats::ListenerCounters;

/// Which route group a path belongs to; the host decides.
pub type Classifier = Arc<dyn Fn(&str) -> Access + Send + Sync>;

/// The state of [`guard`]: the clients, the rate limiter, the classifier and the counters.
#[derive(Clone)]
pub struct Guard {
    pub(crate) auth: Arc<Authenticator>,
    pub(crate) limiter: Arc<RateLimiter>,
    pub(crate) classify: Classifier,
    pub(crate) counters: Arc<ListenerCounters>,
}

fn refusal(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {"status": status.as_u16(), "message": message}});
    (status, axum::Json(body)).into_response()
}

/// The middleware (`axum::middleware::from_fn_with_state`). Open routes pass untouched (with
/// the anonymous [`Sender`]). Other routes: 429 with `Retry-After` past the client address's
/// rate (a request not served by [`crate::Listener::serve`] has no address and is not
/// limited); 401 with `WWW-Authenticate` without valid credentials; 403 for a client outside
/// the route's group; otherwise the request goes on with its [`Sender`].
pub async fn guard(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let group = match (guard.classify)(request.uri().path()) {
        Access::Open => {
            request.extensions_mut().insert(Sender::default());
            return next.run(request).await;
        }
        Access::Group(g) => g,
    };
    if let Some(ClientAddr(addr)) = request.extensions().get::<ClientAddr>().copied()
        && let Err(wait) = guard.limiter.take(addr.ip(), Instant::now())
    {
        guard.counters.rate_limited();
        tracing::info!(client = %addr.ip(), "request refused: over the client's request rate");
        let mut response = refusal(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests from this client; retry later",
        );
        if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    }
    let credentials = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match guard.auth.check(credentials, group) {
        Verdict::Anonymous => {
            request.extensions_mut().insert(Sender::default());
            next.run(request).await
        }
        Verdict::Allowed(name) => {
            request.extensions_mut().insert(Sender(name));
            next.run(request).await
        }
        Verdict::Forbidden(name) => {
            guard.counters.forbidden();
            tracing::info!(client = %name, group, "request refused: client not allowed this route group");
            refusal(
                StatusCode::FORBIDDEN,
                &format!("this client may not use the {group} routes"),
            )
        }
        Verdict::Unauthenticated => {
            guard.counters.unauthenticated();
            tracing::info!(group, "request refused: no valid credentials");
            let mut response = refusal(
                StatusCode::UNAUTHORIZED,
                "authentication required: the bearer token or basic auth of a configured client",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"rca\", Basic realm=\"rca\""),
            );
            response
        }
    }
}
