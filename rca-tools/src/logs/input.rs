//! Reading raw log bytes into lines without ever failing on their content: invalid UTF-8 is
//! decoded lossily, NUL bytes become spaces, CRLF endings are stripped and over-long lines are
//! truncated; every repair is counted so the caller can print a clear note.

use std::fmt;

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
    let mut rest = bytes;
    while !rest.is_empty() {
        let (mut line, next) = match memchr_newline(rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
            notes.crlf += 1;
        }
        notes.lines += 1;
        let mut owned;
        let mut cut = line;
        if cut.len() > max_line_bytes {
            cut = &cut[..max_line_bytes];
            notes.truncated += 1;
            if notes.truncated_lines.len() < 5 {
                notes.truncated_lines.push(notes.lines);
            }
        }
        if cut.contains(&0) {
            notes.nul += 1;
            owned = cut.to_vec();
            owned
                .iter_mut()
                .filter(|b| **b == 0)
                .for_each(|b| *b = b' ');
            cut = &owned;
            lines.push(decode(cut, line.len() > max_line_bytes, &mut notes));
        } else {
            lines.push(decode(cut, line.len() > max_line_bytes, &mut notes));
        }
    }
    (lines, notes)
}

fn decode(bytes: &[u8], truncated: bool, notes: &mut InputNotes) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(e) if truncated && e.error_len().is_none() => {
            // The cut fell inside a multi-byte character: drop the partial character.
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => {
            notes.invalid_utf8 += 1;
            String::from_utf8_lossy(bytes).into_owned()
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
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
