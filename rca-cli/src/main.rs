//! The `rca` command line. Thin: it parses arguments and wires the library crates together;
//! each subcommand lives in its own module.

use clap::{CommandFactory, Parser, Subcommand};

mod embedder;
mod eval_cmd;
mod eval_nezha;
mod logs_cmd;

/// Diagnose cloud incidents with tool-augmented agents, and mitigate them safely.
#[derive(Debug, Parser)]
#[command(name = "rca", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Log clustering: templates and segments.
    Logs(logs_cmd::LogsArgs),
    /// Evaluations on benchmark datasets.
    Eval(eval_cmd::EvalArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        Command::Logs(a) => logs_cmd::run(a).await,
        Command::Eval(a) => eval_cmd::run(a),
    }
}
