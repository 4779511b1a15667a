//! `rca eval loghub DIR --formats FILE [--extra DIR2] [--write-docs docs/benchmarks.md]`, and
//! `rca eval loghub-grammar --out DIR` (the generated development set), and
//! `rca eval grouping --lines FILE --truth NAME=FILE --predicted NAME=FILE` (any miner's groups
//! scored on a labelled input).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use rca_eval::loghub::crossval::{default_grid, leave_one_out_observed};
use rca_eval::loghub::labelled::{GroupingTable, read_values};
use rca_eval::loghub::{
    LoghubReport, SystemData, default_config, grammar, load_folder, parse_formats,
    trivial_grouping_ga, without_join,
};

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
    /// Write the generated development set (labelled logs from message grammars whose values
    /// span a varying number of tokens) in the Loghub layout, with its `formats.tsv`.
    LoghubGrammar(LoghubGrammarArgs),
    /// Rank root-cause pods on the Nezha TrainTicket data and score service-level AS@k.
    Nezha(crate::eval_nezha::NezhaArgs),
    /// Grouping accuracy of any miner's groups (one group id a line, e.g. Drain3's cluster
    /// ids) on a labelled input, beside the trivial grouper (token count and first token).
    Grouping(GroupingArgs),
}

#[derive(Debug, Args)]
struct GroupingArgs {
    /// The input lines (the trivial grouper reads them).
    #[arg(long)]
    lines: PathBuf,
    /// `NAME=FILE`: the true group of each line, one a line. Repeatable: one GA column each.
    #[arg(long, value_parser = parse_named_path, required = true)]
    truth: Vec<(String, PathBuf)>,
    /// `NAME=FILE`: a miner's group of each line, one a line. Repeatable; rows keep this order.
    #[arg(long, value_parser = parse_named_path)]
    predicted: Vec<(String, PathBuf)>,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    json: bool,
}

