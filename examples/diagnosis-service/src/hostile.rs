//! A hostile run against the real `diagnosis-service` binary on loopback, bounded in time:
//! posts without credentials or with a wrong token, slow clients that send half a request line
//! and stall, the OTLP amplification body (a small gzip body that decompresses to 64 MiB of
//! empty messages), an alert list with more groups than the inbox holds, all at once; meanwhile
//! the open health route is probed from its own address. Then one real alert is posted and
//! must be diagnosed.
//!
//! The service runs as a child process, so that its peak memory (`VmHWM` of
//! `/proc/<pid>/status`, Linux only) is its own and not the driver's. On Linux every kind of
//! client has its own loopback address (`127.0.0.N`), so that the per-client connection cap
//! and request rate of the listener meet each kind as they would meet separate hosts:
//!
//! | address | client |
//! |---|---|
//! | 127.0.0.1 | slow clients |
//! | 127.0.0.2 | health probes |
//! | 127.0.0.3 | posts without credentials or with a wrong token |
//! | 127.0.0.4 | OTLP amplification bodies (valid token) |
//! | 127.0.0.5 | the oversized alert list (valid token) |
//! | 127.0.0.6 | the statistics and the alert after the flood |
//!
//! Elsewhere all of them use 127.0.0.1. The `diagnosis-service-load --hostile` command runs it
//! and writes its figures into `docs/benchmarks.md`; a test runs a shorter one.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::load::LoadError;

/// The name of the service's binary (without the platform's suffix).
pub const SERVICE_BINARY: &str = "diagnosis-service";

/// The peak memory the hostile mix must stay under, in MiB.
pub const PEAK_MEMORY_LIMIT_MIB: f64 = 1024.0;

/// What to send, for how long, to which binary.
#[derive(Debug, Clone)]
pub struct HostilePlan {
    /// The `diagnosis-service` binary, built with the `otlp` feature.
    pub service_bin: PathBuf,
    /// The incident directory the service diagnoses over (`data.incident_dir`); the alert
    /// after the flood starts at its `detected_at`.
    pub incident_dir: PathBuf,
    /// How long the hostile mix lasts.
    pub duration: Duration,
    /// `POST /alerts` without credentials, spread over the duration.
    pub unauthenticated_posts: usize,
    /// `POST /alerts` with a bearer token of no client, spread over the duration.
    pub wrong_token_posts: usize,
    /// Concurrent senders of each of these two kinds (each on its own connections).
    pub flood_workers: usize,
    /// Connections that send half a request line and stall; each is opened again
    /// `slow_reopen_after` after the service closed it, until the mix ends.
    pub slow_clients: usize,
    /// The pause before a slow client opens its connection again.
    pub slow_reopen_after: Duration,
    /// OTLP amplification bodies posted (with the valid token), spread over the duration.
    pub amplification_posts: usize,
    /// How many of them are in flight at once.
    pub amplification_workers: usize,
    /// `\x0a\x00` pairs (an empty `ResourceSpans` each) in one amplification body before gzip.
    pub amplification_pairs: usize,
    /// Oversized alert lists posted (with the valid token), spread over the duration.
    pub oversized_posts: usize,
    /// Alerts in one oversized list (a notification without `groupKey`: a group each).
    pub oversized_alerts: usize,
    /// The service's `max_body_bytes` (the oversized list must fit under it, so that it is
    /// refused for its groups and not for its size).
    pub max_body_bytes: usize,
    /// How often the health route is probed.
    pub health_every: Duration,
    /// How long one health probe may take before it counts as a failure.
    pub health_timeout: Duration,
    /// The whole run's limit (start, mix, the alert after it).
    pub time_limit: Duration,
}

impl HostilePlan {
    /// A 20-second mix: 1 500 posts without credentials and 1 500 with a wrong token (4
    /// senders each), 1 100 slow clients, 20 amplification bodies (4 at once), 3 lists of
    /// 13 000 alerts, the health route probed every 100 ms (2 s timeout).
    pub fn new(service_bin: PathBuf, incident_dir: PathBuf) -> HostilePlan {
        HostilePlan {
            service_bin,
            incident_dir,
            duration: Duration::from_secs(20),
            unauthenticated_posts: 1500,
            wrong_token_posts: 1500,
            flood_workers: 4,
            slow_clients: 1100,
            slow_reopen_after: Duration::from_secs(3),
            amplification_posts: 20,
            amplification_workers: 4,
            amplification_pairs: 32 * 1024 * 1024 - 1,
            oversized_posts: 3,
            oversized_alerts: 13_000,
            max_body_bytes: 2 << 20,
            health_every: Duration::from_millis(100),
            health_timeout: Duration::from_secs(2),
            time_limit: Duration::from_secs(300),
        }
    }

