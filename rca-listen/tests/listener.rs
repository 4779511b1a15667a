//! The listener over real sockets: TLS and client certificates, credentials per route group,
//! deadlines for slow clients, connection caps and rates, and the loopback rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};
use rca_listen::{Access, Listener, ListenerConfig, Sender, TestPki, TlsConfig, bearer_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn classify(path: &str) -> Access {
    match path {
        "/healthz" => Access::Open,
        "/alerts" => Access::Group("alerts"),
        _ => Access::Group("reports"),
    }
}

fn app() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/alerts",
            post(
                |Extension(sender): Extension<Sender>, body: String| async move {
                    format!("{}:{}", sender.name(), body.len())
                },
            ),
        )
        .route(
            "/reports",
            get(|Extension(sender): Extension<Sender>| async move { sender.0 }),
        )
}

/// Serves `app()` under `config` on 127.0.0.1; returns the address and the listener.
async fn start(config: ListenerConfig) -> (SocketAddr, Listener) {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let listener = Listener::new(&config, addr).unwrap();
    let served = listener.clone();
    let router = listener.protect(app(), classify);
    tokio::spawn(served.serve(socket, router, std::future::pending()));
    (addr, listener)
}

#[tokio::test]
async fn tls_with_client_certificates_and_tokens_per_route_group() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let config = ListenerConfig {
        tls: Some(TlsConfig {
            cert_file: pki.server_cert_file.clone(),
            key_file: pki.server_key_file.clone(),
            client_ca_file: Some(pki.ca_file.clone()),
        }),
        clients: vec![
            bearer_client(dir.path(), "alertmanager", &["alerts"], "am-secret").unwrap(),
            bearer_client(dir.path(), "reader", &["reports"], "reader-secret").unwrap(),
        ],
        ..ListenerConfig::default()
    };
    let (addr, listener) = start(config).await;
    assert_eq!(listener.scheme(), "https");
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca_file).unwrap()).unwrap();
    let mut identity = std::fs::read(&pki.client_cert_file).unwrap();
    identity.extend(std::fs::read(&pki.client_key_file).unwrap());
    let with_cert = reqwest::Client::builder()
        .add_root_certificate(ca.clone())
        .identity(reqwest::Identity::from_pem(&identity).unwrap())
        .build()
        .unwrap();
    let base = format!("https://localhost:{}", addr.port());

    // The sender's name reaches the handler; other groups and other tokens are refused.
    let r = with_cert
        .post(format!("{base}/alerts"))
        .bearer_auth("am-secret")
        .body("abc")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "alertmanager:3");
    let r = with_cert
        .get(format!("{base}/reports"))
        .bearer_auth("am-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = with_cert
        .get(format!("{base}/reports"))
        .bearer_auth("reader-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "reader");
    let r = with_cert
        .post(format!("{base}/alerts"))
        .bearer_auth("guess")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = with_cert
        .post(format!("{base}/alerts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Health checks need no credentials (but still a client certificate: TLS comes first).
    let r = with_cert
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Without a client certificate the handshake fails; plain HTTP gets no answer.
    let no_cert = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    assert!(no_cert.get(format!("{base}/healthz")).send().await.is_err());
    let plain = reqwest::Client::new();
    assert!(
        plain
            .get(format!("http://127.0.0.1:{}/healthz", addr.port()))
            .send()
            .await
            .is_err()
    );
    let stats = listener.stats();
    assert_eq!(stats.unauthenticated, 2, "{stats:?}");
    assert_eq!(stats.forbidden, 1, "{stats:?}");
    assert!(stats.tls_failures >= 2, "{stats:?}");
}

/// Reads from `stream` until it closes; the time it took.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit.saturating_sub(start.elapsed()), stream.read(&mut buf))
            .await
        {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slow_headers_slow_bodies_and_idle_connections_are_cut() {
    let config = ListenerConfig {
        header_timeout_seconds: 1,
        body_timeout_seconds: 1,
        ..ListenerConfig::default()
    };
    let (addr, listener) = start(config).await;
    // Half a request line, then nothing: closed after the header deadline.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"POST /alerts HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let closed = until_closed(&mut half, Duration::from_secs(10)).await;
    assert!(
        closed.is_some_and(|d| d < Duration::from_secs(5)),
        "{closed:?}"
    );
    // A connection that never sends anything is closed too.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let closed = until_closed(&mut idle, Duration::from_secs(10)).await;
    assert!(
        closed.is_some_and(|d| d < Duration::from_secs(5)),
        "{closed:?}"
    );
    // A body declared 100 bytes long of which 10 arrive: the handler's read fails at the
    // body deadline and the answer is an error, not a wait.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "no answer within 10 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    assert_eq!(listener.stats().body_timeouts, 1);
}

#[tokio::test]
async fn connection_caps_and_rates_hold_per_client_and_health_answers_from_elsewhere() {
    let config = ListenerConfig {
        max_connections_per_client: 4,
        requests_per_second_per_client: 1.0,
        burst_per_client: 3,
        ..ListenerConfig::default()
    };
    let (addr, listener) = start(config).await;
    // Four idle connections from 127.0.0.1 fill its share; a fifth is closed at once.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = TcpStream::connect(addr).await.unwrap();
    let closed = until_closed(&mut fifth, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "the fifth connection stayed open");
    // Another client address still gets through, health first.
    let other = reqwest::Client::builder()
        .local_address(Some("127.0.0.2".parse().unwrap()))
        .build()
        .unwrap();
    let base = format!("http://{addr}");
    for _ in 0..10 {
        let r = other.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(r.status(), 200, "health is not rate-limited");
    }
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let r = other.get(format!("{base}/reports")).send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
    }
    assert_eq!(statuses[..3], [200, 200, 200]);
    assert_eq!(statuses[3..], [429, 429]);
    let stats = listener.stats();
    assert_eq!(stats.connections_refused, 1, "{stats:?}");
    assert_eq!(stats.rate_limited, 2, "{stats:?}");
    drop(held);
}

#[test]
fn an_exposed_address_needs_clients_or_a_deliberate_flag() {
    let exposed: SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let err = Listener::new(&ListenerConfig::default(), exposed).unwrap_err();
    assert!(err.to_string().contains("allow_unauthenticated"), "{err}");
    let on_purpose = ListenerConfig {
        allow_unauthenticated: true,
        ..ListenerConfig::default()
    };
    assert!(Listener::new(&on_purpose, exposed).is_ok());
    let dir = tempfile::tempdir().unwrap();
    let with_clients = ListenerConfig {
        clients: vec![bearer_client(dir.path(), "am", &["alerts"], "t").unwrap()],
        ..ListenerConfig::default()
    };
    assert!(
        Listener::new(&with_clients, exposed)
            .unwrap()
            .authenticates()
    );
    assert!(Listener::new(&ListenerConfig::default(), "127.0.0.1:0".parse().unwrap()).is_ok());
    assert!(Listener::new(&ListenerConfig::default(), "[::1]:0".parse().unwrap()).is_ok());
}
