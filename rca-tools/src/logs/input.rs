//! Reading raw log bytes into lines without ever failing on their content: invalid UTF-8 is
//! decoded lossily, NUL bytes become spaces, CRLF endings are stripped and over-long lines are
//! truncated; every repair is counted so the caller can print a clear note.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead};

/// Default cap on the length of one line (bytes); longer lines are truncated and flagged.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;

/// What had to be repaired while reading.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InputNotes {
    /// Lines read.
    pub lines: usize,
    /// Lines that were not valid UTF-8 (decoded lossily).
    pub invalid_utf8: usize,
    /// Lines longer than the cap (truncated).
    pub truncated: usize,
    /// Lines holding NUL bytes (replaced by spaces).
    pub nul: usize,
    /// Lines ending in CRLF (the CR stripped).
    pub crlf: usize,
    /// 1-based numbers of the first few truncated lines.
    pub truncated_lines: Vec<usize>,
}

impl InputNotes {
    /// Whether anything was repaired.
    pub fn is_clean(&self) -> bool {
        self.invalid_utf8 == 0 && self.truncated == 0 && self.nul == 0
    }
}

impl fmt::Display for InputNotes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lines == 0 {
            return f.write_str("note: the input is empty (0 lines)");
        }
        let mut parts = Vec::new();
        if self.invalid_utf8 > 0 {
            parts.push(format!(
                "{} line(s) were not valid UTF-8 and were decoded lossily (U+FFFD)",
                self.invalid_utf8
            ));
        }
        if self.truncated > 0 {
            parts.push(format!(
                "{} over-long line(s) were truncated (first: line {:?})",
                self.truncated, self.truncated_lines
            ));
        }
        if self.nul > 0 {
            parts.push(format!(
                "{} line(s) held NUL bytes, replaced by spaces",
                self.nul
            ));
        }
        if self.crlf > 0 {
            parts.push(format!("{} CRLF line ending(s) were stripped", self.crlf));
        }
        if parts.is_empty() {
            write!(f, "note: {} lines read, no repair needed", self.lines)
        } else {
            write!(f, "note: {} lines read; {}", self.lines, parts.join("; "))
        }
    }
}

/// Splits raw bytes into lines (a final line without newline counts; an empty input has no
/// lines), repairing as described in the module docs. `max_line_bytes` is the truncation cap.
pub fn read_lines(bytes: &[u8], max_line_bytes: usize) -> (Vec<String>, InputNotes) {
    let mut notes = InputNotes::default();
    let mut lines = Vec::new();
    let mut scratch = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let kept = &line[..line.len().min(max_line_bytes.saturating_add(1))];
        lines.push(
            repair_line(
                kept,
                line.len(),
                line.last() == Some(&b'\r'),
                max_line_bytes,
                &mut notes,
                &mut scratch,
            )
            .into_owned(),
        );
    }
    (lines, notes)
}

/// Repairs one line. `kept` holds the first bytes of the line (without its `\n`), at least
/// `min(full_len, max_line_bytes + 1)` of them; `full_len` is the length of the whole line and
/// `ends_with_cr` whether its last byte is `\r`. Counts the line and every repair in `notes`;
/// `scratch` is reused for NUL replacement.
pub(crate) fn repair_line<'a>(
    kept: &'a [u8],
    full_len: usize,
    ends_with_cr: bool,
    max_line_bytes: usize,
    notes: &mut InputNotes,
    scratch: &'a mut Vec<u8>,
) -> Cow<'a, str> {
    let mut cut = kept;
    let mut len = full_len;
    if ends_with_cr && len > 0 {
        len -= 1;
        cut = &cut[..cut.len().min(len)];
        notes.crlf += 1;
    }
    notes.lines += 1;
    let truncated = len > max_line_bytes;
    if truncated {
        cut = &cut[..cut.len().min(max_line_bytes)];
        notes.truncated += 1;
        if notes.truncated_lines.len() < 5 {
            notes.truncated_lines.push(notes.lines);
        }
    }
    if memchr::memchr(0, cut).is_some() {
        notes.nul += 1;
        scratch.clear();
        scratch.extend(cut.iter().map(|&b| if b == 0 { b' ' } else { b }));
        return decode(scratch, truncated, notes);
    }
    decode(cut, truncated, notes)
}

