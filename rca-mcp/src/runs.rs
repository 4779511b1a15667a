//! Stored runs: each `diagnose` call's trajectory and Markdown report in a run folder of its
//! own, `<runs>/<incident id>/<run id>/` (the runs store of [`rca_agents::report::runs`], the
//! layout `rca diagnose` writes to `rca-runs/`), served as resources
//! `rca://runs/<id>/<run id>/trajectory.json` and `rca://runs/<id>/<run id>/report.md`.
//! `rca://runs/<id>/latest/<file>` reads the incident's newest run; a folder from before run
//! ids (`<runs>/<id>/trajectory.json`) is still served as `rca://runs/<id>/<file>`.

use std::path::{Path, PathBuf};

use rca_agents::report::runs as store_layout;
use rca_llm::Redactor;

use crate::error::McpError;

pub use rca_agents::report::runs::{REPORT_FILE, TRAJECTORY_FILE};

/// The URI prefix of stored runs.
pub const RUNS_URI: &str = "rca://runs/";
/// The run segment of a URI that names an incident's newest run.
pub const LATEST_RUN: &str = "latest";

/// A stored file, as a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFile {
    /// `rca://runs/<id>/<run id>/<file>` (`rca://runs/<id>/<file>` for a folder from before
    /// run ids).
    pub uri: String,
    /// `<id>/<run id>/<file>` (`<id>/<file>`).
    pub name: String,
    /// `application/json` or `text/markdown`.
    pub mime_type: &'static str,
    /// Its size in bytes.
    pub size: u64,
}

/// The folder name of an incident id: letters, digits, `-` and `_` kept, anything else `_`
/// (what `rca diagnose` does).
pub fn run_folder(id: &str) -> String {
    store_layout::folder_name(id)
}

fn mime(file: &str) -> &'static str {
    if file == TRAJECTORY_FILE {
        "application/json"
    } else {
        "text/markdown"
    }
}

/// The regular file at `path` (a link is not followed out of the runs folder).
fn regular_file(path: &Path) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
}

/// The stored files under `runs`, sorted (incidents by name, each incident's runs oldest
/// first), at most `max`; and whether more were left out.
pub fn list(runs: &Path, max: usize) -> (Vec<StoredFile>, bool) {
    let mut ids: Vec<String> = std::fs::read_dir(runs)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|id| store_layout::is_folder_name(id))
        .collect();
    ids.sort();
    let mut out = Vec::new();
    for id in ids {
        let mut entries: Vec<(String, PathBuf)> = store_layout::legacy_files(runs, &id)
            .into_iter()
            .map(|file| (format!("{id}/{file}"), runs.join(&id).join(file)))
            .collect();
        for run in store_layout::run_ids(runs, &id) {
            for file in [TRAJECTORY_FILE, REPORT_FILE] {
                entries.push((
                    format!("{id}/{run}/{file}"),
                    runs.join(&id).join(&run).join(file),
                ));
            }
        }
        for (name, path) in entries {
            let Some(meta) = regular_file(&path) else {
                continue;
            };
            if out.len() == max {
                return (out, true);
            }
            let file = name.rsplit('/').next().unwrap_or_default();
            out.push(StoredFile {
                uri: format!("{RUNS_URI}{name}"),
                mime_type: mime(file),
                name,
                size: meta.len(),
            });
        }
    }
    (out, false)
}

