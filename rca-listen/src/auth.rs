//! Authentication per route group: bearer tokens and basic auth, checked against hashed
//! secrets in constant time.
//!
//! Secrets are stored as their SHA-256 (`sha256:<hex>`). The tokens this is meant for are
//! random (at least 128 bits, e.g. `openssl rand -hex 32`), for which a fast hash is the right
//! one: there is nothing to guess, and a slow hash on every request would hand a flood a
//! second lever. A request's credential is hashed once and compared with every client's in
//! constant time, so the time of a refusal says nothing about how close a guess came.

use std::path::Path;

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ClientConfig;
use crate::error::ListenError;

/// The name of the client that sent a request, put in the request's extensions by the
/// authentication layer. Empty when authentication is off (the anonymous sender).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sender(pub String);

impl Sender {
    /// The client's name; empty for the anonymous sender.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// Who may use a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (health checks).
    Open,
    /// Clients allowed the named route group.
    Group(&'static str),
}

/// `sha256:<hex>` of `secret`: what a client's secret file holds.
pub fn hash_secret(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn read_hash(path: &Path, client: &str) -> Result<[u8; 32], ListenError> {
    let text = std::fs::read_to_string(path).map_err(|e| ListenError::Config {
        message: format!(
            "client {client:?}: cannot read the secret file {}: {e}",
            path.display()
        ),
    })?;
    parse_hash(text.trim()).ok_or_else(|| ListenError::Config {
        message: format!(
            "client {client:?}: {} must hold `sha256:` and 64 hex digits, the hash of the secret and not the secret (`sha256:` followed by what `printf %s \"$SECRET\" | sha256sum` prints)",
            path.display()
        ),
    })
}

fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[derive(Clone)]
enum Credential {
    Bearer([u8; 32]),
    Basic {
        username: Vec<u8>,
        password: [u8; 32],
    },
}

#[derive(Clone)]
struct Client {
    name: String,
    routes: Vec<String>,
    credential: Credential,
}

/// The clients a listener lets in, with their hashed secrets. Never printed: its `Debug`
/// names the clients only.
#[derive(Clone, Default)]
pub struct Authenticator {
    clients: Vec<Client>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.clients.iter().map(|c| &c.name))
            .finish()
    }
}

/// What a request's credentials turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No authentication configured: the anonymous sender.
    Anonymous,
    /// A known client allowed the route group.
    Allowed(String),
    /// A known client not allowed this route group (403).
    Forbidden(String),
    /// No credentials, or none that match a client (401).
    Unauthenticated,
}

impl Authenticator {
    /// The clients of `[[listener.clients]]`, their secret files read now.
    pub fn load(clients: &[ClientConfig]) -> Result<Authenticator, ListenError> {
        let mut out = Vec::new();
        for c in clients {
            let credential = match (&c.bearer_token_file, &c.username, &c.password_file) {
                (Some(file), None, None) => Credential::Bearer(read_hash(file, &c.name)?),
                (None, Some(user), Some(file)) => Credential::Basic {
                    username: user.as_bytes().to_vec(),
                    password: read_hash(file, &c.name)?,
                },
                _ => {
                    return Err(ListenError::Config {
                        message: format!(
                            "client {:?}: give either `bearer_token_file`, or `username` with `password_file`",
                            c.name
                        ),
                    });
                }
            };
            out.push(Client {
                name: c.name.clone(),
                routes: c.routes.clone(),
                credential,
            });
        }
        Ok(Authenticator { clients: out })
    }

