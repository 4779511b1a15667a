//! Where received telemetry goes: a [`TelemetrySink`] keeps a whole batch or none of it.
//! [`IncidentDirSink`] appends to an incident directory that `rca diagnose` reads.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rca_core::source::{
    LogQuery, LogRecord, LogSource, MetricQuery, MetricSample, MetricSource, RecordStream, Span,
    TraceQuery, TraceSource,
};
use rca_core::{SourceError, Timestamp};

use super::SinkError;
use super::convert::{RecordBytes, TelemetryBatch};
use crate::sources::incident::{
    FORMAT_VERSION, MANIFEST, METRICS_CSV_HEADER, Manifest, RangeText, SPANS_CSV_HEADER,
    TelemetryFiles, log_json_line, metric_csv_fields, span_csv_fields, write_manifest,
};
use crate::sources::{
    FileLogSource, FileMetricSource, FileTraceSource, distinct_components, distinct_series,
};

/// Keeps received telemetry. `store` keeps the whole batch or none of it: on an error nothing
/// of the batch is visible, so the sender can send it again.
pub trait TelemetrySink: Send + Sync {
    /// Keeps `batch`.
    fn store(&self, batch: &TelemetryBatch) -> Result<(), SinkError>;

    /// Bytes of memory the sink holds now (0 by default: a sink that writes elsewhere). The
    /// intake counts them toward its memory limit ([`OtlpLimits::max_memory_bytes`]).
    ///
    /// [`OtlpLimits::max_memory_bytes`]: super::OtlpLimits::max_memory_bytes
    fn held_bytes(&self) -> u64 {
        0
    }
}

/// The log file of an incident directory written by [`IncidentDirSink`].
pub const LOGS_FILE: &str = "logs.jsonl";
/// Its metric file.
pub const METRICS_FILE: &str = "metrics.csv";
/// Its span file.
pub const SPANS_FILE: &str = "spans.csv";

/// The prefix of the id of an incident directory written by [`IncidentDirSink`].
const ID_PREFIX: &str = "otlp-";

#[derive(Debug)]
struct DirState {
    /// Bytes of the three telemetry files.
    bytes: u64,
    /// The earliest and latest record time written.
    times: Option<(Timestamp, Timestamp)>,
    manifest: Manifest,
}

/// An incident directory that grows with what is received: `logs.jsonl`, `metrics.csv` and
/// `spans.csv` appended to (each batch all or nothing, synced before the sender hears it was
/// kept), and `incident.json` whose window covers every record (replaced atomically, written
/// before the data, so it never covers less). The detection time is a second after the latest
/// record; no baseline is named, so the diagnosis estimates the onset from the telemetry.
///
/// It writes only inside its directory, and refuses a directory that holds anything else than
/// what it writes (it resumes one it wrote before, keeping what is there).
#[derive(Debug)]
pub struct IncidentDirSink {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<DirState>,
}

fn failed(path: &Path, e: impl std::fmt::Display) -> SourceError {
    SourceError::Failed {
        message: format!("{}: {e}", path.display()),
    }
}

fn csv_rows<const N: usize>(rows: impl Iterator<Item = [String; N]>) -> Result<Vec<u8>, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.write_record(r).map_err(|e| e.to_string())?;
    }
    w.into_inner().map_err(|e| e.to_string())
}

