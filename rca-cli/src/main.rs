//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

use clap::{CommandFactory, Parser, Subcommand};

mod config;
mod diagnose;

/// Diagnose cloud incidents with tool-augmented agents, and mitigate them safely.
#[derive(Debug, Parser)]
#[command(name = "rca", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Diagnose an incident directory (no model needed): ranked root causes with their
    /// evidence chain; saves the trajectory.
    Diagnose(diagnose::DiagnoseArgs),
    /// Work with configuration files.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match command {
            Command::Diagnose(args) => diagnose::run(args).await,
            Command::Config(command) => config::run(command),
        }
    })
}
