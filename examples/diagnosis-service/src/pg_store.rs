//! Reports, resolutions and open episodes in PostgreSQL (tables `diagnosis_reports`,
//! `diagnosis_resolutions`, `diagnosis_episodes`, see [`crate::pg`]): every process sharing the
//! database answers `GET /reports/{id}` for every report.

use std::sync::Arc;

use async_trait::async_trait;

use crate::diagnosis::StoredReport;
use crate::pg::{EPISODES, Pg, REPORTS, RESOLUTIONS};
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
}
