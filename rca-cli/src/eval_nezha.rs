//! `rca eval nezha DIR`: diagnose every Nezha case with the library's diagnosis pipeline and
//! score AS@k, fault types and onsets, under the alert or the fault-time protocol, optionally
//! cross-validated.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use rca_eval::nezha;

/// What the diagnoser is told about the fault time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// Only an alert, a lag of 60-300 s after the fault (drawn per case with `--seed`); the
    /// onset is for the diagnosis to find.
    Alert,
    /// The fault time is known (Nezha's own protocol); detection 180 s after it.
    FaultTime,
}

/// How many normal minutes are spliced before each fault's run under the alert protocol:
/// between two and six, so the first retained event lies 2-8 minutes before the fault.
const SPLICED_MINUTES: (i64, i64) = (2, 6);

/// Arguments of `rca eval nezha`.
#[derive(Debug, Args)]
pub struct NezhaArgs {
    /// The folder holding `rca_data/` (and `construct_data/`).
    dir: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Only these day folders (repeatable).
    #[arg(long = "day")]
    days: Vec<String>,
    /// What the diagnoser is told about the fault time.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Alert)]
    protocol: ProtocolArg,
    /// The seed of the alert lags (and of how many normal minutes are spliced).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Under the alert protocol, do not splice normal minutes before each fault's run (the
    /// data keep about three minutes around each fault, so where the window starts then
    /// gives the fault time away; see `--explain`'s trivial-rule row).
    #[arg(long)]
    no_splice: bool,
    /// Also cross-validate the ranker's settings (and, under the alert protocol, the onset
    /// detector's) over K contiguous folds of cases (choose on K-1, score the held-out fold)
    /// and report both figures.
    #[arg(long, value_name = "K")]
    cross_validate: Option<usize>,
    /// Write the tables into this Markdown file's `nezha-<protocol>` section (and
    /// `nezha-<protocol>-cv` with `--cross-validate`), e.g. docs/benchmarks.md.
    #[arg(long, value_name = "FILE")]
    write_docs: Option<PathBuf>,
    /// Export this case (e.g. `2023-01-29/03`) as an incident directory instead of scoring.
    #[arg(long, value_name = "CASE_ID", requires = "out")]
    export: Option<String>,
    /// Where `--export` writes the incident directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Instead of the plain evaluation, explain every miss: the true service's rank in each
    /// modality, the finding that outranked it and a cause class (re-running the pipeline
    /// with the true onset and with a window ending at the labelled time where that tests a
    /// cause); `--write-docs` writes `nezha-<protocol>-misses`.
    #[arg(long, conflicts_with_all = ["cross_validate", "modality_drop", "memory"])]
    explain: bool,
    /// Score with all telemetry and with each modality (and the log-span join) withheld in
    /// turn, instead of the plain evaluation; `--write-docs` writes `nezha-<protocol>-drop`.
    #[arg(long, conflicts_with = "cross_validate")]
    modality_drop: bool,
    /// Run the cases in order without long-term memory (cold) and with one memory that
    /// starts empty and remembers each case for the next (warm), instead of the plain
    /// evaluation; `--write-docs` writes `nezha-<protocol>-memory`.
    #[arg(long, conflicts_with_all = ["cross_validate", "modality_drop"])]
    memory: bool,
    /// Instead of scoring the faults, inject network delays of these magnitudes (ms,
    /// comma-separated) into the real minute before each fault and score whether the target
    /// pod is found; `--write-docs` writes `nezha-network-delay`.
    #[arg(
        long = "network-delay",
        value_name = "MS,...",
        value_delimiter = ',',
        conflicts_with_all = ["cross_validate", "modality_drop"]
    )]
    injected_delays: Vec<u64>,
}

impl NezhaArgs {
    fn case_options(&self) -> nezha::CaseOptions {
        nezha::CaseOptions {
            protocol: match self.protocol {
                ProtocolArg::Alert => nezha::Protocol::Alert,
                ProtocolArg::FaultTime => nezha::Protocol::FaultTime,
            },
            seed: self.seed,
            splice_minutes: (self.protocol == ProtocolArg::Alert
                && !self.no_splice
                && self.export.is_none())
            .then_some(SPLICED_MINUTES),
            ..nezha::CaseOptions::default()
        }
    }
}

