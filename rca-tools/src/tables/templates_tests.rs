use rca_core::source::{LogRecord, Value};
use rca_core::time::Timestamp;

use super::*;
use crate::tables::export::ParquetExport;
use crate::tables::{SandboxLimits, TelemetryTables};

fn log(ms: i64, component: &str, message: String) -> LogRecord {
    LogRecord {
        timestamp: Timestamp(ms),
        component: component.into(),
        level: None,
        message,
        attributes: Default::default(),
    }
}

/// Two components over 40 s; from 30 s on, `db` also writes a timeout template.
fn lines() -> Vec<LogRecord> {
    let mut out = Vec::new();
    for i in 0..400i64 {
        let t = i * 100;
        out.push(log(
            t,
            "api",
            format!("request {i} served in {} ms", i % 17),
        ));
        out.push(log(
            t,
            "db",
            format!("query on shard {} took {} ms", i % 5, i % 13),
        ));
        if t >= 30_000 && i % 2 == 0 {
            out.push(log(
                t,
                "db",
                format!("connection to replica {} timed out", i % 3),
            ));
        }
    }
    out
}

async fn tables_over(dir: &std::path::Path, target_partitions: usize) -> TelemetryTables {
    let tables = TelemetryTables::new(SandboxLimits::default()).unwrap();
    tables
        .context()
        .state_ref()
        .write()
        .config_mut()
        .options_mut()
        .execution
        .target_partitions = target_partitions;
    tables
        .register_parquet_dir("logs", &dir.join("logs"))
        .await
        .unwrap();
    tables
}

#[tokio::test]
async fn mines_per_component_and_splits_baseline_from_window() {
    let tables = TelemetryTables::new(SandboxLimits::default()).unwrap();
    tables.register_logs("logs", &lines()).unwrap();
    let result = tables
        .query(&templates_sql("logs", 10_000), &[])
        .await
        .unwrap();
    let text = result.render(20);
    let got: Vec<(String, String, i64)> = (0..result.len())
        .map(|i| {
            let s = |c| match result.value(i, c) {
                Some(Value::Text(t)) => t.clone(),
                other => panic!("{other:?}"),
            };
            let Some(Value::Int(n)) = result.value(i, "lines") else {
                panic!("{text}");
            };
            (s("component"), s("template"), *n)
        })
        .collect();
    // Every line is counted once: 400 api lines, 400 + 50 db lines. A duration is masked
    // with its unit (`12 ms` -> `<*> <*>`: units vary within one event elsewhere).
    assert_eq!(
        got,
        [
            ("api".into(), "request <*> served in <*> <*>".into(), 400),
            ("db".into(), "query on shard <*> took <*> <*>".into(), 400),
            (
                "db".into(),
                "connection to replica <*> timed out".into(),
                50
            ),
        ],
        "{text}"
    );
}

#[tokio::test]
async fn the_result_does_not_depend_on_partitions_and_the_shift_names_the_new_template() {
    let dir = tempfile::tempdir().unwrap();
    // Ten-second time partitions: four files per component mix.
    let mut export = ParquetExport::create(&dir.path().join("export"), 10_000).unwrap();
    let all = lines();
    // Written in two halves, so some partitions have two files.
    let (a, b) = all.split_at(all.len() / 2);
    export.write_logs(a).unwrap();
    export.write_logs(b).unwrap();
    let out = dir.path().join("export");
    let sql = frequency_shift_sql("logs", 30_000, 5_000);
    let mut results = Vec::new();
    for partitions in [1, 2, 8] {
        let tables = tables_over(&out, partitions).await;
        results.push(tables.query(&sql, &[]).await.unwrap());
    }
    assert_eq!(results[0].rows, results[1].rows);
    assert_eq!(results[0].rows, results[2].rows);
    let top = &results[0];
    assert_eq!(
        top.value(0, "template"),
        Some(&Value::Text("connection to replica <*> timed out".into())),
        "{}",
        top.render(10)
    );
    assert_eq!(top.value(0, "window"), Some(&Value::Int(50)));
    assert_eq!(top.value(0, "baseline"), Some(&Value::Int(0)));
}

#[tokio::test]
async fn damaged_partial_states_and_wrong_arguments_are_errors() {
    let mut acc = TemplatesAccumulator::default();
    let damaged: ArrayRef = Arc::new(BinaryArray::from(vec![Some(b"not json".as_slice())]));
    let e = acc.merge_batch(&[damaged]).unwrap_err();
    assert!(e.to_string().contains("damaged partial state"), "{e}");
    let e = acc.update_batch(&[]).unwrap_err();
    assert!(e.to_string().contains("expects"), "{e}");

    let tables = TelemetryTables::new(SandboxLimits::default()).unwrap();
    tables.register_logs("logs", &lines()).unwrap();
    let e = tables
        .query("SELECT log_templates(message) FROM logs", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(e, crate::tables::TableError::InvalidQuery { .. }),
        "{e}"
    );
}

#[test]
fn partial_states_carry_templates_not_lines() {
    let mut acc = TemplatesAccumulator::default();
    let messages: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..5000).map(|i| format!("user {i} logged in from host-{}", i % 7)),
    ));
    let chunks: ArrayRef = Arc::new(Int64Array::from_iter_values((0..5000).map(|i| i / 2500)));
    acc.update_batch(&[messages, chunks]).unwrap();
    let state = acc.state().unwrap();
    let Some(ScalarValue::Binary(Some(bytes))) = state.first() else {
        panic!("{state:?}");
    };
    // Two chunks of one template each: far smaller than the 5000 lines.
    assert!(bytes.len() < 8_000, "{} bytes", bytes.len());
    let mut merged = TemplatesAccumulator::default();
    merged
        .merge_batch(&[Arc::new(BinaryArray::from(vec![Some(bytes.as_slice())]))])
        .unwrap();
    assert_eq!(merged.evaluate().unwrap(), acc.evaluate().unwrap());
}

/// Sort keys of every sort in the physical plan of `sql`.
async fn sort_keys(tables: &TelemetryTables, sql: &str) -> Vec<usize> {
    use datafusion::arrow::util::pretty::pretty_format_batches;
    let plan = tables
        .context()
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let text = pretty_format_batches(&plan).unwrap().to_string();
    text.lines()
        .filter(|l| l.contains("SortExec") || l.contains("SortPreservingMergeExec"))
        .map(|l| l.matches(" ASC").count() + l.matches(" DESC").count())
        .collect()
}

/// The queries sort on every key. DataFusion drops sort keys it believes determined by the
/// grouping key even after `unnest` (see `UNKEYED_COMPONENT`): the control query, grouped
/// column kept, loses them; when it no longer does, the workaround can go.
#[tokio::test]
async fn the_queries_keep_every_sort_key() {
    let tables = TelemetryTables::new(SandboxLimits::default()).unwrap();
    tables.register_logs("logs", &lines()).unwrap();
    for sql in [
        templates_sql("logs", 10_000),
        frequency_shift_sql("logs", 30_000, 10_000),
    ] {
        // The outermost sort (the first in the plan's text) is the query's ORDER BY.
        let keys = sort_keys(&tables, &sql).await;
        assert_eq!(keys.first(), Some(&3), "{keys:?}");
    }
    let control = templates_sql("logs", 10_000).replace(UNKEYED_COMPONENT, "grouped AS component");
    let keys = sort_keys(&tables, &control).await;
    assert!(
        keys.first().is_some_and(|&k| k < 3),
        "DataFusion keeps the keys now: {keys:?}"
    );
}
