//! Reports, resolutions and open episodes in PostgreSQL (tables `diagnosis_reports`,
//! `diagnosis_resolutions`, `diagnosis_episodes`, see [`crate::pg`]): every process sharing the
//! database answers `GET /reports/{id}` for every report.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::diagnosis::StoredReport;
use crate::pg::{EPISODES, JOBS, Pg, REPORTS, RESOLUTIONS};
use crate::retention::Pruned;
use crate::store::{
    ReportBackend, Resolution, StoreError, is_report_id, report_from_json, resolution_from_json,
};

/// The store in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pg: Arc<Pg>,
}

impl PgStore {
    /// The store over `pg`'s tables.
    pub fn new(pg: Arc<Pg>) -> Self {
        PgStore { pg }
    }

    fn place(&self, table: &str, id: &str) -> String {
        format!("{}[{id}]", self.pg.table(table))
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Database {
        message: format!("cannot encode the record: {e}"),
    })
}

#[async_trait]
impl ReportBackend for PgStore {
    async fn put(&self, report: &StoredReport) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO {} (id, report) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET report = EXCLUDED.report, stored_at = now()",
            self.pg.table(REPORTS)
        );
        self.pg
            .execute(&sql, &[&report.id, &to_json(report)?])
            .await
            .map(|_| ())
    }

    async fn put_resolution(&self, resolution: &Resolution) -> Result<bool, StoreError> {
        let sql = format!(
            "INSERT INTO {} (id, resolution) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
            self.pg.table(RESOLUTIONS)
        );
        let written = self
            .pg
            .execute(&sql, &[&resolution.id, &to_json(resolution)?])
            .await?;
        Ok(written == 1)
    }

    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StoreError> {
        let sql = format!(
            "SELECT resolution FROM {} WHERE id = $1",
            self.pg.table(RESOLUTIONS)
        );
        let rows = self.pg.query(&sql, &[&id]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let value: serde_json::Value = row.try_get(0).map_err(crate::pg::db_error)?;
        resolution_from_json(value, &self.place(RESOLUTIONS, id)).map(Some)
    }

    async fn current_episode(&self, group: &str) -> Result<Option<String>, StoreError> {
        let sql = format!(
            "SELECT id FROM {} WHERE group_key = $1",
            self.pg.table(EPISODES)
        );
        let rows = self.pg.query(&sql, &[&group]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let id: String = row.try_get(0).map_err(crate::pg::db_error)?;
        // A damaged record starts a new episode, which replaces it.
        if !is_report_id(&id) || self.resolution(&id).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(id))
    }

    async fn open_episode(&self, group: &str, id: &str) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO {} (group_key, id) VALUES ($1, $2)
             ON CONFLICT (group_key) DO UPDATE SET id = EXCLUDED.id, opened_at = now()",
            self.pg.table(EPISODES)
        );
        self.pg.execute(&sql, &[&group, &id]).await.map(|_| ())
    }

    async fn exists(&self, id: &str) -> bool {
        let sql = format!("SELECT 1 FROM {} WHERE id = $1", self.pg.table(REPORTS));
        match self.pg.query(&sql, &[&id]).await {
            Ok(rows) => !rows.is_empty(),
            Err(e) => {
                tracing::warn!(%id, error = %e, "cannot tell whether the report is stored");
                false
            }
        }
    }

    async fn get(&self, id: &str) -> Result<StoredReport, StoreError> {
        let sql = format!(
            "SELECT report FROM {} WHERE id = $1",
            self.pg.table(REPORTS)
        );
        let rows = self.pg.query(&sql, &[&id]).await?;
        let Some(row) = rows.first() else {
            return Err(StoreError::NotFound(id.to_string()));
        };
        let value: serde_json::Value = row.try_get(0).map_err(crate::pg::db_error)?;
        let mut report = report_from_json(value, &self.place(REPORTS, id))?;
        report.resolution = self.resolution(id).await?;
        Ok(report)
    }

    async fn ids(&self) -> Result<Vec<String>, StoreError> {
        // Byte order, as the file store sorts.
        let sql = format!(
            "SELECT id FROM {} ORDER BY id COLLATE \"C\"",
            self.pg.table(REPORTS)
        );
        let rows = self.pg.query(&sql, &[]).await?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(crate::pg::db_error))
            .collect()
    }

    /// One statement: the reports stored before `max_age` ago, and those past `max_bytes`
    /// (their stored size, newest kept first), go with their resolutions and the episodes
    /// naming them; finished jobs older than `max_age` go too (their claims cascade).
    async fn prune(&self, max_age: Duration, max_bytes: u64) -> Result<Pruned, StoreError> {
        let sql = format!(
            "WITH sized AS (
               SELECT id, stored_at, pg_column_size(report)::bigint AS size,
                      sum(pg_column_size(report)::bigint)
                        OVER (ORDER BY stored_at DESC, id DESC) AS running
               FROM {reports}),
             doomed AS (
               SELECT id, size FROM sized
               WHERE stored_at < now() - make_interval(secs => $1) OR running > $2::bigint),
             gone AS (DELETE FROM {reports} WHERE id IN (SELECT id FROM doomed) RETURNING id),
             resolutions AS (DELETE FROM {resolutions} WHERE id IN (SELECT id FROM gone)),
             episodes AS (DELETE FROM {episodes} WHERE id IN (SELECT id FROM gone)),
             jobs AS (DELETE FROM {jobs} WHERE state IN ('done', 'failed')
                        AND updated_at < now() - make_interval(secs => $1))
             SELECT (SELECT count(*) FROM gone)::bigint,
                    (SELECT coalesce(sum(size), 0) FROM doomed)::bigint,
                    (SELECT coalesce(sum(size), 0) FROM sized
                       WHERE id NOT IN (SELECT id FROM doomed))::bigint",
            reports = self.pg.table(REPORTS),
            resolutions = self.pg.table(RESOLUTIONS),
            episodes = self.pg.table(EPISODES),
            jobs = self.pg.table(JOBS),
        );
        let seconds = max_age.as_secs_f64();
        let budget = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        let rows = self.pg.query(&sql, &[&seconds, &budget]).await?;
        let get = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = rows
                .first()
                .ok_or_else(|| StoreError::Database {
                    message: "pruning returned no row".into(),
                })?
                .try_get(i)
                .map_err(crate::pg::db_error)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(Pruned {
            reports: get(0)?,
            bytes: get(1)?,
            kept_bytes: get(2)?,
        })
    }
}