impl IncidentDirSink {
    /// Opens (creating it if needed) `dir`, holding at most `max_bytes` of telemetry.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self, SourceError> {
        std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
        let ours = [MANIFEST, LOGS_FILE, METRICS_FILE, SPANS_FILE];
        for entry in std::fs::read_dir(dir).map_err(|e| failed(dir, e))? {
            let name = entry.map_err(|e| failed(dir, e))?.file_name();
            let name = name.to_string_lossy();
            // Temporary files of an interrupted manifest replacement are ours too.
            let temporary = name.starts_with(&format!(".{MANIFEST}.tmp-"));
            if !ours.contains(&name.as_ref()) && !temporary {
                return Err(SourceError::Failed {
                    message: format!(
                        "{} holds {name:?}, which `rca otlp serve` did not write: name an empty or new directory",
                        dir.display()
                    ),
                });
            }
        }
        let manifest_path = dir.join(MANIFEST);
        let resumed = match std::fs::read_to_string(&manifest_path) {
            Ok(text) => {
                let m: Manifest =
                    serde_json::from_str(&text).map_err(|e| failed(&manifest_path, e))?;
                if !m.id.starts_with(ID_PREFIX) {
                    return Err(failed(
                        &manifest_path,
                        "not an incident `rca otlp serve` wrote; name an empty or new directory",
                    ));
                }
                Some(m)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(failed(&manifest_path, e)),
        };
        let mut bytes = 0;
        for (name, header) in [
            (LOGS_FILE, String::new()),
            (METRICS_FILE, METRICS_CSV_HEADER.join(",") + "\n"),
            (SPANS_FILE, SPANS_CSV_HEADER.join(",") + "\n"),
        ] {
            let path = dir.join(name);
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| failed(&path, e))?;
            let mut len = f.metadata().map_err(|e| failed(&path, e))?.len();
            if len == 0 && !header.is_empty() {
                f.write_all(header.as_bytes())
                    .and_then(|()| f.sync_data())
                    .map_err(|e| failed(&path, e))?;
                len = header.len() as u64;
            }
            bytes += len;
        }
        let now = super::now();
        let (manifest, times) = match resumed {
            Some(m) => {
                let times = Timestamp::parse_rfc3339(&m.window.start)
                    .zip(Timestamp::parse_rfc3339(&m.detected_at))
                    .filter(|_| bytes > 0)
                    .map(|(lo, detected)| (lo, detected.offset_millis(-1000)));
                (m, times)
            }
            None => {
                let m = Manifest {
                    format_version: FORMAT_VERSION,
                    id: format!("{ID_PREFIX}{}", now.millis()),
                    title: "Telemetry received over OTLP".into(),
                    description: "Written by `rca otlp serve` from OpenTelemetry exports; the window covers every record received.".into(),
                    detected_at: now.to_string(),
                    window: RangeText {
                        start: now.to_string(),
                        end: now.to_string(),
                    },
                    baseline: None,
                    system: String::new(),
                    topology: Vec::new(),
                    onset: None,
                    telemetry: TelemetryFiles {
                        logs: vec![LOGS_FILE.into()],
                        metrics: vec![METRICS_FILE.into()],
                        spans: vec![SPANS_FILE.into()],
                    },
                };
                write_manifest(dir, &m)?;
                (m, None)
            }
        };
        Ok(IncidentDirSink {
            dir: dir.to_path_buf(),
            max_bytes,
            state: Mutex::new(DirState {
                bytes,
                times: times.filter(|(lo, hi)| lo <= hi),
                manifest,
            }),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes of telemetry it holds.
    pub fn bytes(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.bytes)
    }
}

/// Appends `chunks` to their files, all or nothing: on a failure the files written so far are
/// cut back to their former length.
fn append_all(chunks: &[(PathBuf, &[u8])]) -> Result<(), String> {
    let mut done: Vec<(File, u64)> = Vec::new();
    let mut result = Ok(());
    for (path, bytes) in chunks.iter().filter(|(_, b)| !b.is_empty()) {
        let attempt = (|| {
            let mut f = OpenOptions::new().append(true).open(path)?;
            let before = f.metadata()?.len();
            done.push((f.try_clone()?, before));
            f.write_all(bytes)?;
            f.sync_data()
        })();
        if let Err(e) = attempt {
            result = Err(format!("{}: {e}", path.display()));
            break;
        }
    }
    if result.is_err() {
        for (f, len) in done {
            let _ = f.set_len(len).and_then(|()| f.sync_data());
        }
    }
    result
}

impl TelemetrySink for IncidentDirSink {
    fn store(&self, batch: &TelemetryBatch) -> Result<(), SinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        let unavailable = |message: String| SinkError::Unavailable { message };
        let mut logs = String::new();
        for r in &batch.logs {
            logs.push_str(&log_json_line(r));
            logs.push('\n');
        }
        let metrics = csv_rows(batch.metrics.iter().map(metric_csv_fields)).map_err(unavailable)?;
        let spans = csv_rows(batch.spans.iter().map(span_csv_fields)).map_err(unavailable)?;
        let new_bytes = (logs.len() + metrics.len() + spans.len()) as u64;
        let mut state = self
            .state
            .lock()
            .map_err(|_| unavailable("the incident directory's lock is poisoned".into()))?;
        if state.bytes.saturating_add(new_bytes) > self.max_bytes {
            return Err(SinkError::Full {
                message: format!(
                    "{} holds {} of its {} bytes; this batch needs {new_bytes} more",
                    self.dir.display(),
                    state.bytes,
                    self.max_bytes
                ),
            });
        }
        let Some((lo, hi)) = batch.time_span() else {
            return Ok(());
        };
        let times = match state.times {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        };
        if state.times != Some(times) {
            let detected = times.1.offset_millis(1000);
            let mut m = state.manifest.clone();
            m.detected_at = detected.to_string();
            m.window = RangeText {
                start: times.0.to_string(),
                end: detected.to_string(),
            };
            write_manifest(&self.dir, &m).map_err(|e| unavailable(e.to_string()))?;
            state.manifest = m;
            state.times = Some(times);
        }
        append_all(&[
            (self.dir.join(LOGS_FILE), logs.as_bytes()),
            (self.dir.join(METRICS_FILE), &metrics),
            (self.dir.join(SPANS_FILE), &spans),
        ])
        .map_err(unavailable)?;
        state.bytes += new_bytes;
        Ok(())
    }
}

