//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

use clap::{CommandFactory, Parser, Subcommand};

#[cfg(feature = "sql")]
mod lifecycle;

/// Diagnose cloud incidents with tool-augmented agents, and mitigate them safely.
#[derive(Debug, Parser)]
#[command(name = "rca", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Tool-lifecycle benchmark: warm runs (reused tools) against cold runs.
    #[cfg(feature = "sql")]
    LifecycleBench(lifecycle::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        #[cfg(feature = "sql")]
        Command::LifecycleBench(args) => lifecycle::bench(args),
    }
}
