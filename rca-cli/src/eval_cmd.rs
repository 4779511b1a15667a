//! `rca eval loghub DIR --formats FILE [--write-docs docs/benchmarks.md]`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use rca_eval::loghub::crossval::{default_grid, leave_one_out_observed};
use rca_eval::loghub::{LoghubReport, default_config, load_folder, parse_formats};

/// Evaluations on benchmark datasets.
#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Log-parsing accuracy (GA, PA, FGA, FTA; original and corrected labels) on a folder in
    /// the Loghub layout.
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
    #[arg(long, default_value_t = 1, value_parser = crate::numbers::at_least_one())]
    threads: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also choose the miner's parameters on all systems but one and score the one left out,
    /// for each system; prints the held-out figures next to the in-sample ones.
    #[arg(long)]
    leave_one_out: bool,
    /// Also write the tables into this Markdown file (section `loghub`).
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
    let threads = a.threads;
    let (systems, missing) = load_folder(&a.dir, &formats)?;
    anyhow::ensure!(
        !systems.is_empty(),
        "no system of the formats table has its log and labels in {} \
         (expected <DIR>/<S>/<S>_2k.log and <S>_2k.log_structured.csv; missing: {})",
        a.dir.display(),
        if missing.is_empty() {
            "-".to_string()
        } else {
            missing.join(", ")
        }
    );
    let scores = systems
        .iter()
        .map(|s| s.score(&config, threads))
        .collect::<Result<Vec<_>, _>>()?;
    let report = LoghubReport::new(scores, missing);
    let cv = if a.leave_one_out {
        let grid = default_grid();
        let bar = crate::progress::Progress::bar(grid.len() as u64, "leave one out");
        let cv = leave_one_out_observed(&systems, &grid, threads, &|done, total| {
            bar.set_position(done as u64, total as u64);
        })?;
        bar.finish();
        Some(cv)
    } else {
        None
    };
    if a.json {
        let value = serde_json::json!({ "default": report, "leave_one_out": cv });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.to_markdown());
        if let Some(cv) = &cv {
            println!("\n### Leave one system out\n\n{}", cv.to_markdown());
        }
    }
    if let Some(docs) = &a.write_docs {
        let command = format!(
            "rca eval loghub {} --formats {} --threads {}{} --write-docs {}",
            a.dir.display(),
            a.formats.display(),
            threads,
            if a.leave_one_out {
                " --leave-one-out"
            } else {
                ""
            },
            docs.display()
        );
        let mut body = format!(
            "### Loghub-2k template mining\n\nOne configuration for every system: `{}`. GA, PA, \
             FGA and FTA against the original labels, then against the corrected labels of Khan \
             et al.\n\n{}",
            serde_json::to_string(&config)?,
            report.to_markdown()
        );
        if let Some(cv) = &cv {
            body.push_str(&format!(
                "\n### Leave one system out\n\nEach system scored with the configuration chosen \
                 on the other systems (highest mean GA, original labels); the in-sample column \
                 uses the configuration chosen on all of them.\n\n{}",
                cv.to_markdown()
            ));
        }
        rca_eval::docs::write_section(docs, "loghub", &command, &body)?;
        eprintln!("wrote section `loghub` of {}", docs.display());
    }
    Ok(())
}
