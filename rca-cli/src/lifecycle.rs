//! `rca lifecycle-bench`: the tool-lifecycle benchmark (warm against cold runs), written into
//! `docs/benchmarks.md` (section `tool-lifecycle` for synthetic incidents,
//! `tool-lifecycle-nezha` for a Nezha day).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rca_eval::lifecycle_bench::{IncidentSet, LifecycleBenchConfig, run};

/// Arguments of `rca lifecycle-bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Measure on the cases of this Nezha dataset (the folder holding `rca_data/`) instead of
    /// synthetic incidents.
    #[arg(long, value_name = "DIR")]
    nezha: Option<PathBuf>,
    /// With --nezha: the day folder (default: the first).
    #[arg(long, requires = "nezha")]
    day: Option<String>,
    /// With --nezha: use at most this many cases in all.
    #[arg(long, requires = "nezha")]
    limit: Option<usize>,
    /// Synthetic incidents measured.
    #[arg(long, default_value_t = 24, conflicts_with = "nezha")]
    incidents: usize,
    /// Past incidents used to warm the inventory up (with --nezha: the earliest cases).
    #[arg(long, default_value_t = 3)]
    warm_up: usize,
    /// Seed of the incident generator and of the sub-task wording.
    #[arg(long, default_value_t = LifecycleBenchConfig::default().seed)]
    seed: u64,
    /// The Markdown file whose section is replaced.
    #[arg(long, default_value = "docs/benchmarks.md")]
    docs: PathBuf,
    /// Print the section without writing it.
    #[arg(long)]
    no_write: bool,
}

/// Runs the benchmark and writes its section.
pub fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let (set, section, mut command) = match &args.nezha {
        Some(root) => {
            let mut command = format!(
                "cargo run -p rca-cli --all-features -- lifecycle-bench --nezha {} --warm-up {}",
                root.display(),
                args.warm_up
            );
            if let Some(day) = &args.day {
                command.push_str(&format!(" --day {day}"));
            }
            if let Some(limit) = args.limit {
                command.push_str(&format!(" --limit {limit}"));
            }
            let set = IncidentSet::Nezha {
                root: root.clone(),
                day: args.day.clone(),
                warm_up_incidents: args.warm_up,
                limit: args.limit,
            };
            (set, "tool-lifecycle-nezha", command)
        }
        None => {
            let set = IncidentSet::Synthetic {
                incidents: args.incidents,
                warm_up_incidents: args.warm_up,
            };
            let command = format!(
                "cargo run -p rca-cli --all-features -- lifecycle-bench --incidents {} --warm-up {}",
                args.incidents, args.warm_up
            );
            (set, "tool-lifecycle", command)
        }
    };
    command.push_str(&format!(" --seed {}", args.seed));
    let config = LifecycleBenchConfig {
        set,
        seed: args.seed,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime
        .block_on(run(config))
        .context("tool-lifecycle benchmark failed")?;
    let body = report.markdown();
    println!("{body}");
    if !args.no_write {
        rca_eval::docs::write_section(&args.docs, section, &command, &body)
            .with_context(|| format!("cannot write {}", args.docs.display()))?;
    }
    Ok(())
}
