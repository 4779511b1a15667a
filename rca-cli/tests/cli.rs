//! End-to-end checks of the `rca` binary and tidy checks of the repository: the README's test
//! command is what CI runs, every library crate denies missing docs, no stub macros in library
//! code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn rca() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rca"))
}

/// The PYTHONPATH a project script (`scripts/fetch-*.sh`) prints after installing `what` on
/// first use; `None` (the test skips) when it cannot be installed and `RCA_REQUIRE_ALL` is
/// unset.
#[cfg(any(feature = "otlp", feature = "mcp"))]
fn python_packages(script: &str, what: &str) -> Option<String> {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts").join(script))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().find_map(|l| l.strip_prefix("PYTHONPATH=")) {
        Some(p) if out.status.success() => Some(p.to_string()),
        _ => {
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(
                !rca_core::testing::require_all(),
                "{what} could not be installed (RCA_REQUIRE_ALL is set): {why}"
            );
            eprintln!("skipping: {what} could not be installed: {why}");
            None
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn version_and_help() {
    let out = rca().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("rca "), "{text}");

    let out = rca().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
}

#[test]
fn unknown_subcommand_is_a_clear_error() {
    let out = rca().arg("no-such-command").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command"));
}

#[test]
fn ci_runs_the_readme_test_command() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        readme.contains("scripts/test.sh"),
        "README must name scripts/test.sh"
    );
    assert!(
        ci.contains("bash scripts/test.sh"),
        ".ci/run must call scripts/test.sh"
    );
    assert!(ci.contains("RCA_REQUIRE_ALL=1"));
}

