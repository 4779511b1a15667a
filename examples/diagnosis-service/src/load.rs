//! A load test of the service, on loopback only and bounded in count and time: bursts of
//! alerts (some sent again, some malformed, some larger than the body limit), a crash and
//! restart of the service mid-run, and a count of what became of every alert.
//!
//! The driver honours `Retry-After` on 429 and 503 and sends again (bounded), as Alertmanager
//! does; it then waits for the inbox to drain and checks the store: every accepted alert must
//! have exactly one report and no report may answer an alert that was not accepted. The
//! `diagnosis-service-load` binary runs it and writes the figures into `docs/benchmarks.md`.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rca_core::Timestamp;
use rca_core::source::{Level, LogRecord, MetricSample};
use rca_tools::sources::{FileLogSource, FileMetricSource};
use serde::Serialize;
use tokio::net::TcpListener;

use crate::Service;
use crate::config::{ServiceConfig, Sources};
use crate::store::ReportStore;

/// Why a load run could not be carried out (not: what it found).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The plan cannot be run: the message says which field to fix.
    #[error("invalid load plan: {0}")]
    Plan(String),
    /// The service could not be started, reached or read back.
    #[error("load run failed: {0}")]
    Service(String),
    /// The run passed its time limit.
    #[error("the load run passed its time limit of {0} s")]
    TimedOut(u64),
}

/// What to send.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Notifications sent in all (one alert group of one alert each).
    pub sends: usize,
    /// Notifications sent at once, as one burst.
    pub burst: usize,
    /// The share of sends that repeat an alert sent earlier.
    pub duplicate_share: f64,
    /// The share of sends whose body is not JSON.
    pub malformed_share: f64,
    /// The share of sends larger than the service's body limit.
    pub oversized_share: f64,
    /// Crash and restart the service after this many bursts.
    pub restart_after_bursts: Option<usize>,
    /// How often one send is repeated after a 429 or 503 before the driver gives up (each
    /// after its `Retry-After`; the run's `time_limit` bounds them all).
    pub max_retries: u32,
    /// The `startsAt` of every alert (where the telemetry shows a fault).
    pub alert_time: Timestamp,
    /// The seed of the choice of each send's kind.
    pub seed: u64,
    /// The whole run's limit.
    pub time_limit: Duration,
}

impl LoadPlan {
    /// 500 sends in bursts of 50: 15% repeats, 5% malformed, 5% oversized, a restart after
    /// the fourth burst.
    pub fn new(alert_time: Timestamp) -> LoadPlan {
        LoadPlan {
            sends: 500,
            burst: 50,
            duplicate_share: 0.15,
            malformed_share: 0.05,
            oversized_share: 0.05,
            restart_after_bursts: Some(4),
            max_retries: 600,
            alert_time,
            seed: 7,
            time_limit: Duration::from_secs(600),
        }
    }

