//! Writing benchmark results into `docs/benchmarks.md`.
//!
//! Each benchmark owns one section between `<!-- BEGIN name -->` and `<!-- END name -->`
//! markers; writing a section replaces only that section (or appends it), so every figure in
//! the file comes from the command named in its section.

use std::path::Path;

/// Why a section could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocsError {
    /// Reading or writing the file failed.
    #[error("cannot update {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
    /// The file has a BEGIN marker without its END marker.
    #[error("{path}: section `{section}` has a BEGIN marker but no END marker")]
    Unbalanced {
        /// The file.
        path: String,
        /// The section.
        section: String,
    },
}

/// Replaces (or appends) section `name` of the Markdown file at `path` with `body`, writing
/// atomically (a temporary file renamed over the original). `command` is the command line
/// that produced the body; it is printed above it so anyone can rerun it.
pub fn write_section(path: &Path, name: &str, command: &str, body: &str) -> Result<(), DocsError> {
    let io = |e: std::io::Error| DocsError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let existing = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "# Benchmarks\n\nEvery section below is written by the command it names; rerun the \
             command to refresh it. Figures are never typed in by hand.\n"
                .to_string()
        }
        Err(e) => return Err(io(e)),
    };
    let updated =
        replace_section(&existing, name, command, body).ok_or_else(|| DocsError::Unbalanced {
            path: path.display().to_string(),
            section: name.to_string(),
        })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    rca_tools::files::write_atomic(path, updated.as_bytes()).map_err(io)
}

/// The text with section `name` replaced or appended; `None` when its markers are unbalanced.
pub fn replace_section(text: &str, name: &str, command: &str, body: &str) -> Option<String> {
    let begin = format!("<!-- BEGIN {name} -->");
    let end = format!("<!-- END {name} -->");
    let section = format!(
        "{begin}\n_Written by `{command}`._\n\n{}\n{end}",
        body.trim_end()
    );
    match text.find(&begin) {
        Some(b) => {
            let rest = &text[b..];
            let e = rest.find(&end)? + b + end.len();
            Some(format!("{}{}{}", &text[..b], section, &text[e..]))
        }
        None => {
            let mut out = text.trim_end().to_string();
            out.push_str("\n\n");
            out.push_str(&section);
            out.push('\n');
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_its_section() {
        let t = replace_section("# B\n", "a", "rca x", "one").unwrap();
        let t = replace_section(&t, "b", "rca y", "two").unwrap();
        let t = replace_section(&t, "a", "rca x", "three").unwrap();
        assert!(t.contains("three") && !t.contains("one") && t.contains("two"));
        assert_eq!(t.matches("BEGIN a").count(), 1);
        assert!(replace_section("<!-- BEGIN a -->", "a", "c", "x").is_none());
    }

    #[test]
    fn writes_file_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("docs/benchmarks.md");
        write_section(&p, "s", "rca s", "| a |").unwrap();
        write_section(&p, "s", "rca s", "| b |").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("# Benchmarks") && text.contains("| b |") && !text.contains("| a |")
        );
    }
}
