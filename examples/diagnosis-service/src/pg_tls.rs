//! PostgreSQL over TLS: tokio-postgres's TLS traits ([`MakeTlsConnect`], [`TlsConnect`],
//! [`TlsStream`]) over rustls and tokio-rustls, with the aws-lc-rs provider the listener
//! already builds (never the process's default provider).
//!
//! The server's certificate is verified against `postgres.ca_file` only (no system roots),
//! and must name the host of `postgres.url` (as libpq's `sslmode=verify-full` does); a client
//! certificate (`postgres.client_cert_file`, `postgres.client_key_file`) is presented when
//! the server asks for one. The session's `tls-server-end-point` channel binding is handed to
//! tokio-postgres, so that SCRAM authentication binds to the TLS session
//! (`SCRAM-SHA-256-PLUS`; `channel_binding=require` in the URL insists on it).
//!
//! Whether TLS is used is the URL's `sslmode`: `disable` never, `prefer` (the default) when
//! the server offers it, `require` always. Without `ca_file` there is no TLS at all, and
//! `sslmode=require` is a configuration error.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use sha2::Digest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use crate::config::PostgresConfig;

/// The TLS of `[postgres]`: a tokio-postgres [`MakeTlsConnect`] over rustls, trusting only the
/// authority of `postgres.ca_file`. Cheap to clone.
#[derive(Clone)]
pub struct PgTls {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTls").finish_non_exhaustive()
    }
}

impl PgTls {
    /// The TLS of `config`: `None` without `ca_file` (no TLS). Reads and checks the files;
    /// the message names the key at fault. `sslmode=require` in the URL without `ca_file` is
    /// an error, as is a client certificate without its key (or the reverse).
    pub fn from_config(config: &PostgresConfig) -> Result<Option<PgTls>, String> {
        let url: tokio_postgres::Config = config.url.parse().map_err(|e| {
            format!(
                "`postgres.url` is not a connection string: {}",
                crate::pg::describe(&e)
            )
        })?;
        let Some(ca_file) = &config.ca_file else {
            if url.get_ssl_mode() == SslMode::Require {
                return Err(
                    "`postgres.url` asks for sslmode=require, which needs `postgres.ca_file`: \
                     the PEM file of the authority that signed the server's certificate (no \
                     system roots are trusted)"
                        .into(),
                );
            }
            if config.client_cert_file.is_some() || config.client_key_file.is_some() {
                return Err(
                    "`postgres.client_cert_file` and `postgres.client_key_file` need TLS: set \
                     `postgres.ca_file` too"
                        .into(),
                );
            }
            return Ok(None);
        };
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca_file, "postgres.ca_file")? {
            roots.add(cert).map_err(|e| {
                format!(
                    "`postgres.ca_file` {}: not a usable authority certificate: {e}",
                    ca_file.display()
                )
            })?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("postgres TLS: {e}"))?
            .with_root_certificates(roots);
        let mut tls = match (&config.client_cert_file, &config.client_key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert_file), Some(key_file)) => {
                let chain = certificates(cert_file, "postgres.client_cert_file")?;
                let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
                    format!(
                        "`postgres.client_key_file` {}: cannot read a PEM private key: {e}",
                        key_file.display()
                    )
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    format!(
                        "`postgres.client_cert_file` and `postgres.client_key_file` do not make \
                         a client certificate: {e}"
                    )
                })?
            }
            (Some(_), None) => {
                return Err(
                    "`postgres.client_cert_file` is set without `postgres.client_key_file`".into(),
                );
            }
            (None, Some(_)) => {
                return Err(
                    "`postgres.client_key_file` is set without `postgres.client_cert_file`".into(),
                );
            }
        };
        // PostgreSQL 17's direct TLS negotiation (`sslnegotiation=direct`) requires it; older
        // servers ignore it.
        tls.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Some(PgTls {
            config: Arc::new(tls),
        }))
    }
}

/// The certificates of the PEM file `path`, the configuration key `key`.
fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("`{key}` {}: cannot read it: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{key}` {}: not PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "`{key}` {}: holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<PgTlsConnect, io::Error> {
        let server_name = ServerName::try_from(domain.to_string()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TLS needs the server's host name or address in `postgres.url` (`host=`) \
                     to verify its certificate; got {domain:?}"
                ),
            )
        })?;
        Ok(PgTlsConnect {
            config: Arc::clone(&self.config),
            server_name,
        })
    }
}

/// One TLS handshake with one server (made by [`PgTls`] for each host it connects to).
pub struct PgTlsConnect {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for PgTlsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTlsConnect")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<PgTlsStream<S>, io::Error>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        let name = self.server_name;
        Box::pin(async move {
            let shown = name.to_str().into_owned();
            let inner = connector
                .connect(name, stream)
                .await
                .map_err(|e| explain(e, &shown))?;
            let binding = inner
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|cert| server_end_point(cert.as_ref()));
            Ok(PgTlsStream { inner, binding })
        })
    }
}