/// Received telemetry kept in memory, for a host that diagnoses live (the diagnosis service):
/// at most `max_records` records of each kind and at most `max_bytes` bytes of records in all
/// (each record's [`RecordBytes`] estimate, with its slot), the oldest received dropped first
/// (and counted). A record larger than the whole byte budget is not kept (and counted as
/// dropped) rather than evicting everything else. It is itself a [`LogSource`],
/// [`MetricSource`] and [`TraceSource`] (each query answered from what it holds then);
/// [`TelemetryBuffer::snapshot`] copies what it holds into file sources cut at a time.
#[derive(Debug)]
pub struct TelemetryBuffer {
    max_records: usize,
    max_bytes: u64,
    state: Mutex<BufferState>,
}

/// The byte budget of a [`TelemetryBuffer`] unless [`TelemetryBuffer::with_max_bytes`] sets
/// another: 256 MiB, which with the intake's default request budgets (two decodes of at most
/// 128 MiB each) fits its default memory limit of 512 MiB.
pub const DEFAULT_BUFFER_BYTES: u64 = 256 << 20;

/// A buffered record: the batch it came in (its age), its size and itself.
#[derive(Debug)]
struct Held<T> {
    seq: u64,
    bytes: u64,
    record: T,
}

#[derive(Debug, Default)]
struct BufferState {
    logs: VecDeque<Held<LogRecord>>,
    metrics: VecDeque<Held<MetricSample>>,
    spans: VecDeque<Held<Span>>,
    evicted: u64,
    /// Bytes of the records held.
    bytes: u64,
    /// The number of the next batch stored.
    next_seq: u64,
}

impl BufferState {
    /// Appends `items` of one batch, dropping (and counting) a record larger than `max_bytes`
    /// on its own; returns the bytes added.
    fn push<T: Clone + RecordBytes>(
        queue: &mut VecDeque<Held<T>>,
        items: &[T],
        seq: u64,
        max_bytes: u64,
        evicted: &mut u64,
    ) -> u64 {
        let mut added = 0;
        for r in items {
            let bytes = r.record_bytes() + HELD_OVERHEAD;
            if bytes > max_bytes {
                *evicted += 1;
                continue;
            }
            added += bytes;
            queue.push_back(Held {
                seq,
                bytes,
                record: r.clone(),
            });
        }
        added
    }

    /// Drops the oldest records of `queue` past `max` records.
    fn trim_count<T>(queue: &mut VecDeque<Held<T>>, max: usize, bytes: &mut u64) -> u64 {
        let over = queue.len().saturating_sub(max);
        for h in queue.drain(..over) {
            *bytes -= h.bytes;
        }
        over as u64
    }

    /// Drops the oldest records of any kind until at most `max_bytes` are held.
    fn trim_bytes(&mut self, max_bytes: u64) -> u64 {
        let mut dropped = 0;
        while self.bytes > max_bytes {
            let fronts = [
                self.logs.front().map(|h| h.seq),
                self.metrics.front().map(|h| h.seq),
                self.spans.front().map(|h| h.seq),
            ];
            let oldest = (0..3)
                .filter_map(|i| fronts[i].map(|seq| (seq, i)))
                .min()
                .map(|(_, i)| i);
            let bytes = match oldest {
                Some(0) => self.logs.pop_front().map(|h| h.bytes),
                Some(1) => self.metrics.pop_front().map(|h| h.bytes),
                Some(_) => self.spans.pop_front().map(|h| h.bytes),
                None => None,
            };
            let Some(bytes) = bytes else { break };
            self.bytes -= bytes;
            dropped += 1;
        }
        dropped
    }
}

