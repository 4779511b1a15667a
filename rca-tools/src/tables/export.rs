//! Telemetry at rest as Parquet, partitioned by time: what `rca export parquet` writes and
//! what a Ballista cluster (or a local session) reads back with
//! [`TelemetryTables::register_parquet_dir`](super::TelemetryTables::register_parquet_dir).
//!
//! Layout under the destination: `logs/`, `metrics/` and `spans/`, each holding one file per
//! time partition and write, `part-<partition start ms>-<write>.parquet`, rows in time order
//! (ties keep the order they were given). The tables are the standard layouts of
//! [`TelemetryTables`](super::TelemetryTables)'s `register_logs`, `register_metrics` and
//! `register_spans`. Files are written under a temporary
//! name and renamed, so a reader never sees half a file, and nothing is written outside the
//! destination, which must be empty or hold only an earlier export.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use rca_core::source::{LogRecord, MetricSample, Span};

use super::error::TableError;
use super::records::{logs_batch, metrics_batch, spans_batch};

/// The signals' directory names under an export.
pub const SIGNALS: [&str; 3] = ["logs", "metrics", "spans"];

/// One hour: the default time partition.
pub const DEFAULT_PARTITION_MS: i64 = 3_600_000;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Every file written, in the order written.
    pub files: Vec<PathBuf>,
    /// Rows written per signal, in the order of [`SIGNALS`].
    pub rows: [u64; 3],
    /// Bytes of the files written.
    pub bytes: u64,
}

/// A Parquet export in progress (see the module docs).
#[derive(Debug)]
pub struct ParquetExport {
    dir: PathBuf,
    partition_ms: i64,
    /// Writes so far per (signal, partition start): the next file's sequence number.
    writes: BTreeMap<(usize, i64), u32>,
    summary: ExportSummary,
}

