//! The queue of accepted alert groups in PostgreSQL, shared by several processes.
//!
//! **Claim.** An idle worker claims the oldest group that is `queued`, or `running` under a
//! lease that has run out, in one statement: the row is selected `FOR UPDATE SKIP LOCKED`
//! (two workers never wait on, nor take, the same row), set `running` with the next
//! `attempts` number, this process as `worker` and `lease_until = now() + lease`, and the
//! claim is recorded in `diagnosis_claims`. The database's clock is the only clock.
//!
//! **Lease.** While it diagnoses, the worker renews the lease four times per lease period
//! (only while the row still carries its claim's number). A worker that dies (killed, its
//! machine lost) stops renewing; once the lease has run out, the next idle worker of any
//! process claims the group again (`attempts` + 1).
//!
//! **Completion.** One statement sets the row `done` (or `failed`), stores the report and
//! marks the claim finished, only if the row still carries this claim's number: a worker
//! whose lease ran out and whose group was claimed again stores nothing
//! ([`StoreError::ClaimLost`]). Each group therefore has at most one report, written by the
//! one claim that completed; a group whose worker died is diagnosed again (at least once).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::inbox::{Admission, Entry, Progress};
use crate::pg::{CLAIMS, JOBS, Pg, REPORTS};
use crate::queue::{AlertQueue, Claim, LeaseKeeper, Outcome};
use crate::store::{ReportStore, StoreError};

/// The shared queue (see the module documentation).
#[derive(Debug)]
pub struct PgQueue {
    pg: Arc<Pg>,
    capacity: usize,
    worker: String,
    lease: Duration,
    poll: Duration,
    wake: Notify,
}

/// How often a waiter (`POST /alerts?wait=N`) looks at the state of its groups.
const WAIT_POLL: Duration = Duration::from_millis(100);

impl PgQueue {
    /// The queue in `pg`'s tables, holding at most `capacity` groups that wait or run.
    pub fn new(pg: Arc<Pg>, capacity: usize) -> PgQueue {
        let config = pg.config();
        let worker = config.worker();
        PgQueue {
            lease: Duration::from_secs(config.lease_seconds.max(1)),
            poll: Duration::from_millis(config.poll_millis.max(10)),
            pg,
            capacity: capacity.max(1),
            worker,
            wake: Notify::new(),
        }
    }

    /// The name this process records in its claims.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// How many groups are `queued`, or `running` under a lease that has run out: what an
    /// earlier run (of any process) left for this one.
    pub async fn left_over(&self) -> Result<usize, StoreError> {
        let sql = format!(
            "SELECT count(*) FROM {} WHERE state = 'queued'
               OR (state = 'running' AND lease_until < now())",
            self.pg.table(JOBS)
        );
        count(&self.pg.query(&sql, &[]).await?)
    }

    /// Claims the oldest claimable group, if any.
    async fn claim(&self) -> Result<Option<Claim>, StoreError> {
        let (jobs, claims) = (self.pg.table(JOBS), self.pg.table(CLAIMS));
        let sql = format!(
            "WITH next AS (
               SELECT id FROM {jobs}
               WHERE state = 'queued' OR (state = 'running' AND lease_until < now())
               ORDER BY received_at_ms, id
               LIMIT 1
               FOR UPDATE SKIP LOCKED
             ), claimed AS (
               UPDATE {jobs} j SET state = 'running', attempts = j.attempts + 1, worker = $1,
                 lease_until = now() + make_interval(secs => $2), updated_at = now()
               FROM next WHERE j.id = next.id
               RETURNING j.id, j.entry, j.attempts
             ), logged AS (
               INSERT INTO {claims} (job_id, attempt, worker)
               SELECT id, attempts, $1 FROM claimed
             )
             SELECT entry, attempts FROM claimed"
        );
        let lease = self.lease.as_secs_f64();
        let rows = self.pg.query(&sql, &[&self.worker, &lease]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let entry: serde_json::Value = row.try_get(0).map_err(crate::pg::db_error)?;
        let attempt: i32 = row.try_get(1).map_err(crate::pg::db_error)?;
        let entry: Entry = match serde_json::from_value(entry) {
            Ok(e) => e,
            Err(e) => {
                return Err(StoreError::Database {
                    message: format!("a queued entry is unreadable: {e}"),
                });
            }
        };
        let keeper = LeaseKeeper::new(tokio::spawn(renew(
            Arc::clone(&self.pg),
            entry.id.clone(),
            attempt,
            self.lease,
        )));
        Ok(Some(Claim::with_lease(entry, attempt, keeper)))
    }
}