/// What holding one record costs besides its [`RecordBytes`]: its age and size.
const HELD_OVERHEAD: u64 = 16;

/// What a [`TelemetryBuffer`] held at one moment, as the file sources the analyzers read.
#[derive(Debug, Clone)]
pub struct BufferedTelemetry {
    /// Its logs.
    pub logs: FileLogSource,
    /// Its metric samples.
    pub metrics: FileMetricSource,
    /// Its spans.
    pub traces: FileTraceSource,
}

impl TelemetryBuffer {
    /// A buffer of at most `max_records` records of each kind and [`DEFAULT_BUFFER_BYTES`] in
    /// all.
    pub fn new(max_records: usize) -> Self {
        TelemetryBuffer {
            max_records,
            max_bytes: DEFAULT_BUFFER_BYTES,
            state: Mutex::new(BufferState::default()),
        }
    }

    /// The buffer holding at most `max_bytes` bytes of records in all (estimated per record
    /// with [`RecordBytes`]).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Its byte budget.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Records dropped to stay within the bounds (of records and of bytes) so far.
    pub fn evicted(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.evicted)
    }

    /// How many records of each kind it holds: logs, metric samples, spans.
    pub fn len(&self) -> (usize, usize, usize) {
        self.state.lock().map_or((0, 0, 0), |s| {
            (s.logs.len(), s.metrics.len(), s.spans.len())
        })
    }

    /// The records held now, cut at `cutoff` (nothing at or after it), as sources.
    pub fn snapshot(&self, cutoff: Option<Timestamp>) -> BufferedTelemetry {
        let (logs, metrics, spans) = match self.state.lock() {
            Ok(s) => (
                s.logs.iter().map(|h| h.record.clone()).collect(),
                s.metrics.iter().map(|h| h.record.clone()).collect(),
                s.spans.iter().map(|h| h.record.clone()).collect(),
            ),
            Err(_) => Default::default(),
        };
        BufferedTelemetry {
            logs: FileLogSource::from_records(logs, cutoff),
            metrics: FileMetricSource::from_samples(metrics, cutoff),
            traces: FileTraceSource::from_spans(spans, cutoff),
        }
    }
}

impl TelemetryBuffer {
    /// The records of one kind that match `keep`, taken under the lock.
    fn matching<T: Clone>(
        &self,
        pick: impl Fn(&BufferState) -> &VecDeque<Held<T>>,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<T>, SourceError> {
        let s = self.state.lock().map_err(|_| SourceError::Failed {
            message: "the telemetry buffer's lock is poisoned".into(),
        })?;
        Ok(pick(&s)
            .iter()
            .filter(|h| keep(&h.record))
            .map(|h| h.record.clone())
            .collect())
    }
}

fn stream<T: Send + 'static>(items: Vec<T>) -> RecordStream<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

#[async_trait]
impl LogSource for TelemetryBuffer {
    async fn logs(&self, query: &LogQuery) -> Result<RecordStream<LogRecord>, SourceError> {
        let hits = self.matching(|s| &s.logs, |r| query.matches(r))?;
        Ok(stream(FileLogSource::from_records(hits, None).query(query)))
    }

    async fn components(&self) -> Result<Vec<String>, SourceError> {
        let s = self.state.lock().map_err(|_| SourceError::Failed {
            message: "the telemetry buffer's lock is poisoned".into(),
        })?;
        Ok(distinct_components(s.logs.iter().map(|h| &h.record)))
    }
}

#[async_trait]
impl MetricSource for TelemetryBuffer {
    async fn samples(
        &self,
        query: &MetricQuery,
    ) -> Result<RecordStream<MetricSample>, SourceError> {
        let hits = self.matching(|s| &s.metrics, |m| query.matches(m))?;
        Ok(stream(
            FileMetricSource::from_samples(hits, None).query(query),
        ))
    }

