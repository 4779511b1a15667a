//! The PostgreSQL connection the shared queue ([`crate::pg_queue::PgQueue`]) and store
//! ([`crate::pg_store::PgStore`]) use, and their tables.
//!
//! One connection per process, reopened when it breaks; every wait is bounded: connecting and
//! each statement by `postgres.timeout_seconds` (on the server as `statement_timeout`, and on
//! the client, which gives up a little later should the server not answer at all).
//!
//! The tables, in `postgres.schema` (created with it when missing, by the first process to
//! start; later ones find them):
//!
//! - `diagnosis_jobs`: one row per accepted alert group (`id` is its report id), its `entry`
//!   (the inbox entry as JSON), `state` (`queued`, `running`, `done`, `failed`), `attempts`
//!   (the number of the latest claim), the claiming `worker` and its `lease_until`, `error`;
//! - `diagnosis_claims`: one row per claim (`job_id`, `attempt`, `worker`, `claimed_at`,
//!   `finished_at` and `outcome` once completed);
//! - `diagnosis_reports`, `diagnosis_resolutions`: one JSON document per report id;
//! - `diagnosis_episodes`: the open episode (report id) of each alert group key;
//! - `diagnosis_memory`: the long-term memory of diagnoses (see [`crate::pg_memory`]), one row
//!   per entry (`namespace`, `id`, `text`, `vector`, `payload`, the `writer` process).
//!
//! Over TLS with `postgres.ca_file` (see [`tls`]). Every error carries its whole cause: the
//! server's severity, SQLSTATE code, message, detail and hint, or what the network or the TLS
//! handshake said ("Connection refused", "password authentication failed for user …",
//! "certificate verify failed: …"), headed by the server it was connecting to.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Socket};

use crate::config::PostgresConfig;
use crate::store::StoreError;

#[path = "pg_tls.rs"]
pub mod tls;

/// The table of accepted alert groups.
pub const JOBS: &str = "diagnosis_jobs";
/// The table of claims.
pub const CLAIMS: &str = "diagnosis_claims";
/// The table of reports.
pub const REPORTS: &str = "diagnosis_reports";
/// The table of resolutions.
pub const RESOLUTIONS: &str = "diagnosis_resolutions";
/// The table of open episodes.
pub const EPISODES: &str = "diagnosis_episodes";
/// The table of long-term memory entries.
pub const MEMORY: &str = "diagnosis_memory";

/// A database error as a [`StoreError`], with its whole cause (see [`describe`]).
pub(crate) fn db_error(e: tokio_postgres::Error) -> StoreError {
    StoreError::Database {
        message: describe(&e),
    }
}

/// A tokio-postgres error with everything it knows, on one line: for an error the server
/// reported, its severity, SQLSTATE code, message, detail and hint (`FATAL 28P01: password
/// authentication failed for user "rca"`); for any other, its own words followed by each
/// cause's (`error connecting to server: Connection refused (os error 111)`). tokio-postgres's
/// own `Display` shows only the first part ("db error", "error connecting to server").
pub fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return describe_db(db);
    }
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(current) = cause {
        let text = match current.downcast_ref::<tokio_postgres::error::DbError>() {
            Some(db) => describe_db(db),
            None => current.to_string(),
        };
        // A wrapper often repeats its cause's words.
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = current.source();
    }
    parts.join(": ")
}

/// An error the server reported: severity, code, message, then detail, hint and the object.
fn describe_db(db: &tokio_postgres::error::DbError) -> String {
    let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    if let Some(detail) = db.detail() {
        text.push_str(&format!("; detail: {detail}"));
    }
    if let Some(hint) = db.hint() {
        text.push_str(&format!("; hint: {hint}"));
    }
    if let Some(table) = db.table() {
        match db.schema() {
            Some(schema) => text.push_str(&format!("; table {schema}.{table}")),
            None => text.push_str(&format!("; table {table}")),
        }
    }
    if let Some(constraint) = db.constraint() {
        text.push_str(&format!("; constraint {constraint}"));
    }
    text.replace('\n', " ")
}

