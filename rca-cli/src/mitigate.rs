//! `rca mitigate`: run STRATUS on a simulated fault scenario, list the scenarios, or run the
//! TNR ablation benchmark.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use clap::{Args, Subcommand, ValueEnum};
use rca_agents::stratus::agents::{PolicyDetector, PolicyDiagnoser};
use rca_agents::stratus::bench::{BenchConfig, Odds, StochasticMitigator, run_bench_observed};
use rca_agents::stratus::severity::{SeverityWeights, mu_text};
use rca_agents::stratus::{
    Approver, Outcome, Proposal, SCENARIOS, SimEnvironment, Stratus, Tnr, TnrConfig, oracle,
    scenario,
};
use tokio::sync::RwLock;

/// Arguments of `rca mitigate`.
#[derive(Debug, Args)]
pub struct MitigateArgs {
    #[command(subcommand)]
    command: Option<MitigateCommand>,
    /// The scenario to mitigate (see --list).
    #[arg(long)]
    scenario: Option<String>,
    /// List the scenarios.
    #[arg(long)]
    list: bool,
    /// Who plans mitigations: the deterministic agents, or the benchmark's stochastic policy.
    #[arg(long, value_enum, default_value_t = PolicyArg::Deterministic)]
    policy: PolicyArg,
    /// Seed of the stochastic policy.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Attempts before giving up.
    #[arg(long, default_value_t = 10, value_parser = crate::numbers::at_least_one())]
    max_attempts: usize,
    /// K: most commands per transaction.
    #[arg(long, default_value_t = 20, value_parser = crate::numbers::at_least_one())]
    max_commands: usize,
    /// Dry-run every transaction on a copy of the state first.
    #[arg(long)]
    dry_run: bool,
    /// Ask on the terminal before every transaction.
    #[arg(long)]
    approve: bool,
    /// Severity weight of each alert.
    #[arg(long, default_value_t = 1.0, value_parser = crate::numbers::non_negative)]
    w_alerts: f64,
    /// Severity weight of each SLA violation.
    #[arg(long, default_value_t = 5.0, value_parser = crate::numbers::non_negative)]
    w_sla: f64,
    /// Severity weight of each lost replica unit.
    #[arg(long, default_value_t = 1.0, value_parser = crate::numbers::non_negative)]
    w_capacity: f64,
    /// Print the full run report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PolicyArg {
    /// Deterministic detection, diagnosis and mitigation policies.
    Deterministic,
    /// Right fix 0.35, harmless wrong fix 0.45, harmful fix 0.20 per attempt.
    Stochastic,
}

#[derive(Debug, Subcommand)]
enum MitigateCommand {
    /// The TNR ablation: tnr / retry_no_undo / no_retry over every scenario x N seeds.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Seeds per scenario.
    #[arg(long, default_value_t = 50, value_parser = crate::numbers::at_least_one_u64())]
    seeds: u64,
    /// Attempts per run.
    #[arg(long, default_value_t = 10, value_parser = crate::numbers::at_least_one())]
    max_attempts: usize,
    /// Print the summary JSON.
    #[arg(long)]
    json: bool,
    /// Write the tables into this Markdown file's `stratus-tnr-ablation` section.
    #[arg(long)]
    write_docs: Option<PathBuf>,
}

/// Asks on the terminal.
struct TerminalApprover;

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, proposal: &Proposal) -> bool {
        let text = format!(
            "transaction {} (mu before: {}{}):\n{}\napprove? [y/N] ",
            proposal.id,
            proposal.mu_pre.map_or("inf".into(), mu_text),
            proposal
                .dry_run_mu
                .map(|m| format!(", dry run predicts {m}"))
                .unwrap_or_default(),
            proposal
                .commands
                .iter()
                .map(|c| format!("  {c}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).is_ok()
                && matches!(line.trim(), "y" | "Y" | "yes")
        })
        .await
        .unwrap_or(false)
    }
}