    async fn series(&self) -> Result<Vec<(String, String)>, SourceError> {
        let s = self.state.lock().map_err(|_| SourceError::Failed {
            message: "the telemetry buffer's lock is poisoned".into(),
        })?;
        Ok(distinct_series(s.metrics.iter().map(|h| &h.record)))
    }
}

#[async_trait]
impl TraceSource for TelemetryBuffer {
    async fn spans(&self, query: &TraceQuery) -> Result<RecordStream<Span>, SourceError> {
        let hits = self.matching(|s| &s.spans, |sp| query.matches(sp))?;
        Ok(stream(FileTraceSource::from_spans(hits, None).query(query)))
    }
}

impl TelemetrySink for TelemetryBuffer {
    fn store(&self, batch: &TelemetryBatch) -> Result<(), SinkError> {
        let mut s = self.state.lock().map_err(|_| SinkError::Unavailable {
            message: "the telemetry buffer's lock is poisoned".into(),
        })?;
        let s = &mut *s;
        let (max, max_bytes) = (self.max_records, self.max_bytes);
        let seq = s.next_seq;
        s.next_seq += 1;
        let mut evicted = 0;
        let mut added = BufferState::push(&mut s.logs, &batch.logs, seq, max_bytes, &mut evicted);
        added += BufferState::push(&mut s.metrics, &batch.metrics, seq, max_bytes, &mut evicted);
        added += BufferState::push(&mut s.spans, &batch.spans, seq, max_bytes, &mut evicted);
        s.bytes += added;
        evicted += BufferState::trim_count(&mut s.logs, max, &mut s.bytes);
        evicted += BufferState::trim_count(&mut s.metrics, max, &mut s.bytes);
        evicted += BufferState::trim_count(&mut s.spans, max, &mut s.bytes);
        evicted += s.trim_bytes(max_bytes);
        s.evicted += evicted;
        Ok(())
    }

