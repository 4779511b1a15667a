//! PostgreSQL over TLS (`postgres.ca_file`, the URL's `sslmode`) and connection errors that
//! name their cause (`--features postgres`).
//!
//! The tests with a server need `RCA_POSTGRES_URL` and `RCA_POSTGRES_CA_FILE` (`bash
//! scripts/services.sh start`, `source .services/env`: a server with `ssl=on`, its certificate
//! made by openssl for 127.0.0.1 and localhost, and two roles admitted over TLS only,
//! `rca_scram` by password and `rca_cert` by client certificate); without them they skip,
//! unless `RCA_REQUIRE_ALL` is set, where they fail. The others need no server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use example_diagnosis_service::pg::Pg;
use example_diagnosis_service::{PostgresConfig, Service, ServiceConfig, StoreError};

use super::workers::{SchemaGuard, postgres, unique_schema};

/// The message of a [`StoreError::Database`] (any other error fails the test).
fn database_message(result: Result<Arc<Pg>, StoreError>) -> String {
    match result {
        Err(StoreError::Database { message }) => message,
        Err(other) => panic!("not a database error: {other}"),
        Ok(pg) => panic!("connected: {pg:?}"),
    }
}

/// The server of `RCA_POSTGRES_URL` (a plain connection to it, as the superuser) and the
/// authority of `RCA_POSTGRES_CA_FILE`, or `None` (the test skips) when either is missing,
/// or the server has no TLS, and `RCA_REQUIRE_ALL` is unset.
async fn tls_server() -> Option<(String, tokio_postgres::Client, PathBuf)> {
    let require = rca_core::testing::require_all();
    let (url, db) = postgres().await?;
    let Some(ca) = std::env::var_os("RCA_POSTGRES_CA_FILE").filter(|v| !v.is_empty()) else {
        assert!(
            !require,
            "RCA_POSTGRES_CA_FILE is not set: run `bash scripts/services.sh start` and source \
             .services/env (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: RCA_POSTGRES_CA_FILE is not set");
        return None;
    };
    let ssl: String = db.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    if ssl != "on" {
        assert!(
            !require,
            "PostgreSQL at RCA_POSTGRES_URL has ssl={ssl}: restart it with `bash \
             scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: PostgreSQL at RCA_POSTGRES_URL has no TLS (ssl={ssl})");
        return None;
    }
    assert!(
        !url.contains("://"),
        "the tests append keywords to RCA_POSTGRES_URL: give it as key=value pairs"
    );
    Some((url, db, PathBuf::from(ca)))
}

/// A name no other test (nor run) uses, for `application_name`.
fn unique_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("rca_{tag}_{}_{nanos}", std::process::id())
}

