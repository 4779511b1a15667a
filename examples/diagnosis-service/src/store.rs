//! Stored reports, resolutions and open episodes behind one [`ReportBackend`] trait, with two
//! implementations: [`FileStore`] (the default: one JSON file per report, one per alert group,
//! written atomically and durably, a synced temp file renamed; a group's resolution in
//! `resolved/<id>.json` beside them) and, with the `postgres` feature, `PgStore` (tables in
//! PostgreSQL, so every process of a service sharing the database answers for every report).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::alert::Alert;
use crate::diagnosis::{REPORT_FORMAT_VERSION, StoredReport, sanitize};
use crate::retention::Pruned;

/// The folder of resolution records inside the store.
pub const RESOLVED_DIR: &str = "resolved";

/// The folder of open-episode records inside the store: `episodes/<group>` holds the report id
/// of the group's episode until that episode's resolution is recorded.
pub const EPISODES_DIR: &str = "episodes";

/// The resolution record format this build writes and reads.
pub const RESOLUTION_FORMAT_VERSION: u32 = 1;

/// An alert group's resolution, as Alertmanager reported it (`status: resolved`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// The record's format version.
    pub format_version: u32,
    /// The report id of the group's episode.
    pub id: String,
    /// When the service received the resolved notification (Unix milliseconds).
    pub received_at_ms: i64,
    /// The latest `endsAt` of the group's alerts (RFC 3339), as Alertmanager sent it.
    pub ends_at: String,
    /// The group's alerts in the resolved notification, redacted.
    pub alerts: Vec<Alert>,
}

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
    /// The shared database failed, did not answer in time or is not configured right.
    #[error("postgres: {message}")]
    Database {
        /// What happened.
        message: String,
    },
    /// A worker's claim on an alert group ended before the worker completed it: the claim's
    /// lease expired and another worker claimed the group; this worker's result is dropped.
    #[error("the claim {attempt} of {id} was lost (its lease expired); the result is dropped")]
    ClaimLost {
        /// The report id of the group.
        id: String,
        /// Which claim of the group was lost.
        attempt: i32,
    },
}

/// Where reports, resolutions and open episodes are kept: the operations the service needs,
/// whatever holds them.
#[async_trait]
pub trait ReportBackend: std::fmt::Debug + Send + Sync {
    /// Stores a report under its id, replacing one stored before under that id.
    async fn put(&self, report: &StoredReport) -> Result<(), StoreError>;
    /// Records a group's resolution unless one is recorded already; true when this call
    /// recorded it.
    async fn put_resolution(&self, resolution: &Resolution) -> Result<bool, StoreError>;
    /// The resolution recorded for `id`, if any; an unknown format version is an error.
    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StoreError>;
    /// The report id of `group`'s open episode, unless its resolution has been recorded since.
    async fn current_episode(&self, group: &str) -> Result<Option<String>, StoreError>;
    /// Records `id` as `group`'s open episode.
    async fn open_episode(&self, group: &str, id: &str) -> Result<(), StoreError>;
    /// Whether a report with this id is stored (false when the backend cannot tell).
    async fn exists(&self, id: &str) -> bool;
    /// Reads a report, with the group's resolution when one is recorded.
    async fn get(&self, id: &str) -> Result<StoredReport, StoreError>;
    /// The ids of the stored reports, sorted.
    async fn ids(&self) -> Result<Vec<String>, StoreError>;
    /// Deletes the reports stored longer than `max_age` ago and, oldest first, those beyond
    /// `max_bytes` in all, each with its resolution and its group's episode record when that
    /// names it (a later notification of the group starts a new episode).
    async fn prune(&self, max_age: Duration, max_bytes: u64) -> Result<Pruned, StoreError>;
}