    fn held_bytes(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::RecordBytes;
    use crate::sources::incident::IncidentDir;
    use rca_core::source::Level;

    fn batch(t: i64) -> TelemetryBatch {
        let at = Timestamp::from_secs(1_700_000_000 + t);
        TelemetryBatch {
            spans: vec![Span {
                trace_id: "ab".into(),
                span_id: format!("s{t}").into(),
                parent_id: None,
                component: "cart, \"eu\"".into(),
                operation: "GET /".into(),
                start: at,
                duration_us: 1200,
                error: true,
                attributes: Default::default(),
            }],
            logs: vec![LogRecord {
                timestamp: at,
                component: "cart".into(),
                level: Some(Level::Error),
                message: "payment\nfailed".into(),
                attributes: [("trace_id".to_string(), "ab".to_string())].into(),
            }],
            metrics: vec![MetricSample {
                timestamp: at,
                component: "cart".into(),
                metric: "latency:p90{route=\"/a,b\"}".into(),
                value: 0.5,
                labels: Default::default(),
            }],
            rejected: 0,
            rejection: None,
        }
    }

    #[test]
    fn batches_land_in_an_incident_directory_that_opens_and_resumes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("inc");
        let sink = IncidentDirSink::open(&dir, 1 << 20).unwrap();
        sink.store(&batch(10)).unwrap();
        sink.store(&batch(0)).unwrap();
        drop(sink);
        let resumed = IncidentDirSink::open(&dir, 1 << 20).unwrap();
        resumed.store(&batch(20)).unwrap();
        let inc = IncidentDir::open(&dir).unwrap();
        assert_eq!(inc.traces.spans_all().len(), 3);
        assert_eq!(inc.traces.spans_all()[0].component, "cart, \"eu\"");
        let m = inc.metrics.samples_all();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].metric, "latency:p90{route=\"/a,b\"}");
        assert_eq!(
            inc.incident.window.start,
            Timestamp::from_secs(1_700_000_000)
        );
        assert_eq!(
            inc.incident.detected_at,
            Timestamp::from_secs(1_700_000_021)
        );
    }

    #[test]
    fn a_full_directory_refuses_the_whole_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let sink = IncidentDirSink::open(tmp.path(), 1 << 20).unwrap();
        sink.store(&batch(0)).unwrap();
        let before = sink.bytes();
        // Reopened with room for less than one more batch.
        drop(sink);
        let sink = IncidentDirSink::open(tmp.path(), before + 10).unwrap();
        assert_eq!(sink.bytes(), before);
        let err = sink.store(&batch(1)).unwrap_err();
        assert!(matches!(err, SinkError::Full { .. }), "{err}");
        assert_eq!(sink.bytes(), before);
        let on_disk: u64 = [LOGS_FILE, METRICS_FILE, SPANS_FILE]
            .iter()
            .map(|f| std::fs::metadata(tmp.path().join(f)).unwrap().len())
            .sum();
        assert_eq!(on_disk, before);
    }

    #[test]
    fn the_buffer_keeps_the_newest_within_its_bound() {
        let buffer = TelemetryBuffer::new(2);
        for t in 0..3 {
            buffer.store(&batch(t)).unwrap();
        }
        assert_eq!(buffer.len(), (2, 2, 2));
        assert_eq!(buffer.evicted(), 3);
        let snap = buffer.snapshot(Some(Timestamp::from_secs(1_700_000_002)));
        let spans = snap.traces.spans_all();
        assert_eq!(spans.len(), 1, "the cutoff applies");
        assert_eq!(spans[0].span_id, "s1");
        assert_eq!(snap.logs.records().len(), 1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let range = rca_core::TimeRange::new(
            Timestamp::from_secs(1_700_000_000),
            Timestamp::from_secs(1_700_000_010),
        );
        let spans = rt.block_on(async {
            let q = TraceQuery::range(range);
            rca_core::source::collect_records(buffer.spans(&q).await).await
        });
        assert_eq!(spans.unwrap().len(), 2);
    }

    #[test]
    fn foreign_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "mine").unwrap();
        let err = IncidentDirSink::open(tmp.path(), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("notes.txt"), "{err}");
        let other = tempfile::tempdir().unwrap();
        std::fs::write(
            other.path().join(MANIFEST),
            r#"{"format_version":1,"id":"x","title":"t","detected_at":"2024-01-01T00:00:00Z","window":{"start":"2024-01-01T00:00:00Z","end":"2024-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert!(IncidentDirSink::open(other.path(), 1 << 20).is_err());
    }

    fn big_span(t: i64, attributes: usize) -> TelemetryBatch {
        let mut b = batch(t);
        b.logs.clear();
        b.metrics.clear();
        b.spans[0].attributes = (0..attributes)
            .map(|a| (format!("attribute.{a}"), "value".to_string()))
            .collect();
        b
    }

    #[test]
    fn the_buffer_holds_at_most_its_byte_budget() {
        let budget = 64 << 10;
        let buffer = TelemetryBuffer::new(1_000_000).with_max_bytes(budget);
        assert_eq!(buffer.max_bytes(), budget);
        // A span whose attributes alone are past the budget is not kept, and nothing else is
        // evicted for it.
        buffer.store(&batch(0)).unwrap();
        let held = buffer.held_bytes();
        buffer.store(&big_span(1, 100_000)).unwrap();
        assert_eq!(buffer.held_bytes(), held);
        assert_eq!((buffer.len(), buffer.evicted()), ((1, 1, 1), 1));
        // Spans of a quarter of the budget each: the oldest records go first, of every kind.
        for t in 2..10 {
            buffer.store(&big_span(t, 100)).unwrap();
            assert!(buffer.held_bytes() <= budget, "{}", buffer.held_bytes());
        }
        let snap = buffer.snapshot(None);
        let spans = snap.traces.spans_all();
        assert!(spans.len() < 8, "{}", spans.len());
        assert_eq!(spans.last().unwrap().span_id, "s9");
        assert!(spans.windows(2).all(|w| w[0].span_id < w[1].span_id));
        let (logs, metrics, kept) = buffer.len();
        assert_eq!(logs, 0, "the first batch's log went first");
        // Stored: one batch of three records, the big span, eight spans.
        assert_eq!(
            buffer.evicted(),
            1 + (3 + 8) - (logs + metrics + kept) as u64
        );
        // Bytes held are what the records weigh.
        let snap = buffer.snapshot(None);
        let weight: u64 = snap
            .traces
            .spans_all()
            .iter()
            .map(|s| s.record_bytes() + HELD_OVERHEAD)
            .sum::<u64>()
            + snap
                .metrics
                .samples_all()
                .iter()
                .map(|m| m.record_bytes() + HELD_OVERHEAD)
                .sum::<u64>();
        assert_eq!(buffer.held_bytes(), weight);
    }
}