#[test]
fn library_crates_deny_missing_docs_and_have_no_stubs() {
    let root = repo_root();
    for krate in [
        "rca-core",
        "rca-llm",
        "rca-tools",
        "rca-agents",
        "rca-eval",
        "rca-mcp",
    ] {
        let lib = std::fs::read_to_string(root.join(krate).join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#![deny(missing_docs)]"),
            "{krate} must deny missing docs"
        );
        let mut stack = vec![root.join(krate).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for banned in ["todo!(", "unimplemented!("] {
                        assert!(
                            !text.contains(banned),
                            "{} contains {banned}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn architecture_doc_names_every_crate() {
    let root = repo_root();
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    for krate in [
        "rca-core",
        "rca-llm",
        "rca-tools",
        "rca-agents",
        "rca-eval",
        "rca-cli",
        "rca-mcp",
    ] {
        assert!(
            arch.contains(krate),
            "docs/ARCHITECTURE.md must describe {krate}"
        );
    }
}

mod html_in_chromium {
    //! The HTML report opened in headless Chromium through ChromeDriver (WebDriver over HTTP):
    //! the root-cause node of the service graph and the evidence chain must be present and
    //! visible in the rendered page, and on the bundled incident the metric charts, the trace
    //! waterfall and the layered graph must be drawn with a size.

    use std::net::TcpListener;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use rca_agents::report::{ReportBundle, render_html};
    use rca_core::trajectory::{RootCauseCandidate, Trajectory};
    use rca_core::{
        DiagnosisReport, Evidence, Incident, Modality, Responsibility, TimeRange, Timestamp,
    };
    use serde_json::{Value, json};

    struct Driver(Child);

    impl Drop for Driver {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn find(names: &[&str]) -> Option<String> {
        names
            .iter()
            .find(|n| std::path::Path::new(n).exists())
            .map(|n| n.to_string())
    }

    fn bundle() -> ReportBundle {
        let t0 = Timestamp::from_civil(2024, 5, 1, 10, 0, 0, 0).unwrap();
        let evidence = vec![
            Evidence::new(Modality::Metrics, t0, "orders", "cpu 4x baseline").with_score(5.0),
            Evidence::new(
                Modality::Traces,
                t0.offset_millis(60_000),
                "orders",
                "p90 of /pay 5x",
            )
            .with_score(3.0),
        ];
        ReportBundle::new(
            Incident {
                id: "html-check".into(),
                title: "checkout <slow>".into(),
                description: String::new(),
                detected_at: t0.offset_millis(120_000),
                window: TimeRange::new(t0, t0.offset_millis(120_000)),
                system: String::new(),
                topology: vec![],
                onset: None,
            },
            DiagnosisReport {
                root_cause: "orders saturates its CPU".into(),
                solution: "roll back orders".into(),
                evidence,
                responsibility: Responsibility::Platform,
                confidence: 0.7,
                candidates: vec![
                    RootCauseCandidate {
                        component: "orders".into(),
                        fault_type: None,
                        time: Some(t0),
                        score: 8.0,
                    },
                    RootCauseCandidate {
                        component: "payments".into(),
                        fault_type: None,
                        time: None,
                        score: 1.0,
                    },
                ],
                usage: Default::default(),
                elapsed_ms: 3,
            },
            Trajectory::new(),
            vec![
                ("frontend".into(), "orders".into()),
                ("orders".into(), "payments".into()),
            ],
        )
    }

    /// Opens `page` in headless Chromium and returns what `script` returns; `None` (the test
    /// skips) when Chromium or ChromeDriver is missing and `RCA_REQUIRE_ALL` is unset.
    async fn in_chromium(page: &Path, script: &str) -> Option<Value> {
        let (Some(chromium), Some(chromedriver)) = (
            find(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]),
            find(&["/usr/bin/chromedriver"]),
        ) else {
            if rca_core::testing::require_all() {
                panic!(
                    "chromium and chromedriver are required (RCA_REQUIRE_ALL is set): bash scripts/services.sh start installs them"
                );
            }
            eprintln!("skipping: chromium or chromedriver not installed");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let _driver = Driver(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let mut ready = false;
        for _ in 0..100 {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "chromedriver did not start");
        let profile = dir.path().join("profile");
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", "--disable-quic", "--window-size=1280,1000",
                     format!("--user-data-dir={}", profile.display())]
        }}}});
        let session: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = session["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {session}"))
            .to_string();
        let url = format!("file://{}", page.display());
        http.post(format!("{base}/session/{id}/url"))
            .json(&json!({"url": url}))
            .send()
            .await
            .unwrap();
        let out: Value = http
            .post(format!("{base}/session/{id}/execute/sync"))
            .json(&json!({"script": script, "args": []}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let _ = http.delete(format!("{base}/session/{id}")).send().await;
        Some(out["value"].clone())
    }

    /// A page-side helper: whether an element is rendered with a size.
    const VISIBLE: &str = r#"
        const visible = (el) => {
            if (!el) return false;
            const r = el.getBoundingClientRect();
            const s = getComputedStyle(el);
            return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity) > 0;
        };"#;

    #[tokio::test]
    async fn root_cause_node_and_evidence_chain_are_visible() {
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("report.html");
        std::fs::write(&page, render_html(&bundle())).unwrap();
        let script = format!(
            "{VISIBLE}{}",
            r#"
            const root = document.querySelector('#service-graph g.root-cause');
            const rect = root ? root.querySelector('rect') : null;
            return {
                title: document.title,
                root_id: root ? root.id : null,
                root_visible: visible(rect),
                root_stroke: rect ? getComputedStyle(rect).stroke : null,
                roots: document.querySelectorAll('#service-graph .root-cause').length,
                chain_visible: visible(document.querySelector('#evidence-chain')),
                chain_rows: Array.from(document.querySelectorAll('#evidence-chain tr.evidence')).filter(visible).length,
                root_cause: document.querySelector('#root-cause').textContent,
            };"#
        );
        let Some(v) = in_chromium(&page, &script).await else {
            return;
        };
        assert_eq!(v["title"], "Diagnosis: checkout <slow>", "{v}");
        assert_eq!(v["root_id"], "node-orders");
        assert_eq!(v["roots"], 1);
        assert_eq!(v["root_visible"], true);
        assert_eq!(v["root_stroke"], "rgb(201, 42, 42)");
        assert_eq!(v["chain_visible"], true);
        assert_eq!(v["chain_rows"], 2);
        assert_eq!(v["root_cause"], "orders saturates its CPU");
    }

    /// The README's incident, diagnosed by the `rca` binary, drawn by Chromium: every metric
    /// of the evidence chain has a chart with both windows and the onset, the slowest trace of
    /// the top candidate is a waterfall with the candidate's spans, and the service graph is
    /// laid out in layers with the root cause visible and every node named on hover.
    #[tokio::test]
    async fn the_bundled_incident_report_draws_its_charts() {
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("report.html");
        let out = super::rca()
            .current_dir(super::repo_root())
            .args([
                "diagnose",
                "examples/incidents/trainticket-cpu",
                "--json",
                "--trajectory",
            ])
            .arg(dir.path().join("trajectory.json"))
            .arg("--html")
            .arg(&page)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let top = report["candidates"][0]["component"]
            .as_str()
            .unwrap()
            .to_string();
        let metric_evidence = report["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("metric_shift:"))
            })
            .count();
        assert!(metric_evidence > 0, "{report}");
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(!html.contains("<script"));

        let script = format!(
            "{VISIBLE}{}",
            r#"
            const size = (el) => { const r = el.getBoundingClientRect(); return [r.width, r.height]; };
            const charts = Array.from(document.querySelectorAll('#metric-charts svg.metric-chart'));
            const waterfall = document.querySelector('#trace-waterfall');
            const graph = document.querySelector('#service-graph');
            const root = document.querySelector('#service-graph g.root-cause');
            const nodes = Array.from(document.querySelectorAll('#service-graph g.node'));
            const xs = new Set(nodes.map(n => Math.round(n.querySelector('rect').getBBox().x)));
            return {
                charts: charts.map(c => ({
                    component: c.dataset.component,
                    metric: c.dataset.metric,
                    size: size(c),
                    visible: visible(c),
                    baseline_points: (c.querySelector('polyline.series.baseline')?.points.numberOfItems) || 0,
                    current_points: (c.querySelector('polyline.series.current')?.points.numberOfItems) || 0,
                    current_line: c.querySelector('polyline.series.current') ? size(c.querySelector('polyline.series.current')) : [0, 0],
                    onset: visible(c.querySelector('g.onset')) && c.querySelector('g.onset line').getBoundingClientRect().height > 0,
                    median: !!c.querySelector('line.baseline-median'),
                })),
                waterfall_size: waterfall ? size(waterfall) : [0, 0],
                spans: waterfall ? waterfall.querySelectorAll('g.span').length : 0,
                candidate_spans: waterfall ? Array.from(waterfall.querySelectorAll('g.span.root-cause rect')).filter(visible).length : 0,
                slowest: waterfall ? visible(waterfall.querySelector('g.span.slowest rect')) : false,
                graph_size: graph ? size(graph) : [0, 0],
                root_title: root ? root.querySelector('title').textContent : null,
                root_visible: root ? visible(root.querySelector('rect')) : false,
                nodes: nodes.length,
                untitled_nodes: nodes.filter(n => !n.querySelector('title')).length,
                layers: xs.size,
                edges: document.querySelectorAll('#service-graph path.edge').length,
                page_width: document.documentElement.scrollWidth,
                viewport: window.innerWidth,
            };"#
        );
        let Some(v) = in_chromium(&page, &script).await else {
            return;
        };
        let charts = v["charts"].as_array().unwrap();
        assert!(!charts.is_empty(), "{v}");
        assert!(charts.len() <= metric_evidence, "{v}");
        for c in charts {
            assert_eq!(c["visible"], true, "{c}");
            assert!(c["size"][0].as_f64().unwrap() > 200.0, "{c}");
            assert!(c["size"][1].as_f64().unwrap() > 80.0, "{c}");
            assert!(c["baseline_points"].as_u64().unwrap() > 10, "{c}");
            assert!(c["current_points"].as_u64().unwrap() >= 2, "{c}");
            assert!(c["current_line"][0].as_f64().unwrap() > 0.0, "{c}");
            assert_eq!(c["onset"], true, "the onset is marked: {c}");
            assert_eq!(c["median"], true, "{c}");
        }
        // The charts are of the top candidate's metrics first.
        assert_eq!(charts[0]["component"], top.as_str(), "{v}");
        assert!(v["waterfall_size"][0].as_f64().unwrap() > 200.0, "{v}");
        assert!(v["waterfall_size"][1].as_f64().unwrap() > 40.0, "{v}");
        assert!(v["spans"].as_u64().unwrap() >= 2, "{v}");
        assert!(v["candidate_spans"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(v["slowest"], true, "{v}");
        assert!(v["graph_size"][0].as_f64().unwrap() > 200.0, "{v}");
        assert_eq!(v["root_visible"], true, "{v}");
        assert!(
            v["root_title"].as_str().unwrap().starts_with(top.as_str()),
            "the root-cause node is named in full on hover: {v}"
        );
        assert!(v["nodes"].as_u64().unwrap() > 10, "{v}");
        assert_eq!(v["untitled_nodes"], 0, "{v}");
        assert!(v["layers"].as_u64().unwrap() >= 3, "{v}");
        assert!(v["edges"].as_u64().unwrap() > 10, "{v}");
        // Nothing forces the page wider than the window.
        assert!(
            v["page_width"].as_f64().unwrap() <= v["viewport"].as_f64().unwrap(),
            "{v}"
        );
    }
}

/// `rca export parquet OUT --incident INCIDENT`, which must succeed; its output.
#[cfg(feature = "sql")]
pub(crate) fn export(incident: &Path, out: &Path) -> String {
    let run = rca()
        .args(["export", "parquet"])
        .arg(out)
        .arg("--incident")
        .arg(incident)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).to_string()
}

