//! The rustls server configuration of `[listener.tls]`.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsConfig;
use crate::error::ListenError;

fn invalid(message: String) -> ListenError {
    ListenError::Config { message }
}

fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, ListenError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(format!("cannot read the {what} {}: {e}", path.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("the {what} {} is not PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "the {what} {} holds no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// The server configuration: its certificate and key, and, with `client_ca_file`, a verifier
/// that requires every client to present a certificate of that authority. HTTP/1.1 only.
pub fn server_config(tls: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, ListenError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = certificates(
        &tls.cert_file,
        "certificate chain (`listener.tls.cert_file`)",
    )?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file).map_err(|e| {
        invalid(format!(
            "cannot read a private key from `listener.tls.key_file` {}: {e}",
            tls.key_file.display()
        ))
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS: {e}")))?;
    let builder = match &tls.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca, "client authority (`listener.tls.client_ca_file`)")? {
                roots
                    .add(cert)
                    .map_err(|e| invalid(format!("the client authority {}: {e}", ca.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| invalid(format!("the client authority {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| invalid(format!("the certificate does not match its key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
