//! Opening (possibly gzip-compressed) text files within a read budget, and reading timestamps.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rca_core::{SourceError, Timestamp};

/// The default limit on the bytes one incident's telemetry may hold once decompressed: 1 GiB.
/// The records read are held in memory, so the limit bounds memory too.
pub const DEFAULT_MAX_TELEMETRY_BYTES: u64 = 1 << 30;

/// A limit on the bytes read, after decompression, from every file it is handed to: the
/// readers of one incident share one budget, so a small gzip that expands without end (or
/// many files that add up) stops with a clear error instead of filling memory.
#[derive(Debug, Clone)]
pub struct ReadBudget {
    limit: u64,
    used: Arc<AtomicU64>,
}

impl ReadBudget {
    /// A budget of `limit_bytes` decompressed bytes.
    pub fn new(limit_bytes: u64) -> Self {
        ReadBudget {
            limit: limit_bytes,
            used: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes read so far by every reader of this budget.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// The error a reader returns once its budget is spent.
#[derive(Debug, thiserror::Error)]
#[error("the telemetry exceeds the limit of {limit} bytes once decompressed")]
struct OverBudget {
    limit: u64,
}

/// A reader that counts what it hands out against a [`ReadBudget`].
struct Budgeted<R> {
    inner: R,
    budget: ReadBudget,
}

impl<R: Read> Read for Budgeted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let before = self.budget.used.fetch_add(n as u64, Ordering::Relaxed);
        if before.saturating_add(n as u64) > self.budget.limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                OverBudget {
                    limit: self.budget.limit,
                },
            ));
        }
        Ok(n)
    }
}

/// The caller's error when `e` is a spent read budget: the file is not bad, the incident is
/// larger than allowed, and reading must stop with an error that says which limit to raise.
pub(crate) fn over_budget(path: &Path, e: &io::Error) -> Option<SourceError> {
    let over = e.get_ref()?.downcast_ref::<OverBudget>()?;
    Some(SourceError::InvalidQuery {
        message: format!(
            "{}: the incident's telemetry exceeds {} bytes once decompressed; raise the limit \
             (`--max-telemetry-bytes`, `IncidentOptions::max_telemetry_bytes`) if this much is meant",
            path.display(),
            over.limit
        ),
    })
}

/// A CSV reader's error that ends the file: the stream failed (an I/O or gzip error, or the
/// read budget ran out), so the rows after it cannot be read. `Err` is the budget's error
/// (reading must stop), `Ok(true)` another stream failure (count it and stop this file),
/// `Ok(false)` one bad row (count it and go on).
pub(crate) fn csv_stream_failure(path: &Path, e: &csv::Error) -> Result<bool, SourceError> {
    match e.kind() {
        csv::ErrorKind::Io(io) => match over_budget(path, io) {
            Some(err) => Err(err),
            None => Ok(true),
        },
        _ => Ok(false),
    }
}

/// Opens a text file for buffered reading, decompressing it when it is gzip (by the `.gz`
/// extension or the gzip magic bytes). No read budget: see [`open_text_within`].
pub fn open_text(path: &Path) -> Result<Box<dyn BufRead + Send>, SourceError> {
    open_text_within(path, None)
}

/// [`open_text`], counting the decompressed bytes against `budget`: once it is spent, reads
/// fail with an error the file readers turn into a clear [`SourceError::InvalidQuery`].
pub fn open_text_within(
    path: &Path,
    budget: Option<&ReadBudget>,
) -> Result<Box<dyn BufRead + Send>, SourceError> {
    let inner = open_raw(path)?;
    Ok(match budget {
        Some(b) => Box::new(BufReader::with_capacity(
            1 << 16,
            Budgeted {
                inner,
                budget: b.clone(),
            },
        )),
        None => Box::new(BufReader::with_capacity(1 << 16, inner)),
    })
}

fn open_raw(path: &Path) -> Result<Box<dyn Read + Send>, SourceError> {
    let unavailable = |e: std::io::Error| SourceError::Unavailable {
        message: format!("cannot open {}: {e}", path.display()),
    };
    let mut file = File::open(path).map_err(unavailable)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(unavailable)?;
    let file = File::open(path).map_err(unavailable)?;
    let gz = path.extension().is_some_and(|e| e == "gz") || (n == 2 && magic == [0x1f, 0x8b]);
    if gz {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(file)))
    } else {
        Ok(Box::new(file))
    }
}

/// The file name without `.gz` and without its last extension (`a/b.csv.gz` -> `b`).
pub(crate) fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    match name.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s.to_string(),
        _ => name.to_string(),
    }
}

