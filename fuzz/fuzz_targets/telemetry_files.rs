//! The telemetry readers on arbitrary file contents (plain and JSON-lines logs, CSV metrics,
//! CSV and OTLP-JSON spans, each maybe gzip): errors or counted bad rows, never a panic, and
//! never more records than the input could hold.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use rca_tools::sources::{
    FileLogSource, FileMetricSource, FileTraceSource, LogOptions, MetricOptions, ReadBudget,
};

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = std::env::temp_dir().canonicalize() else {
        return;
    };
    let dir = dir.join(format!("rca-fuzz-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    for name in ["a.log", "a.jsonl", "m.csv", "s.csv", "s.json", "a.log.gz"] {
        let path = dir.join(name);
        let Ok(mut f) = std::fs::File::create(&path) else {
            return;
        };
        if f.write_all(data).is_err() {
            return;
        }
        let budget = Some(ReadBudget::new(1 << 20));
        let logs = LogOptions {
            budget: budget.clone(),
            ..LogOptions::default()
        };
        if let Ok(s) = FileLogSource::open(&[&path], &logs) {
            assert!(s.report().records <= data.len() + 1);
        }
        let metrics = MetricOptions {
            budget: budget.clone(),
            ..MetricOptions::default()
        };
        let _ = FileMetricSource::open(&[&path], &metrics);
        let _ = FileTraceSource::open_within(&[&path], None, None, budget.as_ref());
    }
});
