//! Accepted alert groups ("alerts" below: one entry, one report), on disk until their report
//! is stored.
//!
//! An alert is accepted only once its entry is written (atomically) to `STORE/inbox/`; a worker
//! diagnoses it, stores the report and only then removes the entry. A service that stops or
//! crashes at any point therefore loses no accepted alert: [`Inbox::open`] finds the entries
//! left behind and queues them again. An alert diagnosed twice (a crash between the report and
//! the removal) writes the same report id twice, so each alert still has exactly one report.
//!
//! The inbox is bounded: once `capacity` alerts wait or are being diagnosed, a notification
//! with new alerts is refused whole ([`Admission::Full`]), and the sender retries; nothing that
//! was accepted is ever dropped to make room. A diagnosis that fails for good is recorded in
//! `failed/<id>.json` (the entry and the error), so its alert is answered, across restarts, by
//! that failure; deleting the file lets the alert be accepted again.
//!
//! Entries hold the notification as received, after redaction by the caller.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, watch};

use crate::alert::{Alert, WebhookPayload};
use crate::diagnosis::sanitize;
use crate::store::{ReportStore, StoreError};

/// The inbox entry format this build writes and reads.
pub const ENTRY_FORMAT_VERSION: u32 = 1;

/// One accepted alert group, as written to the inbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The entry's format version.
    pub format_version: u32,
    /// The report id the group will be stored under.
    pub id: String,
    /// When the service accepted it (Unix milliseconds).
    pub received_at_ms: i64,
    /// The notification, reduced to the group's firing alerts (an entry of an earlier build
    /// carries one alert: a group of one).
    pub payload: WebhookPayload,
}

impl Entry {
    /// The entry for the alert group `group` (see [`WebhookPayload::groups`]), accepted now.
    pub fn new(id: String, group: &WebhookPayload) -> Entry {
        Entry {
            format_version: ENTRY_FORMAT_VERSION,
            id,
            received_at_ms: now_ms(),
            payload: group.clone(),
        }
    }

    /// The group's first alert.
    pub fn alert(&self) -> Option<&Alert> {
        self.payload.alerts.first()
    }
}

/// An entry whose diagnosis failed for good, as kept in `failed/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedEntry {
    /// The entry.
    pub entry: Entry,
    /// Why its diagnosis failed.
    pub error: String,
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// What became of a notification's alerts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The new alerts were written to the inbox (`accepted`); the others were already there or
    /// already reported (`duplicates`, grouped under the id they share).
    Queued {
        /// Ids newly accepted.
        accepted: Vec<String>,
        /// Ids that were waiting, being diagnosed or reported already.
        duplicates: Vec<String>,
    },
    /// The inbox holds `capacity` alerts: nothing of this notification was accepted.
    Full {
        /// The inbox's capacity.
        capacity: usize,
    },
    /// The notification brings more new alert groups than the whole inbox holds: it could
    /// never be accepted, so it is refused in full (not retried).
    TooLarge {
        /// New groups it brings.
        groups: usize,
        /// The inbox's capacity.
        capacity: usize,
    },
}

/// The state of one id, for `GET /reports/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Waiting or being diagnosed.
    Pending,
    /// Its diagnosis failed as often as allowed; the message says why.
    Failed(String),
    /// Not in the inbox (reported, or never seen).
    Unknown,
    /// The queue could not be read (a shared database did not answer); the message says why.
    Unavailable(String),
}

#[derive(Debug, Default)]
struct State {
    pending: HashSet<String>,
    failed: HashMap<String, String>,
}

/// The durable queue of accepted alerts (see the module documentation).
#[derive(Debug, Clone)]
pub struct Inbox {
    dir: PathBuf,
    capacity: usize,
    state: Arc<Mutex<State>>,
    queue: mpsc::UnboundedSender<Entry>,
    finished: Arc<watch::Sender<u64>>,
}

/// The receiving end the workers share.
pub type Queue = Arc<Mutex<mpsc::UnboundedReceiver<Entry>>>;

/// The lock file in a store's directory.
pub const LOCK_FILE: &str = ".lock";

/// How long a starting service waits for the lock of a store whose previous holder is
/// still going away (a restart in place), before it refuses to start.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes a store's lock (an advisory lock on [`LOCK_FILE`] in `dir`, released when the file
/// is dropped or its process ends, even by a crash): a second service on the same store is
/// refused at its start, after waiting at most [`LOCK_WAIT`] for a holder going away.
pub async fn lock_store(dir: &Path) -> Result<std::fs::File, StoreError> {
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_error(&path, e))?;
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io_error(
                    &path,
                    "another diagnosis service holds this store's lock; give each service its \
                     own store_dir, or share one PostgreSQL database between them",
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_error(&path, e)),
        }
    }
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The folder of `failed/` records inside the inbox.
pub const FAILED_DIR: &str = "failed";