/// Whether this session is over TLS, and its protocol version.
async fn session_tls(pg: &Pg) -> (bool, Option<String>) {
    let rows = pg
        .query(
            "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    (rows[0].get(0), rows[0].get(1))
}

/// `sslmode=require` with `ca_file`: the service starts on the server, accepts and diagnoses
/// an alert, and stores its report; every connection it opened is over TLS (pg_stat_ssl,
/// found by the connection string's `application_name`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_works_over_tls_with_sslmode_require() {
    let Some((url, db, ca)) = tls_server().await else {
        return;
    };
    let schema = unique_schema("tls");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let app = unique_name("tls");
    let settings = PostgresConfig {
        ca_file: Some(ca),
        schema: Some(schema.clone()),
        worker_name: Some("tls".into()),
        ..PostgresConfig::new(format!("{url} sslmode=require application_name={app}"))
    };
    settings.validate().unwrap();

    // The service's own connection code, asked directly.
    let pg = Pg::connect(&settings).await.unwrap();
    let (ssl, version) = session_tls(&pg).await;
    assert!(ssl, "the session is not over TLS");
    eprintln!("TLS version {version:?}");

    let store = tempfile::tempdir().unwrap();
    let mut config = ServiceConfig::new(store.path());
    config.max_concurrent = 1;
    config.postgres = Some(settings);
    let service = Service::start(&config, super::telemetry()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(service.serve(listener, async move {
        let _ = stopped.await;
    }));
    let response = super::post(&base, super::payload("4", 1)).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    let report = &body["reports"][0];
    assert_eq!(
        report["report"]["candidates"][0]["component"], "db",
        "{body}"
    );
    let id = report["id"].as_str().unwrap();
    let stored: i64 = db
        .query_one(
            &format!("SELECT count(*) FROM {schema}.diagnosis_reports WHERE id = $1"),
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1, "the report is in the database");

    // Every session of the service (and of `pg`) is over TLS.
    let row = db
        .query_one(
            "SELECT count(*), bool_and(s.ssl) FROM pg_stat_activity a
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    let (sessions, all_tls): (i64, Option<bool>) = (row.get(0), row.get(1));
    assert!(sessions >= 2, "the service's session and pg's: {sessions}");
    assert_eq!(all_tls, Some(true), "{sessions} sessions, not all over TLS");

    let _ = stop.send(());
    serving.await.unwrap().unwrap();
    service.stop(Duration::from_secs(5)).await;
}

/// A `ca_file` of another authority: the start fails, saying that the server's certificate
/// was not verified and why, with `sslmode=require` and with the default `prefer` alike (no
/// quiet fall-back to plain text); a certificate that does not name the host is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_authority_or_host_name_fails_the_start_naming_the_certificate() {
    let Some((url, _db, ca)) = tls_server().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let other = rca_listen::TestPki::generate(dir.path()).unwrap();
    for mode in ["sslmode=require", "sslmode=prefer", ""] {
        let settings = PostgresConfig {
            ca_file: Some(other.ca_file.clone()),
            schema: Some(unique_schema("wrongca")),
            timeout_seconds: 5,
            ..PostgresConfig::new(format!("{url} {mode}"))
        };
        let message = database_message(Pg::connect(&settings).await);
        eprintln!("{mode}: {message}");
        assert!(
            message.contains("certificate verify failed")
                && message.contains("not signed by the authority of `postgres.ca_file`")
                // The test authorities share their name: an unknown issuer, or a bad
                // signature by the one of that name.
                && (message.contains("UnknownIssuer") || message.contains("BadSignature")),
            "{mode}: {message}"
        );
        assert!(message.contains("connecting to 127.0.0.1:"), "{message}");

        // The service does not start.
        let store = tempfile::tempdir().unwrap();
        let mut config = ServiceConfig::new(store.path());
        config.postgres = Some(settings);
        let error = Service::start(&config, super::telemetry())
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("certificate verify failed"), "{error}");
    }

    // The right authority, but the server's certificate names 127.0.0.1 and localhost, not
    // the host the connection string asks for (`hostaddr` still reaches the server; hosts
    // add up, so the test's one is replaced).
    assert!(url.contains("host=127.0.0.1 "), "{url}");
    let settings = PostgresConfig {
        ca_file: Some(ca),
        timeout_seconds: 5,
        ..PostgresConfig::new(format!(
            "{} sslmode=require",
            url.replace("host=127.0.0.1 ", "host=db.example hostaddr=127.0.0.1 ")
        ))
    };
    let message = database_message(Pg::connect(&settings).await);
    eprintln!("{message}");
    assert!(
        message.contains("certificate verify failed")
            && message.contains("does not name db.example"),
        "{message}"
    );
}

