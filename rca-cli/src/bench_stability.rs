//! `rca bench stability`: the RCAgent stability benchmark (shape of RCAgent Table 4).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rca_eval::stability::{StabilitySettings, obsk_comparison, run_stability};

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Controller stability under corrupted model turns (pass and invalid-action rates).
    Stability(StabilityArgs),
    /// Every agent end to end on a real model (or a recording of one): budgets, token
    /// counts, invalid turns and invariants.
    Agents(crate::bench_agents::AgentsArgs),
}

/// Arguments of `rca bench stability`.
#[derive(Debug, Args)]
pub struct StabilityArgs {
    /// Seeded episodes per configuration.
    #[arg(long, default_value_t = 1000)]
    pub episodes: usize,
    /// Probability that a model turn is corrupted.
    #[arg(long, default_value_t = 0.3)]
    pub corruption: f64,
    /// Episode i uses seed `seed + i`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the table into this Markdown file's `stability` section.
    #[arg(long)]
    pub write_docs: Option<PathBuf>,
}

/// Runs a benchmark subcommand.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Stability(args) => stability(args).await,
        BenchCommand::Agents(args) => crate::bench_agents::run(args).await,
    }
}

async fn stability(args: StabilityArgs) -> anyhow::Result<()> {
    let report = run_stability(StabilitySettings {
        episodes: args.episodes,
        corruption: args.corruption,
        seed: args.seed,
    })
    .await?;
    if args.json {
        println!("{}", report.to_json_line());
        if args.write_docs.is_none() {
            return Ok(());
        }
    }
    // Snapshot-key token savings on the same incidents (at most 200 of them).
    let obsk = obsk_comparison(args.episodes.min(200), args.seed).await?;
    let markdown = format!("{}\n{}", report.markdown(), obsk.markdown());
    if !args.json {
        print!("{markdown}");
    }
    if let Some(path) = args.write_docs {
        let mut command = format!(
            "rca bench stability --episodes {} --corruption {}",
            args.episodes, args.corruption
        );
        if args.seed != 0 {
            command.push_str(&format!(" --seed {}", args.seed));
        }
        command.push_str(&format!(" --write-docs {}", path.display()));
        rca_eval::docs::write_section(&path, "stability", &command, &markdown)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(subcommand)]
        command: BenchCommand,
    }

    #[tokio::test]
    async fn parses_and_writes_the_docs_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmarks.md");
        let w = Wrapper::try_parse_from([
            "bench",
            "stability",
            "--episodes",
            "4",
            "--corruption",
            "0.5",
            "--json",
            "--write-docs",
            path.to_str().unwrap(),
        ])
        .unwrap();
        let BenchCommand::Stability(args) = &w.command else {
            panic!("not stability")
        };
        assert_eq!((args.episodes, args.corruption, args.json), (4, 0.5, true));
        run(w.command).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("<!-- BEGIN stability -->"));
        assert!(text.contains("rca bench stability --episodes 4 --corruption 0.5"));
        assert!(text.contains("| no_regen |") && text.contains("prompt tokens with OBSK"));
        let defaults = Wrapper::try_parse_from(["bench", "stability"]).unwrap();
        let BenchCommand::Stability(d) = defaults.command else {
            panic!("not stability")
        };
        assert_eq!((d.episodes, d.corruption, d.json), (1000, 0.3, false));
    }
}
