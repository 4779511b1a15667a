//! Data sources against real servers started by `scripts/services.sh` (PostgreSQL and
//! Prometheus on loopback). Without the servers these tests skip, unless `RCA_REQUIRE_ALL` is
//! set (as in CI), where a missing server fails them.
#![cfg(all(feature = "prometheus", feature = "postgres"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::TryStreamExt;
use rca_core::source::{
    MetricQuery, MetricSource, RecordQuery, Row, SqlSource, TableSource, Value,
};
use rca_core::{SourceError, TimeRange, Timestamp};
use rca_tools::postgres::PostgresSource;
use rca_tools::prometheus::{PrometheusConfig, PrometheusSource};
use rca_tools::records::TableOptions;

fn env_or_skip(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            if rca_core::testing::require_all() {
                panic!(
                    "{name} is not set: run `bash scripts/services.sh start` (RCA_REQUIRE_ALL is set)"
                );
            }
            eprintln!("skipping: {name} is not set (run `bash scripts/services.sh start`)");
            None
        }
    }
}

#[tokio::test]
async fn prometheus_range_series_labels_and_cutoff() {
    let (Some(url), Some(start)) = (
        env_or_skip("RCA_PROMETHEUS_URL"),
        env_or_skip("RCA_PROMETHEUS_FIXTURE_START"),
    ) else {
        return;
    };
    let start = Timestamp::from_secs(start.parse().unwrap());
    let end = start.offset_millis(120 * 60_000);
    let source = PrometheusSource::new(PrometheusConfig::new(&url)).unwrap();

    let series = source.series().await.unwrap();
    assert!(
        series.contains(&("svc-a".into(), "rca_fixture_latency_seconds".into())),
        "{series:?}"
    );
    assert!(series.contains(&("svc-b".into(), "rca_fixture_latency_seconds".into())));
    assert!(
        source
            .labels()
            .await
            .unwrap()
            .contains(&"instance".to_string())
    );

    let mut q = MetricQuery::range(TimeRange::new(start, end));
    q.metric = Some("rca_fixture_latency_seconds".into());
    q.component = Some("svc-a".into());
    let samples: Vec<_> = source
        .samples(&q)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(samples.len(), 120, "one sample a minute for two hours");
    assert!(samples[..110].iter().all(|s| s.value == 0.1));
    assert!(samples[110..].iter().all(|s| s.value == 2.5));
    assert_eq!(samples[0].timestamp, start);

    // The detection time hides the spike.
    let cut = PrometheusSource::new(PrometheusConfig::new(&url))
        .unwrap()
        .with_cutoff(start.offset_millis(110 * 60_000));
    let samples: Vec<_> = cut.samples(&q).await.unwrap().try_collect().await.unwrap();
    assert_eq!(samples.len(), 110);
    assert!(samples.iter().all(|s| s.value == 0.1));

    let counter = source
        .instant(
            "rca_fixture_requests_total",
            start.offset_millis(5 * 60_000),
        )
        .await
        .unwrap();
    assert_eq!(counter.len(), 1);
    assert_eq!(counter[0].value, 5.0);

    let err = source.instant("rate(", start).await.unwrap_err();
    assert!(matches!(err, SourceError::InvalidQuery { .. }), "{err:?}");
    let down = PrometheusSource::new(PrometheusConfig::new("http://127.0.0.1:1")).unwrap();
    assert!(matches!(
        down.series().await,
        Err(SourceError::Unavailable { .. })
    ));
}

#[tokio::test]
async fn postgres_records_queries_and_read_only() {
    let Some(config) = env_or_skip("RCA_POSTGRES_URL") else {
        return;
    };
    let schema = format!("rca_test_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
             CREATE TABLE {schema}.job_events (event_time timestamptz, job_id text, event text, exit_code int);
             INSERT INTO {schema}.job_events VALUES
               ('2024-05-01T10:00:00Z', 'job-7', 'SUBMITTED', NULL),
               ('2024-05-01T10:05:00Z', 'job-8', 'SUBMITTED', NULL),
               ('2024-05-01T10:06:00Z', 'job-7', 'FAILED', 137),
               ('2024-05-01T10:20:00Z', 'job-7', 'RESTARTED', NULL);"
        ))
        .await
        .unwrap();

    let options = TableOptions {
        time_columns: vec!["event_time".into()],
        cutoff: Timestamp::parse_rfc3339("2024-05-01T10:10:00Z"),
        ..Default::default()
    };
    let pg = PostgresSource::connect(&config, &schema, options, Duration::from_secs(5))
        .await
        .unwrap();
    let tables = TableSource::tables(&pg).await.unwrap();
    assert_eq!(
        tables,
        vec![(
            "job_events".into(),
            vec![
                "event_time".into(),
                "job_id".into(),
                "event".into(),
                "exit_code".into()
            ]
        )]
    );

    let q = RecordQuery {
        entity: Some("job-7".into()),
        ..Default::default()
    };
    let rows: Vec<Row> = pg
        .records("job_events", &q)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        2,
        "the restart after the cutoff stays hidden: {rows:?}"
    );
    assert_eq!(rows[1][3], ("exit_code".into(), Value::Int(137)));
    assert_eq!(
        rows[0][0],
        (
            "event_time".into(),
            Value::Text("2024-05-01T10:00:00.000Z".into())
        )
    );

    let q = RecordQuery {
        range: Some(TimeRange::new(
            Timestamp::parse_rfc3339("2024-05-01T10:04:00Z").unwrap(),
            Timestamp::parse_rfc3339("2024-05-01T10:30:00Z").unwrap(),
        )),
        ..Default::default()
    };
    let rows: Vec<Row> = pg
        .records("job_events", &q)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);

    let sql = format!("SELECT job_id, exit_code FROM {schema}.job_events WHERE exit_code = $1");
    let rows: Vec<Row> = pg
        .query(&sql, &[Value::Int(137)])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![
            ("job_id".into(), Value::Text("job-7".into())),
            ("exit_code".into(), Value::Int(137))
        ]]
    );

    // Writes are refused: by the statement check, and by the read-only session on the server.
    assert!(matches!(
        pg.query(&format!("DELETE FROM {schema}.job_events"), &[])
            .await,
        Err(SourceError::InvalidQuery { .. })
    ));
    let sneaky = format!("WITH d AS (DELETE FROM {schema}.job_events RETURNING *) SELECT * FROM d");
    let err = pg.query(&sneaky, &[]).await.err().unwrap();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(matches!(
        pg.records("nope", &RecordQuery::default()).await,
        Err(SourceError::InvalidQuery { .. })
    ));

    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
}
