//! `rca eval loghub DIR --formats FILE [--write-docs docs/benchmarks.md]`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use rca_eval::loghub::{default_config, evaluate, parse_formats};

/// Evaluations on benchmark datasets.
#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Log-parsing accuracy (GA, PA) on a folder in the Loghub layout.
    Loghub(LoghubArgs),
    /// Rank root-cause pods on the Nezha TrainTicket data and score service-level AS@k.
    Nezha(crate::eval_nezha::NezhaArgs),
}

#[derive(Debug, Args)]
struct LoghubArgs {
    /// The folder: `<DIR>/<S>/<S>_2k.log` and `<S>_2k.log_structured.csv` per system.
    dir: PathBuf,
    /// The formats table: `SYSTEM<TAB>PATTERN` per line (e.g. rca-eval/data/loghub-formats.tsv).
    #[arg(long)]
    formats: PathBuf,
    /// Mining threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the table into this Markdown file (section `loghub`).
    #[arg(long)]
    write_docs: Option<PathBuf>,
}

/// Runs `rca eval ...`.
pub fn run(args: EvalArgs) -> Result<()> {
    match args.command {
        EvalCommand::Loghub(a) => loghub(a),
        EvalCommand::Nezha(a) => crate::eval_nezha::run(a),
    }
}

fn loghub(a: LoghubArgs) -> Result<()> {
    let table = std::fs::read_to_string(&a.formats)
        .with_context(|| format!("cannot read {}", a.formats.display()))?;
    let formats = parse_formats(&table)?;
    let config = default_config();
    let report = evaluate(&a.dir, &formats, &config, a.threads.max(1))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_markdown());
    }
    if let Some(docs) = &a.write_docs {
        let command = format!(
            "rca eval loghub {} --formats {} --threads {} --write-docs {}",
            a.dir.display(),
            a.formats.display(),
            a.threads.max(1),
            docs.display()
        );
        let body = format!(
            "### Loghub-2k template mining (original labels)\n\nOne configuration for every \
             system: `{}`.\n\n{}",
            serde_json::to_string(&config)?,
            report.to_markdown()
        );
        rca_eval::docs::write_section(docs, "loghub", &command, &body)?;
        eprintln!("wrote section `loghub` of {}", docs.display());
    }
    Ok(())
}
