//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

use clap::{CommandFactory, Parser, Subcommand};

mod bench_agents;
mod bench_scale;
mod bench_stability;
#[cfg(feature = "ballista")]
mod cluster_cmd;
mod config;
mod diagnose;
mod eval_cmd;
mod eval_nezha;
#[cfg(feature = "sql")]
mod export_cmd;
mod flash_cmd;
#[cfg(feature = "sql")]
mod generated_tools;
#[cfg(feature = "sql")]
mod lifecycle;
mod logs_cmd;
#[cfg(feature = "mcp")]
mod mcp_cmd;
mod mitigate;
mod numbers;
#[cfg(feature = "otlp")]
mod otlp_cmd;
mod progress;
mod react_cmd;
#[cfg(any(feature = "otlp", feature = "mcp"))]
mod serving;

/// The exit statuses of `rca diagnose`, `rca react` and `rca flash` (shown in `rca --help`).
const EXIT_STATUSES: &str = "Exit status (diagnose, react, flash): 0 the run established a root \
cause; 3 the run finished without one (react's controller did not finalize, flash's guide did not \
establish one, diagnose found nothing pointing at a component); the report and trajectory are \
still written. 1 the command failed (bad input, unreadable files, a run that could not finish); \
2 the command line is wrong.";

/// Diagnose cloud incidents with tool-augmented agents, and mitigate them safely.
#[derive(Debug, Parser)]
#[command(name = "rca", version, about, long_about = None, after_help = EXIT_STATUSES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Diagnose an incident directory (no model needed): ranked root causes with their
    /// evidence chain; saves the trajectory.
    Diagnose(diagnose::DiagnoseArgs),
    /// Diagnose an incident directory with the RCAgent controller (ReAct with the real tools
    /// and both experts; its deterministic policy plays the model when none is configured).
    React(react_cmd::ReactArgs),
    /// Follow a troubleshooting guide on an incident directory with FLASH (the configured
    /// model reads the status and plans under the guide's rules; without one the deterministic
    /// policy runs the guide); `human_query` steps ask on the terminal.
    Flash(flash_cmd::FlashArgs),
    /// Mitigate a simulated fault safely with STRATUS (TNR), or run its ablation benchmark.
    Mitigate(mitigate::MitigateArgs),
    /// Log clustering: templates and segments.
    Logs(logs_cmd::LogsArgs),
    /// Evaluations on benchmark datasets.
    Eval(eval_cmd::EvalArgs),
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        command: bench_stability::BenchCommand,
    },
    /// Work with configuration files.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Print the JSON Schema of the `--json` diagnosis report (published as
    /// docs/report.schema.json).
    ReportSchema,
    /// Generated SQL tools: pre-generate them from past incidents.
    #[cfg(feature = "sql")]
    #[command(subcommand)]
    Tools(generated_tools::ToolsCommand),
    /// Tool-lifecycle benchmark: warm runs (reused tools) against cold runs.
    #[cfg(feature = "sql")]
    LifecycleBench(lifecycle::BenchArgs),
    /// Telemetry at rest: write an incident's telemetry as time-partitioned Parquet.
    #[cfg(feature = "sql")]
    #[command(subcommand)]
    Export(export_cmd::ExportCommand),
    /// Past one machine: a Ballista scheduler and executors, template mining and frequency
    /// shift over Parquet locally or on the cluster, and their benchmark.
    #[cfg(feature = "ballista")]
    #[command(subcommand)]
    Cluster(cluster_cmd::ClusterCommand),
    /// OpenTelemetry in: receive OTLP/HTTP exports into an incident directory.
    #[cfg(feature = "otlp")]
    #[command(subcommand)]
    Otlp(otlp_cmd::OtlpCommand),
    /// Serve the tools and the diagnosis to any agent host over MCP (Model Context Protocol):
    /// stdio by default, Streamable HTTP with `--http` (a bearer token required).
    #[cfg(feature = "mcp")]
    Mcp(mcp_cmd::McpArgs),
}

/// A run that finished without establishing a root cause: not a success (exit status
/// [`EXIT_NO_ROOT_CAUSE`]), though its report and trajectory were written.
#[derive(Debug)]
pub(crate) struct NoRootCause(pub String);

impl std::fmt::Display for NoRootCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoRootCause {}

/// The exit status of a run that found no root cause (see [`EXIT_STATUSES`]).
pub(crate) const EXIT_NO_ROOT_CAUSE: u8 = 3;

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<NoRootCause>() {
            Some(none) => {
                eprintln!("no root cause: {none}");
                std::process::ExitCode::from(EXIT_NO_ROOT_CAUSE)
            }
            None => {
                eprintln!("Error: {e:?}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        Command::Diagnose(args) => run_async(diagnose::run(args)),
        Command::React(args) => run_async(react_cmd::run(args)),
        Command::Flash(args) => run_async(flash_cmd::run(args)),
        Command::Mitigate(args) => mitigate::run(args),
        Command::Logs(args) => run_async(logs_cmd::run(args)),
        Command::Eval(args) => eval_cmd::run(args),
        Command::Bench { command } => run_async(bench_stability::run(command)),
        Command::Config(command) => config::run(command),
        Command::ReportSchema => {
            print!("{}", rca_agents::report::report_schema_text());
            Ok(())
        }
        #[cfg(feature = "sql")]
        Command::LifecycleBench(args) => lifecycle::bench(args),
        #[cfg(feature = "sql")]
        Command::Tools(command) => run_async(generated_tools::run(command)),
        #[cfg(feature = "otlp")]
        Command::Otlp(command) => run_async(otlp_cmd::run(command)),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => run_async(mcp_cmd::run(args)),
        #[cfg(feature = "sql")]
        Command::Export(command) => export_cmd::run(command),
        #[cfg(feature = "ballista")]
        Command::Cluster(command) => run_async(cluster_cmd::run(command)),
    }
}

/// Runs a future on a fresh multi-threaded runtime.
fn run_async<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(f)
}