/// The servers of a connection string, as `host:port` (for error messages; never the
/// password).
fn servers(url: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let (ports, addrs) = (url.get_ports(), url.get_hostaddrs());
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut names: Vec<String> = url
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| match host {
            Host::Tcp(name) => match addrs.get(i) {
                Some(addr) => format!("{name}:{} (at {addr})", port(i)),
                None => format!("{name}:{}", port(i)),
            },
            Host::Unix(dir) => format!("{}/.s.PGSQL.{}", dir.display(), port(i)),
        })
        .collect();
    if names.is_empty() {
        names = addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| format!("{addr}:{}", port(i)))
            .collect();
    }
    names.join(", ")
}

/// The shared database of a service's processes.
pub struct Pg {
    config: PostgresConfig,
    /// `config.url`, parsed.
    url: tokio_postgres::Config,
    /// `None` without `ca_file`.
    tls: Option<tls::PgTls>,
    schema: String,
    client: Mutex<Option<Arc<Client>>>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Pg {
    /// Connects (over TLS with `ca_file`, as the URL's `sslmode` says) and creates the
    /// schema and the tables when they are missing. A configuration error (an unreadable
    /// `ca_file`, `sslmode=require` without one, …) is reported before connecting.
    pub async fn connect(config: &PostgresConfig) -> Result<Arc<Pg>, StoreError> {
        let invalid = |message: String| StoreError::Database { message };
        config.validate().map_err(invalid)?;
        let url: tokio_postgres::Config = config.url.parse().map_err(|e| {
            invalid(format!(
                "`postgres.url` is not a connection string: {}",
                describe(&e)
            ))
        })?;
        let tls = tls::PgTls::from_config(config).map_err(invalid)?;
        let pg = Pg {
            config: config.clone(),
            url,
            tls,
            schema: quote(config.schema()),
            client: Mutex::new(None),
        };
        let mut client = pg.open().await?;
        pg.create_tables(&mut client).await?;
        *pg.client.lock().await = Some(Arc::new(client));
        Ok(Arc::new(pg))
    }

    /// The configuration.
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// The longest any one statement may take.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.timeout_seconds)
    }

    /// `name` qualified with the schema, quoted.
    pub fn table(&self, name: &str) -> String {
        format!("{}.{}", self.schema, quote(name))
    }

    async fn open(&self) -> Result<Client, StoreError> {
        let timeout = self.timeout();
        let client = match &self.tls {
            Some(tls) => self.open_with(tls.clone()).await?,
            None => self.open_with(NoTls).await?,
        };
        let setup = format!(
            "SET statement_timeout = {}; SET lock_timeout = {};",
            timeout.as_millis(),
            timeout.as_millis()
        );
        bounded(timeout, client.batch_execute(&setup)).await?;
        Ok(client)
    }

