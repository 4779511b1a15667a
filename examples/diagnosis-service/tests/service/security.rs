//! The service behind TLS with clients per route group: the attacks of issue 45 (a forged
//! first alert pre-empting a real group, a forged resolution) no longer work, and requests
//! without valid credentials are refused and counted.

use super::*;
use rca_listen::{TestPki, TlsConfig, bearer_client};

/// One group of one firing (or resolved) alert with the group key `key`.
fn group(status: &str, key: &str) -> String {
    format!(
        r#"{{"version":"4","groupKey":"{{}}:{{service=\"{key}\"}}","status":"{status}","receiver":"rca",
            "groupLabels":{{"service":"{key}"}},"commonLabels":{{}},"commonAnnotations":{{}},
            "alerts":[{{"status":"{status}","labels":{{"alertname":"HighLatency","service":"web"}},
            "annotations":{{}},"startsAt":"{START}","endsAt":"{end}","fingerprint":"fp1"}}]}}"#,
        end = if status == "resolved" {
            "2024-05-01T10:20:00Z"
        } else {
            "0001-01-01T00:00:00Z"
        }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_first_alert_or_resolution_cannot_take_over_a_group() {
    let store = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(secrets.path()).unwrap();
    let mut config = config(&store, 1, 8);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.listener.tls = Some(TlsConfig {
        cert_file: pki.server_cert_file.clone(),
        key_file: pki.server_key_file.clone(),
        client_ca_file: None,
    });
    config.listener.clients = vec![
        bearer_client(secrets.path(), "alertmanager", &["alerts"], "am-token").unwrap(),
        // Another client allowed to post alerts: it must not touch the first one's groups.
        bearer_client(secrets.path(), "intruder", &["alerts"], "intruder-token").unwrap(),
        bearer_client(
            secrets.path(),
            "reader",
            &["reports", "operations"],
            "reader-token",
        )
        .unwrap(),
    ];
    let service = Service::start(&config, telemetry()).await.unwrap();
    assert_eq!(service.scheme(), "https");
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://localhost:{}", socket.local_addr().unwrap().port());
    let task = tokio::spawn(service.serve(socket, std::future::pending()));
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca_file).unwrap()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let post = |token: Option<&'static str>, body: String| {
        let mut request = client
            .post(format!("{base}/alerts?wait=30"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        request.send()
    };

    // Without credentials, with a wrong token, or as a reader: refused.
    assert_eq!(
        post(None, group("firing", "web")).await.unwrap().status(),
        401
    );
    assert_eq!(
        post(Some("am-tokem"), group("firing", "web"))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        post(Some("reader-token"), group("firing", "web"))
            .await
            .unwrap()
            .status(),
        403
    );

    // The intruder posts first, with the real group's key, and then a resolution of it.
    let forged: serde_json::Value = post(Some("intruder-token"), group("firing", "web"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let forged_id = forged["accepted"][0].as_str().unwrap().to_string();
    // The real notification is still accepted as a group of its own, not a duplicate.
    let real: serde_json::Value = post(Some("am-token"), group("firing", "web"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(real["duplicates"], serde_json::json!([]), "{real}");
    let real_id = real["accepted"][0].as_str().unwrap().to_string();
    assert_ne!(real_id, forged_id);
    assert_eq!(real["reports"][0]["alert"]["name"], "HighLatency", "{real}");
    // The intruder's resolution resolves only its own group; the real one stays open.
    let resolved: serde_json::Value = post(Some("intruder-token"), group("resolved", "web"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resolved["resolved"], serde_json::json!([forged_id]));
    let report: serde_json::Value = client
        .get(format!("{base}/reports/{real_id}"))
        .bearer_auth("reader-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(report["resolution"].is_null(), "{report}");
    // The genuine resolution counts.
    let resolved: serde_json::Value = post(Some("am-token"), group("resolved", "web"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resolved["resolved"], serde_json::json!([real_id]));

    // Reading reports needs the reader's token; health needs nothing; refusals are counted.
    let r = client.get(format!("{base}/reports")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .get(format!("{base}/reports"))
        .bearer_auth("am-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let stats: serde_json::Value = client
        .get(format!("{base}/listener/stats"))
        .bearer_auth("reader-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["unauthenticated"], 3, "{stats}");
    assert_eq!(stats["forbidden"], 2, "{stats}");
    task.abort();
}

#[tokio::test]
async fn a_service_reachable_from_other_hosts_needs_clients() {
    let store = tempfile::tempdir().unwrap();
    let mut config = config(&store, 1, 8);
    config.listen = "0.0.0.0:0".parse().unwrap();
    let err = Service::start(&config, telemetry()).await.unwrap_err();
    assert!(err.to_string().contains("allow_unauthenticated"), "{err}");
    // Nothing was opened: the store is free for a service that is configured right.
    config.listener.allow_unauthenticated = true;
    let service = Service::start(&config, telemetry()).await.unwrap();
    service.stop(Duration::from_secs(1)).await;
}
