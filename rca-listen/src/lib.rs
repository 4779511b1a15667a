//! HTTP listeners safe to expose, for axum routers.
//!
//! A host describes the listener in a `[listener]` table ([`ListenerConfig`]), makes it ready
//! with [`Listener::new`] (which refuses an address other hosts can reach without
//! authentication), puts its router behind [`Listener::protect`] with a classifier naming
//! each path's route group, and serves it with [`Listener::serve`]:
//!
//! - **TLS** (rustls) on every connection, optionally requiring client certificates;
//! - **authentication** per route group: bearer tokens and basic auth, the secrets stored as
//!   SHA-256 hashes in files and compared in constant time; the client's name reaches the
//!   handlers as [`Sender`];
//! - **limits that hold under hostile clients**: a deadline for the TLS handshake and the
//!   headers (also closing idle kept-alive connections), a deadline for the body, a cap on
//!   open connections in all and per client address, a request rate per client address;
//! - **counts** of what was refused ([`ListenerStats`]).

mod auth;
mod body;
mod config;
mod error;
mod guard;
mod rate;
mod serve;
mod stats;
mod tls;

pub use auth::{Access, Authenticator, Sender, Verdict, hash_secret};
pub use body::{BoxError, TimedBody};
pub use config::{ClientConfig, ListenerConfig, TlsConfig};
pub use error::ListenError;
pub use guard::{Classifier, Guard, guard};
pub use rate::RateLimiter;
pub use serve::{ClientAddr, Listener};
pub use stats::{ListenerCounters, ListenerStats};
#[cfg(feature = "test-pki")]
mod test_pki;
#[cfg(feature = "test-pki")]
pub use test_pki::{TestPki, bearer_client};