    fn check(&self) -> Result<(), LoadError> {
        if self.duration.is_zero() || self.health_every.is_zero() {
            return Err(LoadError::Plan(
                "`duration` and `health_every` must be positive".into(),
            ));
        }
        if self.time_limit <= self.duration {
            return Err(LoadError::Plan(
                "`time_limit` must be longer than `duration`".into(),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(LoadError::Plan(
                "`max_body_bytes` must be at least 1024".into(),
            ));
        }
        Ok(())
    }
}

/// The directory of the running executable, and its parent (a test executable lives in
/// `deps/` below the binaries): the first that holds `diagnosis-service`.
pub fn locate_service_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let name = format!("{SERVICE_BINARY}{}", std::env::consts::EXE_SUFFIX);
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// How the requests of one hostile kind were answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StatusCounts {
    /// Requests sent.
    pub sent: usize,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, usize>,
    /// Requests whose connection failed or was closed before an answer (refused at the
    /// connection caps, reset).
    pub connection_failures: usize,
    /// Requests not answered within their timeout.
    pub timeouts: usize,
}

impl StatusCounts {
    /// Answers with `status`.
    pub fn status(&self, status: u16) -> usize {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Answers with a 2xx status.
    pub fn successes(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(s, _)| (200..300).contains(*s))
            .map(|(_, n)| n)
            .sum()
    }

    /// Answers neither 2xx nor 401, 413, 429 or 503.
    pub fn unlisted(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s) && ![401, 413, 429, 503].contains(*s))
            .map(|(_, n)| n)
            .sum()
    }

    /// Answers with a status not in `allowed`, and timeouts (connection failures are not
    /// counted: they are refusals).
    pub fn others(&self, allowed: &[u16]) -> usize {
        self.statuses
            .iter()
            .filter(|(s, _)| !allowed.contains(*s))
            .map(|(_, n)| n)
            .sum::<usize>()
            + self.timeouts
    }

    fn record(&mut self, answer: Answer) {
        self.sent += 1;
        match answer {
            Answer::Status(s) => *self.statuses.entry(s).or_insert(0) += 1,
            Answer::ConnectionFailed => self.connection_failures += 1,
            Answer::TimedOut => self.timeouts += 1,
        }
    }

    fn merge(mut self, other: StatusCounts) -> StatusCounts {
        self.sent += other.sent;
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_insert(0) += n;
        }
        self.connection_failures += other.connection_failures;
        self.timeouts += other.timeouts;
        self
    }
}

/// What became of the slow clients' connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SlowFigures {
    /// Slow clients (connections opened at once at the start).
    pub clients: usize,
    /// Connections opened in all (the clients opened theirs again after the service closed
    /// them).
    pub connections: usize,
    /// Connections the service closed at once (within half the header deadline): over the
    /// per-client cap.
    pub closed_at_once: usize,
    /// Connections the service held, then closed (the header deadline).
    pub closed_after_hold: usize,
    /// Connections still open (and stalled) when the mix ended.
    pub open_at_end: usize,
    /// Connection attempts that failed.
    pub connect_failures: usize,
}

impl SlowFigures {
    fn merge(mut self, o: SlowFigures) -> SlowFigures {
        self.clients += o.clients;
        self.connections += o.connections;
        self.closed_at_once += o.closed_at_once;
        self.closed_after_hold += o.closed_after_hold;
        self.open_at_end += o.open_at_end;
        self.connect_failures += o.connect_failures;
        self
    }
}

/// The health probes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HealthFigures {
    /// Probes sent (each on a new connection).
    pub probes: usize,
    /// Probes not answered 200 within the timeout.
    pub failures: usize,
    /// The first few failures, as said.
    pub failure_examples: Vec<String>,
    /// Median latency of the answered probes, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// The slowest.
    pub max_ms: f64,
    /// When the slowest was sent, seconds into the mix.
    pub max_at_seconds: f64,
}

/// The listener's counters (`GET /listener/stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListenerCounts {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections closed at once at the connection caps.
    pub connections_refused: u64,
    /// Connections open when read.
    pub connections_open: u64,
    /// Requests refused with 401.
    pub unauthenticated: u64,
    /// Requests refused with 403.
    pub forbidden: u64,
    /// Requests refused with 429.
    pub rate_limited: u64,
    /// Bodies that passed their deadline.
    pub body_timeouts: u64,
}

/// The OTLP intake's counters (`GET /otlp/stats`), the refusals of its limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OtlpCounts {
    /// Requests accepted.
    pub requests_accepted: u64,
    /// Requests refused as too large (413), the memory estimate's refusals included.
    pub too_large: u64,
    /// Requests refused while as many as allowed were decoded, or by the store (503).
    pub store_refusals: u64,
    /// Requests refused under memory pressure (503).
    pub memory_refusals: u64,
    /// Body bytes received, as sent.
    pub bytes_received: u64,
}