#[cfg(feature = "otlp")]
#[path = "cli/otlp.rs"]
mod otlp;

#[cfg(feature = "mcp")]
#[path = "cli/mcp.rs"]
mod mcp;

#[path = "cli/tidy_docs.rs"]
mod tidy_docs;

#[cfg(feature = "ballista")]
#[path = "cli/cluster.rs"]
mod cluster;

/// The README's first command: diagnose the bundled incident with no model and no network.
#[test]
fn diagnose_the_bundled_incident() {
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("trajectory.json");
    let html = dir.path().join("report.html");
    let out = rca()
        .current_dir(&root)
        .args([
            "diagnose",
            "examples/incidents/trainticket-cpu",
            "--json",
            "--trajectory",
        ])
        .arg(&trajectory)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let candidates = report["candidates"].as_array().unwrap();
    assert!(!candidates.is_empty(), "{report}");
    assert!(!report["evidence"].as_array().unwrap().is_empty());
    assert!(
        report["root_cause"]
            .as_str()
            .unwrap()
            .contains(candidates[0]["component"].as_str().unwrap())
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trajectory).unwrap()).unwrap();
    assert!(!saved["trajectory"]["steps"].as_array().unwrap().is_empty());
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("class=\"node root-cause\"")
    );

    // Markdown by default.
    let md = rca()
        .current_dir(&root)
        .args([
            "diagnose",
            "examples/incidents/trainticket-cpu",
            "--trajectory",
        ])
        .arg(&trajectory)
        .output()
        .unwrap();
    assert!(md.status.success());
    let text = String::from_utf8_lossy(&md.stdout);
    assert!(
        text.contains("## Evidence chain") && text.contains("## Ranked candidates"),
        "{text}"
    );
}

/// Without `--trajectory`, every run of an incident gets its own folder in `rca-runs/`
/// (`<incident>/<run id>/trajectory.json`) and becomes the incident's `latest`: a second run
/// of the same incident keeps the first.
#[test]
fn two_diagnoses_of_one_incident_are_kept_side_by_side() {
    let work = tempfile::tempdir().unwrap();
    let incident = repo_root().join("examples/incidents/trainticket-cpu");
    let mut said = Vec::new();
    for _ in 0..2 {
        let out = rca()
            .current_dir(work.path())
            .args(["diagnose", "--json"])
            .arg(&incident)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let runs = work.path().join("rca-runs");
    let incidents: Vec<_> = std::fs::read_dir(&runs).unwrap().flatten().collect();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let incident_dir = incidents[0].path();
    let mut ids: Vec<String> = std::fs::read_dir(&incident_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    assert_eq!(ids.len(), 2, "two runs, side by side: {ids:?}");
    for (id, stderr) in ids.iter().zip(&said) {
        let path = incident_dir.join(id).join("trajectory.json");
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["run_id"], id.as_str());
        assert!(stderr.contains(id.as_str()), "the run says where: {stderr}");
        let report = std::fs::read_to_string(incident_dir.join(id).join("report.md")).unwrap();
        assert!(report.contains("## Evidence chain"), "{report}");
    }
    let latest = std::fs::read_to_string(incident_dir.join("latest")).unwrap();
    assert_eq!(latest.trim(), ids[1], "the latest is the second run");
    let name = incident_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        rca_agents::report::runs::latest(&runs, &name).as_deref(),
        Some(ids[1].as_str())
    );
}

#[test]
fn diagnose_reports_a_bad_directory_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = rca().arg("diagnose").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("incident"), "{err}");
}

/// Every file under `dir` with its bytes (symbolic links as their targets), to tell that a
/// run changed nothing there.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((path, target.to_string_lossy().into_owned().into_bytes()));
            } else if meta.is_dir() {
                stack.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The bad-input corpus (`tests/corpus`, see its README): each case fails or succeeds as
/// listed, with its message, never by a panic, and touches nothing but what it may write.
#[test]
fn bad_inputs_from_the_corpus() {
    let root = repo_root();
    let corpus = root.join("rca-cli/tests/corpus");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("cases.json")).unwrap()).unwrap();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    let before = snapshot(&corpus);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let fill = |a: &serde_json::Value| {
            a.as_str()
                .unwrap()
                .replace("{corpus}", &corpus.to_string_lossy())
                .replace("{tmp}", &tmp.path().to_string_lossy())
                .replace("{root}", &root.to_string_lossy())
        };
        let args: Vec<String> = case["args"].as_array().unwrap().iter().map(fill).collect();
        let out = rca().current_dir(tmp.path()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(
            out.status.success(),
            case["ok"].as_bool().unwrap(),
            "{name}: {stderr}"
        );
        if let Some(status) = case.get("status") {
            let status = status.as_i64().map(|s| s as i32);
            assert_eq!(out.status.code(), status, "{name}: {stderr}");
        }
        for words in case["stderr"].as_array().unwrap() {
            let words = words.as_str().unwrap();
            assert!(stderr.contains(words), "{name}: {words:?} not in {stderr}");
        }
        let mut written: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        written.sort();
        let mut allowed: Vec<String> = case["writes"]
            .as_array()
            .map(|w| w.iter().map(|f| f.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        allowed.sort();
        assert_eq!(written, allowed, "{name}: what it wrote");
    }
    assert!(before == snapshot(&corpus), "the corpus is unchanged");
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let null = std::fs::metadata("/dev/null").unwrap();
        assert!(
            null.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }
}

/// `rca tools warm-up` pre-generates tools from a past incident; `rca diagnose
/// --generated-tools` then explores with them and generates nothing new.
#[cfg(feature = "sql")]
#[test]
fn warm_up_then_diagnose_with_generated_tools() {
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("tools.json");
    let out = rca()
        .current_dir(&root)
        .args(["tools", "warm-up", "--inventory"])
        .arg(&inventory)
        .arg("examples/recurring-incidents/cases/exception/incident")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |path: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let before = read(&inventory);
    let tools_before = before["tools"].as_array().unwrap().len();
    assert!(tools_before >= 2, "{before}");
    let out = rca()
        .current_dir(&root)
        .args(["diagnose", "examples/incidents/trainticket-cpu", "--json"])
        .arg("--trajectory")
        .arg(dir.path().join("t.json"))
        .arg("--generated-tools")
        .arg(&inventory)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = read(&inventory);
    let tools = after["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        tools_before,
        "nothing new was generated: {after}"
    );
    let successes: u64 = tools.iter().map(|t| t["successes"].as_u64().unwrap()).sum();
    assert!(
        successes > tools_before as u64,
        "the stored tools ran again: {after}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["evidence"].as_array().unwrap().iter().any(|e| {
        e["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("generated_tool:"))
    }));
}

