//! A throw-away certificate authority for tests (feature `test-pki`): a server certificate for
//! `localhost` and `127.0.0.1`, and a client certificate, all written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};

/// The PEM files of a test authority, its server and its client.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The authority's certificate (trust it on the client side, or as `client_ca_file`).
    pub ca_file: PathBuf,
    /// The server's certificate (for `localhost` and `127.0.0.1`).
    pub server_cert_file: PathBuf,
    /// The server's key.
    pub server_key_file: PathBuf,
    /// A client certificate of the same authority.
    pub client_cert_file: PathBuf,
    /// The client's key.
    pub client_key_file: PathBuf,
}

/// A client with a bearer token: its hash written to `dir/<name>.sha256`.
pub fn bearer_client(
    dir: &Path,
    name: &str,
    routes: &[&str],
    token: &str,
) -> std::io::Result<crate::ClientConfig> {
    let file = dir.join(format!("{name}.sha256"));
    std::fs::write(&file, crate::hash_secret(token))?;
    Ok(crate::ClientConfig {
        name: name.into(),
        routes: routes.iter().map(|r| r.to_string()).collect(),
        bearer_token_file: Some(file),
        username: None,
        password_file: None,
    })
}

fn failed(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl TestPki {
    /// Generates the authority and both certificates into `dir`.
    pub fn generate(dir: &Path) -> std::io::Result<TestPki> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "rca test authority");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?)
            .map_err(failed)?;
        let mut server_params =
            CertificateParams::new(vec!["localhost".to_string()]).map_err(failed)?;
        server_params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        let server_key = KeyPair::generate().map_err(failed)?;
        let server = server_params.signed_by(&server_key, &ca).map_err(failed)?;
        let mut client_params =
            CertificateParams::new(vec!["rca-test-client".to_string()]).map_err(failed)?;
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "rca test client");
        let client_key = KeyPair::generate().map_err(failed)?;
        let client = client_params.signed_by(&client_key, &ca).map_err(failed)?;
        let write = |name: &str, pem: String| -> std::io::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        };
        Ok(TestPki {
            ca_file: write("ca.pem", ca.as_ref().pem())?,
            server_cert_file: write("server.pem", server.pem())?,
            server_key_file: write("server-key.pem", server_key.serialize_pem())?,
            client_cert_file: write("client.pem", client.pem())?,
            client_key_file: write("client-key.pem", client_key.serialize_pem())?,
        })
    }
}