fn export_err(path: &Path, message: impl std::fmt::Display) -> TableError {
    TableError::Export {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Whether `name` is a file an export writes (or its temporary form).
fn is_export_file(name: &str) -> bool {
    name.starts_with("part-") && (name.ends_with(".parquet") || name.ends_with(".parquet.tmp"))
}

impl ParquetExport {
    /// Starts an export into `dir` (created if missing) with time partitions `partition_ms`
    /// long. A destination holding anything but an earlier export's signal directories and
    /// files is refused, so an export never mixes with other data.
    pub fn create(dir: &Path, partition_ms: i64) -> Result<Self, TableError> {
        if partition_ms <= 0 {
            return Err(export_err(dir, "the time partition must be positive"));
        }
        std::fs::create_dir_all(dir).map_err(|e| export_err(dir, e))?;
        let mut writes = BTreeMap::new();
        for entry in std::fs::read_dir(dir).map_err(|e| export_err(dir, e))? {
            let entry = entry.map_err(|e| export_err(dir, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(signal) = SIGNALS.iter().position(|s| *s == name) else {
                return Err(export_err(
                    dir,
                    format!(
                        "holds `{name}`, which an export does not write; use an empty directory"
                    ),
                ));
            };
            if !entry.path().is_dir() {
                return Err(export_err(&entry.path(), "is not a directory"));
            }
            for file in std::fs::read_dir(entry.path()).map_err(|e| export_err(dir, e))? {
                let file = file.map_err(|e| export_err(dir, e))?;
                let fname = file.file_name().to_string_lossy().to_string();
                if !is_export_file(&fname) {
                    return Err(export_err(
                        &file.path(),
                        "is not an export's file; use an empty directory",
                    ));
                }
                // Continue an earlier export's numbering so no file is overwritten.
                if let Some((start, seq)) = parse_part(&fname) {
                    let next = writes.entry((signal, start)).or_insert(0u32);
                    *next = (*next).max(seq.saturating_add(1));
                }
            }
        }
        Ok(ParquetExport {
            dir: dir.to_path_buf(),
            partition_ms,
            writes,
            summary: ExportSummary::default(),
        })
    }

    /// Writes log records (any order; each partition's rows sorted by time).
    pub fn write_logs(&mut self, records: &[LogRecord]) -> Result<(), TableError> {
        self.write(0, records, |r| r.timestamp.millis(), logs_batch)
    }

    /// Writes metric samples.
    pub fn write_metrics(&mut self, samples: &[MetricSample]) -> Result<(), TableError> {
        self.write(1, samples, |s| s.timestamp.millis(), metrics_batch)
    }

    /// Writes spans (partitioned by their start).
    pub fn write_spans(&mut self, spans: &[Span]) -> Result<(), TableError> {
        self.write(2, spans, |s| s.start.millis(), spans_batch)
    }

    /// What was written so far.
    pub fn summary(&self) -> &ExportSummary {
        &self.summary
    }

    /// Ends the export and returns what it wrote.
    pub fn finish(self) -> ExportSummary {
        self.summary
    }

    fn write<T: Clone>(
        &mut self,
        signal: usize,
        items: &[T],
        time: impl Fn(&T) -> i64,
        to_batch: fn(&str, &[T]) -> Result<RecordBatch, TableError>,
    ) -> Result<(), TableError> {
        let name = SIGNALS.get(signal).copied().unwrap_or("logs");
        let mut parts: BTreeMap<i64, Vec<(i64, usize)>> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let t = time(item);
            parts
                .entry(t.div_euclid(self.partition_ms) * self.partition_ms)
                .or_default()
                .push((t, i));
        }
        let dir = self.dir.join(name);
        if !parts.is_empty() {
            std::fs::create_dir_all(&dir).map_err(|e| export_err(&dir, e))?;
        }
        for (start, mut rows) in parts {
            rows.sort_by_key(|&(t, i)| (t, i));
            let sorted: Vec<T> = rows
                .iter()
                .filter_map(|&(_, i)| items.get(i).cloned())
                .collect();
            let batch = to_batch(name, &sorted)?;
            let seq = self.writes.entry((signal, start)).or_insert(0);
            let path = dir.join(format!("part-{start}-{seq}.parquet"));
            *seq += 1;
            let bytes = write_parquet(&path, &batch)?;
            self.summary.files.push(path);
            self.summary.bytes += bytes;
            if let Some(n) = self.summary.rows.get_mut(signal) {
                *n += sorted.len() as u64;
            }
        }
        Ok(())
    }
}

/// `part-<start>-<seq>.parquet` → (start, seq).
fn parse_part(name: &str) -> Option<(i64, u32)> {
    let stem = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    let (start, seq) = stem.rsplit_once('-')?;
    Some((start.parse().ok()?, seq.parse().ok()?))
}

/// Writes one batch as a zstd-compressed Parquet file (through a temporary sibling renamed
/// into place); returns its size.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<u64, TableError> {
    let tmp = path.with_extension("parquet.tmp");
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| export_err(&tmp, e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props))
            .map_err(|e| export_err(&tmp, e))?;
        writer.write(batch).map_err(|e| export_err(&tmp, e))?;
        let file = writer.into_inner().map_err(|e| export_err(&tmp, e))?;
        file.sync_all().map_err(|e| export_err(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| export_err(path, e))?;
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| export_err(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::source::LogRecord;
    use rca_core::time::Timestamp;

    fn log(ms: i64, msg: &str) -> LogRecord {
        LogRecord {
            timestamp: Timestamp(ms),
            component: "api".into(),
            level: None,
            message: msg.into(),
            attributes: Default::default(),
        }
    }

    #[test]
    fn partitions_by_time_sorts_rows_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("export");
        let mut export = ParquetExport::create(&out, 1000).unwrap();
        export
            .write_logs(&[log(1500, "b"), log(200, "a"), log(1100, "c")])
            .unwrap();
        export.write_logs(&[log(1900, "d")]).unwrap();
        let summary = export.finish();
        assert_eq!(summary.rows, [4, 0, 0]);
        let mut names: Vec<String> = std::fs::read_dir(out.join("logs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "part-0-0.parquet",
                "part-1000-0.parquet",
                "part-1000-1.parquet"
            ]
        );
        // A second export into the same destination continues the numbering.
        let mut again = ParquetExport::create(&out, 1000).unwrap();
        again.write_logs(&[log(1200, "e")]).unwrap();
        assert!(out.join("logs/part-1000-2.parquet").is_file());
    }

    #[test]
    fn refuses_a_destination_holding_other_files_and_a_bad_partition() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let e = ParquetExport::create(dir.path(), 1000).unwrap_err();
        assert!(matches!(e, TableError::Export { .. }), "{e}");
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "mine"
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(ParquetExport::create(empty.path(), 0).is_err());
    }
}