/// The local model server of the test suite (`RCA_LLM_BASE_URL`, `RCA_LLM_MODEL` from
/// `.services/env`), or `None` (skip) when it is not configured and `RCA_REQUIRE_ALL` is unset.
fn local_model() -> Option<(String, String)> {
    match (
        std::env::var("RCA_LLM_BASE_URL"),
        std::env::var("RCA_LLM_MODEL"),
    ) {
        (Ok(url), Ok(model)) => Some((url, model)),
        _ => {
            assert!(
                !rca_core::testing::require_all(),
                "RCA_LLM_BASE_URL is not set: run `bash scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
            );
            eprintln!("skipped: no local model server");
            None
        }
    }
}

/// The committed recordings of the real model: what they say about themselves.
const RECORDINGS: &str = "rca-eval/data/recordings/gemma-3-270m";
const GEMMA_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

fn check_recordings(dir: &Path, sha256: &str, at_least: usize) {
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let cassette = rca_llm::Cassette::load(&path).unwrap();
        let p = cassette
            .provenance
            .as_ref()
            .unwrap_or_else(|| panic!("{} names no model", path.display()));
        assert_eq!(p.model_sha256, sha256, "{}", path.display());
        assert_eq!(p.quantization, "Q4_K_M");
        assert_eq!(p.server, "llama-cpp-python");
        assert!(!p.server_version.is_empty() && p.sampling.is_object());
        assert!(!cassette.entries.is_empty(), "{}", path.display());
        for e in &cassette.entries {
            assert!(!e.model_id.starts_with("scripted-"), "{}", path.display());
            assert!(
                !e.response.usage.estimated && e.response.usage.prompt_tokens > 0,
                "{}: every turn carries the server's counts",
                path.display()
            );
            let served = e.response.served.as_ref();
            assert!(
                served.is_some_and(|s| s.id.as_deref().is_some_and(|id| !id.is_empty())
                    && s.created.is_some_and(|t| t > 1_600_000_000)),
                "{}: every turn keeps the server's response id and creation time",
                path.display()
            );
        }
        seen += 1;
    }
    assert!(seen >= at_least, "{seen} recordings in {}", dir.display());
}

/// `rca bench agents --replay DIR --json [--agents A,B]`, which must succeed.
fn replayed_runs(dir: &Path, agents: Option<&str>) -> Vec<serde_json::Value> {
    let mut cmd = rca();
    cmd.current_dir(repo_root())
        .args(["bench", "agents", "--json", "--replay"])
        .arg(dir);
    if let Some(agents) = agents {
        cmd.args(["--agents", agents]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn agents_replay_from_the_recorded_real_model() {
    let root = repo_root();
    let dir = root.join(RECORDINGS);
    check_recordings(&dir, GEMMA_SHA256, 7);
    let runs = replayed_runs(&dir, None);
    assert!(runs.len() >= 7, "{runs:?}");
    for r in &runs {
        assert!(
            r["model"].as_str().unwrap().starts_with("replay:"),
            "replayed output is labelled as a replay: {r}"
        );
        assert!(r["model_calls"].as_u64().unwrap() > 0, "{r}");
    }
    // The committed table follows from the recordings: every replayed row is in the
    // `agents-real-model` section, all but its seconds (replay time).
    let docs = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap();
    let section = docs
        .split("<!-- BEGIN agents-real-model -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- END agents-real-model -->").next())
        .unwrap();
    for r in &runs {
        let n = |k: &str| r[k].as_u64().unwrap();
        let calls = n("model_calls");
        let rate = if calls == 0 {
            0.0
        } else {
            100.0 * n("invalid_turns") as f64 / calls as f64
        };
        let row = format!(
            "| {} | {} | {} | {} | {} | {} ({:.0}%; {}) | {} | {} | {} | {} | ",
            r["agent"].as_str().unwrap(),
            r["data"].as_str().unwrap(),
            r["outcome"].as_str().unwrap().replace('|', "/"),
            n("steps"),
            calls,
            n("invalid_turns"),
            rate,
            n("repairable_turns"),
            n("regenerations"),
            n("truncated_turns"),
            n("prompt_tokens"),
            n("completion_tokens"),
        );
        assert!(
            section.contains(&row),
            "the committed agents-real-model table lacks the replayed row {row}: rewrite it with \
             rca bench agents --replay {RECORDINGS} --write-docs docs/benchmarks.md"
        );
    }
}

/// The agents `agents_on_the_local_model_then_replayed` runs live.
const LIVE_AGENTS: &str = "react-code,flash,stratus,lifecycle,text-sc";

#[test]
fn agents_on_the_local_model_then_replayed() {
    let Some((url, model)) = local_model() else {
        return;
    };
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let out = rca()
        .current_dir(&root)
        .args([
            "bench",
            "agents",
            "--json",
            "--model-url",
            &url,
            "--model",
            &model,
            // Runs must end on their step budgets, not on time: a run cut by the clock asks
            // for a turn its replay then asks for too, which was never recorded.
            "--wall-seconds",
            "1200",
            // ReAct and the orchestra meet the live model in their own tests (`react_on_the_
            // local_model_...`, `diagnose_with_the_local_model_in_every_role`); their committed
            // recordings replay in `agents_replay_from_the_recorded_real_model`. Running them
            // here again would double the suite's longest serial stretch.
            "--agents",
            LIVE_AGENTS,
        ])
        .arg("--record")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let live: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let sha = std::env::var("RCA_LLM_MODEL_SHA256").unwrap_or_else(|_| GEMMA_SHA256.into());
    check_recordings(dir.path(), &sha, 5);
    for r in &live {
        assert_eq!(r["model"], model.as_str(), "{r}");
        assert_eq!(r["server_counted"], true, "{r}");
    }
    // The fresh recording replays with no server: the same calls, outcomes and counts.
    let replayed = replayed_runs(dir.path(), Some(LIVE_AGENTS));
    assert_eq!(live.len(), replayed.len());
    for (a, b) in live.iter().zip(&replayed) {
        for key in [
            "agent",
            "outcome",
            "steps",
            "model_calls",
            "prompt_tokens",
            "invalid_turns",
        ] {
            assert_eq!(a[key], b[key], "{key}: live {a} replayed {b}");
        }
    }
}

/// `rca diagnose` of the bundled incident with `config`, which must succeed with ranked
/// candidates: its stderr and its wall time in seconds.
fn diagnose_bundled_with(config: &Path, trajectory: &Path) -> (String, f64) {
    let started = std::time::Instant::now();
    let out = rca()
        .current_dir(repo_root())
        .args(["diagnose", "examples/incidents/trainticket-cpu", "--json"])
        .arg("--config")
        .arg(config)
        .arg("--trajectory")
        .arg(trajectory)
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !report["candidates"].as_array().unwrap().is_empty(),
        "{report}"
    );
    (stderr, seconds)
}

#[test]
fn diagnose_with_the_local_model_in_every_role() {
    let Some((url, model)) = local_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rca.toml");
    std::fs::write(
        &config,
        format!(
            "[models.local]\nbase_url = \"{url}\"\nmodel = \"{model}\"\n\
             features = {{ native_n = false, tool_calls = false, schema_in_json_object = true, system_role = false, tool_role = false }}\n\
             [roles]\nplanner = \"local\"\ncontroller = \"local\"\nreasoner = \"local\"\n\
             [budgets]\nwall_seconds = 150\n"
        ),
    )
    .unwrap();
    let (_, seconds) = diagnose_bundled_with(&config, &dir.path().join("t.json"));
    assert!(seconds < 180.0, "the wall budget holds: {seconds} s");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    assert_eq!(saved["format_version"], 1);
}

/// A model server that accepts requests and never answers costs the run its wall budget,
/// not more: the model calls end before it and the roles' policies answer.
#[test]
fn a_silent_model_server_cannot_outlast_the_wall_budget() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rca.toml");
    std::fs::write(
        &config,
        format!(
            "[models.silent]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n\
             [roles]\nplanner = \"silent\"\nreasoner = \"silent\"\n[budgets]\nwall_seconds = 5\n"
        ),
    )
    .unwrap();
    let (stderr, seconds) = diagnose_bundled_with(&config, &dir.path().join("t.json"));
    assert!(seconds < 30.0, "{seconds} s");
    assert!(
        stderr.contains("warning: the planner's model failed")
            && stderr.contains("remaining wall time"),
        "{stderr}"
    );
}