/// With `--write-docs`, writes `table` into that file's `section`, naming the command that
/// produced it (`rca eval nezha DIR [--day D]... FLAGS --write-docs FILE`).
fn write_docs(args: &NezhaArgs, section: &str, flags: &str, table: &str) -> Result<()> {
    let Some(path) = &args.write_docs else {
        return Ok(());
    };
    let days: String = args.days.iter().map(|d| format!(" --day {d}")).collect();
    let command = format!(
        "rca eval nezha {}{days} {flags} --write-docs {}",
        args.dir.display(),
        path.display()
    );
    rca_eval::docs::write_section(path, section, &command, table)?;
    eprintln!("updated {}", path.display());
    Ok(())
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
        let data = nezha::load_case(day, &metrics, case, &args.case_options())?;
        nezha::export_case(case, &data, out)?;
        eprintln!("wrote {}", out.display());
        return Ok(());
    }
    let bar = crate::progress::Progress::bar(0, "nezha");
    let mut progress = |done: usize, total: usize, id: &str| {
        bar.set_message(id);
        bar.set_position(done as u64, total as u64);
    };
    let options = nezha::EvalOptions {
        case: args.case_options(),
        days: args.days.clone(),
        ..nezha::EvalOptions::new()?
    };
    if !args.injected_delays.is_empty() {
        let rows = nezha::delay_benchmark(
            &args.dir,
            &args.days,
            &args.injected_delays,
            args.seed,
            &options.pipeline,
            &mut progress,
        )
        .with_context(|| format!("injecting delays into {}", args.dir.display()))?;
        let table = nezha::delay_table(&rows);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            println!("{table}");
        }
        let delays: Vec<String> = args.injected_delays.iter().map(u64::to_string).collect();
        let flags = format!("--network-delay {} --seed {}", delays.join(","), args.seed);
        return write_docs(&args, "nezha-network-delay", &flags, &table);
    }
    if args.memory {
        let rows = nezha::memory_effect(&args.dir, &options, &mut progress)
            .with_context(|| format!("evaluating {}", args.dir.display()))?;
        let table = nezha::memory_table(&rows);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            println!("{table}");
        }
        let protocol = args.case_options().protocol;
        return write_docs(
            &args,
            &format!("nezha-{protocol}-memory"),
            &format!("--protocol {protocol} --memory"),
            &table,
        );
    }
    if args.explain {
        let report = nezha::explain_misses(&args.dir, &options, &mut progress)
            .with_context(|| format!("explaining misses on {}", args.dir.display()))?;
        let table = report.to_markdown();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            println!("{table}");
        }
        let protocol = args.case_options().protocol;
        let mut flags = format!("--protocol {protocol}");
        if protocol == nezha::Protocol::Alert {
            flags.push_str(&format!(" --seed {}", args.seed));
            if args.no_splice {
                flags.push_str(" --no-splice");
            }
        }
        flags.push_str(" --explain");
        return write_docs(&args, &format!("nezha-{protocol}-misses"), &flags, &table);
    }
    if args.modality_drop {
        let rows = nezha::modality_drop(&args.dir, &options, &mut progress)
            .with_context(|| format!("evaluating {}", args.dir.display()))?;
        let table = nezha::drop_table(&rows);
        println!("{table}");
        let protocol = args.case_options().protocol;
        return write_docs(
            &args,
            &format!("nezha-{protocol}-drop"),
            &format!("--protocol {protocol} --modality-drop"),
            &table,
        );
    }
    let report = nezha::evaluate(&args.dir, &options, &mut progress)
        .with_context(|| format!("evaluating {}", args.dir.display()))?;
    let table = nezha::markdown_table(&report);
    let cv = match args.cross_validate {
        Some(k) => {
            // Under the alert protocol the onset detector's constants are searched too.
            let grid = nezha::default_grid(
                &options.pipeline,
                options.case.protocol == nezha::Protocol::Alert,
            );
            Some(
                nezha::cross_validate(&args.dir, &options, &grid, k, &mut progress)
                    .with_context(|| format!("cross-validating on {}", args.dir.display()))?,
            )
        }
        None => None,
    };
    if args.json {
        let value = serde_json::json!({
            "protocol": args.case_options().protocol,
            "summary": report.summary,
            "cases": report.cases,
            "cross_validation": cv,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{table}");
        if let Some(cv) = &cv {
            println!("{}", cv.to_markdown());
        }
        for c in &report.cases {
            let top: Vec<&str> = c
                .ranked_pods
                .iter()
                .take(3)
                .map(|p| nezha::service_of(p))
                .collect();
            let onset = c
                .onset_error_secs
                .map_or("-".to_string(), |e| format!("{e:+.0}s"));
            println!(
                "{}  truth {} ({})  predicted {} [{}]  onset {onset}  {:.2}s",
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
        let protocol = args.case_options().protocol;
        let mut command = format!("rca eval nezha {}", args.dir.display());
        for d in &args.days {
            command.push_str(&format!(" --day {d}"));
        }
        command.push_str(&format!(" --protocol {protocol}"));
        if protocol == nezha::Protocol::Alert {
            command.push_str(&format!(" --seed {}", args.seed));
            if args.no_splice {
                command.push_str(" --no-splice");
            }
        }
        if let Some(k) = args.cross_validate {
            command.push_str(&format!(" --cross-validate {k}"));
        }
        command.push_str(&format!(" --write-docs {}", path.display()));
        let section = format!("nezha-{protocol}");
        rca_eval::docs::write_section(path, &section, &command, &table)?;
        if let Some(cv) = &cv {
            rca_eval::docs::write_section(
                path,
                &format!("{section}-cv"),
                &command,
                &cv.to_markdown(),
            )?;
        }
        eprintln!("updated {}", path.display());
    }
    Ok(())
}
