//! The runs store: each run of a diagnosis kept side by side under
//! `<runs>/<incident folder>/<run id>/` (its `trajectory.json`, and `report.md` where the
//! writer keeps one), with a `latest` file in the incident folder naming the newest run.
//!
//! A run id is time-ordered (`YYYYMMDD-HHMMSS-uuuuuu`, UTC to the microsecond) and unique: the
//! run folder is created exclusively, and a clash (two runs in the same microsecond, or a clock
//! set back) takes the next free `-N` suffix. Sorting the ids sorts the runs by start time, so
//! the newest run is found from the folder names alone when `latest` is missing or stale.
//! `rca diagnose`, `rca react`, `rca flash` and the MCP server's `diagnose` write here; the MCP
//! server serves the runs as resources.
//!
//! Before run ids, a run overwrote `<runs>/<incident folder>/trajectory.json`; such a folder is
//! still read ([`legacy_files`]).

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The trajectory record of a run.
pub const TRAJECTORY_FILE: &str = "trajectory.json";
/// The Markdown report of a run.
pub const REPORT_FILE: &str = "report.md";
/// The file in an incident folder that names its newest run (one line, the run id).
pub const LATEST_FILE: &str = "latest";
/// The runs folder the commands use by default (relative to the working directory).
pub const DEFAULT_RUNS_DIR: &str = "rca-runs";

/// How many `-N` suffixes a run id tries before giving up (a clash needs two runs of one
/// incident in the same microsecond; this bounds the loop, it is never reached in practice).
const MAX_SUFFIXES: u32 = 1000;

/// The folder name of an incident id (or any name in the store): letters, digits, `-` and `_`
/// kept, anything else `_`.
pub fn folder_name(id: &str) -> String {
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

/// Whether `name` can be a folder of the store: non-empty, and [`folder_name`] leaves it as it
/// is (no `.`, `/` or other character that could leave the folder).
pub fn is_folder_name(name: &str) -> bool {
    !name.is_empty() && folder_name(name) == name
}

/// The run id of a run started at `at`: `YYYYMMDD-HHMMSS-uuuuuu` in UTC (microseconds), so
/// that ids sort by time. A time before the epoch counts as the epoch.
pub fn run_id_at(at: SystemTime) -> String {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 1000);
    let (y, mo, d, h, mi, s, _) = rca_core::Timestamp::from_secs(secs).to_civil();
    format!(
        "{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}-{:06}",
        since.subsec_micros()
    )
}

/// A run created in the store: its id and its (empty, new) folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// The run id (a folder name, time-ordered).
    pub id: String,
    /// `<runs>/<incident folder>/<run id>`.
    pub dir: PathBuf,
}

/// Creates the folder of a new run of `incident_id` under `runs` (parents created), started
/// now; the id is unique among the incident's runs (see the module notes).
pub fn create_run(runs: &Path, incident_id: &str) -> io::Result<NewRun> {
    create_run_at(runs, incident_id, SystemTime::now())
}

/// [`create_run`] with the start time given (tests, replays).
pub fn create_run_at(runs: &Path, incident_id: &str, at: SystemTime) -> io::Result<NewRun> {
    let incident_dir = runs.join(folder_name(incident_id));
    std::fs::create_dir_all(&incident_dir)?;
    let base = run_id_at(at);
    for n in 0..MAX_SUFFIXES {
        let id = if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = incident_dir.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(NewRun { id, dir }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{}: no free run id after {MAX_SUFFIXES} tries at {base}",
            incident_dir.display()
        ),
    ))
}

/// Records `run_id` as the newest run of `incident_id` (the `latest` file, written atomically).
pub fn set_latest(runs: &Path, incident_id: &str, run_id: &str) -> io::Result<()> {
    let path = runs.join(folder_name(incident_id)).join(LATEST_FILE);
    rca_tools::files::write_atomic(&path, format!("{run_id}\n").as_bytes())
}

/// The run ids of `incident_id` under `runs`, oldest first (folders only; links and files
/// are not runs).
pub fn run_ids(runs: &Path, incident_id: &str) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(runs.join(folder_name(incident_id)))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|id| is_folder_name(id))
        .collect();
    ids.sort();
    ids
}

/// The newest run of `incident_id`: the one `latest` names when that run exists, else the
/// greatest run id; `None` when the incident has no run.
pub fn latest(runs: &Path, incident_id: &str) -> Option<String> {
    let incident_dir = runs.join(folder_name(incident_id));
    let named = std::fs::read_to_string(incident_dir.join(LATEST_FILE))
        .ok()
        .map(|text| text.trim().to_string())
        .filter(|id| is_folder_name(id))
        .filter(|id| std::fs::symlink_metadata(incident_dir.join(id)).is_ok_and(|m| m.is_dir()));
    named.or_else(|| run_ids(runs, incident_id).pop())
}

/// The files an incident folder holds from before run ids (`<incident folder>/trajectory.json`
/// and `report.md`, regular files only).
pub fn legacy_files(runs: &Path, incident_id: &str) -> Vec<&'static str> {
    let dir = runs.join(folder_name(incident_id));
    [TRAJECTORY_FILE, REPORT_FILE]
        .into_iter()
        .filter(|f| std::fs::symlink_metadata(dir.join(f)).is_ok_and(|m| m.is_file()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn run_ids_are_time_ordered_utc() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_668_475_123_456);
        assert_eq!(run_id_at(at), "20261207-183435-123456");
        assert_eq!(run_id_at(SystemTime::UNIX_EPOCH), "19700101-000000-000000");
        let later = run_id_at(at + Duration::from_micros(1));
        assert!(later > run_id_at(at));
    }

    #[test]
    fn two_runs_in_the_same_instant_sit_side_by_side_and_the_latest_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(latest(tmp.path(), "inc/1"), None);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_668_475);
        let first = create_run_at(tmp.path(), "inc/1", at).unwrap();
        let second = create_run_at(tmp.path(), "inc/1", at).unwrap();
        assert_ne!(first.id, second.id);
        assert!(first.dir.is_dir() && second.dir.is_dir());
        assert_eq!(first.dir.parent(), Some(tmp.path().join("inc_1").as_path()));
        assert_eq!(
            run_ids(tmp.path(), "inc/1"),
            vec![first.id.clone(), second.id.clone()]
        );
        // No pointer yet: the greatest id.
        assert_eq!(latest(tmp.path(), "inc/1"), Some(second.id.clone()));
        // The pointer wins while its run exists.
        set_latest(tmp.path(), "inc/1", &first.id).unwrap();
        assert_eq!(latest(tmp.path(), "inc/1"), Some(first.id.clone()));
        std::fs::remove_dir(&first.dir).unwrap();
        assert_eq!(latest(tmp.path(), "inc/1"), Some(second.id.clone()));
        // A pointer that tries to leave the folder is ignored.
        std::fs::write(tmp.path().join("inc_1").join(LATEST_FILE), "../..\n").unwrap();
        assert_eq!(latest(tmp.path(), "inc/1"), Some(second.id));
    }

    #[test]
    fn legacy_files_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("inc")).unwrap();
        std::fs::write(tmp.path().join("inc").join(TRAJECTORY_FILE), "{}").unwrap();
        assert_eq!(legacy_files(tmp.path(), "inc"), vec![TRAJECTORY_FILE]);
        assert!(is_folder_name("inc_1") && !is_folder_name("..") && !is_folder_name(""));
    }
}