/// The real alert posted after the mix.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AfterFlood {
    /// Its answer's status (0: no answer).
    pub status: u16,
    /// Whether the answer carried its report.
    pub diagnosed: bool,
    /// From the post to the answer, seconds.
    pub seconds: f64,
}

/// What the hostile run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostileFigures {
    /// `debug` or `release`: the build of the driver (and of the service binary beside it).
    pub build: String,
    /// CPUs available to the driver and the service together.
    pub cpus: usize,
    /// The mix's length, seconds.
    pub mix_seconds: f64,
    /// `POST /alerts` without credentials.
    pub unauthenticated: StatusCounts,
    /// `POST /alerts` with a wrong bearer token.
    pub wrong_token: StatusCounts,
    /// The slow clients.
    pub slow: SlowFigures,
    /// The OTLP amplification bodies.
    pub amplification: StatusCounts,
    /// One amplification body as sent (gzip), bytes.
    pub amplification_body_bytes: usize,
    /// One amplification body decompressed, bytes.
    pub amplification_decoded_bytes: usize,
    /// The oversized alert lists.
    pub oversized: StatusCounts,
    /// Alerts in one oversized list.
    pub oversized_alerts: usize,
    /// One oversized list, bytes.
    pub oversized_body_bytes: usize,
    /// The health probes.
    pub health: HealthFigures,
    /// The listener's counters after the mix (`None`: not readable).
    pub listener: Option<ListenerCounts>,
    /// The OTLP intake's counters after the mix (`None`: not readable).
    pub otlp: Option<OtlpCounts>,
    /// The service's peak resident memory (`VmHWM`), MiB; `None` where `/proc` has none.
    pub peak_memory_mib: Option<f64>,
    /// The real alert after the mix.
    pub after: AfterFlood,
    /// The whole run, the service's start included, seconds.
    pub wall_seconds: f64,
}

fn cell(counts: &StatusCounts, status: u16) -> String {
    counts.status(status).to_string()
}