/// Renews the lease of claim `attempt` of `id` four times per `lease` until ended (by the
/// claim's [`LeaseKeeper`]) or until the claim is found lost.
async fn renew(pg: Arc<Pg>, id: String, attempt: i32, lease: Duration) {
    let sql = format!(
        "UPDATE {} SET lease_until = now() + make_interval(secs => $3), updated_at = now()
         WHERE id = $1 AND attempts = $2 AND state = 'running'",
        pg.table(JOBS)
    );
    let secs = lease.as_secs_f64();
    loop {
        tokio::time::sleep(lease / 4).await;
        match pg.execute(&sql, &[&id, &attempt, &secs]).await {
            Ok(1) => {}
            Ok(_) => {
                tracing::warn!(%id, attempt, "the claim was lost; its lease is no longer renewed");
                return;
            }
            // The next renewal may get through before the lease runs out.
            Err(e) => tracing::warn!(%id, attempt, error = %e, "the lease was not renewed"),
        }
    }
}

fn count(rows: &[tokio_postgres::Row]) -> Result<usize, StoreError> {
    let n: i64 = match rows.first() {
        Some(row) => row.try_get(0).map_err(crate::pg::db_error)?,
        None => 0,
    };
    Ok(usize::try_from(n).unwrap_or(0))
}

#[async_trait]
impl AlertQueue for PgQueue {
    fn capacity(&self) -> usize {
        self.capacity
    }