    /// Connects with `tls` (tokio-postgres applies the URL's `sslmode`) and runs the
    /// connection on its own task.
    async fn open_with<T>(&self, tls: T) -> Result<Client, StoreError>
    where
        T: MakeTlsConnect<Socket>,
        T::Stream: Send + 'static,
    {
        let timeout = self.timeout();
        let connecting = self.url.connect(tls);
        let (client, connection) = tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| StoreError::Database {
                message: format!(
                    "connecting to {}: no connection within {} s",
                    servers(&self.url),
                    timeout.as_secs()
                ),
            })?
            .map_err(|e| StoreError::Database {
                message: format!("connecting to {}: {}", servers(&self.url), describe(&e)),
            })?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %describe(&e), "postgres connection closed");
            }
        });
        Ok(client)
    }

    async fn create_tables(&self, client: &mut Client) -> Result<(), StoreError> {
        let (jobs, claims) = (self.table(JOBS), self.table(CLAIMS));
        let (reports, resolutions) = (self.table(REPORTS), self.table(RESOLUTIONS));
        let (episodes, memory) = (self.table(EPISODES), self.table(MEMORY));
        let waiting = quote(&format!("{JOBS}_waiting"));
        let recent = quote(&format!("{MEMORY}_recent"));
        let schema = &self.schema;
        let ddl = format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {jobs} (
               id text PRIMARY KEY,
               entry jsonb NOT NULL,
               received_at_ms bigint NOT NULL,
               state text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
               attempts integer NOT NULL DEFAULT 0,
               worker text,
               lease_until timestamptz,
               error text,
               updated_at timestamptz NOT NULL DEFAULT now());
             CREATE INDEX IF NOT EXISTS {waiting} ON {jobs} (received_at_ms, id)
               WHERE state IN ('queued', 'running');
             CREATE TABLE IF NOT EXISTS {claims} (
               job_id text NOT NULL REFERENCES {jobs} (id) ON DELETE CASCADE,
               attempt integer NOT NULL,
               worker text NOT NULL,
               claimed_at timestamptz NOT NULL DEFAULT now(),
               finished_at timestamptz,
               outcome text,
               PRIMARY KEY (job_id, attempt));
             CREATE TABLE IF NOT EXISTS {reports} (
               id text PRIMARY KEY,
               report jsonb NOT NULL,
               stored_at timestamptz NOT NULL DEFAULT now());
             CREATE TABLE IF NOT EXISTS {resolutions} (
               id text PRIMARY KEY,
               resolution jsonb NOT NULL,
               recorded_at timestamptz NOT NULL DEFAULT now());
             CREATE TABLE IF NOT EXISTS {episodes} (
               group_key text PRIMARY KEY,
               id text NOT NULL,
               opened_at timestamptz NOT NULL DEFAULT now());
             CREATE TABLE IF NOT EXISTS {memory} (
               namespace text NOT NULL,
               id text NOT NULL,
               seq bigserial NOT NULL,
               text text NOT NULL,
               vector real[] NOT NULL,
               payload jsonb NOT NULL,
               writer text NOT NULL,
               inserted_at timestamptz NOT NULL DEFAULT now(),
               updated_at timestamptz NOT NULL DEFAULT now(),
               PRIMARY KEY (namespace, id));
             CREATE INDEX IF NOT EXISTS {recent} ON {memory} (namespace, seq DESC);"
        );
        let timeout = self.timeout();
        // Processes starting together create the tables one after the other (`IF NOT EXISTS`
        // alone races on the catalog).
        let lock_key = format!("diagnosis-service {schema}");
        let work = async {
            let tx = client.transaction().await.map_err(db_error)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1)::bigint)",
                &[&lock_key],
            )
            .await
            .map_err(db_error)?;
            tx.batch_execute(&ddl).await.map_err(db_error)?;
            tx.commit().await.map_err(db_error)
        };
        tokio::time::timeout(timeout * 2, work)
            .await
            .map_err(|_| StoreError::Database {
                message: format!("creating the tables took over {} s", 2 * timeout.as_secs()),
            })?
    }

    /// The connection, reopened when it was closed.
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(client));
        }
        let client = Arc::new(self.open().await?);
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    /// Runs one statement, bounded in time, and returns its rows.
    pub async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        bounded(self.timeout(), client.query(sql, params)).await
    }

    /// Runs one statement, bounded in time, and returns how many rows it changed.
    pub async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        bounded(self.timeout(), client.execute(sql, params)).await
    }
}

/// Awaits `work` for at most `timeout` and a second (the server enforces `timeout` itself;
/// the margin only covers a server that does not answer at all).
async fn bounded<T>(
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    let limit = timeout + Duration::from_secs(1);
    tokio::time::timeout(limit, work)
        .await
        .map_err(|_| StoreError::Database {
            message: format!("no answer within {} s", limit.as_secs()),
        })?
        .map_err(db_error)
}

/// Quotes an SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