/// The failures recorded in `dir` (none when it does not exist); unreadable records are
/// reported in the log and otherwise kept as they are.
async fn read_failed(dir: &Path) -> Result<HashMap<String, String>, StoreError> {
    let mut failed = HashMap::new();
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(failed),
        Err(e) => return Err(io_error(dir, e)),
    };
    while let Some(item) = entries.next_entry().await.map_err(|e| io_error(dir, e))? {
        let path = item.path();
        let record = tokio::fs::read(&path)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice::<FailedEntry>(&b).ok());
        match record {
            Some(r) => {
                failed.insert(r.entry.id, r.error);
            }
            None => tracing::warn!(file = %path.display(), "unreadable failure record kept"),
        }
    }
    Ok(failed)
}

/// Writes `bytes` to `path` durably and atomically ([`rca_tools::files::write_atomic`]: a
/// synced temporary sibling, renamed, the folder synced), off the async workers.
pub async fn write_durably(path: &Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || rca_tools::files::write_atomic(&path, &bytes))
        .await
        .map_err(std::io::Error::other)?
}

/// Removes `path` (already gone is fine) and makes the removal durable.
async fn remove_durably(path: &Path) -> std::io::Result<()> {
    match tokio::fs::remove_file(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => {
            let path = path.to_path_buf();
            tokio::task::spawn_blocking(move || rca_tools::files::sync_folder(&path))
                .await
                .map_err(std::io::Error::other)?
        }
    }
}

impl Inbox {
    /// Opens (creating) `dir` and queues every entry left there by an earlier run, oldest
    /// first. Entries it cannot read are moved to `dir/unreadable/` and reported, never
    /// deleted. Returns the inbox, the queue for the workers and how many entries it recovered.
    pub async fn open(dir: &Path, capacity: usize) -> Result<(Inbox, Queue, usize), StoreError> {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| io_error(dir, e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (finished, _) = watch::channel(0);
        let inbox = Inbox {
            dir: dir.to_path_buf(),
            capacity: capacity.max(1),
            state: Arc::new(Mutex::new(State::default())),
            queue: tx,
            finished: Arc::new(finished),
        };
        let failed = read_failed(&dir.join(FAILED_DIR)).await?;
        let mut left = Vec::new();
        let mut entries = tokio::fs::read_dir(dir)
            .await
            .map_err(|e| io_error(dir, e))?;
        while let Some(item) = entries.next_entry().await.map_err(|e| io_error(dir, e))? {
            let path = item.path();
            let name = item.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(".tmp-") {
                // A write that a crash interrupted: its alert was never acknowledged.
                let _ = tokio::fs::remove_file(&path).await;
                continue;
            }
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let parsed = tokio::fs::read(&path)
                .await
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Entry>(&b).map_err(|e| e.to_string()))
                .and_then(|e| {
                    if e.format_version == ENTRY_FORMAT_VERSION && e.alert().is_some() {
                        Ok(e)
                    } else {
                        Err(format!(
                            "format_version {} with {} alerts; this build reads version \
                             {ENTRY_FORMAT_VERSION} with at least one",
                            e.format_version,
                            e.payload.alerts.len()
                        ))
                    }
                });
            match parsed {
                Ok(entry) => left.push(entry),
                // Gone since the listing (a worker of a crashed run finished it): nothing to do.
                Err(_) if !tokio::fs::try_exists(&path).await.unwrap_or(true) => {}
                Err(message) => {
                    let aside = dir.join("unreadable");
                    tokio::fs::create_dir_all(&aside)
                        .await
                        .map_err(|e| io_error(&aside, e))?;
                    tokio::fs::rename(&path, aside.join(&name))
                        .await
                        .map_err(|e| io_error(&path, e))?;
                    tracing::warn!(file = %path.display(), %message, "inbox entry set aside");
                }
            }
        }
        left.sort_by_key(|e| e.received_at_ms);
        let recovered = left.len();
        {
            let mut state = inbox.state.lock().await;
            state.failed = failed;
            for entry in left {
                state.pending.insert(entry.id.clone());
                // The receiver is held by the caller: sending cannot fail here.
                let _ = inbox.queue.send(entry);
            }
        }
        Ok((inbox, Arc::new(Mutex::new(rx)), recovered))
    }

