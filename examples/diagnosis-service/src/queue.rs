//! The queue of accepted alert groups behind one trait, [`AlertQueue`]: the HTTP handlers
//! admit groups into it and wait on it, the workers claim groups from it and complete them.
//!
//! Two implementations: [`FileQueue`] (the default: the on-disk [`Inbox`] of one process) and,
//! with the `postgres` feature, `PgQueue` (a table in PostgreSQL that several processes share,
//! each group claimed by one worker at a time under a lease its worker keeps renewing).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;

use crate::diagnosis::StoredReport;
use crate::inbox::{self, Admission, Entry, Inbox, Progress};
use crate::store::{ReportStore, StoreError};

/// One accepted alert group a worker has claimed: it is the only worker diagnosing it until it
/// completes the claim (or, with a shared queue, until the claim's lease expires).
#[derive(Debug)]
pub struct Claim {
    /// The accepted group.
    pub entry: Entry,
    /// Which claim of the group this is: 1 for the first, one more for each claim after a
    /// lease expired (a [`FileQueue`] does not count them: always 0).
    pub attempt: i32,
    /// Keeps the claim's lease renewed while the claim lives.
    _lease: Option<LeaseKeeper>,
}

impl Claim {
    /// A claim without a lease (a queue only this process reads).
    pub fn new(entry: Entry, attempt: i32) -> Claim {
        Claim {
            entry,
            attempt,
            _lease: None,
        }
    }

    /// A claim whose lease `keeper` renews until the claim is dropped.
    #[cfg(feature = "postgres")]
    pub(crate) fn with_lease(entry: Entry, attempt: i32, keeper: LeaseKeeper) -> Claim {
        Claim {
            entry,
            attempt,
            _lease: Some(keeper),
        }
    }
}

/// A task that renews a lease; ended when dropped (so a claim dropped, completed or abandoned
/// by an aborted worker, stops renewing and its lease runs out).
#[derive(Debug)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct LeaseKeeper(JoinHandle<()>);

impl LeaseKeeper {
    /// Keeps `task` running while the keeper lives.
    #[cfg(feature = "postgres")]
    pub(crate) fn new(task: JoinHandle<()>) -> LeaseKeeper {
        LeaseKeeper(task)
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How a claimed group ended.
#[derive(Debug)]
pub enum Outcome {
    /// Diagnosed: the report to store.
    Reported(Box<StoredReport>),
    /// Its report was stored already (by an earlier run that stopped before completing).
    AlreadyReported,
    /// Its diagnosis failed for good; the message says why.
    Failed(String),
}

/// The queue of accepted alert groups (see the module documentation).
#[async_trait]
pub trait AlertQueue: std::fmt::Debug + Send + Sync {
    /// How many groups may wait or be diagnosed at once.
    fn capacity(&self) -> usize;

    /// Admits `entries` (distinct ids): those waiting, running, failed or already reported
    /// are duplicates; the new ones are accepted all or none. [`Admission::Full`] when the
    /// queue has no room for the new ones; [`Admission::TooLarge`] when they are more than
    /// `capacity` (they could never be accepted).
    async fn admit(
        &self,
        entries: Vec<Entry>,
        store: &ReportStore,
    ) -> Result<Admission, StoreError>;

    /// Where `id` stands.
    async fn progress(&self, id: &str) -> Progress;

    /// How many groups wait or are being diagnosed.
    async fn pending(&self) -> Result<usize, StoreError>;

    /// Waits until none of `ids` waits or runs, or `timeout` passes; true when none does.
    async fn wait_for(&self, ids: &[String], timeout: Duration) -> bool;

    /// Waits for the next group to diagnose and claims it; `None` once the queue is closed.
    async fn next(&self) -> Option<Claim>;

    /// Completes `claim` with `outcome`: stores the report (in `store`, or in the shared
    /// database with the completion) and takes the group off the queue. On an error the group
    /// stays queued, to be diagnosed again (after a restart, or once the lease expires).
    async fn complete(
        &self,
        claim: Claim,
        outcome: Outcome,
        store: &ReportStore,
    ) -> Result<(), StoreError>;
}

/// The on-disk [`Inbox`] of one process as an [`AlertQueue`].
#[derive(Debug, Clone)]
pub struct FileQueue {
    inbox: Inbox,
    receiver: inbox::Queue,
}

impl FileQueue {
    /// Opens (creating) the inbox in `dir` (see [`Inbox::open`]); also returns how many
    /// entries an earlier run left there.
    pub async fn open(
        dir: &std::path::Path,
        capacity: usize,
    ) -> Result<(FileQueue, usize), StoreError> {
        let (inbox, receiver, recovered) = Inbox::open(dir, capacity).await?;
        Ok((FileQueue { inbox, receiver }, recovered))
    }

    /// The inbox.
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }
}

#[async_trait]
impl AlertQueue for FileQueue {
    fn capacity(&self) -> usize {
        self.inbox.capacity()
    }

    async fn admit(
        &self,
        entries: Vec<Entry>,
        store: &ReportStore,
    ) -> Result<Admission, StoreError> {
        self.inbox.admit(entries, store).await
    }

    async fn progress(&self, id: &str) -> Progress {
        self.inbox.progress(id).await
    }

    async fn pending(&self) -> Result<usize, StoreError> {
        Ok(self.inbox.pending().await)
    }

    async fn wait_for(&self, ids: &[String], timeout: Duration) -> bool {
        self.inbox.wait_for(ids, timeout).await
    }

    async fn next(&self) -> Option<Claim> {
        let mut rx = self.receiver.lock().await;
        rx.recv().await.map(|entry| Claim::new(entry, 0))
    }

    /// A report or a record that cannot be written (a full disk, a failing volume) is
    /// written again after a growing pause (1 s, doubling up to 60 s) until it can be, while
    /// the service runs: no restart is needed when space returns. Meanwhile the group stays
    /// pending (a repeat of its notification is a duplicate, a waiter keeps waiting) and its
    /// inbox entry stays on disk, so a stop loses nothing either.
    async fn complete(
        &self,
        claim: Claim,
        outcome: Outcome,
        store: &ReportStore,
    ) -> Result<(), StoreError> {
        let entry = &claim.entry;
        let mut pause = STORE_RETRY_FIRST;
        let mut attempt = 1u32;
        loop {
            let done = match &outcome {
                Outcome::Reported(report) => match store.put(report).await {
                    Ok(()) => self.inbox.finish(entry, None).await,
                    Err(e) => Err(e),
                },
                Outcome::AlreadyReported => self.inbox.finish(entry, None).await,
                Outcome::Failed(message) => self.inbox.finish(entry, Some(message.clone())).await,
            };
            match done {
                Ok(()) => {
                    if attempt > 1 {
                        tracing::info!(id = %entry.id, attempt, "stored once the store recovered");
                    }
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(
                        id = %entry.id,
                        attempt,
                        error = %e,
                        retry_in_seconds = pause.as_secs(),
                        "the report could not be stored; trying again"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(STORE_RETRY_MAX);
                    attempt = attempt.saturating_add(1);
                }
            }
        }
    }
}

/// The first pause before a failed store write is tried again.
const STORE_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between tries of a failed store write.
const STORE_RETRY_MAX: Duration = Duration::from_secs(60);

/// A queue handle shared by the handlers and the workers.
pub type SharedQueue = Arc<dyn AlertQueue>;