impl HostileFigures {
    /// What went against the run's expectations: peak memory at or over 1 GiB, a failed
    /// health probe, a hostile request answered 2xx or otherwise than expected (401/429 or a
    /// refused connection without credentials; 413/503 for the amplification bodies; 413 for
    /// the oversized list), the alert after the mix not diagnosed. Empty: all held.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(peak) = self.peak_memory_mib
            && peak >= PEAK_MEMORY_LIMIT_MIB
        {
            out.push(format!(
                "peak memory {peak:.0} MiB is not under {PEAK_MEMORY_LIMIT_MIB:.0} MiB"
            ));
        }
        if self.health.failures > 0 {
            out.push(format!(
                "{} of {} health probes failed: {:?}",
                self.health.failures, self.health.probes, self.health.failure_examples
            ));
        }
        if self.health.probes == 0 {
            out.push("no health probe was sent".into());
        }
        let kinds = [
            (
                "posts without credentials",
                &self.unauthenticated,
                &[401, 429][..],
            ),
            (
                "posts with a wrong token",
                &self.wrong_token,
                &[401, 429][..],
            ),
            ("amplification bodies", &self.amplification, &[413, 503][..]),
            ("oversized alert lists", &self.oversized, &[413][..]),
        ];
        for (what, counts, allowed) in kinds {
            let others = counts.others(allowed);
            if others > 0 {
                out.push(format!(
                    "{others} {what} were answered otherwise than {allowed:?} or timed out: {:?}",
                    counts.statuses
                ));
            }
        }
        if !self.after.diagnosed {
            out.push(format!(
                "the alert after the mix was not diagnosed (status {})",
                self.after.status
            ));
        }
        out
    }

    /// The figures as Markdown: a table of the hostile requests by answer, then one of the
    /// slow clients, the listener's and the intake's counters, the health probes, the peak
    /// memory and the alert after the mix.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| hostile requests | sent | 2xx | 401 | 413 | 429 | 503 | other | connection refused or reset | timed out |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let kinds = [
            (
                "`POST /alerts` without credentials".to_string(),
                &self.unauthenticated,
            ),
            (
                "`POST /alerts` with a wrong token".to_string(),
                &self.wrong_token,
            ),
            (
                format!(
                    "OTLP amplification: {} KB of gzip, {:.1} MiB decompressed (valid token)",
                    self.amplification_body_bytes / 1000,
                    self.amplification_decoded_bytes as f64 / f64::from(1 << 20)
                ),
                &self.amplification,
            ),
            (
                format!(
                    "alert list of {} alerts without `groupKey`, {:.1} MB (valid token)",
                    self.oversized_alerts,
                    self.oversized_body_bytes as f64 / 1e6
                ),
                &self.oversized,
            ),
        ];
        for (name, c) in kinds {
            out.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                c.sent,
                c.successes(),
                cell(c, 401),
                cell(c, 413),
                cell(c, 429),
                cell(c, 503),
                c.unlisted(),
                c.connection_failures,
                c.timeouts
            ));
        }
        out.push('\n');
        let s = &self.slow;
        let h = &self.health;
        let mut rows = vec![
            (
                format!(
                    "slow clients: connections opened ({} at once at the start, each opened again after the service closed it)",
                    s.clients
                ),
                s.connections.to_string(),
            ),
            (
                "  closed at once (over the per-client cap)".into(),
                s.closed_at_once.to_string(),
            ),
            (
                "  held, then closed by the header deadline".into(),
                s.closed_after_hold.to_string(),
            ),
            (
                "  still open when the mix ended".into(),
                s.open_at_end.to_string(),
            ),
            ("  could not connect".into(), s.connect_failures.to_string()),
        ];
        match &self.listener {
            Some(l) => rows.extend([
                (
                    "listener: connections accepted / refused at the caps".into(),
                    format!("{} / {}", l.connections_accepted, l.connections_refused),
                ),
                (
                    "listener: requests refused 401 / 403 / 429".into(),
                    format!(
                        "{} / {} / {}",
                        l.unauthenticated, l.forbidden, l.rate_limited
                    ),
                ),
            ]),
            None => rows.push(("listener counters".into(), "not readable".into())),
        }
        if let Some(o) = &self.otlp {
            rows.push((
                "OTLP intake: accepted / 413 (too large, memory estimate) / 503 (busy) / 503 (memory pressure)".into(),
                format!(
                    "{} / {} / {} / {}",
                    o.requests_accepted, o.too_large, o.store_refusals, o.memory_refusals
                ),
            ));
        }
        rows.extend([
            (
                "health probes (`GET /healthz`, a new connection each)".into(),
                h.probes.to_string(),
            ),
            (
                "  failed (not 200 within the timeout)".into(),
                h.failures.to_string(),
            ),
            (
                "  latency p50 / p99 / max (the slowest sent at)".into(),
                format!(
                    "{:.1} / {:.1} / {:.1} ms ({:.1} s into the mix)",
                    h.p50_ms, h.p99_ms, h.max_ms, h.max_at_seconds
                ),
            ),
            (
                "service peak memory (`VmHWM`)".into(),
                self.peak_memory_mib
                    .map_or_else(|| "unavailable".to_string(), |m| format!("{m:.0} MiB")),
            ),
            (
                "a real alert after the mix: diagnosed".into(),
                format!(
                    "{} (status {}, {:.1} s)",
                    if self.after.diagnosed { "yes" } else { "no" },
                    self.after.status,
                    self.after.seconds
                ),
            ),
            (
                "build, CPUs".into(),
                format!("{}, {}", self.build, self.cpus),
            ),
            (
                "mix / wall time".into(),
                format!("{:.1} s / {:.1} s", self.mix_seconds, self.wall_seconds),
            ),
        ]);
        out.push_str("| | |\n|---|---:|\n");
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(u16),
    ConnectionFailed,
    TimedOut,
}

async fn answer(sent: impl Future<Output = Result<reqwest::Response, reqwest::Error>>) -> Answer {
    match sent.await {
        Ok(r) => {
            let status = r.status().as_u16();
            // Read the answer out, so that the connection can be used again.
            let _ = r.bytes().await;
            Answer::Status(status)
        }
        Err(e) if e.is_timeout() => Answer::TimedOut,
        Err(_) => Answer::ConnectionFailed,
    }
}

