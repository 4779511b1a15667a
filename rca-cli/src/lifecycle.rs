//! `rca lifecycle-bench`: the tool-lifecycle benchmark (warm against cold runs), written into
//! `docs/benchmarks.md`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rca_eval::lifecycle_bench::{LifecycleBenchConfig, run};

/// Arguments of `rca lifecycle-bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Synthetic incidents measured.
    #[arg(long, default_value_t = LifecycleBenchConfig::default().incidents)]
    incidents: usize,
    /// Past incidents used to warm the inventory up.
    #[arg(long, default_value_t = LifecycleBenchConfig::default().warm_up_incidents)]
    warm_up: usize,
    /// Seed of the incident generator.
    #[arg(long, default_value_t = LifecycleBenchConfig::default().seed)]
    seed: u64,
    /// The Markdown file whose `tool-lifecycle` section is replaced.
    #[arg(long, default_value = "docs/benchmarks.md")]
    docs: PathBuf,
    /// Print the section without writing it.
    #[arg(long)]
    no_write: bool,
}

/// Runs the benchmark and writes its section.
pub fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let config = LifecycleBenchConfig {
        incidents: args.incidents,
        warm_up_incidents: args.warm_up,
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
        let command = format!(
            "cargo run -p rca-cli --no-default-features --features sql -- lifecycle-bench --incidents {} --warm-up {} --seed {}",
            args.incidents, args.warm_up, args.seed
        );
        rca_eval::docs::write_section(&args.docs, "tool-lifecycle", &command, &body)
            .with_context(|| format!("cannot write {}", args.docs.display()))?;
    }
    Ok(())
}
