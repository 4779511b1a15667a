//! Small synthetic telemetry for the tests of this crate (written for the tests; no dataset).
#![allow(clippy::unwrap_used)] // test fixtures: a failure here is a broken test set-up

use rca_core::source::{Level, LogRecord, MetricSample, Span};
use rca_core::{TimeRange, Timestamp};

use super::catalog::TelemetryTables;
use super::sandbox::SandboxLimits;

/// The incident window of the fixtures: [100 s, 200 s).
pub(crate) fn window() -> TimeRange {
    TimeRange::new(Timestamp(100_000), Timestamp(200_000))
}

/// Logs: three components; `cart` logs errors inside the window.
pub(crate) fn logs() -> Vec<LogRecord> {
    let mut out = Vec::new();
    for i in 0..60i64 {
        let t = Timestamp(i * 4_000);
        for comp in ["frontend", "cart", "db"] {
            let failing = comp == "cart" && window().contains(t) && i % 2 == 0;
            out.push(LogRecord {
                timestamp: t,
                component: comp.into(),
                level: Some(if failing { Level::Error } else { Level::Info }),
                message: if failing {
                    "request failed: upstream reset".into()
                } else {
                    "request served".into()
                },
                attributes: Default::default(),
            });
        }
    }
    out
}

/// Metrics: `cpu` per component every 5 s; `db` spikes inside the window.
pub(crate) fn metrics() -> Vec<MetricSample> {
    let mut out = Vec::new();
    for i in 0..50i64 {
        let t = Timestamp(i * 5_000);
        for (k, comp) in ["frontend", "cart", "db"].iter().enumerate() {
            let base = 20.0 + k as f64 + (i % 3) as f64;
            let spike = *comp == "db" && (120_000..160_000).contains(&t.millis());
            out.push(MetricSample {
                timestamp: t,
                component: (*comp).into(),
                metric: "cpu".into(),
                value: if spike { 95.0 } else { base },
                labels: Default::default(),
            });
        }
    }
    out
}

/// Spans: `db` queries are slow inside the window.
pub(crate) fn spans() -> Vec<Span> {
    let mut out = Vec::new();
    for i in 0..100i64 {
        let t = Timestamp(i * 2_000);
        for (comp, op) in [("frontend", "GET /"), ("db", "query")] {
            let slow = comp == "db" && window().contains(t);
            out.push(Span {
                trace_id: format!("t{i}").into(),
                span_id: format!("{comp}{i}").into(),
                parent_id: (comp == "db")
                    .then(|| format!("frontend{i}"))
                    .map(Into::into),
                component: comp.into(),
                operation: op.into(),
                start: t,
                duration_us: if slow {
                    900_000 + (i as u64 % 7) * 1000
                } else {
                    10_000 + (i as u64 % 5) * 100
                },
                error: slow && i % 10 == 0,
                attributes: Default::default(),
            });
        }
    }
    out
}

/// Tables `logs`, `metrics` and `spans` from the fixtures.
pub(crate) fn tables(limits: SandboxLimits) -> TelemetryTables {
    let t = TelemetryTables::new(limits).unwrap();
    t.register_logs("logs", &logs()).unwrap();
    t.register_metrics("metrics", &metrics()).unwrap();
    t.register_spans("spans", &spans()).unwrap();
    t
}
