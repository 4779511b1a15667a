//! `rca export parquet`: an incident directory's telemetry as time-partitioned Parquet.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use rca_tools::sources::incident::IncidentDir;
use rca_tools::tables::export::{DEFAULT_PARTITION_MS, ParquetExport};

/// `rca export` subcommands.
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Write an incident directory's logs, metrics and spans (what its file sources load, or
    /// what `rca otlp serve` received) as Parquet under DIR/{logs,metrics,spans}, one file per
    /// time partition, for local or Ballista queries (`rca cluster query`).
    Parquet(ParquetArgs),
}

/// Arguments of `rca export parquet`.
#[derive(Debug, Args)]
pub struct ParquetArgs {
    /// The destination: empty, missing, or an earlier export to add to.
    pub dir: PathBuf,
    /// The incident directory to read.
    #[arg(long)]
    pub incident: PathBuf,
    /// Length of a time partition, in seconds.
    #[arg(long, default_value_t = DEFAULT_PARTITION_MS / 1000)]
    pub partition_seconds: i64,
}

/// Runs `rca export`.
pub fn run(command: ExportCommand) -> anyhow::Result<()> {
    match command {
        ExportCommand::Parquet(args) => parquet(args),
    }
}

fn parquet(args: ParquetArgs) -> anyhow::Result<()> {
    let incident = IncidentDir::open(&args.incident)
        .with_context(|| format!("cannot open {}", args.incident.display()))?;
    let partition_ms = args.partition_seconds.saturating_mul(1000);
    let mut export = ParquetExport::create(&args.dir, partition_ms)?;
    export.write_logs(incident.logs.records())?;
    export.write_metrics(incident.metrics.samples_all())?;
    export.write_spans(incident.traces.spans_all())?;
    let summary = export.finish();
    println!(
        "wrote {} files ({} bytes) to {}: {} log lines, {} metric samples, {} spans",
        summary.files.len(),
        summary.bytes,
        args.dir.display(),
        summary.rows[0],
        summary.rows[1],
        summary.rows[2]
    );
    Ok(())
}
