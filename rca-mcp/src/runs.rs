//! Stored runs: each `diagnose` call's trajectory and Markdown report under
//! `<runs>/<incident id>/` (the layout `rca diagnose` writes to `rca-runs/`), served as
//! resources `rca://runs/<id>/trajectory.json` and `rca://runs/<id>/report.md`.

use std::path::{Path, PathBuf};

use rca_llm::Redactor;

use crate::error::McpError;

/// The URI prefix of stored runs.
pub const RUNS_URI: &str = "rca://runs/";
/// The trajectory record of a run.
pub const TRAJECTORY_FILE: &str = "trajectory.json";
/// The Markdown report of a run.
pub const REPORT_FILE: &str = "report.md";

/// A stored file, as a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFile {
    /// `rca://runs/<id>/<file>`.
    pub uri: String,
    /// `<id>/<file>`.
    pub name: String,
    /// `application/json` or `text/markdown`.
    pub mime_type: &'static str,
    /// Its size in bytes.
    pub size: u64,
}

/// The folder name of an incident id: letters, digits, `-` and `_` kept, anything else `_`
/// (what `rca diagnose` does).
pub fn run_folder(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn mime(file: &str) -> &'static str {
    if file == TRAJECTORY_FILE {
        "application/json"
    } else {
        "text/markdown"
    }
}

/// The stored files under `runs`, sorted, at most `max`; and whether more were left out.
pub fn list(runs: &Path, max: usize) -> (Vec<StoredFile>, bool) {
    let mut ids: Vec<String> = std::fs::read_dir(runs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|id| run_folder(id) == *id)
        .collect();
    ids.sort();
    let mut out = Vec::new();
    for id in ids {
        for file in [TRAJECTORY_FILE, REPORT_FILE] {
            let path = runs.join(&id).join(file);
            // Regular files only: a link is not followed out of the runs folder.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            if out.len() == max {
                return (out, true);
            }
            out.push(StoredFile {
                uri: format!("{RUNS_URI}{id}/{file}"),
                name: format!("{id}/{file}"),
                mime_type: mime(file),
                size: meta.len(),
            });
        }
    }
    (out, false)
}

/// The text of the stored file `uri` (redacted), at most `max_bytes` of it, with a closing
/// note when it was cut; refuses any URI that is not one of [`list`]'s.
pub fn read(
    runs: &Path,
    uri: &str,
    max_bytes: usize,
    redactor: &Redactor,
) -> Result<(String, &'static str), McpError> {
    let unknown = || McpError::refused(format!("unknown resource {uri:?}"));
    let rest = uri.strip_prefix(RUNS_URI).ok_or_else(unknown)?;
    let (id, file) = rest.split_once('/').ok_or_else(unknown)?;
    if id.is_empty() || run_folder(id) != id || ![TRAJECTORY_FILE, REPORT_FILE].contains(&file) {
        return Err(unknown());
    }
    let path: PathBuf = runs.join(id).join(file);
    let meta = std::fs::symlink_metadata(&path).map_err(|_| unknown())?;
    if !meta.is_file() {
        return Err(unknown());
    }
    let bytes = read_head(&path, max_bytes)
        .map_err(|e| McpError::failed(format!("cannot read {}: {e}", path.display())))?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text = redactor.redact(&text).into_owned();
    if meta.len() > max_bytes as u64 {
        text.push_str(&format!(
            "\n[... cut: {} more bytes not shown (the server returns at most {max_bytes} bytes of a resource); the file is {}]",
            meta.len() - max_bytes as u64,
            path.display()
        ));
    }
    Ok((text, mime(file)))
}

fn read_head(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)?
        .take(max as u64)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Writes a run's trajectory record and Markdown report (both already redacted) under `runs`;
/// returns their URIs.
pub fn store(
    runs: &Path,
    incident_id: &str,
    record: &serde_json::Value,
    markdown: &str,
) -> Result<(String, String), McpError> {
    let id = run_folder(incident_id);
    let dir = runs.join(&id);
    std::fs::create_dir_all(&dir)
        .map_err(|e| McpError::failed(format!("cannot create {}: {e}", dir.display())))?;
    let text = serde_json::to_string_pretty(record)
        .map_err(|e| McpError::failed(format!("cannot write the trajectory: {e}")))?;
    for (file, bytes) in [
        (TRAJECTORY_FILE, text.as_bytes()),
        (REPORT_FILE, markdown.as_bytes()),
    ] {
        let path = dir.join(file);
        rca_tools::files::write_atomic(&path, bytes)
            .map_err(|e| McpError::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok((
        format!("{RUNS_URI}{id}/{TRAJECTORY_FILE}"),
        format!("{RUNS_URI}{id}/{REPORT_FILE}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_lists_and_reads_only_its_own_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (t, r) = store(
            tmp.path(),
            "inc/1",
            &serde_json::json!({"a": 1}),
            "# report",
        )
        .unwrap();
        assert_eq!(t, "rca://runs/inc_1/trajectory.json");
        let (files, cut) = list(tmp.path(), 10);
        assert!(!cut);
        assert_eq!(files.len(), 2);
        let redactor = Redactor::default();
        let (text, mime) = read(tmp.path(), &r, 1000, &redactor).unwrap();
        assert_eq!((text.as_str(), mime), ("# report", "text/markdown"));
        let (cut_text, _) = read(tmp.path(), &t, 3, &redactor).unwrap();
        assert!(cut_text.contains("more bytes not shown"), "{cut_text}");
        for bad in [
            "rca://runs/../etc/passwd",
            "rca://runs/inc_1/../../x",
            "rca://runs/inc_1/other.json",
            "file:///etc/passwd",
            "rca://runs/inc_1",
        ] {
            assert!(read(tmp.path(), bad, 1000, &redactor).is_err(), "{bad}");
        }
        assert_eq!(list(tmp.path(), 1), (files[..1].to_vec(), true));
    }
}
