//! Stored reports: one JSON file per report, written atomically and durably (a synced temp
//! file, renamed).

use std::path::{Path, PathBuf};

use crate::diagnosis::{REPORT_FORMAT_VERSION, StoredReport, sanitize};

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No report has that id.
    #[error("no report {0}")]
    NotFound(String),
    /// A stored file has a format this build does not read.
    #[error(
        "{path}: format_version {found} is not supported; this build reads {REPORT_FORMAT_VERSION}"
    )]
    Version {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
    },
    /// Reading or writing failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
}

/// A directory of stored reports.
#[derive(Debug, Clone)]
pub struct ReportStore {
    dir: PathBuf,
}

impl ReportStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ReportStore { dir: dir.into() }
    }

    /// Where it stores.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{}.json", sanitize(id)))
    }

    /// Writes a report atomically: a crash mid-write leaves the previous file (or none).
    pub async fn put(&self, report: &StoredReport) -> Result<PathBuf, StoreError> {
        let path = self.path(&report.id);
        let io = |e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let text = serde_json::to_vec_pretty(report).map_err(|e| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        // Synced before the caller removes the alert from its inbox.
        crate::inbox::write_durably(&path, text).await.map_err(io)?;
        Ok(path)
    }

    /// Whether a report with this id is stored.
    pub async fn exists(&self, id: &str) -> bool {
        tokio::fs::try_exists(self.path(id)).await.unwrap_or(false)
    }

    /// Reads a report; an unknown format version is an error, never a misread.
    pub async fn get(&self, id: &str) -> Result<StoredReport, StoreError> {
        let path = self.path(id);
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.to_string()));
            }
            Err(e) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        let bad = |message: String| StoreError::Io {
            path: path.display().to_string(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let found = value
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if found != u64::from(REPORT_FORMAT_VERSION) {
            return Err(StoreError::Version {
                path: path.display().to_string(),
                found,
            });
        }
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }

    /// The ids of the stored reports, sorted.
    pub async fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        let mut entries = match tokio::fs::read_dir(&self.dir).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
            Err(e) => {
                return Err(StoreError::Io {
                    path: self.dir.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some(id) = name.strip_suffix(".json").filter(|n| !n.starts_with('.')) {
                ids.push(id.to_string());
            }
        }
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn store_refuses_unknown_versions() {
        let dir = tempfile::tempdir().unwrap();
        let store = ReportStore::new(dir.path());
        assert!(matches!(
            store.get("absent").await,
            Err(StoreError::NotFound(_))
        ));
        assert!(store.ids().await.unwrap().is_empty());
        std::fs::write(
            dir.path().join("future.json"),
            r#"{"format_version": 9, "id": "future"}"#,
        )
        .unwrap();
        let err = store.get("future").await.unwrap_err();
        assert!(matches!(err, StoreError::Version { found: 9, .. }), "{err}");
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        assert!(matches!(
            store.get("broken").await,
            Err(StoreError::Io { .. })
        ));
        assert_eq!(store.ids().await.unwrap(), vec!["broken", "future"]);
    }
}
