//! Long-term memory of diagnoses in PostgreSQL (table `diagnosis_memory`, see [`crate::pg`]):
//! every process of a service remembers its diagnoses there and is offered the past incidents
//! (and past explorer actions) of all of them.
//!
//! One table holds every store, each under its own `namespace`: `incidents` (past incidents,
//! offered to the planner) and `explorer-<name>` (the past actions of explorer `<name>`). A row
//! is one entry: `id` (unique in its namespace; inserting an id again replaces the entry, which
//! keeps its place), `text`, `vector` (`real[]`), `payload` (JSON), the `writer` (the process's
//! `worker_name`), `inserted_at` and `updated_at`.
//!
//! A search reads the namespace's `postgres.memory_search_limit` most recently inserted
//! entries (10 000 by default) and ranks them by cosine similarity in the process, as the
//! in-memory index does: best first, ties in insertion order. A store holds vectors of one
//! dimension (its first entry's); an entry or a query of another dimension is
//! [`StoreError::DimensionMismatch`]. Every statement is bounded by `postgres.timeout_seconds`.

use std::sync::Arc;

use async_trait::async_trait;
use rca_agents::orchestra::ExplorerStores;
use rca_core::StoreError;
use rca_core::memory::{LongTermMemory, MemoryEntry};
use rca_llm::redact::Redactor;
use rca_llm::vectors::EmbeddingMatrix;

use crate::memory::SharedMemory;
use crate::pg::{MEMORY, Pg};

/// The namespace of past incidents.
pub const INCIDENTS_NAMESPACE: &str = "incidents";

/// The namespace of explorer `name`'s past actions: `explorer-<name>`.
pub fn explorer_namespace(name: &str) -> String {
    format!("explorer-{name}")
}

/// One long-term memory store: the entries of one namespace of `diagnosis_memory`.
#[derive(Debug, Clone)]
pub struct PgLongTermMemory {
    pg: Arc<Pg>,
    namespace: String,
    writer: String,
    search_limit: usize,
}

/// A database failure as a memory store error.
fn io(e: crate::store::StoreError) -> StoreError {
    StoreError::Io {
        message: e.to_string(),
    }
}

impl PgLongTermMemory {
    /// The store `namespace` in `pg`'s table, searching at most `postgres.memory_search_limit`
    /// entries and recording `postgres.worker_name` as the writer of what it inserts.
    pub fn new(pg: Arc<Pg>, namespace: impl Into<String>) -> Self {
        let config = pg.config();
        PgLongTermMemory {
            writer: config.worker(),
            search_limit: config.memory_search_limit.max(1),
            namespace: namespace.into(),
            pg,
        }
    }

    /// The same store searching at most `limit` (at least 1) of the most recent entries.
    pub fn with_search_limit(mut self, limit: usize) -> Self {
        self.search_limit = limit.max(1);
        self
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn corrupt(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            location: format!("{}[{}]", self.pg.table(MEMORY), self.namespace),
            message: message.to_string(),
        }
    }

    /// The dimension of the namespace's vectors (`None`: it has no entry).
    async fn dimension(&self) -> Result<Option<usize>, StoreError> {
        let sql = format!(
            "SELECT cardinality(vector) FROM {} WHERE namespace = $1 LIMIT 1",
            self.pg.table(MEMORY)
        );
        let rows = self.pg.query(&sql, &[&self.namespace]).await.map_err(io)?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let d: i32 = row.try_get(0).map_err(|e| self.corrupt(e))?;
        Ok(Some(usize::try_from(d).unwrap_or(0)))
    }
}