/// Whether `id` has the form of a group's report id (`<16 hex digits>-<Unix ms>`): anything
/// else recorded as an episode is a damaged record.
pub fn is_report_id(id: &str) -> bool {
    id.split_once('-').is_some_and(|(key, ms)| {
        key.len() == 16
            && key.bytes().all(|b| b.is_ascii_hexdigit())
            && !ms.is_empty()
            && ms.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Reads a stored report from its JSON, refusing a format version this build does not read
/// (`place` names where it came from, for the error).
pub fn report_from_json(value: serde_json::Value, place: &str) -> Result<StoredReport, StoreError> {
    let found = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != u64::from(REPORT_FORMAT_VERSION) {
        return Err(StoreError::Version {
            path: place.to_string(),
            found,
        });
    }
    serde_json::from_value(value).map_err(|e| StoreError::Io {
        path: place.to_string(),
        message: e.to_string(),
    })
}

/// Reads a resolution record from its JSON, refusing a format version this build does not
/// read (`place` names where it came from, for the error).
pub fn resolution_from_json(
    value: serde_json::Value,
    place: &str,
) -> Result<Resolution, StoreError> {
    let bad = |message: String| StoreError::Io {
        path: place.to_string(),
        message,
    };
    let found = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != u64::from(RESOLUTION_FORMAT_VERSION) {
        return Err(bad(format!(
            "format_version {found} is not supported; this build reads \
             {RESOLUTION_FORMAT_VERSION}"
        )));
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// The service's store: a cheap handle on a [`ReportBackend`].
#[derive(Debug, Clone)]
pub struct ReportStore {
    backend: Arc<dyn ReportBackend>,
}

impl ReportStore {
    /// A [`FileStore`] in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ReportStore::with_backend(Arc::new(FileStore::new(dir)))
    }

    /// A store over any backend.
    pub fn with_backend(backend: Arc<dyn ReportBackend>) -> Self {
        ReportStore { backend }
    }

    /// Stores a report (see [`ReportBackend::put`]).
    pub async fn put(&self, report: &StoredReport) -> Result<(), StoreError> {
        self.backend.put(report).await
    }

    /// Records a resolution once (see [`ReportBackend::put_resolution`]).
    pub async fn put_resolution(&self, resolution: &Resolution) -> Result<bool, StoreError> {
        self.backend.put_resolution(resolution).await
    }

    /// The resolution of `id` (see [`ReportBackend::resolution`]).
    pub async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StoreError> {
        self.backend.resolution(id).await
    }

    /// The open episode of `group` (see [`ReportBackend::current_episode`]).
    pub async fn current_episode(&self, group: &str) -> Result<Option<String>, StoreError> {
        self.backend.current_episode(group).await
    }

    /// Records `group`'s open episode (see [`ReportBackend::open_episode`]).
    pub async fn open_episode(&self, group: &str, id: &str) -> Result<(), StoreError> {
        self.backend.open_episode(group, id).await
    }

    /// Whether a report with this id is stored.
    pub async fn exists(&self, id: &str) -> bool {
        self.backend.exists(id).await
    }

    /// Reads a report (see [`ReportBackend::get`]).
    pub async fn get(&self, id: &str) -> Result<StoredReport, StoreError> {
        self.backend.get(id).await
    }

    /// The ids of the stored reports, sorted.
    pub async fn ids(&self) -> Result<Vec<String>, StoreError> {
        self.backend.ids().await
    }

    /// Deletes old reports (see [`ReportBackend::prune`]).
    pub async fn prune(&self, max_age: Duration, max_bytes: u64) -> Result<Pruned, StoreError> {
        self.backend.prune(max_age, max_bytes).await
    }
}

/// A directory of stored reports: one JSON file per report, resolutions in `resolved/`, open
/// episodes in `episodes/`.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileStore { dir: dir.into() }
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

    fn resolution_path(&self, id: &str) -> PathBuf {
        self.dir
            .join(RESOLVED_DIR)
            .join(format!("{}.json", sanitize(id)))
    }

    /// Records a group's resolution (atomically and durably), unless one is recorded already;
    /// true when this call wrote it.
    pub async fn put_resolution(&self, resolution: &Resolution) -> Result<bool, StoreError> {
        let path = self.resolution_path(&resolution.id);
        let io = |e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        if tokio::fs::try_exists(&path).await.map_err(io)? {
            return Ok(false);
        }
        let text = serde_json::to_vec_pretty(resolution).map_err(|e| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        tokio::fs::create_dir_all(self.dir.join(RESOLVED_DIR))
            .await
            .map_err(io)?;
        crate::inbox::write_durably(&path, text).await.map_err(io)?;
        Ok(true)
    }

    /// The resolution recorded for `id`, if any; an unknown format version is an error.
    pub async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StoreError> {
        let path = self.resolution_path(id);
        let place = path.display().to_string();
        let bad = |message: String| StoreError::Io {
            path: place.clone(),
            message,
        };
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(e.to_string())),
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        resolution_from_json(value, &place).map(Some)
    }

    fn episode_path(&self, group: &str) -> PathBuf {
        self.dir.join(EPISODES_DIR).join(sanitize(group))
    }

    /// The report id of `group`'s open episode: the one recorded by
    /// [`FileStore::open_episode`], unless its resolution has been recorded since.
    pub async fn current_episode(&self, group: &str) -> Result<Option<String>, StoreError> {
        let path = self.episode_path(group);
        let id = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        // Anything but a report id of a group (`<16 hex digits>-<Unix ms>`) is a damaged
        // record: the group starts a new episode, which replaces it.
        if !is_report_id(&id) || self.resolution(&id).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(id))
    }

    /// Records `id` as `group`'s open episode (atomically and durably): later notifications of
    /// the group are answered with it until its resolution is recorded, whichever of the
    /// group's alerts they carry.
    pub async fn open_episode(&self, group: &str, id: &str) -> Result<(), StoreError> {
        let path = self.episode_path(group);
        let io = |e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        tokio::fs::create_dir_all(self.dir.join(EPISODES_DIR))
            .await
            .map_err(io)?;
        crate::inbox::write_durably(&path, id.as_bytes().to_vec())
            .await
            .map_err(io)
    }

    /// Whether a report with this id is stored.
    pub async fn exists(&self, id: &str) -> bool {
        tokio::fs::try_exists(self.path(id)).await.unwrap_or(false)
    }

    /// Reads a report, with the group's resolution when one is recorded; an unknown format
    /// version is an error, never a misread.
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
        let place = path.display().to_string();
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Io {
                path: place.clone(),
                message: e.to_string(),
            })?;
        let mut report = report_from_json(value, &place)?;
        report.resolution = self.resolution(id).await?;
        Ok(report)
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
            let is_file = entry.file_type().await.is_ok_and(|t| t.is_file());
            if let Some(id) = name
                .strip_suffix(".json")
                .filter(|n| is_file && !n.starts_with('.'))
            {
                ids.push(id.to_string());
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Deletes old reports, their resolutions and their episode records (see
    /// [`ReportBackend::prune`]); a report's age is its file's modification time, its size
    /// that of its file and its resolution's.
    pub async fn prune(&self, max_age: Duration, max_bytes: u64) -> Result<Pruned, StoreError> {
        let io = |path: &Path, e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let now = SystemTime::now();
        // (stored at, id, bytes) of every report.
        let mut reports = Vec::new();
        for id in self.ids().await? {
            let path = self.path(&id);
            let meta = match tokio::fs::metadata(&path).await {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&path, e)),
            };
            let resolution = tokio::fs::metadata(self.resolution_path(&id))
                .await
                .map_or(0, |m| m.len());
            let stored = meta.modified().unwrap_or(now);
            reports.push((stored, id, meta.len().saturating_add(resolution)));
        }
        // Newest first: the running total decides where the byte budget ends.
        reports.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        let mut pruned = Pruned::default();
        let mut kept = 0u64;
        for (stored, id, bytes) in reports {
            let old = now.duration_since(stored).unwrap_or_default() > max_age;
            if !old && kept.saturating_add(bytes) <= max_bytes {
                kept = kept.saturating_add(bytes);
                continue;
            }
            self.delete(&id).await?;
            pruned.reports += 1;
            pruned.bytes = pruned.bytes.saturating_add(bytes);
        }
        pruned.kept_bytes = kept;
        Ok(pruned)
    }

    /// Deletes report `id`, its resolution, and its group's episode record if it names `id`.
    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        let remove = |path: PathBuf| async move {
            match tokio::fs::remove_file(&path).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(StoreError::Io {
                    path: path.display().to_string(),
                    message: e.to_string(),
                }),
            }
        };
        // The episode first: a crash between leaves a report without an episode (a later
        // notification starts a new one), never an episode naming a deleted report.
        if let Some((group, _)) = id.split_once('-') {
            let episode = self.episode_path(group);
            if tokio::fs::read_to_string(&episode)
                .await
                .is_ok_and(|named| named.trim() == id)
            {
                remove(episode).await?;
            }
        }
        remove(self.resolution_path(id)).await?;
        remove(self.path(id)).await
    }
}

