//! Generated SQL tools on the command line (feature `sql`): `rca diagnose --generated-tools
//! FILE` explores with tools from a persistent inventory, and `rca tools warm-up` pre-generates
//! them from past incidents.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use rca_agents::orchestra::generated::{GeneratedToolExplorer, task_for};
use rca_agents::orchestra::policy::OrderedPlanner;
use rca_agents::orchestra::{Explorer, Planner};
use rca_core::Modality;
use rca_llm::HashingEmbedder;
use rca_tools::incident_dir::IncidentDir;
use rca_tools::lifecycle::{TemplatePolicy, ToolForge, ToolInventory, ToolLifecycle, ToolSelector};
use rca_tools::tables::{SandboxLimits, TableEngine, TelemetryTables};

/// `rca tools ...`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Pre-generate tools from past incidents into an inventory, so that later diagnoses with
    /// `rca diagnose --generated-tools FILE` reuse them.
    WarmUp(WarmUpArgs),
}

/// Arguments of `rca tools warm-up`.
#[derive(Debug, Args)]
pub struct WarmUpArgs {
    /// The inventory file (created when missing, updated atomically).
    #[arg(long, value_name = "FILE")]
    pub inventory: PathBuf,
    /// Past incident directories.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
}

/// A lifecycle over the inventory at `path` with the deterministic roles.
fn lifecycle(path: &Path) -> anyhow::Result<Arc<ToolLifecycle>> {
    let inventory = ToolInventory::load_or_new(path)
        .with_context(|| format!("cannot read the tool inventory {}", path.display()))?;
    let forge = ToolForge::new(Arc::new(TemplatePolicy), Arc::new(TemplatePolicy));
    Ok(Arc::new(ToolLifecycle::new(
        inventory,
        ToolSelector::new(Arc::new(HashingEmbedder::default())),
        forge,
    )))
}

fn engine(loaded: &IncidentDir) -> anyhow::Result<Arc<dyn TableEngine>> {
    let tables = TelemetryTables::new(SandboxLimits::default())?;
    tables
        .register_incident(loaded)
        .with_context(|| format!("cannot load {} as tables", loaded.dir.display()))?;
    Ok(Arc::new(tables))
}

/// The modalities an incident has data for.
fn modalities(loaded: &IncidentDir) -> Vec<Modality> {
    let mut out = Vec::new();
    if !loaded.metrics.samples_all().is_empty() {
        out.push(Modality::Metrics);
    }
    if !loaded.traces.spans_all().is_empty() {
        out.push(Modality::Traces);
    }
    if !loaded.logs.records().is_empty() {
        out.push(Modality::Logs);
    }
    out
}

/// Explorers backed by generated tools for one diagnosis, and what to do after it.
pub struct GeneratedTools {
    path: PathBuf,
    lifecycle: Arc<ToolLifecycle>,
    explorers: Vec<Arc<GeneratedToolExplorer>>,
}

impl GeneratedTools {
    /// One explorer per modality of `loaded`, sharing the inventory at `path`.
    pub fn open(path: &Path, loaded: &IncidentDir) -> anyhow::Result<Self> {
        let lifecycle = lifecycle(path)?;
        let engine = engine(loaded)?;
        let explorers = modalities(loaded)
            .into_iter()
            .map(|m| {
                Arc::new(GeneratedToolExplorer::new(
                    m,
                    lifecycle.clone(),
                    engine.clone(),
                ))
            })
            .collect();
        Ok(GeneratedTools {
            path: path.to_path_buf(),
            lifecycle,
            explorers,
        })
    }

    /// The explorers, for the orchestrator.
    pub fn explorers(&self) -> Vec<Arc<dyn Explorer>> {
        self.explorers
            .iter()
            .map(|e| e.clone() as Arc<dyn Explorer>)
            .collect()
    }

    /// Records the diagnosis (a concluded one teaches the tool graph) and saves the inventory.
    pub fn finish(&self, concluded: bool) -> anyhow::Result<()> {
        let sequence: Vec<String> = self.explorers.iter().flat_map(|e| e.tools_used()).collect();
        self.lifecycle
            .record_diagnosis(&sequence, concluded)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        self.lifecycle
            .save(&self.path)
            .with_context(|| format!("cannot save {}", self.path.display()))?;
        eprintln!(
            "generated tools: {} used ({}), inventory saved to {}",
            sequence.len(),
            sequence.join(", "),
            self.path.display()
        );
        Ok(())
    }
}

/// Runs `rca tools ...`.
pub async fn run(command: ToolsCommand) -> anyhow::Result<()> {
    match command {
        ToolsCommand::WarmUp(args) => warm_up(args).await,
    }
}

async fn warm_up(args: WarmUpArgs) -> anyhow::Result<()> {
    let lc = lifecycle(&args.inventory)?;
    let planner = OrderedPlanner::default();
    for dir in &args.dirs {
        let loaded =
            IncidentDir::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
        let engine = engine(&loaded)?;
        let plan = planner
            .plan(&loaded.incident, &modalities(&loaded), None)
            .await
            .context("planning failed")?;
        let tasks: Vec<_> = plan
            .subgoals
            .iter()
            .map(|s| task_for(&s.modality, &s.goal, loaded.incident.window))
            .collect();
        let report = lc.warm_up(&tasks, engine.as_ref()).await?;
        println!(
            "{}: {} tasks, {} tools generated, {} reused, {} escalated, {} role calls",
            dir.display(),
            tasks.len(),
            report.generated,
            report.reused,
            report.escalated,
            report.calls.reasoning + report.calls.coding
        );
    }
    lc.save(&args.inventory)
        .with_context(|| format!("cannot save {}", args.inventory.display()))?;
    println!(
        "inventory {}: {} tools",
        args.inventory.display(),
        lc.inventory().map(|i| i.len()).unwrap_or(0)
    );
    Ok(())
}
