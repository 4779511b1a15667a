//! Tests of the DataFusion tables and the sandbox.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use rca_core::source::{SqlSource, Value};

use super::fixtures::{tables, window};
use super::*;

fn small() -> SandboxLimits {
    SandboxLimits {
        max_rows: 100,
        memory_bytes: 64 * 1024 * 1024,
        timeout: Duration::from_secs(20),
    }
}

#[tokio::test]
async fn records_become_typed_tables() {
    let t = tables(small());
    let schemas = t.schemas().await.unwrap();
    let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["logs", "metrics", "spans"]);
    assert_eq!(
        schemas[0].column("timestamp").unwrap().ty,
        ColumnType::Integer
    );
    assert_eq!(schemas[2].column("error").unwrap().ty, ColumnType::Boolean);
    let r = t
        .query(
            "SELECT component, COUNT(*) AS n FROM logs WHERE level = $1 AND timestamp >= $2 GROUP BY component",
            &[Value::Text("ERROR".into()), Value::Int(window().start.millis())],
        )
        .await
        .unwrap();
    assert_eq!(r.columns, vec!["component", "n"]);
    // `cart` fails on every even 4 s tick inside the half-open window [100 s, 200 s):
    // ticks 26, 28, ..., 48, so 12 errors (200 s itself lies outside the window).
    assert_eq!(
        r.rows,
        vec![vec![Value::Text("cart".into()), Value::Int(12)]]
    );
    // The SqlSource face gives the same rows.
    let tables = SqlSource::tables(&t).await.unwrap();
    assert_eq!(
        tables[1].1,
        vec!["timestamp", "component", "metric", "value", "labels"]
    );
}

#[tokio::test]
async fn sandbox_refuses_writes_and_ddl() {
    let t = tables(small());
    for bad in [
        "DROP TABLE logs",
        "CREATE TABLE x AS SELECT * FROM logs",
        "INSERT INTO logs SELECT * FROM logs",
        "SELECT 1; DROP TABLE logs",
        "COPY logs TO '/tmp/rca-lifecycle-copy.csv'",
        "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/hostname'",
        "SET datafusion.execution.batch_size = 1",
    ] {
        let e = t.query(bad, &[]).await.unwrap_err();
        assert!(
            matches!(
                e,
                TableError::Refused { .. } | TableError::InvalidQuery { .. }
            ),
            "{bad}: {e:?}"
        );
    }
    assert_eq!(
        t.schemas().await.unwrap().len(),
        3,
        "nothing was created or dropped"
    );
    assert!(!std::path::Path::new("/tmp/rca-lifecycle-copy.csv").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_limit_and_timeout() {
    let t = tables(SandboxLimits {
        max_rows: 10,
        ..small()
    });
    let e = t.query("SELECT * FROM logs", &[]).await.unwrap_err();
    assert_eq!(e, TableError::TooManyRows { limit: 10 });
    assert!(t.query("SELECT * FROM logs LIMIT 10", &[]).await.is_ok());

    let slow = tables(SandboxLimits {
        timeout: Duration::from_millis(50),
        ..small()
    });
    let started = std::time::Instant::now();
    let e = slow
        .query(
            "SELECT SUM(a.value % 7) AS s FROM generate_series(1, 20000000000) a",
            &[],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, TableError::Timeout { millis: 50 }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn memory_limit_is_enforced() {
    let t = tables(SandboxLimits {
        memory_bytes: 256 * 1024,
        ..small()
    });
    let e = t
        .query(
            "SELECT a.value % 1000 AS k, COUNT(*) AS n FROM generate_series(1, 2000000) a \
             GROUP BY a.value ORDER BY n DESC LIMIT 5",
            &[],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, TableError::MemoryLimit { .. }), "{e:?}");
}

#[tokio::test]
async fn csv_gzip_parquet_and_arrow_tables() {
    let dir = tempfile::tempdir().unwrap();
    let csv = "timestamp,component,value\n1000,a,1.5\n2000,b,2.5\n";
    std::fs::write(dir.path().join("kpi.csv"), csv).unwrap();
    let gz = dir.path().join("Kpi Archive.csv.gz");
    let mut enc = flate2_writer(&gz);
    enc.write_all(csv.as_bytes()).unwrap();
    enc.finish().unwrap();

    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("timestamp", DataType::Int64, false),
            Field::new("component", DataType::Utf8, false),
            Field::new("value", DataType::Float64, false),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![1000, 2000, 3000])),
            Arc::new(StringArray::from(vec!["a", "b", "c"])),
            Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0])),
        ],
    )
    .unwrap();
    let pq = dir.path().join("kpi_pq.parquet");
    let file = std::fs::File::create(&pq).unwrap();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();

    let t = TelemetryTables::new(small()).unwrap();
    let names = t
        .register_dir(dir.path(), CsvOptions::default())
        .await
        .unwrap();
    assert_eq!(names, vec!["kpi_archive", "kpi", "kpi_pq"]);
    t.register_batches("kpi_mem", vec![batch]).unwrap();
    for (table, n) in [
        ("kpi", 2),
        ("kpi_archive", 2),
        ("kpi_pq", 3),
        ("kpi_mem", 3),
    ] {
        let r = t
            .query(
                &format!("SELECT SUM(value) AS s, COUNT(*) AS n FROM {table}"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(r.value(0, "n"), Some(&Value::Int(n)), "{table}");
    }
    let e = t
        .register_file(
            "Bad",
            &dir.path().join("kpi.csv"),
            TableFormat::Csv,
            CsvOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, TableError::Register { .. }));
    let e = t
        .register_file(
            "missing",
            &dir.path().join("none.csv"),
            TableFormat::Csv,
            CsvOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not a file"));
    assert_eq!(
        TableFormat::from_path(std::path::Path::new("x.CSV.GZ")),
        Some(TableFormat::GzipCsv)
    );
}

fn flate2_writer(path: &std::path::Path) -> flate2::write::GzEncoder<std::fs::File> {
    flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    )
}
