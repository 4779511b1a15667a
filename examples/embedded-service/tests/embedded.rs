//! The host's model (over real HTTP to a stand-in gateway) and log store wired into the
//! orchestra.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use example_embedded_service::{GatewayConfig, HostLogStore, HostModel, diagnose};
use example_host_model::testing::serve_canned;
use rca_core::source::Level;
use rca_core::{Incident, TimeRange, Timestamp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_model_and_host_store_diagnose_together() {
    let dir = tempfile::tempdir().unwrap();
    let store = HostLogStore::new(dir.path());
    let detected = Timestamp(1_714_558_500_000);
    let minute = |m: i64| detected.offset_millis(-m * 60_000);
    for m in (1..=60).rev() {
        store
            .append(
                "api",
                minute(m),
                Level::Info,
                &format!("GET /cart 200 in {} ms", 10 + m % 4),
            )
            .unwrap();
        store
            .append("queue", minute(m), Level::Info, "consumer lag 0")
            .unwrap();
        if m <= 6 {
            for _ in 0..6 {
                store
                    .append(
                        "queue",
                        minute(m),
                        Level::Error,
                        "broker connection refused, retrying",
                    )
                    .unwrap();
            }
        }
    }
    // The gateway's answer for the reasoner: a canned turn written for this test.
    let answer = r#"{"root_cause": "the queue lost its broker connection", "solution": "restart the broker", "responsibility": "platform", "confidence": 0.8, "fault_type": "network", "candidates": ["queue"]}"#;
    let (addr, seen) = serve_canned("host-key", vec![answer.to_string()])
        .await
        .unwrap();
    let model = HostModel::new(GatewayConfig {
        address: addr.to_string(),
        model: "scripted-embedded-test".into(),
        api_key: "host-key".into(),
        timeout: Duration::from_secs(10),
    });
    let incident = Incident {
        id: "embedded".into(),
        title: "cart checkout failing".into(),
        description: String::new(),
        detected_at: detected,
        window: TimeRange::new(minute(60), detected),
        system: String::new(),
        topology: Vec::new(),
        onset: None,
    };
    let run = diagnose(model, store, &incident).await.unwrap();
    assert_eq!(
        run.report.root_cause,
        "the queue lost its broker connection"
    );
    assert_eq!(run.report.candidates[0].component, "queue");
    assert!(run.report.evidence.iter().all(|e| e.component == "queue"));
    assert!(!run.report.evidence.is_empty());
    // The model saw the evidence the host's logs produced.
    let bodies = seen.lock().unwrap().bodies.clone();
    assert!(bodies.iter().any(|b| b.contains("queue")), "{bodies:?}");
}

#[test]
fn links_only_rca_core_and_rca_agents() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    let rca: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|n| n.starts_with("rca-"))
        .collect();
    assert_eq!(rca, vec!["rca-core", "rca-agents"]);
    assert!(!deps.contains("fastembed") && !deps.contains("rca-llm"));
    for sibling in ["../host-model/Cargo.toml", "../host-log-source/Cargo.toml"] {
        let text =
            std::fs::read_to_string(format!("{}/{sibling}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(
            !text.contains("rca-llm") && !text.contains("rca-tools") && !text.contains("fastembed")
        );
    }
}
