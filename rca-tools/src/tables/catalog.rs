//! [`TelemetryTables`]: an incident's telemetry registered as DataFusion tables, queried
//! through the sandbox. Everything in this file needs the `sql` feature.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions};
use rca_core::SourceError;
use rca_core::source::{LogRecord, MetricSample, RecordStream, Row, Span, SqlSource, Value};

use super::arrow_rows::column_type;
use super::engine::{QueryResult, TableEngine};
use super::error::TableError;
use super::records::{logs_batch, metrics_batch, spans_batch};
use super::sandbox::{SandboxLimits, run_sandboxed};
use super::schema::{ColumnInfo, TableSchema};

/// The file formats a table can be read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableFormat {
    /// Comma-separated values.
    Csv,
    /// Gzip-compressed CSV.
    GzipCsv,
    /// Parquet files.
    Parquet,
}

impl TableFormat {
    /// The format a file name suggests (`.csv`, `.csv.gz`, `.parquet`), if any.
    pub fn from_path(path: &Path) -> Option<TableFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".csv.gz") {
            Some(TableFormat::GzipCsv)
        } else if name.ends_with(".csv") {
            Some(TableFormat::Csv)
        } else if name.ends_with(".parquet") {
            Some(TableFormat::Parquet)
        } else {
            None
        }
    }

    fn extension(self) -> &'static str {
        match self {
            TableFormat::Csv => ".csv",
            TableFormat::GzipCsv => ".csv.gz",
            TableFormat::Parquet => ".parquet",
        }
    }
}

/// How to read CSV files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvOptions {
    /// Whether the first line names the columns.
    pub has_header: bool,
    /// The field separator.
    pub delimiter: u8,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            has_header: true,
            delimiter: b',',
        }
    }
}

/// Telemetry tables in a DataFusion session whose every query runs in the read-only sandbox.
///
/// Tables come from CSV, gzip CSV or Parquet files, from Arrow record batches, or from
/// `rca-core` records (logs, metric samples, spans) in the standard layouts with times in
/// epoch milliseconds.
pub struct TelemetryTables {
    ctx: SessionContext,
    limits: SandboxLimits,
    names: Mutex<Vec<String>>,
}

impl TelemetryTables {
    /// An empty set of tables under `limits` (the memory limit becomes the session's pool).
    pub fn new(limits: SandboxLimits) -> Result<Self, TableError> {
        // No spilling: a sandboxed query writes nothing, and over its memory pool it fails.
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(limits.memory_bytes, 1.0)
            .with_disk_manager_builder(
                DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
            )
            .build_arc()
            .map_err(|e| TableError::Execution {
                message: e.to_string(),
            })?;
        let ctx = SessionContext::new_with_config_rt(session_config(), runtime);
        ctx.register_udaf(super::templates::log_templates_udaf());
        Ok(TelemetryTables {
            ctx,
            limits,
            names: Mutex::new(Vec::new()),
        })
    }

    /// Tables on a session built elsewhere (a Ballista cluster's, for one); the session should
    /// have [`session_config`]'s settings and the workspace's functions.
    #[cfg(feature = "ballista")]
    pub(crate) fn with_context(ctx: SessionContext, limits: SandboxLimits) -> Self {
        TelemetryTables {
            ctx,
            limits,
            names: Mutex::new(Vec::new()),
        }
    }