#[test]
fn the_configuration_guide_example_passes_config_check() {
    let guide = std::fs::read_to_string(repo_root().join("docs/guides/configuration.md")).unwrap();
    let example = guide
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rca.toml");
    std::fs::write(&file, example).unwrap();
    let out = rca()
        .args(["config", "check"])
        .arg(&file)
        .env("OLLAMA_API_KEY", "set-for-the-check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stub OpenAI-compatible server on loopback that answers every request with `body`
/// (HTTP 200, JSON); its base URL (`.../v1`).
fn stub_openai_server(body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// `rca config check` asks each model's server for its models: a name the server does not
/// serve fails the check and names the served ones; a served name passes; a server that
/// cannot be asked is a warning, not a failure; `--offline` asks nothing.
#[test]
fn config_check_asks_the_server_for_the_model_name() {
    let url =
        stub_openai_server(r#"{"object":"list","data":[{"id":"served-model","object":"model"}]}"#);
    let dir = tempfile::tempdir().unwrap();
    let check = |base_url: &str, model: &str, extra: &[&str]| {
        let file = dir.path().join(format!("{model}.toml"));
        std::fs::write(
            &file,
            format!(
                "[models.m]\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n[roles]\nreasoner = \"m\"\n"
            ),
        )
        .unwrap();
        let out = rca()
            .args(["config", "check"])
            .arg(&file)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = check(&url, "wrong-name", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("models.m.model")
            && stderr.contains("\"wrong-name\" is not among the models")
            && stderr.contains("served-model"),
        "{stderr}"
    );
    let (code, stdout, stderr) = check(&url, "served-model", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("serves \"served-model\""), "{stdout}");
    // `--offline`: the file alone.
    let (code, stdout, _) = check(&url, "wrong-name", &["--offline"]);
    assert_eq!(code, Some(0));
    assert!(!stdout.contains("serves"), "{stdout}");
    // Nothing listens: a warning, the name unchecked.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (code, _, stderr) = check(&format!("http://127.0.0.1:{closed}/v1"), "other", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("could not be asked") && stderr.contains("unchecked"),
        "{stderr}"
    );
}

/// `rca diagnose --config` against a server that counts its tokens and answers as another
/// model: the report's usage is the server's counts summed over every call (not 0), and the
/// other model is warned about once, as it happens.
#[test]
fn diagnose_sums_the_server_counted_usage_and_warns_about_another_model() {
    let url = stub_openai_server(
        r#"{"id":"chatcmpl-1","object":"chat.completion","model":"other-model","choices":[{"index":0,"message":{"role":"assistant","content":"{\"decision\": \"continue\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1234,"completion_tokens":5,"total_tokens":1239}}"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rca.toml");
    std::fs::write(
        &config,
        format!(
            "[models.m]\nbase_url = \"{url}\"\nmodel = \"configured-model\"\n\
             [roles]\nplanner = \"m\"\ncontroller = \"m\"\nreasoner = \"m\"\n\
             [budgets]\nwall_seconds = 60\n"
        ),
    )
    .unwrap();
    let trajectory = dir.path().join("t.json");
    let out = rca()
        .current_dir(repo_root())
        .args(["diagnose", "examples/incidents/trainticket-cpu", "--json"])
        .arg("--config")
        .arg(&config)
        .arg("--trajectory")
        .arg(&trajectory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("answered with model `other-model`, not the configured `configured-model`")
            .count(),
        1,
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let prompt = report["usage"]["prompt_tokens"].as_u64().unwrap();
    let completion = report["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(
        prompt >= 3 * 1234,
        "planner, controller, reasoner: {prompt}"
    );
    assert_eq!(prompt % 1234, 0, "only the server's counts: {prompt}");
    assert_eq!(prompt / 1234, completion / 5, "one count per call");
    assert_eq!(report["usage"]["estimated"], false);
    // The steps carry their calls' share: here every call, the reasoner's too (its answer
    // does not fit a report, so its call is in the step of its fallback).
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trajectory).unwrap()).unwrap();
    let steps: u64 = saved["trajectory"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["usage"]["prompt_tokens"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(steps, prompt, "the steps' sum");
    assert_eq!(saved["trajectory"]["usage"]["prompt_tokens"], prompt);
}

#[test]
fn the_local_model_config_passes_config_check() {
    let out = rca()
        .current_dir(repo_root())
        .args(["config", "check", "examples/rca-local.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The incident directories bundled with the repository.
#[test]
fn diagnose_remembers_incidents_in_a_memory_folder() {
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let memory = dir.path().join("memory");
    let incidents = bundled_incidents();
    assert!(incidents.len() >= 2);
    let mut stderr = Vec::new();
    for (i, incident) in incidents.iter().take(2).enumerate() {
        let out = rca()
            .current_dir(&root)
            .arg("diagnose")
            .arg(incident)
            .arg("--json")
            .arg("--trajectory")
            .arg(dir.path().join(format!("trajectory-{i}.json")))
            .arg("--memory")
            .arg(&memory)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stderr.push(String::from_utf8_lossy(&out.stderr).to_string());
    }
    assert!(
        !stderr[0].contains("long-term memory offered"),
        "{}",
        stderr[0]
    );
    assert!(
        stderr[1].contains("long-term memory offered 1 past incident(s)"),
        "{}",
        stderr[1]
    );
    // Versioned files: the incidents and one per explorer.
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(memory.join("incidents.json")).unwrap()).unwrap();
    assert_eq!(stored["format_version"], 1);
    assert_eq!(stored["entries"].as_array().unwrap().len(), 2);
    let explorer_files = std::fs::read_dir(&memory)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("explorer-")
        })
        .count();
    assert!(explorer_files >= 2, "{explorer_files}");
    let trajectory: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("trajectory-1.json")).unwrap())
            .unwrap();
    assert!(
        trajectory["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "recalled"),
        "{trajectory}"
    );
    // A memory path that is a file is a clear error, and the file is left alone.
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, "keep").unwrap();
    let out = rca()
        .current_dir(&root)
        .arg("diagnose")
        .arg(&incidents[0])
        .arg("--memory")
        .arg(&file)
        .arg("--trajectory")
        .arg(dir.path().join("t.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot open the memory folder"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}

fn bundled_incidents() -> Vec<PathBuf> {
    let root = repo_root();
    let mut dirs = vec![root.join("examples/incidents/trainticket-cpu")];
    let cases = root.join("examples/recurring-incidents/cases");
    for case in std::fs::read_dir(&cases).unwrap() {
        let incident = case.unwrap().path().join("incident");
        if incident.join("incident.json").is_file() {
            dirs.push(incident);
        }
    }
    dirs.sort();
    dirs
}

#[test]
fn react_runs_the_rcagent_controller_on_every_bundled_incident_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let incidents = bundled_incidents();
    assert!(incidents.len() >= 3, "{incidents:?}");
    for (i, incident) in incidents.iter().enumerate() {
        let trajectory = dir.path().join(format!("t{i}.json"));
        let out = rca()
            .current_dir(repo_root())
            .arg("react")
            .arg(incident)
            .args(["--json", "--trajectory"])
            .arg(&trajectory)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", incident.display());
        // The steps are shown as they happen, by the policy that plays the model.
        assert!(stderr.contains("policy-planned-investigation") && stderr.contains("step 0:"));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!report["root_cause"].as_str().unwrap().is_empty());
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trajectory).unwrap()).unwrap();
        assert_eq!(saved["agent"], "react");
        let steps = saved["trajectory"]["steps"].as_array().unwrap();
        let names: Vec<&str> = steps
            .iter()
            .filter_map(|s| s["action"]["name"].as_str())
            .collect();
        assert_eq!(names.last(), Some(&"finalize"), "{names:?}");
        assert!(names.contains(&"get_logs") && names.contains(&"analyze_logs"));
        // Real tool output longer than the head went to the snapshot store, keyed.
        assert!(
            steps
                .iter()
                .any(|s| s["observation"]["snapshot_key"].is_string()),
            "{}",
            incident.display()
        );
    }
}

#[test]
fn react_on_the_local_model_in_both_action_modes_and_with_stepwise_consistency() {
    let Some((url, model)) = local_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rca.toml");
    std::fs::write(
        &config,
        format!(
            "[models.local]\nbase_url = \"{url}\"\nmodel = \"{model}\"\nrequest_timeout_ms = 120000\n\
             features = {{ native_n = false, tool_calls = false, schema_in_json_object = true, system_role = false, tool_role = false }}\n\
             [roles]\nexplorer = \"local\"\n[budgets]\nmax_steps = 2\nwall_seconds = 360\n"
        ),
    )
    .unwrap();
    for (mode, extra) in [
        (
            "json_text",
            vec!["--consistency", "stepwise", "--samples", "2"],
        ),
        ("native_tools", vec![]),
    ] {
        let trajectory = dir.path().join(format!("{mode}.json"));
        let out = rca()
            .current_dir(repo_root())
            .args(["react", "examples/incidents/trainticket-cpu", "--config"])
            .arg(&config)
            .args(["--action-mode", mode, "--max-turn-tokens", "64"])
            .args(&extra)
            .arg("--trajectory")
            .arg(&trajectory)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A 270M base model rarely finalizes in two steps: the run may end without a
        // report, but never by a model failure, and its trajectory is saved either way.
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trajectory).unwrap())
                .unwrap_or_else(|e| panic!("{mode}: {e}: {stderr}"));
        let t = &saved["trajectory"];
        let outcome = t["outcome"].to_string();
        assert!(!outcome.contains("failed"), "{mode}: {outcome}: {stderr}");
        assert!(
            out.status.success() || outcome.contains("budget") || outcome.contains("timed_out"),
            "{mode}: {stderr}"
        );
        let steps = t["steps"].as_array().unwrap();
        assert!(!steps.is_empty() && steps.len() <= 2, "{mode}: {stderr}");
        // The server counted the tokens.
        assert_eq!(t["usage"]["estimated"], false, "{mode}");
        assert!(t["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        if mode == "native_tools" {
            // Grammar-constrained native calls: every turn names an offered tool.
            assert!(
                steps.iter().all(|s| s["action"]["name"].is_string()),
                "{mode}: {steps:?}"
            );
        }
    }
}

#[test]
fn self_consistency_on_the_local_model() {
    let Some((_, model)) = local_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("benchmarks.md");
    let out = rca()
        .current_dir(repo_root())
        .args(["bench", "sc", "--model", &model, "--questions", "2"])
        .args([
            "--samples",
            "2",
            "--max-tokens",
            "24",
            "--json",
            "--write-docs",
        ])
        .arg(&docs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["model"].as_str().unwrap().contains(&model));
    let questions = report["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 2);
    for q in questions {
        assert_eq!(q["samples"].as_array().unwrap().len(), 2, "{q}");
    }
    for usage in ["single_usage", "samples_usage", "merge_usage"] {
        assert_eq!(report[usage]["estimated"], false, "{usage}");
        assert!(
            report[usage]["prompt_tokens"].as_u64().unwrap() > 0,
            "{usage}"
        );
    }
    let text = std::fs::read_to_string(&docs).unwrap();
    assert!(
        text.contains("<!-- BEGIN self-consistency-real-model -->"),
        "{text}"
    );
}

#[test]
fn stability_on_real_turns_from_the_local_model() {
    let Some((_, model)) = local_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("benchmarks.md");
    let out = rca()
        .current_dir(repo_root())
        .args(["bench", "stability", "--model", &model, "--episodes", "1"])
        .args([
            "--configs",
            "all,none",
            "--max-steps",
            "3",
            "--max-turn-tokens",
            "48",
        ])
        .args(["--json", "--write-docs"])
        .arg(&docs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["source"].as_str().unwrap().contains(&model));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["tokens_estimated"], false, "{r}");
        assert!(r["prompt_tokens"].as_u64().unwrap() > 0);
        let turns = r["turns"].as_u64().unwrap();
        assert!((1..=3).contains(&turns), "{r}");
    }
    // `none` has no error rules: nothing is rule-caught there.
    assert_eq!(rows[1]["rule_caught"], 0);
    let text = std::fs::read_to_string(&docs).unwrap();
    assert!(
        text.contains("<!-- BEGIN stability-real-model-json_text -->"),
        "{text}"
    );
}