/// 127.0.0.`n` on Linux (all of 127/8 is loopback there), else 127.0.0.1.
fn loopback(n: u8) -> IpAddr {
    if cfg!(target_os = "linux") {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

fn client_from(address: IpAddr, timeout: Duration) -> Result<reqwest::Client, LoadError> {
    reqwest::Client::builder()
        .local_address(address)
        .timeout(timeout)
        .build()
        .map_err(|e| LoadError::Service(format!("cannot build an HTTP client: {e}")))
}

/// When the mix started, how long it lasts, when it ends.
#[derive(Debug, Clone, Copy)]
struct Pace {
    start: Instant,
    duration: Duration,
    end: Instant,
}

/// Sends `count` requests (`send(i)`) from `workers` senders, the `i`-th at `i / count` of
/// the mix's duration, or, `together`, in bursts of `workers` at once; none after its end.
async fn paced<F, Fut>(
    count: usize,
    workers: usize,
    together: bool,
    pace: Pace,
    send: F,
) -> StatusCounts
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Answer>,
{
    let workers = workers.clamp(1, count.max(1));
    let send = &send;
    let all = (0..workers).map(|w| async move {
        let mut counts = StatusCounts::default();
        let mut i = w;
        while i < count {
            let slot = if together { i - i % workers } else { i };
            let at = pace.start + pace.duration.mul_f64(slot as f64 / count as f64);
            tokio::time::sleep_until(at).await;
            if Instant::now() >= pace.end {
                break;
            }
            counts.record(send(i).await);
            i += workers;
        }
        counts
    });
    futures::future::join_all(all)
        .await
        .into_iter()
        .fold(StatusCounts::default(), StatusCounts::merge)
}

/// One slow client: opens a connection from 127.0.0.1, sends half a request line, waits
/// until the service closes it (or the mix ends), opens it again after `reopen_after`.
async fn slow_client(
    addr: SocketAddr,
    end: Instant,
    reopen_after: Duration,
    held: Duration,
) -> SlowFigures {
    let mut f = SlowFigures {
        clients: 1,
        ..SlowFigures::default()
    };
    while Instant::now() < end {
        let opened = Instant::now();
        let stream = match tokio::time::timeout_at(end, tokio::net::TcpStream::connect(addr)).await
        {
            Err(_) => break,
            Ok(Err(_)) => {
                f.connect_failures += 1;
                tokio::time::sleep_until((Instant::now() + reopen_after).min(end)).await;
                continue;
            }
            Ok(Ok(s)) => s,
        };
        f.connections += 1;
        let mut stream = stream;
        let _ = stream.write_all(b"POST /alerts HT").await;
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout_at(end, async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        if closed.is_err() {
            f.open_at_end += 1;
            break;
        }
        if opened.elapsed() < held {
            f.closed_at_once += 1;
        } else {
            f.closed_after_hold += 1;
        }
        drop(stream);
        tokio::time::sleep_until((Instant::now() + reopen_after).min(end)).await;
    }
    f
}

/// The `q` quantile (nearest rank) of sorted `values`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Probes `GET /healthz` every `every` until `end`, each on a new connection.
async fn probe_health(
    client: reqwest::Client,
    url: String,
    end: Instant,
    every: Duration,
) -> HealthFigures {
    let mut latencies = Vec::new();
    let mut h = HealthFigures::default();
    let began = Instant::now();
    let mut next = began;
    while next < end {
        tokio::time::sleep_until(next).await;
        let t = Instant::now();
        h.probes += 1;
        let failure = match client.get(&url).send().await {
            Ok(r) if r.status() == 200 => match r.bytes().await {
                Ok(_) => {
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    if ms > h.max_ms {
                        h.max_ms = ms;
                        h.max_at_seconds = (t - began).as_secs_f64();
                    }
                    latencies.push(ms);
                    None
                }
                Err(e) => Some(format!("reading the answer: {e}")),
            },
            Ok(r) => Some(format!("status {}", r.status())),
            Err(e) => Some(format!("{e}")),
        };
        if let Some(why) = failure {
            h.failures += 1;
            if h.failure_examples.len() < 3 {
                h.failure_examples.push(why);
            }
        }
        next = (next + every).max(Instant::now());
    }
    latencies.sort_by(f64::total_cmp);
    h.p50_ms = quantile(&latencies, 0.5);
    h.p99_ms = quantile(&latencies, 0.99);
    h
}

/// A gzip body of `pairs` times `\x0a\x00`: as many empty `ResourceSpans` once decoded.
fn amplification_body(pairs: usize) -> Result<Vec<u8>, LoadError> {
    let chunk = [0x0a_u8, 0x00].repeat(512 * 1024);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut left = pairs.saturating_mul(2);
    while left > 0 {
        let n = left.min(chunk.len());
        encoder
            .write_all(&chunk[..n])
            .map_err(|e| LoadError::Service(format!("gzip: {e}")))?;
        left -= n;
    }
    encoder
        .finish()
        .map_err(|e| LoadError::Service(format!("gzip: {e}")))
}

/// A webhook notification without `groupKey` of `alerts` firing alerts: as many groups.
fn alert_list(alerts: usize, starts_at: &str) -> String {
    let mut body = String::from(r#"{"version":"4","status":"firing","receiver":"rca","alerts":["#);
    for i in 0..alerts {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(
            r#"{{"status":"firing","labels":{{"alertname":"Flood","n":"{i}"}},"startsAt":"{starts_at}"}}"#
        ));
    }
    body.push_str("]}");
    body
}

/// One firing alert group, as Alertmanager sends it.
fn one_alert(starts_at: &str, nonce: u64) -> String {
    serde_json::json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"AfterTheFlood\", run=\"{nonce}\"}}"),
        "status": "firing",
        "receiver": "rca",
        "groupLabels": {"alertname": "AfterTheFlood"},
        "commonLabels": {},
        "commonAnnotations": {},
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "AfterTheFlood", "service": "ts-travel-service"},
            "annotations": {"summary": "an alert posted after the hostile mix"},
            "startsAt": starts_at,
            "fingerprint": format!("{nonce:016x}"),
        }],
    })
    .to_string()
}

