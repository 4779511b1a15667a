//! A report that cannot be stored (the disk full, here: its file a link into a missing folder) is
//! stored once the store recovers, without a restart; meanwhile its group is pending, never
//! failed, and a repeat of its notification is a duplicate.

use super::*;

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_could_not_be_stored_is_stored_when_the_store_recovers() {
    let store = tempfile::tempdir().unwrap();
    let config = config(&store, 1, 8);
    let service = Service::start(&config, telemetry()).await.unwrap();
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", socket.local_addr().unwrap());
    let task = tokio::spawn(service.serve(socket, std::future::pending()));

    // The group's id, as the service will compute it, so that the store is broken before
    // the alert is even posted (no race with the worker).
    let group = example_diagnosis_service::WebhookPayload::parse(payload("4", 1).as_bytes())
        .unwrap()
        .groups()
        .remove(0);
    let id = example_diagnosis_service::Diagnoser::new(
        &config,
        Sources::default(),
        rca_llm::redact::Redactor::builtin(),
    )
    .group_id(&group, "")
    .unwrap();
    // The report's file is a link into a folder that does not exist yet: the report is not
    // there (the link dangles) and every write of it fails, as on a full disk, until the
    // folder appears (space returns).
    let elsewhere = tempfile::tempdir().unwrap();
    let missing = elsewhere.path().join("not-yet");
    std::os::unix::fs::symlink(
        missing.join("report.json"),
        store.path().join(format!("{id}.json")),
    )
    .unwrap();
    let answer: serde_json::Value = post_to(&format!("{base}/alerts"), payload("4", 1))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["accepted"], serde_json::json!([id]), "{answer}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    // (GET /reports/{id} would read the folder: the queue says where the group stands.)
    let progress = service.inbox().progress(&id).await;
    assert!(
        matches!(
            progress,
            example_diagnosis_service::inbox::Progress::Pending
        ),
        "pending while the store fails, not {progress:?}"
    );
    let again: serde_json::Value = post_to(&format!("{base}/alerts"), payload("4", 1))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["duplicates"], serde_json::json!([id]), "{again}");
    assert!(
        store
            .path()
            .join("inbox")
            .join(format!("{id}.json"))
            .exists(),
        "the entry stays in the inbox while its report is not stored"
    );

    // Space returns: the report is stored by the next try (pauses 1, 2, 4, 8 s so far).
    std::fs::create_dir(&missing).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = reqwest::get(format!("{base}/reports/{id}")).await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 202);
        assert!(
            tokio::time::Instant::now() < deadline,
            "not stored within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        !store
            .path()
            .join("inbox")
            .join(format!("{id}.json"))
            .exists()
    );
    task.abort();
    service.stop(Duration::from_secs(5)).await;
}