/// Authentication over TLS: SCRAM with channel binding required (the TLS session's
/// `tls-server-end-point` must be right, or the server refuses); a wrong password, an unknown
/// role, a missing client certificate and a plain-text connection are refused with the
/// server's own words; the client certificate of `client_cert_file` logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_over_tls_and_its_failures_are_named() {
    let Some((url, db, ca)) = tls_server().await else {
        return;
    };
    let rules: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_hba_file_rules
             WHERE 'rca_scram' = ANY(user_name) OR 'rca_cert' = ANY(user_name)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    if rules < 3 {
        assert!(
            !rca_core::testing::require_all(),
            "PostgreSQL at RCA_POSTGRES_URL lacks the rca_scram/rca_cert rules: restart it \
             with `bash scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
        );
        eprintln!("skipping: the server lacks the rca_scram/rca_cert rules of scripts/services.sh");
        return;
    }
    let password = unique_name("pw");
    db.batch_execute(&format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rca_scram') THEN
             CREATE ROLE rca_scram LOGIN;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rca_cert') THEN
             CREATE ROLE rca_cert LOGIN;
           END IF;
         END $$;
         ALTER ROLE rca_scram PASSWORD '{password}';
         GRANT CREATE ON DATABASE postgres TO rca_scram, rca_cert;"
    ))
    .await
    .unwrap();
    let tls_dir = ca.parent().unwrap().to_path_buf();
    let connect = |extra: String, client_cert: bool| {
        let schema = unique_schema("auth");
        let guard = SchemaGuard {
            url: url.clone(),
            schema: schema.clone(),
        };
        let settings = PostgresConfig {
            ca_file: Some(ca.clone()),
            client_cert_file: client_cert.then(|| tls_dir.join("client.pem")),
            client_key_file: client_cert.then(|| tls_dir.join("client-key.pem")),
            schema: Some(schema),
            timeout_seconds: 5,
            ..PostgresConfig::new(format!("{url} {extra}"))
        };
        async move { (Pg::connect(&settings).await, guard) }
    };
    let current_user = |pg: Arc<Pg>| async move {
        let rows = pg.query("SELECT current_user::text", &[]).await.unwrap();
        let user: String = rows[0].get(0);
        (user, session_tls(&pg).await.0)
    };

    // SCRAM over TLS, bound to the TLS session.
    let (pg, _guard) = connect(
        format!("user=rca_scram password={password} sslmode=require channel_binding=require"),
        false,
    )
    .await;
    let pg = pg.unwrap_or_else(|e| panic!("SCRAM with channel binding: {e}"));
    assert_eq!(current_user(pg).await, ("rca_scram".to_string(), true));

    let (result, _guard) = connect(
        "user=rca_scram password=wrong sslmode=require".into(),
        false,
    )
    .await;
    let message = database_message(result);
    eprintln!("{message}");
    assert!(
        message.contains("FATAL 28P01: password authentication failed for user \"rca_scram\""),
        "{message}"
    );

    let (result, _guard) = connect("user=rca_no_such_role sslmode=require".into(), false).await;
    let message = database_message(result);
    eprintln!("{message}");
    assert!(
        message.contains("FATAL 28000: role \"rca_no_such_role\" does not exist"),
        "{message}"
    );

    // The client certificate (CN "rca test client", mapped to rca_cert).
    let (pg, _guard) = connect("user=rca_cert sslmode=require".into(), true).await;
    let pg = pg.unwrap_or_else(|e| panic!("client certificate: {e}"));
    assert_eq!(current_user(pg).await, ("rca_cert".to_string(), true));

    let (result, _guard) = connect("user=rca_cert sslmode=require".into(), false).await;
    let message = database_message(result);
    eprintln!("{message}");
    assert!(
        message.contains("connection requires a valid client certificate"),
        "{message}"
    );

    let (result, _guard) = connect("user=rca_cert sslmode=disable".into(), true).await;
    let message = database_message(result);
    eprintln!("{message}");
    assert!(
        message.contains("rejects connection") && message.contains("no encryption"),
        "{message}"
    );
}

/// A free port on 127.0.0.1 that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Nothing listens: the error says so (the operating system's words), and where.
#[tokio::test]
async fn a_closed_port_reports_the_refusal() {
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let pki = rca_listen::TestPki::generate(dir.path()).unwrap();
    for (extra, ca_file) in [("", None), (" sslmode=require", Some(pki.ca_file))] {
        let settings = PostgresConfig {
            ca_file,
            timeout_seconds: 5,
            ..PostgresConfig::new(format!(
                "host=127.0.0.1 port={port} user=rca dbname=rca{extra}"
            ))
        };
        let message = database_message(Pg::connect(&settings).await);
        eprintln!("{message}");
        assert!(
            message.to_lowercase().contains("refused"),
            "no cause: {message}"
        );
        assert!(
            message.starts_with(&format!(
                "connecting to 127.0.0.1:{port}: error connecting to server: "
            )),
            "{message}"
        );
    }
}

