//! `rca otlp serve` against the real OpenTelemetry Python SDK and its OTLP/HTTP exporter
//! (installed from PyPI by scripts/fetch-otel.sh): a small shop of services exports its traces,
//! logs and metrics; the broken service must be the top candidate of `rca diagnose` on the
//! directory written. Malformed and oversized bodies get a 4xx and are counted; nothing
//! accepted is lost.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The PYTHONPATH of the OpenTelemetry SDK, installed on first use; `None` (skip) when it cannot be
/// installed and `RCA_REQUIRE_ALL` is unset.
pub(super) fn otel_python() -> Option<String> {
    super::python_packages("fetch-otel.sh", "the OpenTelemetry SDK")
}

/// `rca otlp serve DIR` on a free port: the child and its base URL.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        Self::start_as(dir, extra, "http", "127.0.0.1")
    }

    /// With `scheme` and `host` in its base URL (`https`, `localhost` under TLS).
    fn start_as(dir: &Path, extra: &[&str], scheme: &str, host: &str) -> Server {
        let mut child = super::rca()
            .args(["otlp", "serve"])
            .arg(dir)
            .args(["--listen", "127.0.0.1:0", "--for-seconds", "300"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("rca starts");
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped"))
            .read_line(&mut first)
            .expect("the server prints its address");
        let addr: std::net::SocketAddr = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .unwrap();
        Server {
            child,
            base: format!("{scheme}://{host}:{}", addr.port()),
        }
    }

    /// Stops it (SIGTERM, as a service manager would) and returns its closing statistics.
    fn stop(mut self) -> Value {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let mut rest = String::new();
        if let Some(out) = self.child.stdout.as_mut() {
            let _ = std::io::Read::read_to_string(out, &mut rest);
        }
        let status = self.child.wait().expect("rca ends");
        assert!(status.success(), "{status}");
        serde_json::from_str(rest.trim()).expect("statistics on shutdown")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn post(base: &str, path: &str, content_type: &str, body: Vec<u8>) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        match client
            .post(format!("{base}{path}"))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
        {
            Ok(r) => r.status().as_u16(),
            Err(e) => panic!("POST {path}: {e}"),
        }
    })
}

fn lines(path: PathBuf) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

fn shop(python_path: &str, base: &str, faulty: &str, mode: &str) -> Value {
    shop_with(python_path, base, faulty, mode, &[])
}