#[async_trait]
impl LongTermMemory for PgLongTermMemory {
    async fn insert(&self, entry: MemoryEntry) -> Result<(), StoreError> {
        let dimension = i32::try_from(entry.vector.len()).map_err(|_| StoreError::Io {
            message: format!("a vector of {} dimensions is too long", entry.vector.len()),
        })?;
        // Inserted (or replacing the entry with its id) only when the namespace is empty or
        // holds vectors of this dimension: every entry has the dimension of the first.
        let sql = format!(
            "INSERT INTO {t} (namespace, id, text, vector, payload, writer)
             SELECT $1::text, $2::text, $3::text, $4::real[], $5::jsonb, $6::text
             WHERE NOT EXISTS (
               SELECT 1 FROM (SELECT vector FROM {t} WHERE namespace = $1::text LIMIT 1) one
               WHERE cardinality(one.vector) <> $7::integer)
             ON CONFLICT (namespace, id) DO UPDATE SET text = EXCLUDED.text,
               vector = EXCLUDED.vector, payload = EXCLUDED.payload, writer = EXCLUDED.writer,
               updated_at = now()",
            t = self.pg.table(MEMORY)
        );
        let written = self
            .pg
            .execute(
                &sql,
                &[
                    &self.namespace,
                    &entry.id,
                    &entry.text,
                    &entry.vector,
                    &entry.payload,
                    &self.writer,
                    &dimension,
                ],
            )
            .await
            .map_err(io)?;
        if written == 1 {
            return Ok(());
        }
        match self.dimension().await? {
            Some(expected) => Err(StoreError::DimensionMismatch {
                expected,
                found: entry.vector.len(),
            }),
            None => Err(StoreError::Io {
                message: format!("the entry {} was not stored", entry.id),
            }),
        }
    }

    async fn nearest(
        &self,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, StoreError> {
        // The most recent entries, in insertion order (ties keep it).
        let sql = format!(
            "SELECT id, text, vector, payload FROM (
               SELECT seq, id, text, vector, payload FROM {} WHERE namespace = $1
               ORDER BY seq DESC LIMIT $2) recent
             ORDER BY seq",
            self.pg.table(MEMORY)
        );
        let limit = i64::try_from(self.search_limit).unwrap_or(i64::MAX);
        let rows = self
            .pg
            .query(&sql, &[&self.namespace, &limit])
            .await
            .map_err(io)?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            let decoded: Result<MemoryEntry, tokio_postgres::Error> = (|| {
                Ok(MemoryEntry {
                    id: row.try_get(0)?,
                    text: row.try_get(1)?,
                    vector: row.try_get(2)?,
                    payload: row.try_get(3)?,
                })
            })();
            entries.push(decoded.map_err(|e| self.corrupt(e))?);
        }
        let Some(first) = entries.first() else {
            return Ok(Vec::new());
        };
        if first.vector.len() != vector.len() {
            return Err(StoreError::DimensionMismatch {
                expected: first.vector.len(),
                found: vector.len(),
            });
        }
        let rows: Vec<Vec<f32>> = entries.iter().map(|e| e.vector.clone()).collect();
        let matrix = EmbeddingMatrix::from_rows(&rows).map_err(|e| self.corrupt(e))?;
        let ranked = matrix.nearest(vector, k).map_err(|e| self.corrupt(e))?;
        Ok(ranked
            .into_iter()
            .filter_map(|(i, score)| entries.get(i).map(|e| (e.clone(), score)))
            .collect())
    }

    async fn count(&self) -> Result<usize, StoreError> {
        let sql = format!(
            "SELECT count(*) FROM {} WHERE namespace = $1",
            self.pg.table(MEMORY)
        );
        let rows = self.pg.query(&sql, &[&self.namespace]).await.map_err(io)?;
        let n: i64 = match rows.first() {
            Some(row) => row.try_get(0).map_err(|e| self.corrupt(e))?,
            None => 0,
        };
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

/// The long-term memory of diagnoses in `pg`'s table, shared by every process using it: the
/// namespace `incidents` and one `explorer-<name>` per explorer, redacted by `redactor`.
pub fn shared_memory(pg: &Arc<Pg>, redactor: &Redactor) -> SharedMemory {
    let incidents = Arc::new(PgLongTermMemory::new(Arc::clone(pg), INCIDENTS_NAMESPACE));
    let pg = Arc::clone(pg);
    let open: ExplorerStores = Arc::new(move |name: &str| {
        let store = PgLongTermMemory::new(Arc::clone(&pg), explorer_namespace(name));
        Ok(Arc::new(store) as Arc<dyn LongTermMemory>)
    });
    crate::memory::redacted(incidents, open, redactor)
}
