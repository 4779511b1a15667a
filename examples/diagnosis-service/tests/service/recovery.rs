//! A report that cannot be stored (the disk full, here: its file name taken by a folder) is
//! stored once the store recovers, without a restart; meanwhile its group is pending, never
//! failed, and a repeat of its notification is a duplicate.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_could_not_be_stored_is_stored_when_the_store_recovers() {
    let store = tempfile::tempdir().unwrap();
    let mut config = config(&store, 1, 8);
    // The worker holds its finished diagnosis this long before storing it: time for the
    // test to break the store first.
    config.test_delay_ms = 1_500;
    let service = Service::start(&config, telemetry()).await.unwrap();
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", socket.local_addr().unwrap());
    let task = tokio::spawn(service.serve(socket, std::future::pending()));

    let answer: serde_json::Value = post_to(&format!("{base}/alerts"), payload("4", 1))
        .await
        .json()
        .await
        .unwrap();
    let id = answer["accepted"][0].as_str().unwrap().to_string();
    // Every write of the report fails until the folder in its place is removed.
    let blocker = store.path().join(format!("{id}.json"));
    std::fs::create_dir_all(blocker.join("occupied")).unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // (GET /reports/{id} would read the folder: the queue says where the group stands.)
    assert!(
        matches!(
            service.inbox().progress(&id).await,
            example_diagnosis_service::inbox::Progress::Pending
        ),
        "pending while the store fails"
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
    std::fs::remove_dir_all(&blocker).unwrap();
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