    /// Whether any client is configured (authentication is on).
    pub fn enabled(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The verdict on an `Authorization` header value for route group `group`.
    pub fn check(&self, authorization: Option<&[u8]>, group: &str) -> Verdict {
        if !self.enabled() {
            return Verdict::Anonymous;
        }
        let Some(client) = authorization.and_then(|v| self.identify(v)) else {
            return Verdict::Unauthenticated;
        };
        if client.routes.iter().any(|r| r == group) {
            Verdict::Allowed(client.name.clone())
        } else {
            Verdict::Forbidden(client.name.clone())
        }
    }

    /// The client whose credential the header carries. Every client is compared (no early
    /// exit), each comparison in constant time.
    fn identify(&self, value: &[u8]) -> Option<&Client> {
        let text = std::str::from_utf8(value).ok()?.trim();
        let (scheme, rest) = text.split_once(' ')?;
        let rest = rest.trim();
        let mut found = None;
        if scheme.eq_ignore_ascii_case("bearer") {
            let hash: [u8; 32] = Sha256::digest(rest.as_bytes()).into();
            for c in &self.clients {
                if let Credential::Bearer(h) = &c.credential
                    && bool::from(h.ct_eq(&hash))
                {
                    found = Some(c);
                }
            }
        } else if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.as_bytes())
                .ok()?;
            let colon = decoded.iter().position(|b| *b == b':')?;
            let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
            let hash: [u8; 32] = Sha256::digest(password).into();
            for c in &self.clients {
                if let Credential::Basic { username, password } = &c.credential {
                    let same_user =
                        username.len() == user.len() && bool::from(username.ct_eq(user));
                    if same_user & bool::from(password.ct_eq(&hash)) {
                        found = Some(c);
                    }
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_secret(dir: &Path, name: &str, secret: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, hash_secret(secret)).unwrap();
        path
    }

    fn clients(dir: &Path) -> Authenticator {
        let am = with_secret(dir, "am", "token-of-alertmanager");
        let collector = with_secret(dir, "col", "pw-of-collector");
        Authenticator::load(&[
            ClientConfig {
                name: "alertmanager".into(),
                routes: vec!["alerts".into()],
                bearer_token_file: Some(am),
                username: None,
                password_file: None,
            },
            ClientConfig {
                name: "collector".into(),
                routes: vec!["telemetry".into(), "reports".into()],
                bearer_token_file: None,
                username: Some("otel".into()),
                password_file: Some(collector),
            },
        ])
        .unwrap()
    }

    #[test]
    fn bearer_and_basic_credentials_are_checked_per_route_group() {
        let dir = tempfile::tempdir().unwrap();
        let auth = clients(dir.path());
        let bearer = b"Bearer token-of-alertmanager".as_slice();
        assert_eq!(
            auth.check(Some(bearer), "alerts"),
            Verdict::Allowed("alertmanager".into())
        );
        assert_eq!(
            auth.check(Some(bearer), "reports"),
            Verdict::Forbidden("alertmanager".into())
        );
        assert_eq!(
            auth.check(Some(b"Bearer token-of-alertmanagex"), "alerts"),
            Verdict::Unauthenticated
        );
        assert_eq!(auth.check(None, "alerts"), Verdict::Unauthenticated);
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("otel:pw-of-collector")
        );
        assert_eq!(
            auth.check(Some(basic.as_bytes()), "telemetry"),
            Verdict::Allowed("collector".into())
        );
        let wrong_user = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("otelx:pw-of-collector")
        );
        assert_eq!(
            auth.check(Some(wrong_user.as_bytes()), "telemetry"),
            Verdict::Unauthenticated
        );
        // A bearer token equal to a basic password is not that client's credential.
        assert_eq!(
            auth.check(Some(b"Bearer pw-of-collector"), "telemetry"),
            Verdict::Unauthenticated
        );
        assert_eq!(
            Authenticator::default().check(None, "alerts"),
            Verdict::Anonymous
        );
    }

    #[test]
    fn secret_files_must_hold_a_hash_and_debug_names_clients_only() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "token-of-alertmanager").unwrap();
        let err = Authenticator::load(&[ClientConfig {
            name: "am".into(),
            routes: vec!["alerts".into()],
            bearer_token_file: Some(plain),
            username: None,
            password_file: None,
        }])
        .unwrap_err();
        assert!(err.to_string().contains("sha256:"), "{err}");
        assert!(!err.to_string().contains("token-of-alertmanager"), "{err}");
        let auth = clients(dir.path());
        let shown = format!("{auth:?}");
        assert_eq!(shown, r#"["alertmanager", "collector"]"#);
        assert_eq!(
            parse_hash(&hash_secret("x")),
            Some(Sha256::digest(b"x").into())
        );
    }
}