/// Reads a timestamp written as a number (seconds, milliseconds, microseconds or nanoseconds
/// since the epoch, told apart by magnitude; fractions allowed) or as RFC 3339 text (a longer
/// fraction than milliseconds and a trailing zone word are accepted).
pub fn parse_time(text: &str) -> Option<Timestamp> {
    let t = text.trim().trim_matches('"');
    if t.is_empty() {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        let v: i64 = t.parse().ok()?;
        return Some(from_magnitude(v as f64, Some(v)));
    }
    if let Ok(v) = t.parse::<f64>() {
        if v.is_finite() && v > 0.0 {
            return Some(from_magnitude(v, None));
        }
        return None;
    }
    if let Some(ts) = Timestamp::parse_rfc3339(t) {
        return Some(ts);
    }
    // `2023-01-29 08:41:09.712997733 +0000 UTC ...`, `2023-01-29T08:41:09,123`: keep the civil
    // part, the fraction's first digits and a numeric offset if one follows.
    let b = t.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let civil = t.get(0..19)?;
    let mut rest = t.get(19..)?;
    let mut frac = String::new();
    if rest.starts_with('.') || rest.starts_with(',') {
        frac = rest[1..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        rest = &rest[1 + frac.len()..];
    }
    let rest = rest.trim_start();
    let offset = rest
        .split_whitespace()
        .next()
        .filter(|w| {
            (w.starts_with('+') || w.starts_with('-'))
                && (w.len() == 5 || w.len() == 6)
                && w[1..].chars().all(|c| c.is_ascii_digit() || c == ':')
        })
        .unwrap_or("Z");
    let mut text = civil.to_string();
    if !frac.is_empty() {
        text.push('.');
        text.push_str(&frac.chars().take(3).collect::<String>());
    }
    text.push_str(offset);
    Timestamp::parse_rfc3339(&text)
}

fn from_magnitude(v: f64, exact: Option<i64>) -> Timestamp {
    let abs = v.abs();
    if abs >= 1e17 {
        match exact {
            Some(n) => Timestamp::from_nanos(n),
            None => Timestamp((v / 1e6) as i64),
        }
    } else if abs >= 1e14 {
        Timestamp((v / 1e3) as i64)
    } else if abs >= 1e11 {
        Timestamp(v as i64)
    } else {
        Timestamp((v * 1e3) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_by_magnitude() {
        let secs = Timestamp::from_secs(1_674_981_669);
        assert_eq!(parse_time("1674981669"), Some(secs));
        assert_eq!(parse_time("1674981669000"), Some(secs));
        assert_eq!(parse_time("1674981669000000"), Some(secs));
        assert_eq!(parse_time("1674981669000000000"), Some(secs));
        assert_eq!(parse_time("1674981669.5"), Some(secs.offset_millis(500)));
        assert_eq!(parse_time("-3"), None);
        assert_eq!(parse_time(""), None);
    }

    #[test]
    fn text_forms() {
        let t = Timestamp::from_civil(2023, 1, 29, 8, 41, 9, 712).unwrap();
        assert_eq!(
            parse_time("2023-01-29 08:41:09.712997733 +0000 UTC m=+0.78"),
            Some(t)
        );
        assert_eq!(parse_time("2023-01-29T08:41:09.712997733Z"), Some(t));
        assert_eq!(parse_time("2023-01-29T16:41:09,712 +0800"), Some(t));
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn gzip_and_plain() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.log");
        std::fs::write(&plain, "x\ny\n").unwrap();
        let gz = dir.path().join("a.log.gz");
        let mut enc =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
        enc.write_all(b"x\ny\n").unwrap();
        enc.finish().unwrap();
        for p in [&plain, &gz] {
            let lines: Vec<String> = open_text(p).unwrap().lines().map(|l| l.unwrap()).collect();
            assert_eq!(lines, ["x", "y"]);
        }
        assert_eq!(stem(&gz), "a");
        assert!(open_text(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn a_budget_counts_decompressed_bytes_across_files() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        // 1 MiB of zeros compresses to about a kilobyte.
        let gz = dir.path().join("bomb.log.gz");
        let mut enc =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
        enc.write_all(&vec![0u8; 1 << 20]).unwrap();
        enc.finish().unwrap();
        assert!(std::fs::metadata(&gz).unwrap().len() < 8 << 10);
        let budget = ReadBudget::new(100_000);
        let mut sink = Vec::new();
        let err = open_text_within(&gz, Some(&budget))
            .unwrap()
            .read_to_end(&mut sink)
            .unwrap_err();
        let msg = over_budget(&gz, &err).unwrap().to_string();
        assert!(
            msg.contains("exceeds 100000 bytes") && msg.contains("bomb.log.gz"),
            "{msg}"
        );
        // What was read stayed near the limit: one buffer past it at most.
        assert!(sink.len() <= 100_000 + (1 << 16) && budget.used() > 100_000);
        // The budget is shared: a second small file is refused too, an unbudgeted one is not.
        let plain = dir.path().join("a.log");
        std::fs::write(&plain, "x\n").unwrap();
        let mut out = String::new();
        assert!(
            open_text_within(&plain, Some(&budget))
                .unwrap()
                .read_to_string(&mut out)
                .is_err()
        );
        let fresh = ReadBudget::new(10);
        open_text_within(&plain, Some(&fresh))
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!((out.as_str(), fresh.used()), ("x\n", 2));
        // Any other I/O error is not a budget error.
        assert!(over_budget(&plain, &io::Error::other("disk")).is_none());
    }
}