    /// The inbox's capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{}.json", sanitize(id)))
    }

    /// Admits `entries` (distinct ids); those waiting, running or already reported in `store`
    /// are duplicates. All new entries are written before any is queued; if one cannot be
    /// written, none is accepted and the error is returned.
    ///
    /// The store is asked while the inbox is locked: a worker stores its report before it
    /// takes the lock to finish, so an alert is always either pending or reported here, and a
    /// repeat is never diagnosed twice.
    pub async fn admit(
        &self,
        entries: Vec<Entry>,
        store: &ReportStore,
    ) -> Result<Admission, StoreError> {
        let mut state = self.state.lock().await;
        let mut duplicates = Vec::new();
        let mut fresh = Vec::new();
        for entry in entries {
            if state.pending.contains(&entry.id)
                || state.failed.contains_key(&entry.id)
                || store.exists(&entry.id).await
            {
                duplicates.push(entry.id);
            } else {
                fresh.push(entry);
            }
        }
        // A notification larger than the whole inbox could never be accepted: refused in
        // full, whatever the inbox holds now.
        if fresh.len() > self.capacity {
            return Ok(Admission::TooLarge {
                groups: fresh.len(),
                capacity: self.capacity,
            });
        }
        if !fresh.is_empty() && state.pending.len() + fresh.len() > self.capacity {
            return Ok(Admission::Full {
                capacity: self.capacity,
            });
        }
        // Undone on a failure: the files this call created (an entry already on disk, left
        // by a report that could not be stored, is rewritten but never removed).
        let mut created: Vec<PathBuf> = Vec::new();
        for entry in &fresh {
            let path = self.path(&entry.id);
            let existed = tokio::fs::try_exists(&path).await.unwrap_or(true);
            if let Err(e) = self.write(entry).await {
                for path in &created {
                    let _ = tokio::fs::remove_file(path).await;
                }
                return Err(e);
            }
            if !existed {
                created.push(path);
            }
        }
        let accepted = fresh.iter().map(|e| e.id.clone()).collect();
        for entry in fresh {
            state.failed.remove(&entry.id);
            state.pending.insert(entry.id.clone());
            if self.queue.send(entry).is_err() {
                // No worker listens any more (the service is stopping): the entry stays on
                // disk and is diagnosed after the next start.
                tracing::warn!("no worker is running; the alert waits in the inbox");
            }
        }
        Ok(Admission::Queued {
            accepted,
            duplicates,
        })
    }

    async fn write(&self, entry: &Entry) -> Result<(), StoreError> {
        let path = self.path(&entry.id);
        let text = serde_json::to_vec(entry).map_err(|e| io_error(&path, e))?;
        write_durably(&path, text)
            .await
            .map_err(|e| io_error(&path, e))
    }

    /// The entry is done: its report is stored, or its diagnosis failed for good (`failure`,
    /// recorded in `failed/` first). Removes it from the inbox and wakes whoever waits for it.
    pub async fn finish(&self, entry: &Entry, failure: Option<String>) -> Result<(), StoreError> {
        let id = entry.id.as_str();
        let mut result = Ok(());
        if let Some(error) = &failure {
            let dir = self.dir.join(FAILED_DIR);
            let path = dir.join(format!("{}.json", sanitize(id)));
            let record = FailedEntry {
                entry: entry.clone(),
                error: error.clone(),
            };
            let written = async {
                tokio::fs::create_dir_all(&dir).await?;
                let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
                write_durably(&path, text).await
            };
            result = written.await.map_err(|e| io_error(&path, e));
        }
        // The entry stays when its failure could not be recorded: a restart tries it again.
        if result.is_ok() {
            let path = self.path(id);
            result = remove_durably(&path).await.map_err(|e| io_error(&path, e));
        }
        self.settle(id, failure).await;
        result
    }

    /// `id` no longer waits or runs (failed, when `failure` says why); wakes the waiters.
    async fn settle(&self, id: &str, failure: Option<String>) {
        {
            let mut state = self.state.lock().await;
            state.pending.remove(id);
            if let Some(message) = failure {
                state.failed.insert(id.to_string(), message);
            }
        }
        self.finished.send_modify(|n| *n += 1);
    }

    /// Where `id` stands.
    pub async fn progress(&self, id: &str) -> Progress {
        let state = self.state.lock().await;
        if state.pending.contains(id) {
            Progress::Pending
        } else if let Some(m) = state.failed.get(id) {
            Progress::Failed(m.clone())
        } else {
            Progress::Unknown
        }
    }

    /// How many alerts wait or are being diagnosed.
    pub async fn pending(&self) -> usize {
        self.state.lock().await.pending.len()
    }

    /// Waits until none of `ids` is pending, or `timeout` passes; true when none is.
    pub async fn wait_for(&self, ids: &[String], timeout: std::time::Duration) -> bool {
        let mut finished = self.finished.subscribe();
        let all_done = async {
            loop {
                {
                    let state = self.state.lock().await;
                    if ids.iter().all(|id| !state.pending.contains(id)) {
                        return;
                    }
                }
                if finished.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, all_done).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> Entry {
        let payload =
            WebhookPayload::parse(crate::alert::tests::SAMPLE.as_bytes()).expect("sample");
        Entry::new(id.into(), &payload)
    }

    #[tokio::test]
    async fn one_store_has_one_service() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_store(dir.path()).await.unwrap();
        let second = lock_store(dir.path()).await.unwrap_err();
        assert!(
            second.to_string().contains("another diagnosis service"),
            "{second}"
        );
        drop(first);
        assert!(lock_store(dir.path()).await.is_ok());
    }

    #[tokio::test]
    async fn accepted_entries_survive_a_restart_and_the_capacity_refuses_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (inbox, _queue, recovered) = Inbox::open(dir.path(), 2).await.unwrap();
        assert_eq!(recovered, 0);
        let store_dir = tempfile::tempdir().unwrap();
        let none = ReportStore::new(store_dir.path());
        let first = inbox
            .admit(vec![entry("a"), entry("b")], &none)
            .await
            .unwrap();
        assert_eq!(
            first,
            Admission::Queued {
                accepted: vec!["a".into(), "b".into()],
                duplicates: vec![]
            }
        );
        // Full: a new id is refused, a pending one is grouped as a duplicate.
        assert_eq!(
            inbox.admit(vec![entry("c")], &none).await.unwrap(),
            Admission::Full { capacity: 2 }
        );
        assert_eq!(
            inbox.admit(vec![entry("a")], &none).await.unwrap(),
            Admission::Queued {
                accepted: vec![],
                duplicates: vec!["a".into()]
            }
        );
        // "a" is done; "b" is left behind by a crash, with an unreadable neighbour.
        inbox.finish(&entry("a"), None).await.unwrap();
        assert_eq!(inbox.progress("a").await, Progress::Unknown);
        assert_eq!(inbox.progress("b").await, Progress::Pending);
        std::fs::write(dir.path().join("junk.json"), "{").unwrap();
        std::fs::write(dir.path().join(".b.json.tmp-1-0"), "half").unwrap();
        drop(inbox);
        let (again, queue, recovered) = Inbox::open(dir.path(), 2).await.unwrap();
        assert_eq!(recovered, 1);
        let next = queue.lock().await.recv().await.unwrap();
        assert_eq!(next.id, "b");
        assert_eq!(again.pending().await, 1);
        assert!(dir.path().join("unreadable/junk.json").exists());
        assert!(!dir.path().join(".b.json.tmp-1-0").exists());
        // Reported ids are duplicates too; a failure is remembered.
        std::fs::write(store_dir.path().join("d.json"), "{}").unwrap();
        assert_eq!(
            again.admit(vec![entry("d")], &none).await.unwrap(),
            Admission::Queued {
                accepted: vec![],
                duplicates: vec!["d".into()]
            }
        );
        again.finish(&next, Some("no data".into())).await.unwrap();
        assert_eq!(
            again.progress("b").await,
            Progress::Failed("no data".into())
        );
        assert!(
            again
                .wait_for(&["b".into()], std::time::Duration::from_secs(1))
                .await
        );
        assert!(!dir.path().join("b.json").exists());
        // The failure outlives a restart, and a repeat of the failed alert is grouped with it.
        drop(again);
        let (third, _queue, recovered) = Inbox::open(dir.path(), 2).await.unwrap();
        assert_eq!(recovered, 0);
        assert_eq!(
            third.progress("b").await,
            Progress::Failed("no data".into())
        );
        assert_eq!(
            third.admit(vec![entry("b")], &none).await.unwrap(),
            Admission::Queued {
                accepted: vec![],
                duplicates: vec!["b".into()]
            }
        );
        // A notification larger than the whole inbox is refused in full, even when the
        // inbox is empty: it could never be accepted.
        let many: Vec<Entry> = ["x", "y", "z"].iter().map(|i| entry(i)).collect();
        assert_eq!(
            third.admit(many, &none).await.unwrap(),
            Admission::TooLarge {
                groups: 3,
                capacity: 2
            }
        );
    }
}
