//! The connection loop: connection caps, TLS handshakes and header reads with a deadline,
//! bodies with a deadline, graceful shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::auth::{Access, Authenticator};
use crate::body::TimedBody;
use crate::config::ListenerConfig;
use crate::error::ListenError;
use crate::guard::Guard;
use crate::rate::RateLimiter;
use crate::stats::{ListenerCounters, ListenerStats};

/// The address a request came from, put in its extensions by [`Listener::serve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// How long in-flight requests get to finish once shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// A listener's configuration made ready: TLS loaded, secrets read, limits checked.
#[derive(Clone)]
pub struct Listener {
    config: ListenerConfig,
    tls: Option<TlsAcceptor>,
    auth: Arc<Authenticator>,
    counters: Arc<ListenerCounters>,
    limiter: Arc<RateLimiter>,
    slots: Arc<Slots>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("tls", &self.tls.is_some())
            .field("clients", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// Checks `config` for a listener on `address`, reads its certificate and secret files.
    /// Refuses an address other than loopback without clients, unless
    /// `allow_unauthenticated` says so on purpose.
    pub fn new(config: &ListenerConfig, address: SocketAddr) -> Result<Listener, ListenError> {
        config
            .validate()
            .map_err(|message| ListenError::Config { message })?;
        if config.clients.is_empty() && !address.ip().is_loopback() && !config.allow_unauthenticated
        {
            return Err(ListenError::Config {
                message: format!(
                    "{address} is reachable from other hosts and no `[[listener.clients]]` are configured: anyone could post and read; configure clients (bearer token or basic auth), listen on loopback, or set `listener.allow_unauthenticated = true` on purpose"
                ),
            });
        }
        let tls = match &config.tls {
            Some(t) => Some(TlsAcceptor::from(crate::tls::server_config(t)?)),
            None => None,
        };
        let auth = Arc::new(Authenticator::load(&config.clients)?);
        if auth.enabled() && tls.is_none() && !address.ip().is_loopback() {
            tracing::warn!(%address, "credentials will cross the network in plain text: configure `[listener.tls]`");
        }
        if !auth.enabled() && !address.ip().is_loopback() {
            tracing::warn!(%address, "serving without authentication on an address other hosts can reach (`listener.allow_unauthenticated`)");
        }
        Ok(Listener {
            tls,
            auth,
            counters: Arc::default(),
            limiter: Arc::new(RateLimiter::new(
                config.requests_per_second_per_client,
                config.burst_per_client,
            )),
            slots: Arc::new(Slots {
                max: config.max_connections,
                per_client: config.max_connections_per_client,
                open: Mutex::new((0, HashMap::new())),
            }),
            config: config.clone(),
        })
    }

    /// Whether connections use TLS (`https`) or not (`http`).
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Whether clients are configured (requests need credentials).
    pub fn authenticates(&self) -> bool {
        self.auth.enabled()
    }

    /// The counters of this listener and its guard.
    pub fn stats(&self) -> ListenerStats {
        self.counters.snapshot()
    }

    /// The shared counters (for a stats route).
    pub fn counters(&self) -> Arc<ListenerCounters> {
        Arc::clone(&self.counters)
    }

    /// A `GET` route answering [`ListenerStats`] as JSON (mount it under an operations path).
    pub fn stats_route(&self) -> axum::routing::MethodRouter {
        let counters = self.counters();
        axum::routing::get(move || {
            let counters = Arc::clone(&counters);
            async move { axum::Json(counters.snapshot()) }
        })
    }

    /// `router` behind the guard: each path's route group from `classify`; every route that
    /// is not [`Access::Open`] is rate-limited per client and needs a client allowed its group.
    pub fn protect(
        &self,
        router: Router,
        classify: impl Fn(&str) -> Access + Send + Sync + 'static,
    ) -> Router {
        let guard = Guard {
            auth: Arc::clone(&self.auth),
            limiter: Arc::clone(&self.limiter),
            classify: Arc::new(classify),
            counters: Arc::clone(&self.counters),
        };
        router.layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::guard,
        ))
    }

    /// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, lets
    /// requests in flight finish (at most 30 s) and closes idle connections.
    pub async fn serve(
        self,
        listener: TcpListener,
        app: Router,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                a = listener.accept() => a,
            };
            while tasks.try_join_next().is_some() {}
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(slot) = Slots::claim(&self.slots, peer.ip()) else {
                self.counters.refused();
                tracing::debug!(client = %peer.ip(), "connection refused: over the connection caps");
                drop(stream);
                continue;
            };
            self.counters.accepted();
            let conn = Connection {
                peer,
                app: app.clone(),
                header_timeout: Duration::from_secs(self.config.header_timeout_seconds),
                body_timeout: Duration::from_secs(self.config.body_timeout_seconds),
                counters: Arc::clone(&self.counters),
                stop: stop_rx.clone(),
            };
            let tls = self.tls.clone();
            tasks.spawn(async move {
                conn.run(stream, tls).await;
                drop(slot);
            });
        }
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("requests still running after the shutdown grace period were cut");
            tasks.abort_all();
        }
        Ok(())
    }
}

/// The connection caps: open connections in all and per client address.
#[derive(Debug)]
struct Slots {
    max: usize,
    per_client: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One open connection's place under the caps, given back when dropped.
struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    fn claim(slots: &Arc<Slots>, ip: IpAddr) -> Option<Slot> {
        let mut open = match slots.open.lock() {
            Ok(o) => o,
            Err(p) => p.into_inner(),
        };
        let (total, per) = &mut *open;
        let mine = per.get(&ip).copied().unwrap_or(0);
        if *total >= slots.max || mine >= slots.per_client {
            return None;
        }
        *total += 1;
        per.insert(ip, mine + 1);
        Some(Slot {
            slots: Arc::clone(slots),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = match self.slots.open.lock() {
            Ok(o) => o,
            Err(p) => p.into_inner(),
        };
        let (total, per) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(n) = per.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

struct Connection {
    peer: SocketAddr,
    app: Router,
    header_timeout: Duration,
    body_timeout: Duration,
    counters: Arc<ListenerCounters>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Connection {
    async fn run(self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        let _ = stream.set_nodelay(true);
        let counters = Arc::clone(&self.counters);
        match tls {
            None => self.http(stream).await,
            Some(acceptor) => {
                match tokio::time::timeout(self.header_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(tls_stream)) => self.http(tls_stream).await,
                    Ok(Err(e)) => {
                        counters.tls_failure();
                        tracing::debug!(client = %self.peer, error = %e, "TLS handshake failed");
                    }
                    Err(_) => {
                        counters.tls_failure();
                        tracing::debug!(client = %self.peer, "TLS handshake timed out");
                    }
                }
            }
        }
        counters.closed();
    }

    async fn http<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            peer,
            app,
            header_timeout,
            body_timeout,
            counters,
            mut stop,
        } = self;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ClientAddr(peer));
            let counters = Arc::clone(&counters);
            let request =
                request.map(|b| axum::body::Body::new(TimedBody::new(b, body_timeout, counters)));
            app.clone().oneshot(request)
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .keep_alive(true);
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(client = %peer, error = %e, "connection ended with an error");
                }
            }
            _ = async { let _ = stop.wait_for(|s| *s).await; } => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
    }
}