/// A tiny folder in the Loghub layout: each system's log, its original labels and (for the
/// first) corrected labels.
fn loghub_folder(dir: &Path) -> PathBuf {
    let systems = [
        ("Alpha", ["login accepted for", "disk full on"]),
        ("Beta", ["job started on", "job stopped on"]),
    ];
    for (i, (system, events)) in systems.iter().enumerate() {
        let sys = dir.join(system);
        std::fs::create_dir_all(&sys).unwrap();
        let mut log = String::new();
        let mut csv = String::from("LineId,Content,EventId,EventTemplate\n");
        for n in 0..12 {
            let e = n % 2;
            log.push_str(&format!("I {} 10.0.0.{n}\n", events[e]));
            csv.push_str(&format!(
                "{},{} host{n},E{e},{} <*>\n",
                n + 1,
                events[e],
                events[e]
            ));
        }
        std::fs::write(sys.join(format!("{system}_2k.log")), log).unwrap();
        std::fs::write(sys.join(format!("{system}_2k.log_structured.csv")), &csv).unwrap();
        if i == 0 {
            std::fs::write(
                sys.join(format!("{system}_2k.log_structured_corrected.csv")),
                &csv,
            )
            .unwrap();
        }
    }
    let formats = dir.join("formats.tsv");
    std::fs::write(
        &formats,
        "Alpha\t<Level> <Content>\nBeta\t<Level> <Content>\n",
    )
    .unwrap();
    formats
}

