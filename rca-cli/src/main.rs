//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

mod bench_stability;

use clap::{CommandFactory, Parser, Subcommand};

/// Diagnose cloud incidents with tool-augmented agents, and mitigate them safely.
#[derive(Debug, Parser)]
#[command(name = "rca", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        command: bench_stability::BenchCommand,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        Command::Bench { command } => run_async(bench_stability::run(command)),
    }
}

/// Runs a future on a fresh multi-threaded runtime.
fn run_async<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(f)
}
