//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

mod eval;

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
    /// Run a benchmark and print its scores.
    Eval {
        #[command(subcommand)]
        command: eval::EvalCommand,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        Command::Eval { command } => eval::run(command),
    }
}