fn decode<'a>(bytes: &'a [u8], truncated: bool, notes: &mut InputNotes) -> Cow<'a, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(e) if truncated && e.error_len().is_none() => {
            // The cut fell inside a multi-byte character: drop the partial character.
            String::from_utf8_lossy(&bytes[..e.valid_up_to()])
        }
        Err(_) => {
            notes.invalid_utf8 += 1;
            String::from_utf8_lossy(bytes)
        }
    }
}

/// Reads repaired lines from a buffered reader one at a time, holding at most
/// `max_line_bytes + 1` bytes of a line in memory however long the line is; the repairs are
/// those of [`read_lines`], counted in [`LineReader::into_notes`].
pub struct LineReader<R> {
    inner: R,
    max_line_bytes: usize,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    notes: InputNotes,
}

impl<R: BufRead> LineReader<R> {
    /// A reader over `inner` with the truncation cap `max_line_bytes`.
    pub fn new(inner: R, max_line_bytes: usize) -> Self {
        LineReader {
            inner,
            max_line_bytes,
            buf: Vec::new(),
            scratch: Vec::new(),
            notes: InputNotes::default(),
        }
    }

    /// The next repaired line, `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Cow<'_, str>>> {
        self.buf.clear();
        let keep = self.max_line_bytes.saturating_add(1);
        let mut full_len = 0usize;
        let mut last = None;
        let mut any = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (take, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i, true),
                None => (avail.len(), false),
            };
            let room = keep.saturating_sub(self.buf.len()).min(take);
            self.buf.extend_from_slice(&avail[..room]);
            full_len += take;
            if take > 0 {
                last = avail.get(take - 1).copied();
            }
            self.inner.consume(if done { take + 1 } else { take });
            if done {
                break;
            }
        }
        Ok(Some(repair_line(
            &self.buf,
            full_len,
            last == Some(b'\r'),
            self.max_line_bytes,
            &mut self.notes,
            &mut self.scratch,
        )))
    }

    /// What was repaired so far.
    pub fn into_notes(self) -> InputNotes {
        self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_and_counts() {
        let mut input = b"ok line\r\nbad \xff\xfe utf8\nnul\0here\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 10 * 1024 * 1024));
        input.extend_from_slice("é tail".as_bytes());
        let (lines, notes) = read_lines(&input, DEFAULT_MAX_LINE_BYTES);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "ok line");
        assert!(lines[1].contains('\u{FFFD}'));
        assert_eq!(lines[2], "nul here");
        assert_eq!(lines[3].len(), DEFAULT_MAX_LINE_BYTES);
        assert_eq!(notes.crlf, 1);
        assert_eq!(notes.invalid_utf8, 1);
        assert_eq!(notes.nul, 1);
        assert_eq!(notes.truncated, 1);
        assert_eq!(notes.truncated_lines, vec![4]);
        assert!(notes.to_string().contains("truncated"));
    }

    #[test]
    fn cut_inside_a_character_is_not_invalid() {
        let (lines, notes) = read_lines("aé".as_bytes(), 2);
        assert_eq!(lines, vec!["a".to_string()]);
        assert_eq!(notes.invalid_utf8, 0);
        assert_eq!(notes.truncated, 1);
    }

    #[test]
    fn empty_input() {
        let (lines, notes) = read_lines(b"", 10);
        assert!(lines.is_empty());
        assert_eq!(notes.to_string(), "note: the input is empty (0 lines)");
        let (lines, _) = read_lines(b"\n\n", 10);
        assert_eq!(lines, vec![String::new(), String::new()]);
    }
}