/// A handshake's error, with what a certificate problem means here.
fn explain(e: io::Error, host: &str) -> io::Error {
    let Some(tls) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
        return e;
    };
    let why = match tls {
        rustls::Error::InvalidCertificate(cert) => {
            let what = match cert {
                rustls::CertificateError::UnknownIssuer
                | rustls::CertificateError::BadSignature => {
                    "the server's certificate is not signed by the authority of \
                     `postgres.ca_file`"
                        .to_string()
                }
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => format!(
                    "the server's certificate does not name {host} (the host of `postgres.url`)"
                ),
                rustls::CertificateError::Expired
                | rustls::CertificateError::ExpiredContext { .. } => {
                    "the server's certificate has expired".to_string()
                }
                _ => "the server's certificate was refused".to_string(),
            };
            format!("certificate verify failed: {what} ({tls})")
        }
        _ => format!("TLS with {host} failed: {tls}"),
    };
    io::Error::new(e.kind(), why)
}

/// RFC 5929's `tls-server-end-point` of a DER certificate: its hash by the hash of its
/// signature algorithm (SHA-256 for MD5 and SHA-1), as PostgreSQL computes it. `None` for
/// algorithms without one (RSASSA-PSS, EdDSA): SCRAM then goes without channel binding.
fn server_end_point(der: &[u8]) -> Option<Vec<u8>> {
    let (certificate, _) = der_element(der, 0x30)?;
    let (_, rest) = der_element(certificate, 0x30)?;
    let (algorithm, _) = der_element(rest, 0x30)?;
    let (oid, _) = der_element(algorithm, 0x06)?;
    // 1.2.840.113549.1.1.x (RSA) and 1.2.840.10045.4.x (ECDSA).
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
    const ECDSA_SHA2: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    let hash = if oid == ECDSA_SHA1 {
        256
    } else if let Some(&[n]) = oid.strip_prefix(RSA) {
        match n {
            4 | 5 | 11 => 256,
            12 => 384,
            13 => 512,
            14 => 224,
            _ => return None,
        }
    } else if let Some(&[n]) = oid.strip_prefix(ECDSA_SHA2) {
        match n {
            1 => 224,
            2 => 256,
            3 => 384,
            4 => 512,
            _ => return None,
        }
    } else {
        return None;
    };
    Some(match hash {
        224 => sha2::Sha224::digest(der).to_vec(),
        384 => sha2::Sha384::digest(der).to_vec(),
        512 => sha2::Sha512::digest(der).to_vec(),
        _ => sha2::Sha256::digest(der).to_vec(),
    })
}

/// The content of the DER element at the start of `input` if its tag is `tag`, and what
/// follows it.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = input.split_first()?;
    if first != tag {
        return None;
    }
    let (&len, mut rest) = rest.split_first()?;
    let len = if len < 0x80 {
        usize::from(len)
    } else {
        let n = usize::from(len & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A connection to PostgreSQL over TLS (made by [`PgTlsConnect`]).
pub struct PgTlsStream<S> {
    inner: tokio_rustls::client::TlsStream<S>,
    binding: Option<Vec<u8>>,
}

impl<S> std::fmt::Debug for PgTlsStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTlsStream").finish_non_exhaustive()
    }
}

impl<S> TlsStream for PgTlsStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    fn channel_binding(&self) -> ChannelBinding {
        match &self.binding {
            Some(hash) => ChannelBinding::tls_server_end_point(hash.clone()),
            None => ChannelBinding::none(),
        }
    }
}

impl<S> AsyncRead for PgTlsStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S> AsyncWrite for PgTlsStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_elements_are_read_with_short_and_long_lengths() {
        assert_eq!(
            der_element(&[0x30, 2, 1, 2, 9], 0x30),
            Some((&[1u8, 2][..], &[9u8][..]))
        );
        let mut long = vec![0x04, 0x81, 200];
        long.extend(std::iter::repeat_n(7u8, 200));
        let (content, rest) = der_element(&long, 0x04).unwrap();
        assert_eq!((content.len(), rest.len()), (200, 0));
        assert_eq!(der_element(&[0x30, 5, 1], 0x30), None, "truncated");
        assert_eq!(der_element(&[0x31, 0], 0x30), None, "another tag");
    }

    #[test]
    fn the_end_point_hash_follows_the_signature_algorithm() {
        // A minimal "certificate": SEQUENCE { SEQUENCE {} (tbs), SEQUENCE { OID } }.
        let cert = |oid: &[u8]| {
            let mut alg = vec![0x06, oid.len() as u8];
            alg.extend_from_slice(oid);
            let mut body = vec![0x30, 0];
            body.extend_from_slice(&[0x30, alg.len() as u8]);
            body.extend(alg);
            let mut der = vec![0x30, body.len() as u8];
            der.extend(body);
            der
        };
        let ecdsa_sha256 = cert(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]);
        assert_eq!(
            server_end_point(&ecdsa_sha256),
            Some(sha2::Sha256::digest(&ecdsa_sha256).to_vec())
        );
        let rsa_sha384 = cert(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c]);
        assert_eq!(server_end_point(&rsa_sha384).map(|h| h.len()), Some(48));
        let rsa_sha1 = cert(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05]);
        assert_eq!(server_end_point(&rsa_sha1).map(|h| h.len()), Some(32));
        let ed25519 = cert(&[0x2b, 0x65, 0x70]);
        assert_eq!(server_end_point(&ed25519), None);
    }
}