#[async_trait]
impl ReportBackend for FileStore {
    async fn put(&self, report: &StoredReport) -> Result<(), StoreError> {
        FileStore::put(self, report).await.map(|_| ())
    }
    async fn put_resolution(&self, resolution: &Resolution) -> Result<bool, StoreError> {
        FileStore::put_resolution(self, resolution).await
    }
    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StoreError> {
        FileStore::resolution(self, id).await
    }
    async fn current_episode(&self, group: &str) -> Result<Option<String>, StoreError> {
        FileStore::current_episode(self, group).await
    }
    async fn open_episode(&self, group: &str, id: &str) -> Result<(), StoreError> {
        FileStore::open_episode(self, group, id).await
    }
    async fn exists(&self, id: &str) -> bool {
        FileStore::exists(self, id).await
    }
    async fn get(&self, id: &str) -> Result<StoredReport, StoreError> {
        FileStore::get(self, id).await
    }
    async fn ids(&self) -> Result<Vec<String>, StoreError> {
        FileStore::ids(self).await
    }
    async fn prune(&self, max_age: Duration, max_bytes: u64) -> Result<Pruned, StoreError> {
        FileStore::prune(self, max_age, max_bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retention_deletes_old_reports_and_the_oldest_beyond_the_byte_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let ids = [
            "00000000000000a1-1",
            "00000000000000a2-2",
            "00000000000000a3-3",
        ];
        for (i, id) in ids.iter().enumerate() {
            // Pruning reads sizes and times only: any 10 KB file stands for a report.
            std::fs::write(store.path(id), "x".repeat(10_000)).unwrap();
            let resolution = Resolution {
                format_version: RESOLUTION_FORMAT_VERSION,
                id: id.to_string(),
                received_at_ms: 1,
                ends_at: String::new(),
                alerts: Vec::new(),
            };
            store.put_resolution(&resolution).await.unwrap();
            store
                .open_episode(id.split_once('-').unwrap().0, id)
                .await
                .unwrap();
            // Stored a day, an hour and a second ago.
            let age = [86_400, 3_600, 1][i];
            let when = SystemTime::now() - Duration::from_secs(age);
            std::fs::File::options()
                .write(true)
                .open(store.path(id))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        // Nothing is old enough or too large: nothing goes.
        let kept = store
            .prune(Duration::from_secs(7 * 86_400), 1 << 30)
            .await
            .unwrap();
        assert_eq!(kept.reports, 0);
        // Older than two hours: the first, with its resolution and its episode record.
        let pruned = store
            .prune(Duration::from_secs(7_200), 1 << 30)
            .await
            .unwrap();
        assert_eq!(pruned.reports, 1, "{pruned:?}");
        assert!(pruned.bytes > 10_000, "{pruned:?}");
        assert_eq!(store.ids().await.unwrap(), ids[1..].to_vec());
        assert!(!store.resolution_path(ids[0]).exists());
        assert!(!store.episode_path("00000000000000a1").exists());
        // Room for one report: the older of the two goes.
        let pruned = store
            .prune(Duration::from_secs(7_200), 15_000)
            .await
            .unwrap();
        assert_eq!(pruned.reports, 1, "{pruned:?}");
        assert!(pruned.kept_bytes <= 15_000, "{pruned:?}");
        assert_eq!(store.ids().await.unwrap(), vec![ids[2]]);
        assert!(store.episode_path("00000000000000a3").exists());
    }

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
        // Resolutions: none, then the first one recorded is kept.
        assert_eq!(store.resolution("r").await.unwrap(), None);
        let resolution = |ends_at: &str| Resolution {
            format_version: RESOLUTION_FORMAT_VERSION,
            id: "r".into(),
            received_at_ms: 1,
            ends_at: ends_at.into(),
            alerts: Vec::new(),
        };
        assert!(store.put_resolution(&resolution("first")).await.unwrap());
        assert!(!store.put_resolution(&resolution("second")).await.unwrap());
        assert_eq!(
            store.resolution("r").await.unwrap(),
            Some(resolution("first"))
        );
        assert_eq!(store.ids().await.unwrap(), vec!["broken", "future"]);
    }
}