    fn check(&self) -> Result<(), LoadError> {
        let shares = [
            self.duplicate_share,
            self.malformed_share,
            self.oversized_share,
        ];
        if shares.iter().any(|s| !(0.0..=1.0).contains(s)) || shares.iter().sum::<f64>() > 1.0 {
            return Err(LoadError::Plan(
                "the shares must lie in [0, 1] and add up to at most 1".into(),
            ));
        }
        if self.sends == 0 || self.burst == 0 {
            return Err(LoadError::Plan(
                "`sends` and `burst` must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// What became of the sends, and how long alerts took to their report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoadFigures {
    /// Notifications sent (first attempts).
    pub sent: usize,
    /// Sends of an alert not sent before.
    pub new_alerts: usize,
    /// Sends repeating an earlier alert.
    pub repeats: usize,
    /// Malformed sends, and how many of them got a 4xx.
    pub malformed: usize,
    /// Of `malformed`, answered with a 4xx.
    pub malformed_refused: usize,
    /// Oversized sends.
    pub oversized: usize,
    /// Of `oversized`, answered with 413 (or whose connection the server closed while the
    /// body was still being sent).
    pub oversized_refused: usize,
    /// Distinct alert ids the service accepted.
    pub accepted: usize,
    /// Sends the service grouped with an alert it already had.
    pub grouped: usize,
    /// 429 or 503 answers (each followed by a send again).
    pub busy: usize,
    /// Of `busy`, answers that carried `Retry-After`.
    pub busy_with_retry_after: usize,
    /// Sends given up after `max_retries` busy answers.
    pub given_up: usize,
    /// Answers of any other status (a good send refused, a server error).
    pub unexpected: usize,
    /// Restarts, and the accepted alerts the new service found in its inbox.
    pub restarts: usize,
    /// Alerts recovered from the inbox at the restarts.
    pub recovered: usize,
    /// Reports in the store at the end.
    pub reports_stored: usize,
    /// Accepted alerts without a report.
    pub missing: usize,
    /// Reports for alerts that were never accepted.
    pub extra: usize,
    /// Median time from acceptance to report, in milliseconds.
    pub p50_ms: i64,
    /// 99th percentile of that time.
    pub p99_ms: i64,
    /// The whole run's wall time, in seconds.
    pub wall_seconds: f64,
}

impl LoadFigures {
    /// The figures as a Markdown table.
    pub fn to_markdown(&self) -> String {
        let rows = [
            ("sent (first attempts)", self.sent.to_string()),
            ("  new alerts", self.new_alerts.to_string()),
            ("  repeats of an earlier alert", self.repeats.to_string()),
            (
                "  malformed: refused with a 4xx",
                format!("{} of {}", self.malformed_refused, self.malformed),
            ),
            (
                "  oversized: refused (413, or the connection closed mid-body)",
                format!("{} of {}", self.oversized_refused, self.oversized),
            ),
            ("alerts accepted (distinct)", self.accepted.to_string()),
            ("sends grouped with an alert", self.grouped.to_string()),
            (
                "429/503 answers (with Retry-After)",
                format!("{} ({})", self.busy, self.busy_with_retry_after),
            ),
            ("sends given up by the client", self.given_up.to_string()),
            ("other answers", self.unexpected.to_string()),
            (
                "restarts (alerts recovered from the inbox)",
                format!("{} ({})", self.restarts, self.recovered),
            ),
            ("reports stored", self.reports_stored.to_string()),
            ("accepted alerts without a report", self.missing.to_string()),
            ("reports of alerts not accepted", self.extra.to_string()),
            ("time to report p50", format!("{} ms", self.p50_ms)),
            ("time to report p99", format!("{} ms", self.p99_ms)),
            ("wall time", format!("{:.1} s", self.wall_seconds)),
        ];
        let mut out = String::from("| | |\n|---|---:|\n");
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out
    }
}

/// One notification to send.
#[derive(Debug, Clone)]
enum SendKind {
    Alert { index: usize, repeat: bool },
    Malformed,
    Oversized,
}

fn notification(index: usize, alert_time: Timestamp, padding: usize) -> String {
    let pad = "x".repeat(padding);
    format!(
        r#"{{"version":"4","groupKey":"{{}}:{{alertname=\"LoadTest\", n=\"{index}\"}}","status":"firing",
            "receiver":"rca","groupLabels":{{"alertname":"LoadTest","n":"{index}"}},"commonLabels":{{}},
            "commonAnnotations":{{}},"alerts":[{{"status":"firing",
            "labels":{{"alertname":"LoadTest","service":"web","n":"{index}"}},
            "annotations":{{"summary":"load test alert {index}","pad":"{pad}"}},
            "startsAt":"{alert_time}","fingerprint":"load{index:06}"}}]}}"#
    )
}

/// What one send came to.
#[derive(Debug, Default)]
struct Outcome {
    status: u16,
    accepted: Vec<String>,
    duplicates: Vec<String>,
    busy: usize,
    busy_with_retry_after: usize,
    given_up: bool,
}

/// Sends `body` until it is not answered 429 or 503 (at most `max_retries` times again). For a
/// body over the limit (`oversized`) a connection the server closed while the body was still
/// being sent counts as its refusal (status 0), as a sender would see it.
async fn send_one(
    client: &reqwest::Client,
    base: &str,
    body: String,
    max_retries: u32,
    oversized: bool,
) -> Result<Outcome, LoadError> {
    let mut outcome = Outcome::default();
    for _ in 0..=max_retries {
        let sent = client
            .post(format!("{base}/alerts"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) if oversized && !e.is_timeout() => {
                outcome.status = 0;
                return Ok(outcome);
            }
            Err(e) => return Err(LoadError::Service(format!("POST /alerts: {e}"))),
        };
        let status = response.status().as_u16();
        if status == 429 || status == 503 {
            outcome.busy += 1;
            let after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            outcome.busy_with_retry_after += usize::from(after.is_some());
            tokio::time::sleep(Duration::from_secs(after.unwrap_or(1).clamp(1, 30))).await;
            continue;
        }
        outcome.status = status;
        if status == 202 || status == 200 {
            let json: serde_json::Value = response
                .json()
                .await
                .map_err(|e| LoadError::Service(format!("an answer that is not JSON: {e}")))?;
            let ids = |key: &str| -> Vec<String> {
                json[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            outcome.accepted = ids("accepted");
            outcome.duplicates = ids("duplicates");
        }
        return Ok(outcome);
    }
    outcome.given_up = true;
    Ok(outcome)
}

/// A running service on an ephemeral loopback port.
struct Running {
    base: String,
    service: Service,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(config: &ServiceConfig, sources: &Sources) -> Result<Running, LoadError> {
    let service = Service::start(config, sources.clone())
        .await
        .map_err(|e| LoadError::Service(e.to_string()))?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| LoadError::Service(format!("cannot listen on loopback: {e}")))?;
    let base = listener
        .local_addr()
        .map(|a| format!("http://{a}"))
        .map_err(|e| LoadError::Service(e.to_string()))?;
    let server = tokio::spawn(service.serve(listener, std::future::pending()));
    Ok(Running {
        base,
        service,
        server,
    })
}

/// The `q` quantile (nearest rank) of sorted `values`.
fn quantile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs `plan` against a service with `config` (its `store_dir` should be empty; `listen` is
/// ignored: the service listens on an ephemeral loopback port) over `sources`.
pub async fn run_load(
    config: &ServiceConfig,
    sources: &Sources,
    plan: &LoadPlan,
) -> Result<LoadFigures, LoadError> {
    plan.check()?;
    config.validate_limits().map_err(LoadError::Plan)?;
    let limit = plan.time_limit;
    tokio::time::timeout(limit, drive(config, sources, plan))
        .await
        .map_err(|_| LoadError::TimedOut(limit.as_secs()))?
}

async fn drive(
    config: &ServiceConfig,
    sources: &Sources,
    plan: &LoadPlan,
) -> Result<LoadFigures, LoadError> {
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let mut sends = Vec::with_capacity(plan.sends);
    let mut new_alerts = 0usize;
    for _ in 0..plan.sends {
        let r: f64 = rng.random();
        let send = if r < plan.duplicate_share {
            if new_alerts > 0 {
                SendKind::Alert {
                    index: rng.random_range(0..new_alerts),
                    repeat: true,
                }
            } else {
                // Nothing to repeat yet: a new alert.
                new_alerts += 1;
                SendKind::Alert {
                    index: new_alerts - 1,
                    repeat: false,
                }
            }
        } else if r < plan.duplicate_share + plan.malformed_share {
            SendKind::Malformed
        } else if r < plan.duplicate_share + plan.malformed_share + plan.oversized_share {
            SendKind::Oversized
        } else {
            new_alerts += 1;
            SendKind::Alert {
                index: new_alerts - 1,
                repeat: false,
            }
        };
        sends.push(send);
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| LoadError::Service(e.to_string()))?;
    let mut figures = LoadFigures {
        sent: sends.len(),
        ..LoadFigures::default()
    };
    let mut accepted: BTreeSet<String> = BTreeSet::new();
    let mut running = start(config, sources).await?;
    for (b, burst) in sends.chunks(plan.burst).enumerate() {
        let base = running.base.clone();
        let outcomes = futures::future::join_all(burst.iter().map(|send| {
            let body = match send {
                SendKind::Alert { index, .. } => notification(*index, plan.alert_time, 0),
                SendKind::Malformed => {
                    let mut text = notification(0, plan.alert_time, 0);
                    text.truncate(text.len() / 2);
                    text
                }
                SendKind::Oversized => notification(0, plan.alert_time, config.max_body_bytes + 1),
            };
            let client = &client;
            let base = base.as_str();
            let oversized = matches!(send, SendKind::Oversized);
            async move { send_one(client, base, body, plan.max_retries, oversized).await }
        }))
        .await;
        for (send, outcome) in burst.iter().zip(outcomes) {
            let outcome = outcome?;
            figures.busy += outcome.busy;
            figures.busy_with_retry_after += outcome.busy_with_retry_after;
            let answered = !outcome.given_up;
            let ok = answered && (outcome.status == 202 || outcome.status == 200);
            match send {
                SendKind::Alert { repeat, .. } => {
                    if *repeat {
                        figures.repeats += 1;
                    } else {
                        figures.new_alerts += 1;
                    }
                    figures.unexpected += usize::from(answered && !ok);
                }
                SendKind::Malformed => {
                    figures.malformed += 1;
                    figures.malformed_refused +=
                        usize::from(answered && (400..500).contains(&outcome.status));
                }
                SendKind::Oversized => {
                    figures.oversized += 1;
                    figures.oversized_refused +=
                        usize::from(answered && matches!(outcome.status, 413 | 0));
                }
            }
            if !answered {
                figures.given_up += 1;
                continue;
            }
            figures.grouped += outcome.duplicates.len();
            accepted.extend(outcome.accepted);
        }
        if plan.restart_after_bursts == Some(b + 1) {
            // A crash: the server and the workers end at once, mid-diagnosis.
            running.server.abort();
            running.service.crash();
            running = start(config, sources).await?;
            figures.restarts += 1;
            figures.recovered += running.service.recovered();
        }
    }
    // Wait for the inbox to drain (the run's time limit bounds this).
    while running.service.inbox().pending().await.unwrap_or(0) > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.server.abort();
    running.service.stop(Duration::from_secs(10)).await;

    let store = ReportStore::new(&config.store_dir);
    let ids = store
        .ids()
        .await
        .map_err(|e| LoadError::Service(e.to_string()))?;
    let stored: HashSet<&String> = ids.iter().collect();
    let mut times = Vec::new();
    for id in &ids {
        let report = store
            .get(id)
            .await
            .map_err(|e| LoadError::Service(e.to_string()))?;
        if let (Some(a), Some(b)) = (report.received_at_ms, report.reported_at_ms) {
            times.push(b - a);
        }
    }
    times.sort_unstable();
    figures.accepted = accepted.len();
    figures.reports_stored = ids.len();
    figures.missing = accepted.iter().filter(|id| !stored.contains(id)).count();
    figures.extra = ids.iter().filter(|id| !accepted.contains(*id)).count();
    figures.p50_ms = quantile(&times, 0.5);
    figures.p99_ms = quantile(&times, 0.99);
    figures.wall_seconds = started.elapsed().as_secs_f64();
    Ok(figures)
}

/// Synthetic telemetry for `web` and `db` over the hour before `alert_time`: db's latency and
/// CPU jump in the last eight minutes, and db logs connection-pool errors then. What a
/// diagnosis of it should find is known: db.
pub fn synthetic_sources(alert_time: Timestamp) -> Sources {
    let t = |min_before: i64| alert_time.offset_millis(-min_before * 60_000);
    let mut samples = Vec::new();
    let mut logs = Vec::new();
    for m in (1..=60).rev() {
        let hot = m <= 8;
        for (component, metric, calm, bad) in [
            ("db", "cpu_usage", 0.30, 0.95),
            ("db", "latency_p90", 20.0, 900.0),
            ("web", "cpu_usage", 0.40, 0.41),
        ] {
            let wobble = ((m * 7) % 5) as f64 * 0.01 * calm;
            samples.push(MetricSample {
                timestamp: t(m),
                component: component.into(),
                metric: metric.into(),
                value: if hot && component == "db" {
                    bad
                } else {
                    calm + wobble
                },
                labels: Default::default(),
            });
        }
        logs.push(LogRecord {
            timestamp: t(m),
            component: "web".into(),
            level: Some(Level::Info),
            message: format!("GET /checkout 200 in {} ms", 20 + m % 3),
            attributes: Default::default(),
        });
        if hot {
            for _ in 0..5 {
                logs.push(LogRecord {
                    timestamp: t(m),
                    component: "db".into(),
                    level: Some(Level::Error),
                    message: "connection pool exhausted, waited 5000 ms".into(),
                    attributes: Default::default(),
                });
            }
        }
    }
    Sources {
        metrics: Some(Arc::new(FileMetricSource::from_samples(samples, None))),
        logs: Some(Arc::new(FileLogSource::from_records(logs, None))),
        topology: vec![("web".into(), "db".into())],
        ..Sources::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_plans() {
        assert_eq!(quantile(&[], 0.5), 0);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.5), 2);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.99), 4);
        let mut plan = LoadPlan::new(Timestamp::from_secs(0));
        assert!(plan.check().is_ok());
        plan.malformed_share = 0.9;
        assert!(matches!(plan.check(), Err(LoadError::Plan(_))));
        plan.malformed_share = f64::NAN;
        assert!(plan.check().is_err());
    }
}
