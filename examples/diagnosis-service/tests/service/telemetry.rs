//! Telemetry files the binary tests start the service on.

use std::path::{Path, PathBuf};

use super::t;

/// Telemetry files for `web` and `db` over the hour before START: db's latency jumps in the
/// last eight minutes and it logs connection-pool errors then.
pub(crate) fn write_telemetry(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let mut metrics = String::from("timestamp,component,metric,value\n");
    let mut db_log = String::new();
    let mut web_log = String::new();
    for m in (1..=60).rev() {
        let at = t(m).to_string();
        let hot = m <= 8;
        let latency = if hot { 900.0 } else { 20.0 + (m % 3) as f64 };
        metrics.push_str(&format!("{at},db,latency_p90,{latency}\n"));
        metrics.push_str(&format!(
            "{at},db,cpu_usage,{}\n",
            if hot { 0.95 } else { 0.3 }
        ));
        metrics.push_str(&format!(
            "{at},web,cpu_usage,{}\n",
            0.4 + (m % 2) as f64 * 0.01
        ));
        web_log.push_str(&format!(
            "{at} INFO GET /checkout 200 in {} ms\n",
            20 + m % 3
        ));
        if hot {
            for _ in 0..5 {
                db_log.push_str(&format!(
                    "{at} ERROR connection pool exhausted, waited 5000 ms\n"
                ));
            }
        }
    }
    let metrics_path = dir.join("metrics.csv");
    std::fs::write(&metrics_path, metrics).unwrap();
    let logs = vec![dir.join("db.log"), dir.join("web.log")];
    std::fs::write(&logs[0], db_log).unwrap();
    std::fs::write(&logs[1], web_log).unwrap();
    (metrics_path, logs)
}