    /// The sandbox limits.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// The DataFusion session, for hosts that register their own table providers. Queries
    /// run directly on it bypass the sandbox.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    fn check_name(name: &str) -> Result<(), TableError> {
        if crate::lifecycle_identifier(name) {
            Ok(())
        } else {
            Err(TableError::Register {
                table: name.to_string(),
                message: "table names must be lower-case identifiers (letters, digits, `_`)".into(),
            })
        }
    }

    fn remember(&self, name: &str) {
        if let Ok(mut names) = self.names.lock()
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
            names.sort();
        }
    }

    /// Registers a file as table `name`.
    pub async fn register_file(
        &self,
        name: &str,
        path: &Path,
        format: TableFormat,
        csv: CsvOptions,
    ) -> Result<(), TableError> {
        Self::check_name(name)?;
        let reg = |e: datafusion::error::DataFusionError| TableError::Register {
            table: name.to_string(),
            message: format!("{}: {e}", path.display()),
        };
        if !path.is_file() {
            return Err(TableError::Register {
                table: name.to_string(),
                message: format!("{} is not a file", path.display()),
            });
        }
        let location = path.to_string_lossy();
        // A file whose name does not end in the format's extension is read all the same.
        let actual = path
            .file_name()
            .and_then(|f| f.to_str())
            .map(|f| {
                let lower = f.to_ascii_lowercase();
                if lower.ends_with(format.extension()) {
                    format.extension().to_string()
                } else {
                    f.rsplit_once('.')
                        .map(|(_, e)| format!(".{e}"))
                        .unwrap_or_default()
                }
            })
            .unwrap_or_default();
        match format {
            TableFormat::Csv | TableFormat::GzipCsv => {
                let compression = if format == TableFormat::GzipCsv {
                    FileCompressionType::GZIP
                } else {
                    FileCompressionType::UNCOMPRESSED
                };
                let options = CsvReadOptions::new()
                    .has_header(csv.has_header)
                    .delimiter(csv.delimiter)
                    .file_extension(&actual)
                    .file_compression_type(compression);
                self.ctx
                    .register_csv(name, &*location, options)
                    .await
                    .map_err(reg)?;
            }
            TableFormat::Parquet => {
                let options = ParquetReadOptions::default().file_extension(&actual);
                self.ctx
                    .register_parquet(name, &*location, options)
                    .await
                    .map_err(reg)?;
            }
        }
        self.remember(name);
        Ok(())
    }

    /// Registers a directory of Parquet files (searched recursively, such as one signal of
    /// `rca export parquet`) as one table `name`. Each file is read by one partition, in
    /// order, so [`log_templates`](super::templates) mines every file's lines in file order.
    pub async fn register_parquet_dir(&self, name: &str, dir: &Path) -> Result<(), TableError> {
        Self::check_name(name)?;
        if !dir.is_dir() {
            return Err(TableError::Register {
                table: name.to_string(),
                message: format!("{} is not a directory", dir.display()),
            });
        }
        let location = format!("{}/", dir.to_string_lossy().trim_end_matches('/'));
        self.ctx
            .register_parquet(name, &location, ParquetReadOptions::default())
            .await
            .map_err(|e| TableError::Register {
                table: name.to_string(),
                message: format!("{}: {e}", dir.display()),
            })?;
        self.remember(name);
        Ok(())
    }

    /// Registers every `.csv`, `.csv.gz` and `.parquet` file directly in `dir` as a table
    /// named after the file (lower-cased, non-alphanumerics as `_`); returns the names.
    pub async fn register_dir(
        &self,
        dir: &Path,
        csv: CsvOptions,
    ) -> Result<Vec<String>, TableError> {
        let err = |e: std::io::Error| TableError::Register {
            table: dir.display().to_string(),
            message: e.to_string(),
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .filter_map(|p| TableFormat::from_path(&p).map(|f| (p, f)))
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut names = Vec::new();
        for (path, format) in files {
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            let stem = file
                .to_ascii_lowercase()
                .trim_end_matches(format.extension())
                .to_string();
            let name = table_name(&stem);
            self.register_file(&name, &path, format, csv).await?;
            names.push(name);
        }
        Ok(names)
    }

    /// Registers in-memory Arrow record batches (all of one schema) as table `name`.
    pub fn register_batches(
        &self,
        name: &str,
        batches: Vec<RecordBatch>,
    ) -> Result<(), TableError> {
        Self::check_name(name)?;
        let reg = |message: String| TableError::Register {
            table: name.to_string(),
            message,
        };
        let schema = batches
            .first()
            .map(|b| b.schema())
            .ok_or_else(|| reg("no record batches given".into()))?;
        let table = MemTable::try_new(schema, vec![batches]).map_err(|e| reg(e.to_string()))?;
        self.ctx
            .register_table(name, Arc::new(table))
            .map_err(|e| reg(e.to_string()))?;
        self.remember(name);
        Ok(())
    }

    /// Registers log records as table `name` (see the module docs for the layout).
    pub fn register_logs(&self, name: &str, records: &[LogRecord]) -> Result<(), TableError> {
        self.register_batches(name, vec![logs_batch(name, records)?])
    }

    /// Registers metric samples as table `name`.
    pub fn register_metrics(&self, name: &str, samples: &[MetricSample]) -> Result<(), TableError> {
        self.register_batches(name, vec![metrics_batch(name, samples)?])
    }

    /// Registers spans as table `name`.
    pub fn register_spans(&self, name: &str, spans: &[Span]) -> Result<(), TableError> {
        self.register_batches(name, vec![spans_batch(name, spans)?])
    }

    /// Registers an incident directory's telemetry as the tables `logs`, `metrics` and
    /// `spans` (everything its sources loaded, so nothing at or after the detection time).
    pub fn register_incident(
        &self,
        incident: &crate::sources::incident::IncidentDir,
    ) -> Result<(), TableError> {
        self.register_logs("logs", incident.logs.records())?;
        self.register_metrics("metrics", incident.metrics.samples_all())?;
        self.register_spans("spans", incident.traces.spans_all())
    }

    /// The registered tables with their typed columns, by name.
    pub async fn schemas(&self) -> Result<Vec<TableSchema>, TableError> {
        let names = self.names.lock().map(|n| n.clone()).unwrap_or_default();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let provider = self.ctx.table_provider(name.as_str()).await.map_err(|e| {
                TableError::Execution {
                    message: e.to_string(),
                }
            })?;
            let columns = provider
                .schema()
                .fields()
                .iter()
                .map(|f| ColumnInfo::new(f.name().clone(), column_type(f.data_type())))
                .collect();
            out.push(TableSchema::new(name, columns));
        }
        Ok(out)
    }

    /// Runs one read-only query in the sandbox.
    pub async fn query(&self, sql: &str, params: &[Value]) -> Result<QueryResult, TableError> {
        run_sandboxed(&self.ctx, &self.limits, sql, params).await
    }
}

