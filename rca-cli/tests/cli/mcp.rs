//! `rca mcp` driven by the official MCP Python SDK (PyPI `mcp`, installed by
//! scripts/fetch-mcp.sh), as an agent host would: over stdio and over Streamable HTTP it lists
//! the tools, calls each with arguments valid against its input schema, checks each result
//! against its output schema, reads a cut result back by its snapshot key, reads the stored
//! report and trajectory as resources and gets the prompt (rca-cli/tests/mcp/client.py). The
//! diagnosis it serves names the same top candidate as `rca diagnose`. The HTTP transport
//! refuses a client without the token, or with a wrong one, and refuses to start without a
//! token unless bound to loopback on purpose.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use rca_core::testing::require_all;
use serde_json::Value;

const INCIDENT: &str = "examples/incidents/trainticket-cpu";

/// The PYTHONPATH of the MCP Python SDK, installed on first use; `None` (skip) when it cannot be
/// installed and `RCA_REQUIRE_ALL` is unset.
fn mcp_python() -> Option<String> {
    super::python_packages("fetch-mcp.sh", "the MCP Python SDK")
}

fn client(python_path: &str, args: &[&str]) -> Output {
    Command::new("python3")
        .env("PYTHONPATH", python_path)
        .current_dir(super::repo_root())
        .arg(super::repo_root().join("rca-cli/tests/mcp/client.py"))
        .args(args)
        .output()
        .expect("python3 runs")
}

fn summary(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "the client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client prints its summary")
}

/// The top candidate of `rca diagnose` on the bundled incident.
fn top_candidate_of_rca_diagnose() -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = super::rca()
        .current_dir(super::repo_root())
        .args(["diagnose", INCIDENT, "--json", "--trajectory"])
        .arg(tmp.path().join("trajectory.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a report");
    report["candidates"][0]["component"]
        .as_str()
        .expect("a top candidate")
        .to_string()
}

fn check_summary(s: &Value, top: &str) {
    assert_eq!(s["tools"].as_array().unwrap().len(), 10, "{s}");
    assert!(s["components"].as_u64().unwrap() > 1, "{s}");
    assert!(s["snapshot_chars"].as_u64().unwrap() > 400, "{s}");
    assert!(s["templates"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["top_candidate"], top, "{s}");
    assert!(
        s["path_refusal"]
            .as_str()
            .unwrap()
            .contains("paths are refused"),
        "{s}"
    );
    assert!(s["bad_args"].as_str().unwrap().contains("sql"), "{s}");
    assert!(s["resources"].as_u64().unwrap() >= 2, "{s}");
}

#[test]
fn the_python_sdk_uses_every_tool_over_stdio() {
    let Some(python_path) = mcp_python() else {
        return;
    };
    let top = top_candidate_of_rca_diagnose();
    let runs = tempfile::tempdir().unwrap();
    let out = client(
        &python_path,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_rca"),
            INCIDENT,
            runs.path().to_str().unwrap(),
        ],
    );
    let s = summary(&out);
    check_summary(&s, &top);
    // The stored run, where its resource URI says.
    // `rca://runs/<incident>/<run id>/trajectory.json`: the run's own folder.
    let run = s["trajectory_uri"]
        .as_str()
        .and_then(|u| u.strip_prefix("rca://runs/"))
        .and_then(|u| u.rsplit_once('/'))
        .map(|(run, _)| run.to_string())
        .expect("a stored run");
    let stored = runs.path().join(run);
    assert!(stored.join("trajectory.json").is_file());
    assert!(stored.join("report.md").is_file());
}

/// `rca mcp --http 127.0.0.1:0` with `extra`; the child and the endpoint's URL.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(runs: &Path, extra: &[&str]) -> Server {
        let mut child = super::rca()
            .current_dir(super::repo_root())
            .args([
                "mcp",
                INCIDENT,
                "--http",
                "127.0.0.1:0",
                "--for-seconds",
                "600",
            ])
            .args(["--head-chars", "400", "--runs"])
            .arg(runs)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("rca starts");
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped"))
            .read_line(&mut first)
            .expect("the server prints its address");
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        Server {
            child,
            url: format!("http://{addr}/mcp"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn post_initialize(url: &str, token: Option<&str>) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            );
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        request.send().await.expect("the server answers").status().as_u16()
    })
}

