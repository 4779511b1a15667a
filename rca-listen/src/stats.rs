//! What a listener counts: connections and the requests it refused before a handler ran.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// The counters a listener and its layers share.
#[derive(Debug, Default)]
pub struct ListenerCounters {
    connections_accepted: AtomicU64,
    connections_refused: AtomicU64,
    connections_open: AtomicU64,
    tls_failures: AtomicU64,
    unauthenticated: AtomicU64,
    forbidden: AtomicU64,
    rate_limited: AtomicU64,
    body_timeouts: AtomicU64,
}

/// A snapshot of [`ListenerCounters`], as `GET` routes serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ListenerStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections closed at once: over `max_connections` or `max_connections_per_client`.
    pub connections_refused: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// TLS handshakes that failed or timed out.
    pub tls_failures: u64,
    /// Requests refused with 401: no credentials, or none of a configured client.
    pub unauthenticated: u64,
    /// Requests refused with 403: a client outside the route's group.
    pub forbidden: u64,
    /// Requests refused with 429: over the client's request rate.
    pub rate_limited: u64,
    /// Request bodies that did not arrive within `body_timeout_seconds`.
    pub body_timeouts: u64,
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

impl ListenerCounters {
    /// A snapshot.
    pub fn snapshot(&self) -> ListenerStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ListenerStats {
            connections_accepted: get(&self.connections_accepted),
            connections_refused: get(&self.connections_refused),
            connections_open: get(&self.connections_open),
            tls_failures: get(&self.tls_failures),
            unauthenticated: get(&self.unauthenticated),
            forbidden: get(&self.forbidden),
            rate_limited: get(&self.rate_limited),
            body_timeouts: get(&self.body_timeouts),
        }
    }
    pub(crate) fn accepted(&self) {
        bump(&self.connections_accepted);
        bump(&self.connections_open);
    }
    pub(crate) fn closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
    pub(crate) fn refused(&self) {
        bump(&self.connections_refused);
    }
    pub(crate) fn tls_failure(&self) {
        bump(&self.tls_failures);
    }
    pub(crate) fn unauthenticated(&self) {
        bump(&self.unauthenticated);
    }
    pub(crate) fn forbidden(&self) {
        bump(&self.forbidden);
    }
    pub(crate) fn rate_limited(&self) {
        bump(&self.rate_limited);
    }
    pub(crate) fn body_timeout(&self) {
        bump(&self.body_timeouts);
    }
}