/// A random token.
fn token(rng: &mut ChaCha8Rng) -> String {
    let a: u64 = rng.random();
    let b: u64 = rng.random();
    format!("{a:016x}{b:016x}")
}

/// The service process, killed when dropped.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The peak resident memory (`VmHWM`), MiB; `None` where `/proc` does not say.
    fn peak_memory_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line
            .trim_start_matches("VmHWM:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib / 1024.0)
    }
}

fn path_text(path: &Path) -> Result<String, LoadError> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| LoadError::Plan(format!("{} is not UTF-8", path.display())))
}

/// Writes the configuration: loopback with an ephemeral port, a store in `dir`, the incident
/// and the OTLP routes, two clients (`alertmanager`: alerts and telemetry; `reader`: reports
/// and operations) whose hashed tokens are written beside it.
fn write_config(
    plan: &HostilePlan,
    dir: &Path,
    incident: &Path,
    sender_token: &str,
    reader_token: &str,
) -> Result<PathBuf, LoadError> {
    use toml::{Table, Value};
    let io = |e: std::io::Error| LoadError::Service(format!("writing the configuration: {e}"));
    let mut clients = Vec::new();
    for (name, routes, token) in [
        ("alertmanager", ["alerts", "telemetry"], sender_token),
        ("reader", ["reports", "operations"], reader_token),
    ] {
        let file = dir.join(format!("{name}.sha256"));
        std::fs::write(&file, rca_listen::hash_secret(token)).map_err(io)?;
        let mut client = Table::new();
        client.insert("name".into(), Value::from(name));
        client.insert(
            "routes".into(),
            Value::Array(routes.iter().map(|r| Value::from(*r)).collect()),
        );
        client.insert("bearer_token_file".into(), Value::from(path_text(&file)?));
        clients.push(Value::Table(client));
    }
    let mut listener = Table::new();
    listener.insert("clients".into(), Value::Array(clients));
    let mut data = Table::new();
    data.insert("incident_dir".into(), Value::from(path_text(incident)?));
    data.insert("otlp".into(), Value::from(true));
    let mut config = Table::new();
    config.insert("listen".into(), Value::from("127.0.0.1:0"));
    config.insert(
        "store_dir".into(),
        Value::from(path_text(&dir.join("store"))?),
    );
    let max_body = i64::try_from(plan.max_body_bytes)
        .map_err(|_| LoadError::Plan("`max_body_bytes` is too large".into()))?;
    config.insert("max_body_bytes".into(), Value::from(max_body));
    config.insert("data".into(), Value::Table(data));
    config.insert("listener".into(), Value::Table(listener));
    let text = toml::to_string(&config)
        .map_err(|e| LoadError::Service(format!("writing the configuration: {e}")))?;
    let path = dir.join("service.toml");
    std::fs::write(&path, text).map_err(io)?;
    Ok(path)
}