/// The session settings of every telemetry session, local or on a cluster: no information
/// schema; a file is scanned whole by one partition and scans are never repartitioned
/// round-robin, so order-sensitive aggregates (template mining) see each file's rows in file
/// order wherever they run.
pub fn session_config() -> SessionConfig {
    let mut config = SessionConfig::new()
        .with_information_schema(false)
        .with_repartition_file_scans(false)
        .with_round_robin_repartition(false);
    // Strings as plain UTF-8 arrays in every plan, so local and distributed runs type alike.
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    config
}

fn table_name(stem: &str) -> String {
    let mut s: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        s.insert(0, 't');
    }
    s
}

#[async_trait]
impl TableEngine for TelemetryTables {
    async fn schemas(&self) -> Result<Vec<TableSchema>, SourceError> {
        Ok(TelemetryTables::schemas(self).await?)
    }

    async fn run(&self, sql: &str, params: &[Value]) -> Result<QueryResult, SourceError> {
        Ok(self.query(sql, params).await?)
    }
}

#[async_trait]
impl SqlSource for TelemetryTables {
    async fn tables(&self) -> Result<Vec<(String, Vec<String>)>, SourceError> {
        Ok(TelemetryTables::schemas(self)
            .await?
            .into_iter()
            .map(|t| (t.name, t.columns.into_iter().map(|c| c.name).collect()))
            .collect())
    }

    async fn query(&self, sql: &str, params: &[Value]) -> Result<RecordStream<Row>, SourceError> {
        let result = TelemetryTables::query(self, sql, params).await?;
        Ok(Box::pin(futures::stream::iter(
            result.to_rows().into_iter().map(Ok),
        )))
    }
}