#[test]
fn eval_loghub_reports_four_metrics_and_leave_one_out() {
    let dir = tempfile::tempdir().unwrap();
    let formats = loghub_folder(dir.path());
    let out = rca()
        .args(["eval", "loghub"])
        .arg(dir.path())
        .arg("--formats")
        .arg(&formats)
        .args(["--leave-one-out", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let systems = v["default"]["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 2);
    for key in ["ga", "pa", "fga", "fta"] {
        assert!(systems[0]["original"][key].is_number(), "{key}");
        assert!(systems[0]["corrected"][key].is_number(), "{key}");
    }
    assert!(systems[1]["corrected"].is_null());
    // Addresses are parameters: both systems group perfectly.
    assert_eq!(v["default"]["mean_original"]["ga"], 1.0);
    let cv = &v["leave_one_out"];
    assert_eq!(cv["folds"].as_array().unwrap().len(), 2);
    assert_eq!(cv["candidates"], 1728);
    assert_eq!(cv["held_out"]["systems"].as_array().unwrap().len(), 2);
}

#[test]
fn eval_grouping_scores_a_miners_ids_beside_the_trivial_grouper() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let lines = write("lines", "open a 1\nopen b 2\nclose a\nopen a 3 4\n");
    let truth = write("truth", "E1\nE1\nE2\nE1\n");
    let ours = write("ours", "7\n7\n8\n7\n");
    let short = write("short", "7\n7\n");
    let out = rca()
        .args(["eval", "grouping", "--lines", &lines])
        .arg("--truth")
        .arg(format!("original={truth}"))
        .arg("--predicted")
        .arg(format!("ours={ours}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("| ours | 2 | 1.000 |"), "{table}");
    // The trivial grouper splits E1 by token count: only `close a` is right.
    assert!(
        table.contains("| trivial (token count and first token) | 3 | 0.250 |"),
        "{table}"
    );
    let out = rca()
        .args(["eval", "grouping", "--lines", &lines])
        .arg("--truth")
        .arg(format!("original={truth}"))
        .arg("--predicted")
        .arg(format!("short={short}"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 values for 4 lines"), "{err}");
}

#[test]
fn eval_loghub_grammar_writes_the_generated_set_and_extra_scores_it() {
    let dir = tempfile::tempdir().unwrap();
    let formats = loghub_folder(dir.path());
    let generated = dir.path().join("generated");
    let out = rca()
        .args(["eval", "loghub-grammar", "--out"])
        .arg(&generated)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The committed set is what the command writes.
    let committed = repo_root().join("rca-eval/data/grammar-2k");
    for f in [
        "formats.tsv",
        "Relay/Relay_2k.log",
        "Batch/Batch_2k.log_structured.csv",
    ] {
        assert!(
            std::fs::read(generated.join(f)).unwrap() == std::fs::read(committed.join(f)).unwrap(),
            "{f}"
        );
    }
    let out = rca()
        .args(["eval", "loghub"])
        .arg(dir.path())
        .arg("--formats")
        .arg(&formats)
        .arg("--extra")
        .arg(&generated)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let extra = &v["extra"]["generated"];
    let names: Vec<&str> = extra["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Relay", "Batch", "Volumes"]);
    assert!(
        extra["mean_original"]["ga"].as_f64().unwrap() > 0.5,
        "{extra}"
    );
    assert_eq!(v["default"]["systems"].as_array().unwrap().len(), 2);
    // A folder whose systems repeat another folder's names is refused.
    let out = rca()
        .args(["eval", "loghub"])
        .arg(dir.path())
        .arg("--formats")
        .arg(&formats)
        .arg("--extra")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("repeats a system name"));
}

/// A guide whose first step asks the on-call engineer and whose second reads what they named.
const ASKING_GUIDE: &str = "# Ask, then look\n\n## Ask the on-call engineer\n\
    Action: human_query {\"question\": \"Which pod alerted?\", \"fact\": \"component\"}\n\n\
    ## Read its metrics\nAction: get_metrics {\"entity\": \"{component}\"}\n\
    If `CpuUsage`: conclude \"metrics of {component} read\"\n";

#[test]
fn flash_asks_on_the_terminal_and_gives_up_after_its_timeout() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let guide = dir.path().join("guide.md");
    std::fs::write(&guide, ASKING_GUIDE).unwrap();
    let incident = repo_root().join("examples/incidents/trainticket-cpu");
    let flash = |trajectory: &Path, timeout: &str| {
        let mut cmd = rca();
        cmd.current_dir(repo_root())
            .arg("flash")
            .arg(&incident)
            .arg("--guide")
            .arg(&guide)
            .args(["--json", "--human-timeout", timeout, "--trajectory"])
            .arg(trajectory)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().unwrap()
    };
    // The engineer answers: the answer becomes the fact the next step reads.
    let answered = dir.path().join("answered.json");
    let mut child = flash(&answered, "60");
    writeln!(
        child.stdin.take().unwrap(),
        "ts-contacts-service-866bd68c97-xcqfx"
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("flash asks: Which pod alerted?"),
        "{stderr}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&answered).unwrap()).unwrap();
    assert_eq!(saved["agent"], "flash");
    assert_eq!(
        saved["memory"]["facts"]["component"],
        "ts-contacts-service-866bd68c97-xcqfx"
    );
    let steps = saved["trajectory"]["steps"].as_array().unwrap();
    let metrics = steps
        .iter()
        .find(|s| s["action"]["name"] == "get_metrics")
        .unwrap();
    assert_eq!(
        metrics["action"]["args"]["entity"],
        "ts-contacts-service-866bd68c97-xcqfx"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["root_cause"],
        "metrics of ts-contacts-service-866bd68c97-xcqfx read"
    );
    // Nobody answers (the terminal stays open): the question times out and the run goes on,
    // to no root cause (exit status 3), its trajectory saved.
    let silent = dir.path().join("silent.json");
    let mut child = flash(&silent, "1");
    let _held_open = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&silent).unwrap()).unwrap();
    let asked = &saved["trajectory"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"]["name"] == "human_query")
        .unwrap()["error"];
    assert!(
        asked.as_str().unwrap().contains("no answer within 1 s"),
        "{asked}"
    );
    assert!(saved["memory"]["facts"].get("component").is_none());
}

/// One exit-status convention for diagnose, react and flash: a flash run whose guide does not
/// establish a root cause is not a success (status 3), though its report is printed and its
/// trajectory saved; the statuses are in `rca --help`.
#[test]
fn flash_without_a_root_cause_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("t.json");
    let out = rca()
        .current_dir(repo_root())
        .args([
            "flash",
            "examples/incidents/trainticket-cpu",
            "--guide",
            "examples/recurring-incidents/cases/cpu-contention/guide.md",
            "--fact",
            "component=no-such-pod",
            "--json",
            "--trajectory",
        ])
        .arg(&trajectory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no root cause: the guide did not establish a root cause"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["root_cause"],
        "no root cause was established by the guide"
    );
    assert!(trajectory.is_file());
    let help = rca().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit status") && help.contains("3 the run finished without one"),
        "{help}"
    );
}

/// The same convention for react: a run whose step budget ends before the controller
/// finalizes exits 3 (it exited 1, like an error), its trajectory saved.
#[test]
fn react_out_of_steps_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("t.json");
    let out = rca()
        .current_dir(repo_root())
        .args([
            "react",
            "examples/incidents/trainticket-cpu",
            "--max-steps",
            "1",
            "--trajectory",
        ])
        .arg(&trajectory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no root cause: the controller did not finalize (StepBudgetExhausted)"),
        "{stderr}"
    );
    assert!(trajectory.is_file());
}

