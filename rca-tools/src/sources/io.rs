//! Opening (possibly gzip-compressed) text files and reading timestamps.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use rca_core::{SourceError, Timestamp};

/// Opens a text file for buffered reading, decompressing it when it is gzip (by the `.gz`
/// extension or the gzip magic bytes).
pub fn open_text(path: &Path) -> Result<Box<dyn BufRead + Send>, SourceError> {
    let unavailable = |e: std::io::Error| SourceError::Unavailable {
        message: format!("cannot open {}: {e}", path.display()),
    };
    let mut file = File::open(path).map_err(unavailable)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(unavailable)?;
    let file = File::open(path).map_err(unavailable)?;
    let gz = path.extension().is_some_and(|e| e == "gz") || (n == 2 && magic == [0x1f, 0x8b]);
    if gz {
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(file),
        )))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
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
}
