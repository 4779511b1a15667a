//! The `diagnosis-service` binary with the file store: it logs its refusals (a structured
//! subscriber on stderr), and a second service on the same store refuses to start.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn config(dir: &Path, store: &Path) -> std::path::PathBuf {
    let (metrics, logs) = super::telemetry::write_telemetry(dir);
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\
         store_dir = {store:?}\n\
         [data]\n\
         metrics = [{metrics:?}]\n\
         logs = [{:?}, {:?}]\n\
         topology = [[\"web\", \"db\"]]\n",
        logs[0], logs[1]
    );
    let path = dir.join("service.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_binary_logs_its_refusals_and_one_store_has_one_service() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let config = config(dir.path(), &store);
    let log = dir.path().join("first.log");
    let mut first = Command::new(env!("CARGO_BIN_EXE_diagnosis-service"))
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let base = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("listening on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
        if let Ok(Some(status)) = first.try_wait() {
            panic!("the service exited with {status}:\n{text}");
        }
        assert!(
            Instant::now() < deadline,
            "not listening within 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{base}/alerts"))
            .body("not json")
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 400);
    // A second service on the same store waits for the lock, then refuses to start.
    let second = Command::new(env!("CARGO_BIN_EXE_diagnosis-service"))
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("another diagnosis service"), "{said}");
    let _ = first.kill();
    let _ = first.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("request refused") && text.contains("status=400"),
        "{text}"
    );
}
