//! Miner state on disk: [`OnlineMiner::save`]'s JSON written atomically (a temporary sibling
//! file renamed over the old one), so a crash mid-write leaves the previous state intact.

use std::path::Path;

use super::{LogsError, OnlineMiner};

impl OnlineMiner {
    /// Writes the state to `path` atomically.
    pub fn save_to(&self, path: &Path) -> Result<(), LogsError> {
        let io = |e: std::io::Error| LogsError::Io {
            message: format!("{}: {e}", path.display()),
        };
        let json = self.save()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        crate::files::write_atomic(path, json.as_bytes()).map_err(io)
    }

    /// Reads a state written by [`OnlineMiner::save_to`]; another format version is
    /// [`LogsError::StateVersion`].
    pub fn restore_from(path: &Path) -> Result<OnlineMiner, LogsError> {
        let json = std::fs::read_to_string(path).map_err(|e| LogsError::Io {
            message: format!("{}: {e}", path.display()),
        })?;
        OnlineMiner::restore(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::MinerConfig;

    #[test]
    fn round_trips_atomically_and_refuses_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/miner.json");
        let mut miner = OnlineMiner::new(MinerConfig::default());
        miner.ingest_line("connection from 10.0.0.1 closed");
        miner.ingest_line("connection from 10.0.0.2 closed");
        miner.save_to(&path).unwrap();
        // Only the state file is left: the temporary file was renamed.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("miner.json")]);
        let restored = OnlineMiner::restore_from(&path).unwrap();
        assert_eq!(restored.save().unwrap(), miner.save().unwrap());

        let text = std::fs::read_to_string(&path).unwrap();
        let bumped = text.replacen(
            &format!("\"version\":{}", crate::logs::STATE_VERSION),
            "\"version\":999",
            1,
        );
        assert_ne!(bumped, text);
        std::fs::write(&path, bumped).unwrap();
        assert!(matches!(
            OnlineMiner::restore_from(&path),
            Err(LogsError::StateVersion {
                found: Some(999),
                ..
            })
        ));
        assert!(matches!(
            OnlineMiner::restore_from(&dir.path().join("missing.json")),
            Err(LogsError::Io { .. })
        ));
    }
}
