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
    /// The body does not say what it is: fix the benchmark's text (see [`standing_of`]).
    #[error(
        "section `{section}` does not say whether it measures or demonstrates, or which \
         baseline it beats: {missing}"
    )]
    Unstated {
        /// The section.
        section: String,
        /// What is missing.
        missing: String,
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
    standing_of(body).map_err(|missing| DocsError::Unstated {
        section: name.to_string(),
        missing,
    })?;
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

/// Whether a section's body states its standing, as docs/benchmarks.md's rule asks: that it
/// *measures* (a figure that can come out badly) or *demonstrates* a mechanism (a result that
/// follows from how the benchmark was built), and which trivial baseline it beats (or why
/// none applies), both in words a reader finds ("measures" or "demonstrates"/"demonstration";
/// "baseline" or "trivial"; any case). `Err` says what is missing.
pub fn standing_of(body: &str) -> Result<(), String> {
    let lower = body.to_lowercase();
    let verdict = ["measures", "demonstrates", "demonstration"]
        .iter()
        .any(|w| lower.contains(w));
    let baseline = ["baseline", "trivial"].iter().any(|w| lower.contains(w));
    match (verdict, baseline) {
        (true, true) => Ok(()),
        (false, true) => Err("no \"Measures\" or \"Demonstrates\"".to_string()),
        (true, false) => Err("no baseline named".to_string()),
        (false, false) => {
            Err("no \"Measures\" or \"Demonstrates\", and no baseline named".to_string())
        }
    }
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
        let said = "Measures x. Baseline: y.\n\n";
        write_section(&p, "s", "rca s", &format!("{said}| a |")).unwrap();
        write_section(&p, "s", "rca s", &format!("{said}| b |")).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("# Benchmarks") && text.contains("| b |") && !text.contains("| a |")
        );
    }

    #[test]
    fn a_body_that_does_not_state_its_standing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.md");
        let err = write_section(&p, "s", "rca s", "| a |").unwrap_err();
        assert!(matches!(err, DocsError::Unstated { .. }), "{err}");
        assert!(standing_of("Measures x.").is_err());
        assert!(standing_of("The trivial baseline is y.").is_err());
        assert!(standing_of("This measures x against a trivial grouper.").is_ok());
        assert!(standing_of("Demonstrates x; no trivial baseline applies.").is_ok());
        assert!(!p.exists(), "nothing written");
    }
}
