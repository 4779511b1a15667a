//! Streamable HTTP: rmcp's `StreamableHttpService` behind rca-listen's [`Listener`], so the
//! MCP endpoint inherits its deadlines, connection caps, per-client rates, TLS and bearer
//! authentication (hashed tokens compared in constant time).

use std::future::Future;
use std::sync::Arc;

use rca_listen::{Access, Listener, ListenerConfig, ListenerStats};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::error::McpError;
use crate::server::RcaMcp;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// The route group a client must be allowed (`routes = ["mcp"]` in `[[listener.clients]]`).
pub const ROUTE_GROUP: &str = "mcp";
/// The route group of [`HttpOptions::telemetry_routes`] (the paths under `/v1/`).
pub const TELEMETRY_GROUP: &str = "telemetry";

/// How the HTTP transport is served.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// The listener: deadlines, caps, rates, TLS and the clients (each with a bearer token
    /// file allowed the route group [`ROUTE_GROUP`]).
    pub listener: ListenerConfig,
    /// Serve without clients, on purpose, when bound to loopback. Without this flag, and
    /// always on an address other hosts can reach, the transport requires a bearer token.
    pub allow_unauthenticated_loopback: bool,
    /// Host names (with an optional port) accepted in the `Host` header besides the loopback
    /// names and the bound address (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// The largest request body accepted by the MCP endpoint (bytes; 0: 1 MiB).
    pub max_body_bytes: usize,
    /// Routes under `/v1/` served on the same listener in the route group
    /// [`TELEMETRY_GROUP`]: an OTLP/HTTP intake feeding the live sources.
    pub telemetry_routes: Option<axum::Router>,
}

/// Checks that the transport on `address` is authenticated, or unauthenticated on loopback
/// on purpose.
pub fn check_auth(options: &HttpOptions, address: std::net::SocketAddr) -> Result<(), McpError> {
    let clients = &options.listener.clients;
    if clients.is_empty() {
        if !address.ip().is_loopback() {
            return Err(McpError::config(format!(
                "{address} is reachable from other hosts: the MCP transport requires a bearer token there (a client with `bearer_token_file`, or --token-file)"
            )));
        }
        if !options.allow_unauthenticated_loopback {
            return Err(McpError::config(
                "the MCP HTTP transport requires a bearer token (a client with `bearer_token_file`, or --token-file); on loopback, --allow-unauthenticated-loopback serves without one on purpose",
            ));
        }
        return Ok(());
    }
    if !clients
        .iter()
        .any(|c| c.routes.iter().any(|r| r == ROUTE_GROUP))
    {
        return Err(McpError::config(format!(
            "no `[[listener.clients]]` is allowed the route group {ROUTE_GROUP:?}: add it to a client's `routes`"
        )));
    }
    Ok(())
}

/// A listener configuration with one client, `name`, whose bearer token's hash
/// (`sha256:<hex>`, see [`rca_listen::hash_secret`]) is in `token_file`, allowed the MCP
/// endpoint and the telemetry routes.
pub fn token_client(
    mut listener: ListenerConfig,
    name: &str,
    token_file: std::path::PathBuf,
) -> ListenerConfig {
    listener.clients.push(rca_listen::ClientConfig {
        name: name.to_string(),
        routes: vec![ROUTE_GROUP.to_string(), TELEMETRY_GROUP.to_string()],
        bearer_token_file: Some(token_file),
        username: None,
        password_file: None,
    });
    listener
}

/// Serves `server` over Streamable HTTP at [`MCP_PATH`] on `socket` until `shutdown`
/// resolves; returns the listener's counts. Refuses to start unauthenticated unless
/// [`check_auth`] allows it.
pub async fn serve_http(
    server: RcaMcp,
    socket: TcpListener,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ListenerStats, McpError> {
    let address = socket
        .local_addr()
        .map_err(|e| McpError::failed(format!("the socket has no address: {e}")))?;
    check_auth(&options, address)?;
    let guard =
        Listener::new(&options.listener, address).map_err(|e| McpError::config(e.to_string()))?;
    let mut config = StreamableHttpServerConfig::default();
    // Stateless, JSON answers: nothing is kept per client between requests.
    config.legacy_session_mode = false;
    config.json_response = true;
    config.max_request_body_bytes = if options.max_body_bytes == 0 {
        1 << 20
    } else {
        options.max_body_bytes
    };
    let mut hosts = config.allowed_hosts.clone();
    if !address.ip().is_unspecified() {
        hosts.push(address.ip().to_string());
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    config.allowed_hosts = hosts;
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new()
        .route_service(MCP_PATH, service)
        .route("/listener/stats", guard.stats_route());
    if let Some(telemetry) = options.telemetry_routes.clone() {
        router = router.merge(telemetry);
    }
    let router = guard.protect(router, |path| {
        if path.starts_with("/v1/") {
            Access::Group(TELEMETRY_GROUP)
        } else {
            Access::Group(ROUTE_GROUP)
        }
    });
    guard
        .clone()
        .serve(socket, router, async move {
            shutdown.await;
            cancel.cancel();
        })
        .await
        .map_err(|e| McpError::failed(format!("the HTTP transport stopped: {e}")))?;
    Ok(guard.stats())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthenticated_only_on_loopback_and_only_on_purpose() {
        let loopback: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let public: std::net::SocketAddr = "0.0.0.0:0".parse().unwrap();
        let mut options = HttpOptions::default();
        assert!(check_auth(&options, loopback).is_err());
        options.allow_unauthenticated_loopback = true;
        assert!(check_auth(&options, loopback).is_ok());
        assert!(check_auth(&options, public).is_err());
        let with_token = HttpOptions {
            listener: token_client(ListenerConfig::default(), "host", "t".into()),
            ..HttpOptions::default()
        };
        assert!(check_auth(&with_token, public).is_ok());
        let mut wrong_group = with_token.clone();
        wrong_group.listener.clients[0].routes = vec!["alerts".into()];
        assert!(check_auth(&wrong_group, loopback).is_err());
    }
}
