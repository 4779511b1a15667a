//! Retention in PostgreSQL: reports older than the age, and the oldest beyond the bytes, are
//! deleted with their resolutions and the episodes naming them; finished jobs past the age too.

use std::sync::Arc;
use std::time::Duration;

use example_diagnosis_service::PostgresConfig;
use example_diagnosis_service::pg::Pg;
use example_diagnosis_service::pg_store::PgStore;
use example_diagnosis_service::store::ReportStore;

use super::workers::{SchemaGuard, postgres, unique_schema};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_retention_deletes_by_age_and_bytes() {
    let Some((url, db)) = postgres().await else {
        return;
    };
    let schema = unique_schema("retention");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let mut config = PostgresConfig::new(url.clone());
    config.schema = Some(schema.clone());
    let pg = Pg::connect(&config).await.unwrap();
    let store = ReportStore::with_backend(Arc::new(PgStore::new(Arc::clone(&pg))));
    // Three reports stored two days, an hour and a minute ago, each with a resolution and an
    // open episode; two finished jobs, one two days old.
    let ids = [
        "00000000000000b1-1",
        "00000000000000b2-2",
        "00000000000000b3-3",
    ];
    for (id, age) in ids.iter().zip(["2 days", "1 hour", "1 minute"]) {
        let body: String = (0..2_000)
            .map(|i| format!("{:x}", i * 7919 % 4099))
            .collect();
        db.execute(
            &format!(
                "INSERT INTO {schema}.diagnosis_reports (id, report, stored_at)
                 VALUES ($1, $2, now() - interval '{age}')"
            ),
            &[id, &serde_json::json!({"id": id, "padding": body})],
        )
        .await
        .unwrap();
        db.execute(
            &format!(
                "INSERT INTO {schema}.diagnosis_resolutions (id, resolution) VALUES ($1, '{{}}')"
            ),
            &[id],
        )
        .await
        .unwrap();
        let group = id.split_once('-').unwrap().0;
        db.execute(
            &format!("INSERT INTO {schema}.diagnosis_episodes (group_key, id) VALUES ($1, $2)"),
            &[&group, id],
        )
        .await
        .unwrap();
    }
    for (id, age) in [("old-job", "2 days"), ("new-job", "1 minute")] {
        db.execute(
            &format!(
                "INSERT INTO {schema}.diagnosis_jobs (id, entry, received_at_ms, state, updated_at)
                 VALUES ($1, '{{}}', 0, 'done', now() - interval '{age}')"
            ),
            &[&id],
        )
        .await
        .unwrap();
    }
    let count = |table: &'static str| {
        let db = &db;
        let schema = schema.clone();
        async move {
            let row = db
                .query_one(&format!("SELECT count(*) FROM {schema}.{table}"), &[])
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };

    // A day's age: the first report goes with its resolution and episode, and the old job.
    let pruned = store
        .prune(Duration::from_secs(86_400), u64::MAX)
        .await
        .unwrap();
    assert_eq!(pruned.reports, 1, "{pruned:?}");
    assert!(pruned.bytes > 0, "{pruned:?}");
    assert_eq!(store.ids().await.unwrap(), ids[1..].to_vec());
    assert_eq!(count("diagnosis_resolutions").await, 2);
    assert_eq!(count("diagnosis_episodes").await, 2);
    assert_eq!(count("diagnosis_jobs").await, 1);

    // Bytes for the newest report only: the older of the two goes.
    let newest: i32 = db
        .query_one(
            &format!("SELECT pg_column_size(report) FROM {schema}.diagnosis_reports WHERE id = $1"),
            &[&ids[2]],
        )
        .await
        .unwrap()
        .get(0);
    let pruned = store
        .prune(Duration::from_secs(86_400), newest as u64)
        .await
        .unwrap();
    assert_eq!(pruned.reports, 1, "{pruned:?}");
    assert_eq!(pruned.kept_bytes, newest as u64, "{pruned:?}");
    assert_eq!(store.ids().await.unwrap(), vec![ids[2]]);
    assert_eq!(count("diagnosis_episodes").await, 1);
}