/// The README's `rca flash` command for the bundled incident, run as written (plus a
/// trajectory path and `--json`): the deterministic policy follows the guide to its conclusion.
#[test]
fn the_readme_flash_command_runs_with_the_deterministic_policy() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run -p rca-cli -- flash "))
        .expect("the README documents an `rca flash` command");
    let args: Vec<&str> = line
        .trim_start_matches("cargo run -p rca-cli -- ")
        .split_whitespace()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = rca()
        .current_dir(repo_root())
        .args(&args)
        .arg("--json")
        .arg("--trajectory")
        .arg(dir.path().join("t.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{line}: {stderr}");
    assert!(stderr.contains("with the deterministic policy"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let root_cause = report["root_cause"].as_str().unwrap();
    assert!(
        root_cause.starts_with("cpu_contention:") && readme.contains(root_cause),
        "the README says what it concludes: {root_cause}"
    );
}

/// `rca mitigate generate` writes scenario files that `rca mitigate check` accepts, one per
/// family, and never overwrites a file.
#[test]
fn mitigate_generate_writes_checked_files_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("generated");
    let run = |args: &[&str]| rca().args(args).output().unwrap();
    let d = dir.to_str().unwrap();
    let out = run(&["mitigate", "generate", "--seed", "3", "--count", "20", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 20);
    let out = run(&["mitigate", "check", d]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let again = run(&["mitigate", "generate", "--seed", "3", "--count", "20", d]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 20);
    let out = run(&["mitigate", "bench", "--scenario-dir", d, "--first", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Per fault family"));
}