/// Starts the binary on `config` and waits (at most a minute) for its `listening on` line.
async fn start(
    plan: &HostilePlan,
    config: &Path,
    dir: &Path,
) -> Result<(Running, String), LoadError> {
    let log = dir.join("service.log");
    let stderr = std::fs::File::create(&log)
        .map_err(|e| LoadError::Service(format!("cannot create {}: {e}", log.display())))?;
    let child = Command::new(&plan.service_bin)
        .arg(config)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| {
            LoadError::Service(format!(
                "cannot start {}: {e} (build it with `cargo build -p example-diagnosis-service --features otlp --bins`)",
                plan.service_bin.display()
            ))
        })?;
    let mut running = Running { child, log };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&running.log).unwrap_or_default();
        if let Some(rest) = text.split("listening on ").nth(1)
            && let Some(base) = rest.split_whitespace().next()
        {
            return Ok((running, base.to_string()));
        }
        if let Ok(Some(status)) = running.child.try_wait() {
            return Err(LoadError::Service(format!(
                "the service exited with {status} (is it built with `--features otlp`?):\n{}",
                running.log_tail()
            )));
        }
        if Instant::now() >= deadline {
            return Err(LoadError::Service(format!(
                "the service did not listen within 60 s:\n{}",
                running.log_tail()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The incident's `detected_at`, as written in its `incident.json`.
fn detected_at(incident: &Path) -> Result<String, LoadError> {
    let path = incident.join("incident.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| LoadError::Plan(format!("cannot read {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| LoadError::Plan(format!("{}: {e}", path.display())))?;
    json["detected_at"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| LoadError::Plan(format!("{} has no `detected_at`", path.display())))
}

/// Starts the binary of `plan` on the run's configuration and stops it again: an early
/// error for a binary that cannot serve the run (not built with `--features otlp`, missing).
pub async fn preflight(plan: &HostilePlan) -> Result<(), LoadError> {
    plan.check()?;
    let incident = std::fs::canonicalize(&plan.incident_dir)
        .map_err(|e| LoadError::Plan(format!("{}: {e}", plan.incident_dir.display())))?;
    let dir = tempfile::tempdir()
        .map_err(|e| LoadError::Service(format!("cannot create a temporary folder: {e}")))?;
    let config = write_config(plan, dir.path(), &incident, "preflight-a", "preflight-b")?;
    let (running, _) = start(plan, &config, dir.path()).await?;
    drop(running);
    Ok(())
}

/// Runs `plan`: starts the binary, runs the hostile mix, reads the counters, posts one real
/// alert, reads the service's peak memory and stops it.
pub async fn run_hostile(plan: &HostilePlan) -> Result<HostileFigures, LoadError> {
    plan.check()?;
    let limit = plan.time_limit;
    tokio::time::timeout(limit, drive(plan))
        .await
        .map_err(|_| LoadError::TimedOut(limit.as_secs()))?
}

async fn drive(plan: &HostilePlan) -> Result<HostileFigures, LoadError> {
    let started = Instant::now();
    let incident = std::fs::canonicalize(&plan.incident_dir)
        .map_err(|e| LoadError::Plan(format!("{}: {e}", plan.incident_dir.display())))?;
    let starts_at = detected_at(&incident)?;
    let dir = tempfile::tempdir()
        .map_err(|e| LoadError::Service(format!("cannot create a temporary folder: {e}")))?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (sender_token, reader_token, wrong_token) =
        (token(&mut rng), token(&mut rng), token(&mut rng));
    let config = write_config(plan, dir.path(), &incident, &sender_token, &reader_token)?;

    // The bodies, made before the service starts (not timed).
    let pairs = plan.amplification_pairs;
    let amplification = tokio::task::spawn_blocking(move || amplification_body(pairs))
        .await
        .map_err(|e| LoadError::Service(format!("gzip: {e}")))??;
    let amplification = bytes_of(amplification);
    let list = alert_list(plan.oversized_alerts, &starts_at);
    if list.len() > plan.max_body_bytes {
        return Err(LoadError::Plan(format!(
            "the alert list of {} alerts is {} bytes, over `max_body_bytes` ({}): it would be refused for its size, not its groups",
            plan.oversized_alerts,
            list.len(),
            plan.max_body_bytes
        )));
    }
    let list = bytes_of(list.into_bytes());
    let mut figures = HostileFigures {
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        amplification_body_bytes: amplification.len(),
        amplification_decoded_bytes: pairs.saturating_mul(2),
        oversized_alerts: plan.oversized_alerts,
        oversized_body_bytes: list.len(),
        ..HostileFigures::default()
    };

    let (running, base) = start(plan, &config, dir.path()).await?;
    let addr: SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| LoadError::Service(format!("the service said it listens on {base}: {e}")))?;

    let start_at = Instant::now();
    let pace = Pace {
        start: start_at,
        duration: plan.duration,
        end: start_at + plan.duration,
    };

    // Health probes from 127.0.0.2, a new connection each.
    let health_client = reqwest::Client::builder()
        .local_address(loopback(2))
        .timeout(plan.health_timeout)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| LoadError::Service(format!("cannot build an HTTP client: {e}")))?;
    let health = tokio::spawn(probe_health(
        health_client,
        format!("{base}/healthz"),
        pace.end,
        plan.health_every,
    ));

    // Slow clients from 127.0.0.1.
    let slow: Vec<_> = (0..plan.slow_clients)
        .map(|_| {
            tokio::spawn(slow_client(
                addr,
                pace.end,
                plan.slow_reopen_after,
                Duration::from_secs(5),
            ))
        })
        .collect();

    // Posts without credentials and with a wrong token, from 127.0.0.3.
    let flood_client = client_from(loopback(3), Duration::from_secs(10))?;
    let small = bytes_of(one_alert(&starts_at, 0).into_bytes());
    let alerts_url = format!("{base}/alerts");
    let unauthenticated = {
        let (client, url, body) = (flood_client.clone(), alerts_url.clone(), small.clone());
        let count = plan.unauthenticated_posts;
        let workers = plan.flood_workers;
        tokio::spawn(async move {
            paced(count, workers, false, pace, |_| {
                answer(
                    client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.to_vec())
                        .send(),
                )
            })
            .await
        })
    };
    let wrong = {
        let (client, url, body) = (flood_client, alerts_url.clone(), small);
        let count = plan.wrong_token_posts;
        let workers = plan.flood_workers;
        let wrong_token = wrong_token.clone();
        tokio::spawn(async move {
            paced(count, workers, false, pace, |_| {
                answer(
                    client
                        .post(&url)
                        .bearer_auth(&wrong_token)
                        .header("content-type", "application/json")
                        .body(body.to_vec())
                        .send(),
                )
            })
            .await
        })
    };

    // Amplification bodies from 127.0.0.4.
    let amplified = {
        let client = client_from(loopback(4), Duration::from_secs(60))?;
        let url = format!("{base}/v1/traces");
        let token = sender_token.clone();
        let body = amplification;
        let count = plan.amplification_posts;
        let workers = plan.amplification_workers;
        tokio::spawn(async move {
            paced(count, workers, true, pace, |_| {
                answer(
                    client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/x-protobuf")
                        .header("content-encoding", "gzip")
                        .body(body.to_vec())
                        .send(),
                )
            })
            .await
        })
    };

    // Oversized alert lists from 127.0.0.5.
    let oversized = {
        let client = client_from(loopback(5), Duration::from_secs(60))?;
        let url = alerts_url.clone();
        let token = sender_token.clone();
        let body = list;
        let count = plan.oversized_posts;
        tokio::spawn(async move {
            paced(count, 1, false, pace, |_| {
                answer(
                    client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(body.to_vec())
                        .send(),
                )
            })
            .await
        })
    };

    let join = |e: tokio::task::JoinError| LoadError::Service(format!("a client task failed: {e}"));
    figures.health = health.await.map_err(join)?;
    for s in slow {
        let f = s.await.map_err(join)?;
        figures.slow = std::mem::take(&mut figures.slow).merge(f);
    }
    figures.unauthenticated = unauthenticated.await.map_err(join)?;
    figures.wrong_token = wrong.await.map_err(join)?;
    figures.amplification = amplified.await.map_err(join)?;
    figures.oversized = oversized.await.map_err(join)?;
    figures.mix_seconds = start_at.elapsed().as_secs_f64();

    // The counters, and one real alert, from 127.0.0.6.
    let after = client_from(loopback(6), Duration::from_secs(90))?;
    figures.listener = get_json(&after, &format!("{base}/listener/stats"), &reader_token).await;
    figures.otlp = get_json(&after, &format!("{base}/otlp/stats"), &reader_token).await;
    let posted = Instant::now();
    let sent = after
        .post(format!("{base}/alerts?wait=60"))
        .bearer_auth(&sender_token)
        .header("content-type", "application/json")
        .body(one_alert(&starts_at, seed))
        .send()
        .await;
    if let Ok(response) = sent {
        figures.after.status = response.status().as_u16();
        let json: serde_json::Value = response.json().await.unwrap_or_default();
        figures.after.diagnosed = figures.after.status == 200
            && json["reports"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["report"].is_object()));
    }
    figures.after.seconds = posted.elapsed().as_secs_f64();
    figures.peak_memory_mib = running.peak_memory_mib();
    drop(running);
    figures.wall_seconds = started.elapsed().as_secs_f64();
    Ok(figures)
}

/// Shared bytes, cloned cheaply into each request.
fn bytes_of(v: Vec<u8>) -> Arc<[u8]> {
    Arc::from(v)
}

async fn get_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    token: &str,
) -> Option<T> {
    let response = client.get(url).bearer_auth(token).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bodies_and_quantiles() {
        let mut c = StatusCounts::default();
        for a in [
            Answer::Status(401),
            Answer::Status(429),
            Answer::Status(202),
            Answer::ConnectionFailed,
            Answer::TimedOut,
        ] {
            c.record(a);
        }
        assert_eq!(c.sent, 5);
        assert_eq!(c.successes(), 1);
        assert_eq!(c.others(&[401, 429]), 2, "the 202 and the timeout");
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.5), 2.0);
        assert_eq!(quantile(&[], 0.99), 0.0);
        let body = amplification_body(1 << 20).unwrap();
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut decoded)
            .unwrap();
        assert_eq!(decoded.len(), 2 << 20);
        assert!(decoded.chunks(2).all(|p| p == [0x0a, 0x00]));
        assert!(body.len() < 4096, "{}", body.len());
        let list = alert_list(3, "2023-01-29T13:35:25.000Z");
        let parsed = crate::WebhookPayload::parse(list.as_bytes());
        assert!(parsed.is_ok_and(|p| p.alerts.len() == 3 && p.group_key.is_empty()));
    }
}
