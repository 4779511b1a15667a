//! `rca eval nezha DIR`: rank root-cause pods on the Nezha data and score AS@k.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use rca_eval::nezha;

/// Arguments of `rca eval nezha`.
#[derive(Debug, Args)]
pub struct NezhaArgs {
    /// The folder holding `rca_data/` and `construct_data/`.
    dir: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Only these day folders (repeatable).
    #[arg(long = "day")]
    days: Vec<String>,
    /// Write the table into this Markdown file's `nezha` section (e.g. docs/benchmarks.md).
    #[arg(long, value_name = "FILE")]
    write_docs: Option<PathBuf>,
    /// Export this case (e.g. `2023-01-29/03`) as an incident directory instead of scoring.
    #[arg(long, value_name = "CASE_ID", requires = "out")]
    export: Option<String>,
    /// Where `--export` writes the incident directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Take log templates from the online template miner (rca-tools `logs`) instead of the
    /// simple built-in templater.
    #[arg(long)]
    miner: bool,
    /// Also print, per case, the top candidates and their strongest findings.
    #[arg(long)]
    explain: bool,
    /// Seconds of telemetry after the fault kept in an export (an export keeps everything from
    /// the fault on, not only the settled minute the evaluation looks at).
    #[arg(long, default_value_t = 180)]
    export_after_secs: i64,
}

/// Runs `rca eval nezha`.
pub fn run(args: NezhaArgs) -> Result<()> {
    if let (Some(id), Some(out)) = (&args.export, &args.out) {
        let days = nezha::discover(&args.dir)?;
        let (day, case) = days
            .iter()
            .find_map(|d| d.cases.iter().find(|c| &c.id == id).map(|c| (d, c)))
            .ok_or_else(|| nezha::NezhaError::NoSuchCase(id.clone()))?;
        let metrics = nezha::DayMetrics::load(day)?;
        let options = nezha::CaseOptions {
            settled_minute: None,
            after_secs: args.export_after_secs,
            ..nezha::CaseOptions::default()
        };
        let data = nezha::load_case(day, &metrics, case, &options)?;
        nezha::export_case(case, &data, out)?;
        eprintln!("wrote {}", out.display());
        return Ok(());
    }
    let tty = std::io::stderr().is_terminal();
    let mut progress = |done: usize, total: usize, id: &str| {
        if tty {
            let width = 30;
            let filled = done * width / total.max(1);
            eprint!(
                "\r[{}{}] {done}/{total} {id}   ",
                "#".repeat(filled),
                " ".repeat(width - filled)
            );
            let _ = std::io::stderr().flush();
            if done == total {
                eprintln!();
            }
        }
    };
    let options = nezha::EvalOptions {
        days: args.days.clone(),
        use_miner: args.miner,
        ..nezha::EvalOptions::default()
    };
    if args.explain {
        return explain(&args, &options);
    }
    let report = nezha::evaluate(&args.dir, &options, &mut progress)
        .with_context(|| format!("evaluating {}", args.dir.display()))?;
    let table = nezha::markdown_table(&report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{table}");
        for c in &report.cases {
            let top: Vec<&str> = c
                .ranked_pods
                .iter()
                .take(3)
                .map(|p| nezha::service_of(p))
                .collect();
            println!(
                "{}  truth {} ({})  predicted {} [{}]  {:.2}s",
                c.id,
                nezha::service_of(&c.truth_pod),
                c.truth_type,
                c.fault_type,
                top.join(", "),
                c.seconds
            );
        }
    }
    if let Some(path) = &args.write_docs {
        let mut command = format!("rca eval nezha {}", args.dir.display());
        for d in &args.days {
            command.push_str(&format!(" --day {d}"));
        }
        if args.miner {
            command.push_str(" --miner");
        }
        command.push_str(&format!(" --write-docs {}", path.display()));
        let section = if args.miner { "nezha-miner" } else { "nezha" };
        rca_eval::docs::write_section(path, section, &command, &table)?;
        eprintln!("updated {}", path.display());
    }
    Ok(())
}

/// Prints the top candidates of every case with their strongest findings.
fn explain(args: &NezhaArgs, options: &nezha::EvalOptions) -> Result<()> {
    for day in nezha::discover(&args.dir)? {
        if !options.days.is_empty() && !options.days.contains(&day.name) {
            continue;
        }
        let metrics = nezha::DayMetrics::load(&day)?;
        for case in &day.cases {
            let data = nezha::load_case(&day, &metrics, case, &options.case)?;
            let d = nezha::diagnose_case_with(&data, options.use_miner);
            println!(
                "== {} truth {} ({}) -> {}",
                case.id,
                nezha::service_of(&case.truth_pod),
                case.truth_type,
                d.fault_type
            );
            let truth_at = d.ranked.iter().position(|r| r.component == case.truth_pod);
            let show: Vec<usize> = (0..d.ranked.len().min(4))
                .chain(truth_at.filter(|&i| i >= 4))
                .collect();
            for r in show.iter().map(|&i| &d.ranked[i]) {
                let mods: Vec<String> = r.modalities.iter().map(|m| m.to_string()).collect();
                let mark = if r.component == case.truth_pod {
                    "*"
                } else {
                    " "
                };
                println!("{mark} {:.3} {} [{}]", r.score, r.component, mods.join(","));
                for f in r.findings.iter().take(4) {
                    println!(
                        "      {} {:.1} {}",
                        f.modality,
                        f.score,
                        f.summary.chars().take(150).collect::<String>()
                    );
                }
            }
        }
    }
    Ok(())
}
