//! `rca mitigate`: run STRATUS on a simulated fault scenario (built in, or a scenario file),
//! list the scenarios, benchmark the agents on scenario files, or run the fixed-odds
//! demonstration of TNR.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use clap::{Args, Subcommand, ValueEnum};
use rca_agents::stratus::agents::{PolicyDetector, PolicyDiagnoser};
use rca_agents::stratus::bench::{BenchConfig, Odds, StochasticMitigator, run_bench_observed};
use rca_agents::stratus::scenario_bench::{AgentBenchConfig, AgentSet, run_agent_bench};
use rca_agents::stratus::severity::{SeverityWeights, mu_text};
use rca_agents::stratus::{
    Approver, Outcome, Proposal, Scenario, SimEnvironment, Stratus, Tnr, TnrConfig,
    builtin_scenarios, scenario,
};
use tokio::sync::RwLock;

/// Arguments of `rca mitigate`.
#[derive(Debug, Args)]
pub struct MitigateArgs {
    #[command(subcommand)]
    command: Option<MitigateCommand>,
    /// The built-in scenario to mitigate (see --list).
    #[arg(long, conflicts_with = "scenario_file")]
    scenario: Option<String>,
    /// A scenario file to mitigate (docs/guides/stratus.md describes the format).
    #[arg(long, value_name = "FILE")]
    scenario_file: Option<PathBuf>,
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
    /// The agents on scenario files: deterministic (and with --model, model-backed), each
    /// under TNR and without undo.
    Bench(AgentBenchArgs),
    /// Check scenario files: each builds, its fault breaks the cluster without crashing it,
    /// and its reference fix passes the oracle. Runs no agent.
    Check(CheckArgs),
    /// The fixed-odds demonstration of TNR (a mechanism, not a measurement): tnr /
    /// retry_no_undo / no_retry over every built-in scenario x N seeds.
    Demo(BenchArgs),
    /// Write generated scenarios (random applications, faults composed from the manifest
    /// model, one family per kind of object and relation, plus two at once), each checked.
    Generate(GenerateArgs),
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Seed of the generator (the same seed writes the same files).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many scenarios.
    #[arg(long, default_value_t = 17, value_parser = crate::numbers::at_least_one())]
    count: usize,
    /// The directory to write them into (created if missing; an existing file is never
    /// overwritten).
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Scenario files, or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct AgentBenchArgs {
    /// Run the scenario files of this directory (default: the built-in scenarios).
    #[arg(long, value_name = "DIR", conflicts_with = "generated")]
    scenario_dir: Option<PathBuf>,
    /// Run this many generated scenarios (seeded by --seed) instead of files.
    #[arg(long, value_name = "K", value_parser = crate::numbers::at_least_one())]
    generated: Option<usize>,
    /// Seed of the generated scenarios.
    #[arg(long, default_value_t = 0, requires = "generated")]
    seed: u64,
    /// Erase each faulty cluster's change history before the agents arrive (an environment
    /// without an audit trail).
    #[arg(long)]
    without_history: bool,
    /// Also run model-backed agents, on the OpenAI-compatible server of `--model-url` (or
    /// `RCA_LLM_BASE_URL`).
    #[arg(long)]
    model: bool,
    /// The model server (default: `RCA_LLM_BASE_URL`).
    #[arg(long)]
    model_url: Option<String>,
    /// The model name (default: `RCA_LLM_MODEL`).
    #[arg(long)]
    model_name: Option<String>,
    /// Read commands the model diagnoser may run per attempt.
    #[arg(long, default_value_t = 2)]
    reads: usize,
    /// Only the first N scenario files (by name): a model-backed run costs minutes per
    /// scenario on a small machine.
    #[arg(long, value_parser = crate::numbers::at_least_one())]
    first: Option<usize>,
    /// Attempts per run.
    #[arg(long, default_value_t = 10, value_parser = crate::numbers::at_least_one())]
    max_attempts: usize,
    /// Wall time of one run, in seconds.
    #[arg(long, default_value_t = 600, value_parser = crate::numbers::at_least_one_u64())]
    run_seconds: u64,
    /// Print every run as JSON.
    #[arg(long)]
    json: bool,
    /// Write the tables into this Markdown file (section `stratus-agents-<dir>`, with
    /// `-model` when --model).
    #[arg(long)]
    write_docs: Option<PathBuf>,
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
        let warning = proposal
            .irreversible
            .as_ref()
            .map(|why| format!("IRREVERSIBLE: {why}\nundo cannot bring back what it destroys; it will count as a crash.\n"))
            .unwrap_or_default();
        let text = format!(
            "{warning}transaction {} (mu before: {}{}):\n{}\napprove? [y/N] ",
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
    match args.command {
        Some(MitigateCommand::Demo(b)) => return demo(b).await,
        Some(MitigateCommand::Bench(b)) => return agent_bench(b).await,
        Some(MitigateCommand::Check(c)) => return check(c),
        Some(MitigateCommand::Generate(g)) => return generate(g),
        None => {}
    }
    if args.list {
        for s in builtin_scenarios()? {
            println!("{:<20} {}", s.name, s.summary);
        }
        return Ok(());
    }
    let s: Scenario = match (&args.scenario, &args.scenario_file) {
        (Some(name), _) => scenario(name)?.clone(),
        (None, Some(path)) => Scenario::from_file(path)?,
        (None, None) => anyhow::bail!(
            "give --scenario NAME, --scenario-file FILE, --list, or a subcommand (bench, demo)"
        ),
    };
    let weights = SeverityWeights {
        alerts: args.w_alerts,
        sla_violations: args.w_sla,
        capacity_loss: args.w_capacity,
    };
    let env = Arc::new(RwLock::new(SimEnvironment::new(s.build()?)));
    let config = TnrConfig {
        max_commands: args.max_commands,
        weights,
        dry_run: args.dry_run,
        ..TnrConfig::default()
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
                s.clone(),
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
    let verdict = s.verdict(env.read().await.cluster());
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

fn check(args: CheckArgs) -> anyhow::Result<()> {
    let mut bad = 0usize;
    for path in &args.paths {
        let scenarios = if path.is_dir() {
            Scenario::from_dir(path)?
        } else {
            vec![Scenario::from_file(path)?]
        };
        for s in scenarios {
            let c = s.check()?;
            let status = if c.ok() { "ok" } else { "PROBLEM" };
            bad += usize::from(!c.ok());
            println!(
                "{status:<8} {:<28} mu0 {}; fix {}",
                c.name,
                mu_text(c.mu0),
                match c.fix_passes {
                    None => "none given".to_string(),
                    Some(true) => "passes the oracle".to_string(),
                    Some(false) => format!("leaves: {}", c.after_fix.join("; ")),
                }
            );
            for b in &c.broken {
                println!("         broken: {b}");
            }
        }
    }
    if bad > 0 {
        anyhow::bail!("{bad} scenario(s) have problems");
    }
    Ok(())
}

fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    use rca_agents::stratus::sim::generate::generate;
    let scenarios = generate(args.seed, args.count)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let paths: Vec<PathBuf> = scenarios
        .iter()
        .map(|s| args.dir.join(format!("{}.yaml", s.name)))
        .collect();
    if let Some(p) = paths.iter().find(|p| p.exists()) {
        anyhow::bail!(
            "{} already exists; nothing was written (choose another directory or seed)",
            p.display()
        );
    }
    for (s, path) in scenarios.iter().zip(&paths) {
        let text = format!(
            "# STRATUS scenario generated by `rca mitigate generate --seed {} --count {}`.\n{}",
            args.seed,
            args.count,
            s.to_yaml()?
        );
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "wrote {} checked scenarios to {}",
        scenarios.len(),
        args.dir.display()
    );
    Ok(())
}

async fn agent_bench(b: AgentBenchArgs) -> anyhow::Result<()> {
    let (scenarios, label): (Vec<Scenario>, String) = match (&b.scenario_dir, b.generated) {
        (Some(dir), _) => (
            Scenario::from_dir(dir)?,
            dir.file_name()
                .map_or("dir".into(), |n| n.to_string_lossy().to_string()),
        ),
        (None, Some(k)) => (
            rca_agents::stratus::sim::generate::generate(b.seed, k)?,
            "generated".into(),
        ),
        (None, None) => (builtin_scenarios()?.to_vec(), "builtin".into()),
    };
    let scenarios: Vec<Scenario> = match b.first {
        Some(n) => scenarios.into_iter().take(n).collect(),
        None => scenarios,
    };
    let config = AgentBenchConfig {
        max_attempts: b.max_attempts,
        run_timeout: std::time::Duration::from_secs(b.run_seconds),
        without_history: b.without_history,
        ..AgentBenchConfig::default()
    };
    let mut sets = vec![AgentSet::Deterministic, AgentSet::NewestChange];
    let mut provenance = String::new();
    if b.model {
        let client = crate::bench_agents::live_client(
            &b.model_url,
            &b.model_name,
            std::time::Duration::from_secs(120),
        )?;
        provenance = format!(
            " Model: `{}` at the server of `--model-url` (or `RCA_LLM_BASE_URL`), {} read(s) per diagnosis.",
            crate::bench_agents::env_or(&b.model_name, "RCA_LLM_MODEL")?,
            b.reads
        );
        sets.push(AgentSet::Model {
            model: Arc::new(client),
            reads: b.reads,
        });
    }
    let progress = crate::progress::Progress::bar(0, "mitigate bench");
    let report = run_agent_bench(&scenarios, &sets, &config, |done, total| {
        progress.set_position(done as u64, total as u64)
    })
    .await?;
    progress.finish();
    if b.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!("{}", report.markdown());
    }
    if let Some(path) = b.write_docs {
        let section = format!(
            "stratus-agents-{label}{}{}",
            if b.without_history {
                "-without-history"
            } else {
                ""
            },
            if b.model { "-model" } else { "" }
        );
        let command = format!(
            "rca mitigate bench{}{}{}{}{} --max-attempts {} --write-docs {}",
            b.scenario_dir
                .as_ref()
                .map(|d| format!(" --scenario-dir {}", d.display()))
                .unwrap_or_default(),
            b.generated
                .map(|k| format!(" --generated {k} --seed {}", b.seed))
                .unwrap_or_default(),
            if b.without_history {
                " --without-history"
            } else {
                ""
            },
            if b.model {
                format!(" --model --reads {}", b.reads)
            } else {
                String::new()
            },
            b.first.map(|n| format!(" --first {n}")).unwrap_or_default(),
            b.max_attempts,
            path.display()
        );
        let what = match b.generated {
            Some(k) => format!(
                "{k} generated scenarios (seed {}). A demonstration of the mechanism, not of generalisation: the generator and the hypothesis families were written by the same team on the same manifest model (docs/guides/stratus.md); the trivial baseline is in the table.",
                b.seed
            ),
            None if b.model => format!(
                "{} scenario files. Demonstrates that the agents run on a real model (a 270M \
                 base model mitigates little; the point is that each role's turns are the \
                 model's and the transactions hold). Baseline: `baseline-newest-change` (and the \
                 deterministic agents) on the same scenarios, in the same table.",
                scenarios.len()
            ),
            None => format!(
                "{} scenario files. Measures the agents on scenarios in the files' folder (see \
                 docs/guides/stratus.md for who wrote which set). Baseline: \
                 `baseline-newest-change`, in the same table.",
                scenarios.len()
            ),
        };
        let body = format!(
            "## STRATUS agents on the scenarios of `{label}`{}\n\n{what}{provenance}\n\n{}",
            if b.without_history {
                ", the change history erased"
            } else {
                ""
            },
            report.markdown()
        );
        rca_eval::docs::write_section(&path, &section, &command, &body)?;
        eprintln!("wrote section {section} of {}", path.display());
    }
    Ok(())
}

async fn demo(b: BenchArgs) -> anyhow::Result<()> {
    let config = BenchConfig {
        seeds: b.seeds,
        max_attempts: b.max_attempts,
        ..BenchConfig::default()
    };
    let progress = crate::progress::Progress::bar(0, "mitigate demo");
    let report = run_bench_observed(&config, builtin_scenarios()?, |done, total| {
        progress.set_position(done, total)
    })
    .await?;
    progress.finish();
    if b.json {
        println!("{}", serde_json::to_string(&report.summary())?);
    } else {
        println!("{}", report.markdown());
    }
    if let Some(path) = b.write_docs {
        let command = format!(
            "rca mitigate demo --seeds {} --max-attempts {} --write-docs {}",
            b.seeds,
            b.max_attempts,
            path.display()
        );
        let body = format!(
            "## STRATUS: Transactional No-Regression, a fixed-odds demonstration\n\n\
             Baseline: `no_retry` (one attempt, no undo), in the same table.\n\n{}",
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
    fn demo_writes_its_docs_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmarks.md");
        let t = T::try_parse_from([
            "rca",
            "demo",
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
        assert!(text.contains("rca mitigate demo --seeds 2"));
        assert!(text.contains("| tnr |"));
        assert!(text.contains("not a measurement"));
    }

    #[test]
    fn bench_runs_a_scenario_directory_and_writes_its_section() {
        let dir = tempfile::tempdir().unwrap();
        let scenarios = dir.path().join("mine");
        std::fs::create_dir(&scenarios).unwrap();
        let s = scenario("stuck-pod").unwrap();
        std::fs::write(
            scenarios.join("a.yaml"),
            serde_norway::to_string(s).unwrap(),
        )
        .unwrap();
        let path = dir.path().join("benchmarks.md");
        let t = T::try_parse_from([
            "rca",
            "bench",
            "--scenario-dir",
            scenarios.to_str().unwrap(),
            "--write-docs",
            path.to_str().unwrap(),
        ])
        .unwrap();
        run(t.args).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("<!-- BEGIN stratus-agents-mine -->"),
            "{text}"
        );
        assert!(
            text.contains("| stuck-pod | deterministic | tnr | yes |"),
            "{text}"
        );
        std::fs::write(scenarios.join("b.yaml"), "name: [").unwrap();
        let t = T::try_parse_from([
            "rca",
            "bench",
            "--scenario-dir",
            scenarios.to_str().unwrap(),
        ])
        .unwrap();
        assert!(run(t.args).unwrap_err().to_string().contains("b.yaml"));
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