/// The text of the stored file `uri` (redacted), at most `max_bytes` of it, with a closing
/// note when it was cut; refuses any URI that is not one of [`list`]'s or a `latest` one.
pub fn read(
    runs: &Path,
    uri: &str,
    max_bytes: usize,
    redactor: &Redactor,
) -> Result<(String, &'static str), McpError> {
    let unknown = || McpError::refused(format!("unknown resource {uri:?}"));
    let rest = uri.strip_prefix(RUNS_URI).ok_or_else(unknown)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (id, run, file) = match parts.as_slice() {
        [id, file] => (*id, None, *file),
        [id, run, file] => (*id, Some(*run), *file),
        _ => return Err(unknown()),
    };
    if !store_layout::is_folder_name(id) || ![TRAJECTORY_FILE, REPORT_FILE].contains(&file) {
        return Err(unknown());
    }
    let path: PathBuf = match run {
        None => runs.join(id).join(file),
        Some(LATEST_RUN) => {
            let latest = store_layout::latest(runs, id).ok_or_else(|| {
                McpError::refused(format!(
                    "unknown resource {uri:?}: no run of {id} is stored"
                ))
            })?;
            runs.join(id).join(latest).join(file)
        }
        Some(run) if store_layout::is_folder_name(run) => runs.join(id).join(run).join(file),
        Some(_) => return Err(unknown()),
    };
    let meta = regular_file(&path).ok_or_else(unknown)?;
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

/// Writes a run's trajectory record and Markdown report (both already redacted) in a new run
/// folder under `runs` (the record gains its `run_id`), then makes it the incident's latest
/// run; returns their URIs.
pub fn store(
    runs: &Path,
    incident_id: &str,
    record: &serde_json::Value,
    markdown: &str,
) -> Result<(String, String), McpError> {
    let id = run_folder(incident_id);
    let run = store_layout::create_run(runs, incident_id).map_err(|e| {
        McpError::failed(format!(
            "cannot create a run folder in {}: {e}",
            runs.join(&id).display()
        ))
    })?;
    let mut record = record.clone();
    if let Some(fields) = record.as_object_mut() {
        fields.insert("run_id".into(), serde_json::json!(run.id));
    }
    let text = serde_json::to_string_pretty(&record)
        .map_err(|e| McpError::failed(format!("cannot write the trajectory: {e}")))?;
    for (file, bytes) in [
        (TRAJECTORY_FILE, text.as_bytes()),
        (REPORT_FILE, markdown.as_bytes()),
    ] {
        let path = run.dir.join(file);
        rca_tools::files::write_atomic(&path, bytes)
            .map_err(|e| McpError::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    store_layout::set_latest(runs, incident_id, &run.id).map_err(|e| {
        McpError::failed(format!(
            "cannot record the latest run in {}: {e}",
            runs.join(&id).display()
        ))
    })?;
    Ok((
        format!("{RUNS_URI}{id}/{}/{TRAJECTORY_FILE}", run.id),
        format!("{RUNS_URI}{id}/{}/{REPORT_FILE}", run.id),
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
        assert!(t.starts_with("rca://runs/inc_1/"), "{t}");
        assert!(t.ends_with("/trajectory.json"), "{t}");
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
            "rca://runs/inc_1/../trajectory.json",
            "rca://runs/inc_1/other.json",
            "rca://runs/inc_1/latest/other.json",
            "rca://runs/inc_1/a/b/trajectory.json",
            "file:///etc/passwd",
            "rca://runs/inc_1",
            "rca://runs/no_such/latest/trajectory.json",
        ] {
            assert!(read(tmp.path(), bad, 1000, &redactor).is_err(), "{bad}");
        }
        assert_eq!(list(tmp.path(), 1), (files[..1].to_vec(), true));
    }

    #[test]
    fn two_runs_of_one_incident_are_both_kept_and_latest_reads_the_second() {
        let tmp = tempfile::tempdir().unwrap();
        let (first, _) = store(tmp.path(), "inc", &serde_json::json!({"n": 1}), "# one").unwrap();
        let (second, _) = store(tmp.path(), "inc", &serde_json::json!({"n": 2}), "# two").unwrap();
        assert_ne!(first, second);
        let (files, _) = list(tmp.path(), 10);
        assert_eq!(files.len(), 4, "{files:?}");
        let redactor = Redactor::default();
        let (one, _) = read(tmp.path(), &first, 1000, &redactor).unwrap();
        assert!(one.contains("\"n\": 1") && one.contains("run_id"), "{one}");
        let (latest, _) = read(
            tmp.path(),
            "rca://runs/inc/latest/report.md",
            1000,
            &redactor,
        )
        .unwrap();
        assert_eq!(latest, "# two");
        // A folder from before run ids is still listed and read.
        std::fs::create_dir(tmp.path().join("old")).unwrap();
        std::fs::write(tmp.path().join("old").join(TRAJECTORY_FILE), "{}").unwrap();
        let (files, _) = list(tmp.path(), 10);
        assert!(
            files
                .iter()
                .any(|f| f.uri == "rca://runs/old/trajectory.json"),
            "{files:?}"
        );
        let (old, _) = read(tmp.path(), "rca://runs/old/trajectory.json", 100, &redactor).unwrap();
        assert_eq!(old, "{}");
    }
}
