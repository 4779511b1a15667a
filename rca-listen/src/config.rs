//! The `[listener]` table: limits, TLS and the clients allowed in, as a host's configuration
//! file gives them.

use std::path::PathBuf;

use serde::Deserialize;

/// How a listener accepts connections and requests.
///
/// Every limit has a default that holds on a small machine; see the hardening guide for the
/// reasoning behind each. Deserialised from TOML (`[listener]`) with unknown keys refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// The longest a client may take to send a request's headers (and a TLS handshake), in
    /// seconds; an idle kept-alive connection is closed after it too.
    #[serde(default = "default_header_timeout")]
    pub header_timeout_seconds: u64,
    /// The longest a client may take to send a request's body once its headers are in, in
    /// seconds; past it the body read fails (408) and the connection is closed.
    #[serde(default = "default_body_timeout")]
    pub body_timeout_seconds: u64,
    /// The most connections open at once; past it a new connection is closed at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// The most connections open at once from one client address.
    #[serde(default = "default_max_connections_per_client")]
    pub max_connections_per_client: usize,
    /// Requests per second one client address may sustain on the rate-limited routes.
    #[serde(default = "default_rate")]
    pub requests_per_second_per_client: f64,
    /// Requests one client address may send in a burst above the sustained rate.
    #[serde(default = "default_burst")]
    pub burst_per_client: u32,
    /// Serve without authentication on an address other than loopback. Off by default: a
    /// listener reachable from other hosts refuses to start without `[[listener.clients]]`.
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// TLS for every connection; unset: plain HTTP.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// The clients allowed in, each with one credential and the route groups it may use.
    /// Empty: no authentication (loopback only, unless `allow_unauthenticated`).
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            header_timeout_seconds: default_header_timeout(),
            body_timeout_seconds: default_body_timeout(),
            max_connections: default_max_connections(),
            max_connections_per_client: default_max_connections_per_client(),
            requests_per_second_per_client: default_rate(),
            burst_per_client: default_burst(),
            allow_unauthenticated: false,
            tls: None,
            clients: Vec::new(),
        }
    }
}

/// `[listener.tls]`: the server's certificate and, optionally, the authority its clients'
/// certificates must chain to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, PEM, leaf first.
    pub cert_file: PathBuf,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// When set, every client must present a certificate signed by an authority in this PEM
    /// file (mutual TLS); the handshake fails otherwise.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

/// `[[listener.clients]]`: one client and its credential. Exactly one of `bearer_token_file`
/// and (`username`, `password_file`) is given. The files hold the secret's SHA-256 as
/// `sha256:<64 hex digits>` (see [`crate::hash_secret`]), never the secret itself.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// The client's name: the sender recorded with what it posts, and in logs.
    pub name: String,
    /// The route groups it may use (the host names them, e.g. `alerts`, `telemetry`,
    /// `reports`, `operations`).
    pub routes: Vec<String>,
    /// A file holding the hash of the client's bearer token (`Authorization: Bearer ...`).
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// The basic-auth user name (`Authorization: Basic ...`).
    #[serde(default)]
    pub username: Option<String>,
    /// A file holding the hash of the basic-auth password.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

fn default_header_timeout() -> u64 {
    10
}
fn default_body_timeout() -> u64 {
    60
}
fn default_max_connections() -> usize {
    1024
}
fn default_max_connections_per_client() -> usize {
    128
}
fn default_rate() -> f64 {
    100.0
}
fn default_burst() -> u32 {
    200
}

impl ListenerConfig {
    /// Takes the relative paths (certificates, keys, secret files) as relative to `base`, the
    /// folder of the configuration file that named them.
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(tls) = self.tls.as_mut() {
            resolve(&mut tls.cert_file);
            resolve(&mut tls.key_file);
            tls.client_ca_file.iter_mut().for_each(resolve);
        }
        for client in &mut self.clients {
            client.bearer_token_file.iter_mut().for_each(resolve);
            client.password_file.iter_mut().for_each(resolve);
        }
    }

    /// Checks the values; the message names the key and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.header_timeout_seconds == 0 || self.header_timeout_seconds > 3600 {
            return Err("`listener.header_timeout_seconds` must be between 1 and 3600".into());
        }
        if self.body_timeout_seconds == 0 || self.body_timeout_seconds > 3600 {
            return Err("`listener.body_timeout_seconds` must be between 1 and 3600".into());
        }
        if self.max_connections == 0 {
            return Err("`listener.max_connections` must be at least 1".into());
        }
        if self.max_connections_per_client == 0 {
            return Err("`listener.max_connections_per_client` must be at least 1".into());
        }
        if !(self.requests_per_second_per_client.is_finite()
            && self.requests_per_second_per_client > 0.0)
        {
            return Err(
                "`listener.requests_per_second_per_client` must be a positive number".into(),
            );
        }
        if self.burst_per_client == 0 {
            return Err("`listener.burst_per_client` must be at least 1".into());
        }
        let mut names = std::collections::HashSet::new();
        for c in &self.clients {
            if c.name.trim().is_empty() {
                return Err("every `[[listener.clients]]` needs a `name`".into());
            }
            if !names.insert(c.name.as_str()) {
                return Err(format!(
                    "two `[[listener.clients]]` are named {:?}: names identify senders",
                    c.name
                ));
            }
            if c.routes.is_empty() {
                return Err(format!(
                    "client {:?}: `routes` must name at least one route group",
                    c.name
                ));
            }
            match (&c.bearer_token_file, &c.username, &c.password_file) {
                (Some(_), None, None) | (None, Some(_), Some(_)) => {}
                _ => {
                    return Err(format!(
                        "client {:?}: give either `bearer_token_file`, or `username` with `password_file`",
                        c.name
                    ));
                }
            }
        }
        Ok(())
    }
}