#[test]
fn the_python_sdk_uses_every_tool_over_http_and_is_refused_without_the_token() {
    let Some(python_path) = mcp_python() else {
        return;
    };
    let top = top_candidate_of_rca_diagnose();
    let tmp = tempfile::tempdir().unwrap();
    let token = "mcp-test-token-0123456789abcdef";
    let token_file = tmp.path().join("token.sha256");
    std::fs::write(&token_file, rca_listen::hash_secret(token)).unwrap();
    let runs = tmp.path().join("runs");
    let server = Server::start(&runs, &["--token-file", token_file.to_str().unwrap()]);

    assert_eq!(post_initialize(&server.url, None), 401);
    assert_eq!(post_initialize(&server.url, Some("wrong-token")), 401);
    assert_eq!(post_initialize(&server.url, Some(token)), 200);
    // The SDK without the token, or with a wrong one, cannot even initialize.
    for wrong in ["-", "wrong-token"] {
        let refused = summary(&client(&python_path, &["refused", &server.url, wrong]));
        assert_eq!(refused["refused"], true, "{refused}");
    }

    let s = summary(&client(&python_path, &["http", &server.url, token]));
    check_summary(&s, &top);
    drop(server);

    // Without a token the transport does not start, unless on loopback on purpose.
    let out = super::rca()
        .current_dir(super::repo_root())
        .args([
            "mcp",
            INCIDENT,
            "--http",
            "127.0.0.1:0",
            "--for-seconds",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires a bearer token"));
    let out = super::rca()
        .current_dir(super::repo_root())
        .args([
            "mcp",
            INCIDENT,
            "--http",
            "0.0.0.0:0",
            "--allow-unauthenticated-loopback",
        ])
        .args(["--for-seconds", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reachable from other hosts"));
    let open = Server::start(&runs, &["--allow-unauthenticated-loopback"]);
    assert_eq!(post_initialize(&open.url, None), 200);
}

/// `rca mcp --otlp`: the OpenTelemetry Python SDK exports a small shop whose pricing service
/// fails to the same listener (with the token); the MCP client diagnoses the incident `live`
/// and finds the broken service.
#[cfg(feature = "otlp")]
#[test]
fn otlp_exports_are_diagnosed_live_over_mcp() {
    let Some(python_path) = mcp_python() else {
        return;
    };
    let Some(otel_path) = super::otlp::otel_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let token = "mcp-live-token-0123456789abcdef";
    let token_file = tmp.path().join("token.sha256");
    std::fs::write(&token_file, rca_listen::hash_secret(token)).unwrap();
    let server = Server::start(
        &tmp.path().join("runs"),
        &["--token-file", token_file.to_str().unwrap(), "--otlp"],
    );
    let base = server.url.trim_end_matches("/mcp").to_string();
    super::otlp::shop_with(
        &otel_path,
        &base,
        "pricing",
        "error",
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("authorization=Bearer%20{token}"),
        )],
    );
    let s = summary(&client(&python_path, &["live", &server.url, token]));
    assert!(
        s["components"].as_array().unwrap().len() >= 4,
        "the shop's services: {s}"
    );
    assert!(s["log_lines"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["top_candidate"], "pricing", "{s}");
}

/// `rca mcp --config` whose `[sources.prometheus]` is the real Prometheus of
/// `scripts/services.sh start` (svc-a's latency jumps in the last ten minutes of a two-hour
/// fixture ending ten minutes before it started; svc-b's stays flat): the MCP client lists the
/// live incident's components and reads svc-a's metrics, the jump flagged.
#[test]
fn a_configurations_prometheus_is_served_live() {
    let vars = (
        std::env::var("RCA_PROMETHEUS_URL"),
        std::env::var("RCA_PROMETHEUS_FIXTURE_START"),
    );
    let (Ok(url), Ok(start)) = vars else {
        assert!(
            !require_all(),
            "RCA_PROMETHEUS_URL is not set: run `bash scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: RCA_PROMETHEUS_URL is not set (run `bash scripts/services.sh start`)");
        return;
    };
    let Some(python_path) = mcp_python() else {
        return;
    };
    let start: u64 = start
        .parse()
        .expect("RCA_PROMETHEUS_FIXTURE_START is in seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Look back over the whole fixture, however long ago the services started.
    let minutes = (now.saturating_sub(start) / 60 + 5).to_string();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("rca.toml");
    std::fs::write(
        &config,
        format!("[sources.prometheus]\nurl = \"{url}\"\ncomponent_label = \"instance\"\n"),
    )
    .unwrap();
    let server = Server::start(
        &tmp.path().join("runs"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--live-minutes",
            &minutes,
            "--allow-unauthenticated-loopback",
        ],
    );
    let s = summary(&client(
        &python_path,
        &["live-metrics", &server.url, "-", "svc-a"],
    ));
    let components: Vec<&str> = s["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        components.contains(&"svc-a") && components.contains(&"svc-b"),
        "the fixture's components: {s}"
    );
    let text = s["metrics_text"].as_str().unwrap();
    assert!(
        text.contains("ANOMALY rca_fixture_latency_seconds"),
        "{text}"
    );
    assert!(text.contains("rca_fixture_requests_total"), "{text}");
}

/// A `[sources.prometheus]` whose URL is not one stops `rca mcp` with the key and the fix.
#[test]
fn a_bad_prometheus_source_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("rca.toml");
    std::fs::write(&config, "[sources.prometheus]\nurl = \"localhost:9090\"\n").unwrap();
    let out = super::rca()
        .current_dir(super::repo_root())
        .args(["mcp", INCIDENT, "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sources.prometheus.url"), "{stderr}");
}