/// [`shop`] with more environment (the SDK's `OTEL_EXPORTER_OTLP_*` settings).
pub(super) fn shop_with(
    python_path: &str,
    base: &str,
    faulty: &str,
    mode: &str,
    env: &[(&str, String)],
) -> Value {
    let mut command = Command::new("python3");
    if !env.is_empty() {
        // `requests` (under the exporter) lets these override the authority the exporter
        // sets on its session (psf/requests#3829): the SDK's own settings must decide.
        command
            .env_remove("REQUESTS_CA_BUNDLE")
            .env_remove("CURL_CA_BUNDLE");
    }
    let out = command
        .env("PYTHONPATH", python_path)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .arg(super::repo_root().join("rca-cli/tests/otel/shop.py"))
        .args([base, faulty, mode, "300"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the shop prints its counts")
}

#[test]
fn the_python_sdk_exports_a_shop_and_the_diagnosis_names_the_broken_service() {
    let Some(python_path) = otel_python() else {
        return;
    };
    for (faulty, mode) in [("pricing", "error"), ("stock", "slow")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("incident");
        let server = Server::start(&dir, &["--max-body-bytes", "4000000"]);
        let made = shop(&python_path, &server.base, faulty, mode);

        // Bad bodies: each refused with its 4xx and counted, none of them kept.
        assert_eq!(
            post(
                &server.base,
                "/v1/traces",
                "application/x-protobuf",
                vec![0xff; 64]
            ),
            400
        );
        assert_eq!(
            post(
                &server.base,
                "/v1/logs",
                "application/json",
                b"{\"resourceLogs\":".to_vec()
            ),
            400
        );
        assert_eq!(
            post(&server.base, "/v1/metrics", "text/plain", b"cpu 1".to_vec()),
            415
        );
        assert_eq!(
            post(
                &server.base,
                "/v1/traces",
                "application/x-protobuf",
                vec![0; 5_000_000]
            ),
            413
        );

        let stats = server.stop();
        assert_eq!(stats["bad_requests"], 2, "{stats}");
        assert_eq!(stats["unsupported_media"], 1, "{stats}");
        assert_eq!(stats["too_large"], 1, "{stats}");
        assert_eq!(stats["items_rejected"], 0, "{stats}");
        // Everything the SDK made was accepted and is in the directory.
        assert_eq!(stats["spans"], made["spans"], "{stats} {made}");
        assert_eq!(stats["logs"], made["logs"], "{stats} {made}");
        assert!(stats["metric_samples"].as_u64().unwrap() > 0, "{stats}");
        assert_eq!(
            lines(dir.join("spans.csv")) as u64 - 1,
            made["spans"].as_u64().unwrap()
        );
        assert_eq!(
            lines(dir.join("logs.jsonl")) as u64,
            made["logs"].as_u64().unwrap()
        );
        let metrics = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
        assert!(metrics.contains("rpc.server.duration:p90"), "{metrics}");
        assert!(metrics.contains("rpc.server.requests:rate"), "{metrics}");

        let out = super::rca()
            .arg("diagnose")
            .arg(&dir)
            .arg("--json")
            .arg("--trajectory")
            .arg(tmp.path().join("trajectory.json"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            report["candidates"][0]["component"],
            faulty,
            "{mode} in {faulty}: {}",
            serde_json::to_string_pretty(&report["candidates"]).unwrap()
        );

        // What OTLP delivered goes to rest as Parquet: every signal has rows.
        #[cfg(feature = "sql")]
        {
            let parquet = tmp.path().join("parquet");
            let text = super::export(&dir, &parquet);
            // "wrote N files (B bytes) to DIR: L log lines, M metric samples, S spans"
            let counts: Vec<u64> = text
                .rsplit(": ")
                .next()
                .unwrap_or_default()
                .split(", ")
                .filter_map(|part| part.split(' ').next()?.parse().ok())
                .collect();
            assert_eq!(counts.len(), 3, "{text}");
            assert!(counts.iter().all(|&n| n > 0), "{text}");
        }
    }
}

/// The SDK exports over TLS with a client certificate and a bearer token, set the way its
/// users set them (`OTEL_EXPORTER_OTLP_HEADERS`, `..._CERTIFICATE`, `..._CLIENT_*`); exports
/// without the token, or with another, are refused with 401 and counted.
#[test]
fn the_python_sdk_exports_over_tls_with_a_client_certificate_and_a_token() {
    let Some(python_path) = otel_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pki = rca_listen::TestPki::generate(tmp.path()).unwrap();
    let token = "shop-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    std::fs::write(
        tmp.path().join("shop.sha256"),
        rca_listen::hash_secret(token),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("listener.toml"),
        "[listener]\n\
         [listener.tls]\n\
         cert_file = \"server.pem\"\n\
         key_file = \"server-key.pem\"\n\
         client_ca_file = \"ca.pem\"\n\
         [[listener.clients]]\n\
         name = \"shop\"\n\
         routes = [\"telemetry\"]\n\
         bearer_token_file = \"shop.sha256\"\n",
    )
    .unwrap();
    let dir = tmp.path().join("incident");
    let listener = tmp.path().join("listener.toml");
    let server = Server::start_as(
        &dir,
        &["--listener", listener.to_str().unwrap()],
        "https",
        "localhost",
    );
    let file = |p: &Path| p.to_str().unwrap().to_string();
    let made = shop_with(
        &python_path,
        &server.base,
        "pricing",
        "error",
        &[
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("authorization=Bearer%20{token}"),
            ),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", file(&pki.ca_file)),
            (
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                file(&pki.client_cert_file),
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", file(&pki.client_key_file)),
        ],
    );
    // Without the token, and with a wrong one (the client certificate alone is not enough).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let statuses = runtime.block_on(async {
        let mut identity = std::fs::read(&pki.client_cert_file).unwrap();
        identity.extend(std::fs::read(&pki.client_key_file).unwrap());
        let client = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(&pki.ca_file).unwrap()).unwrap(),
            )
            .identity(reqwest::Identity::from_pem(&identity).unwrap())
            .build()
            .unwrap();
        let mut out = Vec::new();
        for auth in [None, Some("Bearer shop-token-guess")] {
            let mut request = client
                .post(format!("{}/v1/traces", server.base))
                .header("content-type", "application/json")
                .body("{}");
            if let Some(a) = auth {
                request = request.header("authorization", a);
            }
            out.push(request.send().await.unwrap().status().as_u16());
        }
        out
    });
    assert_eq!(statuses, [401, 401]);
    let stats = server.stop();
    assert_eq!(stats["listener"]["unauthenticated"], 2, "{stats}");
    assert_eq!(stats["spans"], made["spans"], "{stats} {made}");
    assert_eq!(stats["logs"], made["logs"], "{stats} {made}");
    assert!(stats["metric_samples"].as_u64().unwrap() > 0, "{stats}");
}

#[test]
fn a_directory_of_other_files_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("app.log"), "mine").unwrap();
    let out = super::rca()
        .args(["otlp", "serve"])
        .arg(tmp.path())
        .args(["--listen", "127.0.0.1:0", "--for-seconds", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("app.log"), "{err}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("app.log")).unwrap(),
        "mine"
    );
}