fn parse_named_path(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, path)) if !name.trim().is_empty() && !path.is_empty() => {
            Ok((name.trim().to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("expected NAME=FILE, got {s:?}")),
    }
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
    /// Also score this folder in the Loghub layout, with its formats table in
    /// `DIR/formats.tsv` (e.g. rca-eval/data/grammar-2k, written by `rca eval loghub-grammar`);
    /// its systems join the leave-one-out folds and get their own mean. Repeatable.
    #[arg(long)]
    extra: Vec<PathBuf>,
    /// Also write the tables into this Markdown file (section `loghub`).
    #[arg(long)]
    write_docs: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LoghubGrammarArgs {
    /// The folder to write (created if missing; its files are replaced).
    #[arg(long)]
    out: PathBuf,
    /// The seed of the generator (the committed set uses the default).
    #[arg(long, default_value_t = grammar::SEED)]
    seed: u64,
}

/// Runs `rca eval ...`.
pub fn run(args: EvalArgs) -> Result<()> {
    match args.command {
        EvalCommand::Loghub(a) => loghub(a),
        EvalCommand::LoghubGrammar(a) => {
            let written = grammar::write_folder(&a.out, a.seed)?;
            eprintln!(
                "wrote {} ({} lines each) in {}",
                written.join(", "),
                grammar::LINES,
                a.out.display()
            );
            Ok(())
        }
        EvalCommand::Nezha(a) => crate::eval_nezha::run(a),
        EvalCommand::Grouping(a) => grouping(a),
    }
}

fn grouping(a: GroupingArgs) -> Result<()> {
    let lines = read_values(&a.lines)?;
    let named = |list: &[(String, PathBuf)]| {
        list.iter()
            .map(|(name, path)| Ok((name.clone(), read_values(path)?)))
            .collect::<Result<Vec<_>>>()
    };
    let table = GroupingTable::score(&lines, &named(&a.truth)?, &named(&a.predicted)?)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&table)?);
    } else {
        print!("{}", table.markdown());
    }
    Ok(())
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
    // The extra folders: each scored on its own, and all systems together for the folds.
    let mut all: Vec<SystemData> = systems;
    let mut sets: Vec<(String, Vec<String>)> = vec![(
        folder_name(&a.dir),
        all.iter().map(|s| s.system.clone()).collect(),
    )];
    let mut extra_reports = Vec::new();
    for dir in &a.extra {
        let table_path = dir.join("formats.tsv");
        let table = std::fs::read_to_string(&table_path)
            .with_context(|| format!("cannot read {}", table_path.display()))?;
        let (extra, missing) = load_folder(dir, &parse_formats(&table)?)?;
        anyhow::ensure!(
            !extra.is_empty(),
            "no system of {} has its log and labels in {}",
            table_path.display(),
            dir.display()
        );
        let names: Vec<String> = extra.iter().map(|s| s.system.clone()).collect();
        anyhow::ensure!(
            !names.iter().any(|n| all.iter().any(|s| s.system == *n)),
            "{} repeats a system name of another folder",
            dir.display()
        );
        let scores = extra
            .iter()
            .map(|s| s.score(&config, threads))
            .collect::<Result<Vec<_>, _>>()?;
        extra_reports.push((folder_name(dir), LoghubReport::new(scores, missing)));
        sets.push((folder_name(dir), names));
        all.extend(extra);
    }
    if a.extra.is_empty() {
        sets.clear();
    }
    let baselines = baseline_table(
        &all,
        (&folder_name(&a.dir), &report),
        &extra_reports,
        &config,
        threads,
    )?;
    let cv = if a.leave_one_out {
        let grid = default_grid();
        let bar = crate::progress::Progress::bar(grid.len() as u64, "leave one out");
        let cv = leave_one_out_observed(&all, &grid, threads, &|done, total| {
            bar.set_position(done as u64, total as u64);
        })?;
        bar.finish();
        Some(cv)
    } else {
        None
    };
    if a.json {
        let extra: serde_json::Map<String, serde_json::Value> = extra_reports
            .iter()
            .map(|(n, r)| Ok((n.clone(), serde_json::to_value(r)?)))
            .collect::<Result<_, serde_json::Error>>()?;
        let value = serde_json::json!({ "default": report, "extra": extra, "leave_one_out": cv });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.to_markdown());
        for (name, r) in &extra_reports {
            println!("\n{name}:\n\n{}", r.to_markdown());
        }
        println!("\n{baselines}");
        if let Some(cv) = &cv {
            println!(
                "\n### Leave one system out\n\n{}",
                cv.to_markdown_sets(&sets)
            );
        }
    }
    if let Some(docs) = &a.write_docs {
        let extra_args: String = a
            .extra
            .iter()
            .map(|d| format!(" --extra {}", d.display()))
            .collect();
        let command = format!(
            "rca eval loghub {} --formats {}{extra_args} --threads {}{} --write-docs {}",
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
        for (name, r) in &extra_reports {
            body.push_str(&format!(
                "\n### {name}\n\nThe same configuration on the systems of `{name}` (no \
                 corrected labels).\n\n{}",
                r.to_markdown()
            ));
        }
        body.push_str(&format!("\n{baselines}"));
        if let Some(cv) = &cv {
            body.push_str(&format!(
                "\n### Leave one system out\n\nEach system scored with the configuration chosen \
                 on the other systems (highest mean GA, original labels; the systems of every \
                 folder take part in the folds); the in-sample column uses the configuration \
                 chosen on all of them.\n\n{}",
                cv.to_markdown_sets(&sets)
            ));
        }
        rca_eval::docs::write_section(docs, "loghub", &command, &body)?;
        eprintln!("wrote section `loghub` of {}", docs.display());
    }
    Ok(())
}

/// The table that says what the miner's GA beats on every system: the same configuration
/// without the join across token counts and the anchor groups, and a trivial grouper (token
/// count and first token). The generated folders were written by the team that wrote the
/// miner, with the shape the join is for: on them the table demonstrates a mechanism.
fn baseline_table(
    all: &[SystemData],
    (name, report): (&str, &LoghubReport),
    extra_reports: &[(String, LoghubReport)],
    config: &rca_tools::logs::MinerConfig,
    threads: usize,
) -> Result<String> {
    let plain = without_join(config);
    let mut out = String::from(
        "### Against the miner without the join, and a trivial grouper\n\n\
         GA (original labels) of the configuration above, of the same configuration with the \
         join across token counts and the anchor groups off, and of a trivial grouper (lines \
         with the same token count and first token together). The Loghub systems measure; \
         the generated systems were written by this project with the shape the join is for, \
         so on them the table demonstrates the mechanism rather than measuring it.\n\n\
         | System | Set | GA | GA without the join | GA trivial |\n|---|---|---|---|---|\n",
    );
    let scored = std::iter::once((name, "measures", report)).chain(
        extra_reports
            .iter()
            .map(|(n, r)| (n.as_str(), "demonstrates", r)),
    );
    for (set, role, r) in scored {
        for score in &r.systems {
            let Some(data) = all.iter().find(|d| d.system == score.system) else {
                continue;
            };
            let without = data.score(&plain, threads)?;
            out.push_str(&format!(
                "| {} | {set} ({role}) | {:.3} | {:.3} | {:.3} |\n",
                score.system,
                score.original.ga,
                without.original.ga,
                trivial_grouping_ga(data)
            ));
        }
    }
    Ok(out)
}

/// The last component of a folder path (the path itself when it has none).
fn folder_name(dir: &std::path::Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