    /// Groups with a row in the queue (whatever its state) or a stored report are duplicates.
    /// The bound is checked against the count of all processes: two processes admitting at the
    /// same moment may each let one notification past it.
    async fn admit(
        &self,
        entries: Vec<Entry>,
        _store: &ReportStore,
    ) -> Result<Admission, StoreError> {
        let (jobs, reports) = (self.pg.table(JOBS), self.pg.table(REPORTS));
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        let sql = format!(
            "SELECT id FROM {jobs} WHERE id = ANY($1) UNION SELECT id FROM {reports} WHERE id = ANY($1)"
        );
        let known: std::collections::HashSet<String> = self
            .pg
            .query(&sql, &[&ids])
            .await?
            .iter()
            .map(|r| r.try_get::<_, String>(0).map_err(crate::pg::db_error))
            .collect::<Result<_, _>>()?;
        let (known_entries, fresh): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|e| known.contains(&e.id));
        let mut duplicates: Vec<String> = known_entries.into_iter().map(|e| e.id).collect();
        if fresh.is_empty() {
            return Ok(Admission::Queued {
                accepted: Vec::new(),
                duplicates,
            });
        }
        // A notification larger than the whole queue could never be accepted.
        if fresh.len() > self.capacity {
            return Ok(Admission::TooLarge {
                groups: fresh.len(),
                capacity: self.capacity,
            });
        }
        let pending = self.pending().await?;
        if pending + fresh.len() > self.capacity {
            return Ok(Admission::Full {
                capacity: self.capacity,
            });
        }
        let fresh_ids: Vec<String> = fresh.iter().map(|e| e.id.clone()).collect();
        let mut documents = Vec::with_capacity(fresh.len());
        for entry in &fresh {
            documents.push(
                serde_json::to_value(entry).map_err(|e| StoreError::Database {
                    message: format!("cannot encode the entry {}: {e}", entry.id),
                })?,
            );
        }
        let received: Vec<i64> = fresh.iter().map(|e| e.received_at_ms).collect();
        // All of the notification's new groups in one statement: all or none.
        let sql = format!(
            "INSERT INTO {jobs} (id, entry, received_at_ms, state)
             SELECT id, entry, received_at_ms, 'queued'
             FROM unnest($1::text[], $2::jsonb[], $3::int8[]) AS t(id, entry, received_at_ms)
             ON CONFLICT (id) DO NOTHING
             RETURNING id"
        );
        let inserted: std::collections::HashSet<String> = self
            .pg
            .query(&sql, &[&fresh_ids, &documents, &received])
            .await?
            .iter()
            .map(|r| r.try_get::<_, String>(0).map_err(crate::pg::db_error))
            .collect::<Result<_, _>>()?;
        // Admitted by another process in the meantime: a duplicate.
        let (accepted, raced): (Vec<String>, Vec<String>) =
            fresh_ids.into_iter().partition(|id| inserted.contains(id));
        duplicates.extend(raced);
        if !accepted.is_empty() {
            self.wake.notify_waiters();
        }
        Ok(Admission::Queued {
            accepted,
            duplicates,
        })
    }

    async fn progress(&self, id: &str) -> Progress {
        let sql = format!(
            "SELECT state, error FROM {} WHERE id = $1",
            self.pg.table(JOBS)
        );
        let rows = match self.pg.query(&sql, &[&id]).await {
            Ok(rows) => rows,
            Err(e) => return Progress::Unavailable(e.to_string()),
        };
        let Some(row) = rows.first() else {
            return Progress::Unknown;
        };
        let state: Result<String, _> = row.try_get(0);
        let error: Option<String> = row.try_get(1).unwrap_or(None);
        match state.as_deref() {
            Ok("queued" | "running") => Progress::Pending,
            Ok("failed") => Progress::Failed(error.unwrap_or_default()),
            Ok(_) => Progress::Unknown,
            Err(e) => Progress::Unavailable(e.to_string()),
        }
    }

    async fn pending(&self) -> Result<usize, StoreError> {
        let sql = format!(
            "SELECT count(*) FROM {} WHERE state IN ('queued', 'running')",
            self.pg.table(JOBS)
        );
        count(&self.pg.query(&sql, &[]).await?)
    }

    async fn wait_for(&self, ids: &[String], timeout: Duration) -> bool {
        if ids.is_empty() {
            return true;
        }
        let sql = format!(
            "SELECT count(*) FROM {} WHERE id = ANY($1) AND state IN ('queued', 'running')",
            self.pg.table(JOBS)
        );
        let ids = ids.to_vec();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.pg.query(&sql, &[&ids]).await.and_then(|r| count(&r)) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read the queue; waiting on"),
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return false;
            }
            tokio::time::sleep(WAIT_POLL.min(deadline - now)).await;
        }
    }

    /// Polls for a claimable group every `poll_millis` (at once after this process admitted
    /// one); never `None`: the workers stop on their own signal.
    async fn next(&self) -> Option<Claim> {
        loop {
            match self.claim().await {
                Ok(Some(claim)) => return Some(claim),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot claim from the queue; trying again"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.poll) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    async fn complete(
        &self,
        claim: Claim,
        outcome: Outcome,
        _store: &ReportStore,
    ) -> Result<(), StoreError> {
        let (jobs, claims, reports) = (
            self.pg.table(JOBS),
            self.pg.table(CLAIMS),
            self.pg.table(REPORTS),
        );
        let (state, error, report, label): (&str, Option<String>, Option<serde_json::Value>, &str) =
            match outcome {
                Outcome::Reported(report) => {
                    let value =
                        serde_json::to_value(&report).map_err(|e| StoreError::Database {
                            message: format!("cannot encode the report {}: {e}", report.id),
                        })?;
                    ("done", None, Some(value), "reported")
                }
                Outcome::AlreadyReported => ("done", None, None, "already reported"),
                Outcome::Failed(message) => ("failed", Some(message), None, "failed"),
            };
        // Only while the row carries this claim: one statement, so the report, the row and
        // the claim change together or not at all.
        let sql = format!(
            "WITH done AS (
               UPDATE {jobs} SET state = $3, error = $4, lease_until = NULL, updated_at = now()
               WHERE id = $1 AND attempts = $2 AND state = 'running'
               RETURNING id
             ), stored AS (
               INSERT INTO {reports} (id, report)
               SELECT id, $5::jsonb FROM done WHERE $5::jsonb IS NOT NULL
               ON CONFLICT (id) DO NOTHING
             ), finished AS (
               UPDATE {claims} SET finished_at = now(), outcome = $6
               WHERE job_id = $1 AND attempt = $2 AND EXISTS (SELECT 1 FROM done)
             )
             SELECT count(*) FROM done"
        );
        let id = &claim.entry.id;
        let rows = self
            .pg
            .query(
                &sql,
                &[&id, &claim.attempt, &state, &error, &report, &label],
            )
            .await?;
        if count(&rows)? == 0 {
            return Err(StoreError::ClaimLost {
                id: id.clone(),
                attempt: claim.attempt,
            });
        }
        Ok(())
    }
}