fn path_text(p: &[Option<f64>]) -> String {
    p.iter()
        .map(|m| m.map_or("inf".to_string(), mu_text))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Runs `rca mitigate`.
pub fn run(args: MitigateArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(run_async(args))
}

async fn run_async(args: MitigateArgs) -> anyhow::Result<()> {
    if let Some(MitigateCommand::Bench(b)) = args.command {
        return bench(b).await;
    }
    if args.list {
        for s in SCENARIOS {
            println!("{:<20} {}", s.name, s.summary);
        }
        return Ok(());
    }
    let name = args
        .scenario
        .as_deref()
        .context("give --scenario NAME, --list, or the `bench` subcommand")?;
    let s = scenario(name)?;
    let weights = SeverityWeights {
        alerts: args.w_alerts,
        sla_violations: args.w_sla,
        capacity_loss: args.w_capacity,
    };
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build())));
    let config = TnrConfig {
        max_commands: args.max_commands,
        weights,
        dry_run: args.dry_run,
    };
    let mut tnr = Tnr::new(Arc::clone(&env), config).await?;
    if args.approve {
        tnr = tnr.with_approver(Arc::new(TerminalApprover));
    }
    let machine = match args.policy {
        PolicyArg::Deterministic => Stratus::default(),
        PolicyArg::Stochastic => Stratus::new(
            Arc::new(PolicyDetector),
            Arc::new(PolicyDiagnoser),
            Arc::new(StochasticMitigator::new(
                Arc::clone(&env),
                s,
                Odds::default(),
                args.seed,
            )),
        ),
    }
    .with_max_attempts(args.max_attempts);
    let report = machine.run(&tnr).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("scenario: {} — {}", s.name, s.summary);
    if let Some(d) = &report.detection {
        println!("detection: {}", d.summary);
    }
    for (i, t) in report.transactions.iter().enumerate() {
        println!("\ntransaction {}:", t.id);
        if let Some(d) = report.diagnoses.get(i) {
            println!(
                "  diagnosis: {:?} on {} ({})",
                d.fault, d.component, d.reason
            );
        }
        for c in &t.commands {
            println!("  $ kubectl {c}");
        }
        println!(
            "  hidden mu: {}",
            path_text(&{
                let mut p = vec![t.mu_pre];
                p.extend(t.hidden_mu.iter().copied());
                p
            })
        );
        let outcome = match &t.outcome {
            Outcome::Committed => "committed".to_string(),
            Outcome::Aborted { reason } => format!(
                "ABORTED, undone in {} step(s): {}",
                t.undo_steps,
                serde_json::to_string(reason)?
            ),
            Outcome::RejectedByDryRun { predicted_mu } => format!(
                "rejected by dry run (predicted mu {})",
                predicted_mu.map_or("inf".into(), mu_text)
            ),
            Outcome::Declined => "declined".into(),
        };
        println!(
            "  outcome: {outcome}; visible mu now {}",
            t.visible_mu.map_or("inf".into(), mu_text)
        );
    }
    for f in &report.feedback {
        if f.commands.is_empty() {
            println!("\nattempt {}: {}", f.attempt, f.outcome);
        }
    }
    println!("\nvisible mu path: {}", path_text(&report.paths.visible));
    println!("hidden mu path:  {}", path_text(&report.paths.hidden));
    let phases: Vec<String> = report
        .phases
        .iter()
        .map(|p| serde_json::to_value(p).map(|v| v.as_str().unwrap_or("").to_string()))
        .collect::<Result<_, _>>()?;
    println!("states: {}", phases.join(" -> "));
    let verdict = oracle(&env.read().await.cluster().health());
    println!(
        "outcome: {} (alerts cleared: {}, requests succeed: {}, components healthy: {})",
        if report.resolved {
            "MITIGATED"
        } else {
            "NOT MITIGATED"
        },
        verdict.alerts_cleared,
        verdict.requests_succeed,
        verdict.components_healthy
    );
    for r in &verdict.remaining {
        println!("  still: {r}");
    }
    Ok(())
}

async fn bench(b: BenchArgs) -> anyhow::Result<()> {
    let config = BenchConfig {
        seeds: b.seeds,
        max_attempts: b.max_attempts,
        ..BenchConfig::default()
    };
    let progress = crate::progress::Progress::bar(0, "mitigate bench");
    let report =
        run_bench_observed(&config, |done, total| progress.set_position(done, total)).await?;
    progress.finish();
    if b.json {
        println!("{}", serde_json::to_string(&report.summary())?);
    } else {
        println!("{}", report.markdown());
    }
    if let Some(path) = b.write_docs {
        let command = format!(
            "rca mitigate bench --seeds {} --max-attempts {} --write-docs {}",
            b.seeds,
            b.max_attempts,
            path.display()
        );
        let body = format!(
            "## STRATUS: Transactional No-Regression ablation\n\n{}",
            report.markdown()
        );
        rca_eval::docs::write_section(&path, "stratus-tnr-ablation", &command, &body)?;
        eprintln!("wrote section stratus-tnr-ablation of {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        args: MitigateArgs,
    }

    #[test]
    fn bench_writes_its_docs_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmarks.md");
        let t = T::try_parse_from([
            "rca",
            "bench",
            "--seeds",
            "2",
            "--json",
            "--write-docs",
            path.to_str().unwrap(),
        ])
        .unwrap();
        run(t.args).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("<!-- BEGIN stratus-tnr-ablation -->"));
        assert!(text.contains("rca mitigate bench --seeds 2"));
        assert!(text.contains("| tnr |"));
    }

    #[test]
    fn runs_a_scenario_and_rejects_unknown_ones() {
        let t = T::try_parse_from(["rca", "--scenario", "stuck-pod", "--json"]).unwrap();
        run(t.args).unwrap();
        let t = T::try_parse_from(["rca", "--scenario", "no-such-thing"]).unwrap();
        assert!(
            run(t.args)
                .unwrap_err()
                .to_string()
                .contains("unknown scenario")
        );
    }
}