/// Writes `text` to `dir/name`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The TLS keys are checked before any connection, each message naming its key.
#[tokio::test]
async fn tls_settings_are_checked_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let pki = rca_listen::TestPki::generate(dir.path()).unwrap();
    // Port 1: nothing should ever be asked; a check that connected would time out or be refused.
    let base = "host=127.0.0.1 port=1 user=rca password=s3cr3tpw dbname=rca";
    let check = |config: PostgresConfig| async move {
        let validated = config.validate().unwrap_err();
        let connected = database_message(Pg::connect(&config).await);
        assert_eq!(validated, connected, "Pg::connect checks as validate does");
        assert!(!validated.contains("s3cr3tpw"), "{validated}");
        validated
    };

    let e = check(PostgresConfig::new(format!("{base} sslmode=require"))).await;
    assert!(
        e.contains("sslmode=require") && e.contains("`postgres.ca_file`"),
        "{e}"
    );

    let missing = dir.path().join("missing.pem");
    let e = check(PostgresConfig {
        ca_file: Some(missing.clone()),
        ..PostgresConfig::new(base)
    })
    .await;
    assert!(
        e.starts_with("`postgres.ca_file`") && e.contains(&missing.display().to_string()),
        "{e}"
    );

    let e = check(PostgresConfig {
        ca_file: Some(write(dir.path(), "empty.pem", "not a certificate\n")),
        ..PostgresConfig::new(base)
    })
    .await;
    assert!(
        e.starts_with("`postgres.ca_file`") && e.contains("holds no certificate"),
        "{e}"
    );

    let e = check(PostgresConfig {
        ca_file: Some(write(
            dir.path(),
            "broken.pem",
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        )),
        ..PostgresConfig::new(base)
    })
    .await;
    assert!(
        e.starts_with("`postgres.ca_file`") && e.contains("not PEM"),
        "{e}"
    );

    let e = check(PostgresConfig {
        client_cert_file: Some(pki.client_cert_file.clone()),
        client_key_file: Some(pki.client_key_file.clone()),
        ..PostgresConfig::new(base)
    })
    .await;
    assert!(
        e.contains("need TLS") && e.contains("`postgres.ca_file`"),
        "{e}"
    );

    let with_ca = || PostgresConfig {
        ca_file: Some(pki.ca_file.clone()),
        ..PostgresConfig::new(format!("{base} sslmode=require"))
    };
    let e = check(PostgresConfig {
        client_cert_file: Some(pki.client_cert_file.clone()),
        ..with_ca()
    })
    .await;
    assert!(e.contains("without `postgres.client_key_file`"), "{e}");
    let e = check(PostgresConfig {
        client_key_file: Some(pki.client_key_file.clone()),
        ..with_ca()
    })
    .await;
    assert!(e.contains("without `postgres.client_cert_file`"), "{e}");
    let e = check(PostgresConfig {
        client_cert_file: Some(pki.client_cert_file.clone()),
        client_key_file: Some(pki.client_cert_file.clone()),
        ..with_ca()
    })
    .await;
    assert!(e.starts_with("`postgres.client_key_file`"), "{e}");
    let e = check(PostgresConfig {
        client_cert_file: Some(pki.client_cert_file.clone()),
        client_key_file: Some(pki.server_key_file.clone()),
        ..with_ca()
    })
    .await;
    assert!(
        e.contains("`postgres.client_cert_file` and `postgres.client_key_file`"),
        "{e}"
    );

    let e = check(PostgresConfig::new(format!("{base} sslmode=verify-full"))).await;
    assert!(
        e.starts_with("`postgres.url` is not a connection string") && e.contains("sslmode"),
        "{e}"
    );

    // Right: the files are read and the settings pass; the secrets stay out of Debug.
    let right = PostgresConfig {
        client_cert_file: Some(pki.client_cert_file.clone()),
        client_key_file: Some(pki.client_key_file.clone()),
        ..with_ca()
    };
    right.validate().unwrap();
    let shown = format!("{right:?}");
    assert!(!shown.contains("s3cr3tpw"), "{shown}");
    assert!(shown.contains("ca.pem"), "{shown}");

    // A configuration file is checked as it loads.
    let file = write(
        dir.path(),
        "service.toml",
        &format!("[data]\nmetrics = [\"m.csv\"]\n[postgres]\nurl = \"{base} sslmode=require\"\n"),
    );
    let e = ServiceConfig::load(&file).unwrap_err().to_string();
    assert!(e.contains("`postgres.ca_file`"), "{e}");
    let file = write(
        dir.path(),
        "service.toml",
        &format!(
            "[data]\nmetrics = [\"m.csv\"]\n[postgres]\nurl = \"{base} sslmode=require\"\n\
             ca_file = {:?}\nclient_cert_file = {:?}\nclient_key_file = {:?}\n",
            pki.ca_file, pki.client_cert_file, pki.client_key_file
        ),
    );
    let loaded = ServiceConfig::load(&file).unwrap();
    assert_eq!(loaded.postgres.unwrap().ca_file, Some(pki.ca_file.clone()));
}
