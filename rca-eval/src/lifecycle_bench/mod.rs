//! Tool reuse benchmark of the tool lifecycle (ICWS'26 pattern 3): warm runs, whose tools come
//! from a persistent inventory warmed up on past incidents, against cold runs that generate
//! every tool afresh. Reported: role calls per incident (each call of a model-backed role is
//! one model call) and the tool reuse rate.
//!
//! Two sets of incidents: synthetic ones generated from a seed (module `synthetic`), and the cases
//! of a Nezha day folder (module `nezha`; the earliest cases warm the inventory up, the later ones
//! are measured). Each incident poses three explorer sub-tasks (logs, traces, metrics),
//! worded differently from incident to incident. The roles are deterministic stand-ins for the
//! models, and every call of one counts as a model call: the reasoning role is
//! [`TemplatePolicy`]; the coding role is [`FirstDraftCoder`], which writes the template's
//! query with the time window in the wrong unit on its first round for a contract (as a coding
//! model often does) and the correct query once it gets feedback.

mod nezha;
mod synthetic;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rca_core::TimeRange;
use rca_core::seeded::SeededRng;
use rca_core::source::Value;
use rca_llm::HashingEmbedder;
use rca_tools::lifecycle::{
    Acquisition, ContractWriter, Feedback, LifecycleError, RoleCalls, SqlWriter, TemplatePolicy,
    ToolContract, ToolForge, ToolInventory, ToolLifecycle, ToolSelector, ToolTask, WarmUpReport,
};
use rca_tools::tables::{SandboxLimits, TableError, TableSchema, TelemetryTables};
use serde::{Deserialize, Serialize};

use crate::nezha::{NezhaError, service_of};

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleBenchError {
    /// The dataset has nothing to measure (the message says what is missing).
    #[error("{0}")]
    NoData(String),
    /// Reading the Nezha data failed.
    #[error(transparent)]
    Nezha(#[from] NezhaError),
    /// Building an incident's tables failed.
    #[error(transparent)]
    Tables(#[from] TableError),
    /// The lifecycle failed outside generation.
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
}

/// Where the benchmark's incidents come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IncidentSet {
    /// Incidents generated from the seed.
    Synthetic {
        /// Incidents measured.
        incidents: usize,
        /// Past incidents whose sub-tasks warm the inventory up before the warm run.
        warm_up_incidents: usize,
    },
    /// The cases of a Nezha dataset's day folder, in time order: the first
    /// `warm_up_incidents` warm the inventory up, the rest are measured.
    Nezha {
        /// The dataset root (holding `rca_data/`).
        root: PathBuf,
        /// The day folder (the first one when `None`).
        day: Option<String>,
        /// Cases used for the warm-up.
        warm_up_incidents: usize,
        /// Use at most this many cases in all (all when `None`).
        limit: Option<usize>,
    },
}

/// The benchmark's knobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleBenchConfig {
    /// The incidents.
    pub set: IncidentSet,
    /// Seed of the incident generator and of the sub-task wording.
    pub seed: u64,
}

impl Default for LifecycleBenchConfig {
    fn default() -> Self {
        LifecycleBenchConfig {
            set: IncidentSet::Synthetic {
                incidents: 24,
                warm_up_incidents: 3,
            },
            seed: 7,
        }
    }
}

/// Figures of one run (cold or warm).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// Incidents.
    pub incidents: usize,
    /// Sub-tasks that asked for a tool.
    pub acquisitions: usize,
    /// Of those, served by a stored tool.
    pub reused: usize,
    /// Of those, served by a newly generated tool.
    pub generated: usize,
    /// Of those, for which generation escalated.
    pub escalated: usize,
    /// Sub-tasks whose tool put the faulty component first (for the fault's modality).
    pub fault_found: usize,
    /// Role calls (reasoning plus coding) spent during the run.
    pub role_calls: usize,
}

impl RunStats {
    /// Role calls per incident.
    pub fn calls_per_incident(&self) -> f64 {
        ratio(self.role_calls, self.incidents)
    }

    /// Share of acquisitions served by a stored tool.
    pub fn reuse_rate(&self) -> f64 {
        ratio(self.reused, self.acquisitions)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The benchmark's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleBenchReport {
    /// The knobs.
    pub config: LifecycleBenchConfig,
    /// What the incidents were, in words.
    pub source: String,
    /// Every tool generated afresh for every incident.
    pub cold: RunStats,
    /// Tools from the persistent inventory, generated only when nothing fits.
    pub warm: RunStats,
    /// What the warm-up did.
    pub warm_up: WarmUpReport,
    /// Tools in the inventory after the warm run.
    pub inventory_tools: usize,
    /// Tool-graph edges after the warm run.
    pub graph_edges: usize,
}

impl LifecycleBenchReport {
    /// A Markdown section for `docs/benchmarks.md`.
    pub fn markdown(&self) -> String {
        let row = |name: &str, s: &RunStats| {
            format!(
                "| {name} | {} | {} | {:.2} | {:.1}% | {} | {} | {} |\n",
                s.incidents,
                s.acquisitions,
                s.calls_per_incident(),
                100.0 * s.reuse_rate(),
                s.generated,
                s.escalated,
                s.fault_found
            )
        };
        let warm_up_incidents = match &self.config.set {
            IncidentSet::Synthetic {
                warm_up_incidents, ..
            }
            | IncidentSet::Nezha {
                warm_up_incidents, ..
            } => *warm_up_incidents,
        };
        let mut out = format!(
            "{} (seed {}), three explorer sub-tasks each; deterministic roles standing in for \
             the models (template reasoning role, a coding role that needs one refinement per \
             new contract); every role call counts as a model call; selection embeds with the \
             hashing embedder. A cold run generates every \
             sub-task's tool afresh. Warm-up: {} past incidents, {} tools generated with {} role \
             calls.\n\n",
            self.source,
            self.config.seed,
            warm_up_incidents,
            self.warm_up.generated,
            self.warm_up.calls.reasoning + self.warm_up.calls.coding
        );
        out.push_str("| run | incidents | sub-tasks | role calls per incident | tool reuse rate | generated | escalated | fault component ranked first |\n");
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        out.push_str(&row("cold (no inventory)", &self.cold));
        out.push_str(&row("warm (persistent inventory)", &self.warm));
        out.push_str(&format!(
            "\nAfter the warm run the inventory holds {} tools and the tool graph {} edges.\n",
            self.inventory_tools, self.graph_edges
        ));
        out.push_str(
            "\n**What these figures follow from.** This table demonstrates the mechanism; it \
             measures nothing about reuse in the field. Baseline: the cold run (no inventory: \
             every sub-task generates its tool). The reuse rate follows from how the \
             benchmark is built: each modality's sub-tasks are drawn from a few fixed \
             phrasings, and the template roles make one tool per modality, so once warm-up has \
             stored those tools almost every later sub-task matches one. The fault column is \
             the same cold and warm by construction: a reused tool runs the query the template \
             roles would have generated afresh. The 22-28% gain the paper reports from tool \
             management comes from model-written tools that improve with quality scores and \
             feedback, which deterministic roles cannot show.\n",
        );
        out
    }
}

/// The coding role of the benchmark: the template's query, but on the first round for a
/// contract the window is compared in seconds instead of milliseconds (an empty result);
/// after feedback, the correct query.
pub struct FirstDraftCoder;

#[async_trait]
impl SqlWriter for FirstDraftCoder {
    fn uses_model(&self) -> bool {
        false
    }

    async fn write_sql(
        &self,
        contract: &ToolContract,
        tables: &[TableSchema],
        feedback: &[Feedback],
    ) -> Result<String, LifecycleError> {
        let sql = TemplatePolicy.write_sql(contract, tables, feedback).await?;
        if feedback.is_empty() {
            Ok(sql
                .replace("$1", "($1 / 1000)")
                .replace("$2", "($2 / 1000)"))
        } else {
            Ok(sql)
        }
    }
}

/// What a tool's answer must show to count as finding the fault (used only for scoring).
pub(crate) enum Truth {
    /// The tool of sub-task `task` ranks `component` first.
    FaultTask {
        /// The sub-task whose modality shows the fault.
        task: usize,
        /// The faulty component.
        component: String,
    },
    /// Some sub-task's tool ranks a component of this service (pod name without its two
    /// trailing parts) first.
    AnyTask {
        /// The faulty service.
        service: String,
    },
}

impl Truth {
    fn found(&self, task: usize, top: &str) -> bool {
        match self {
            Truth::FaultTask { task: t, component } => *t == task && top == component,
            Truth::AnyTask { service } => service_of(top) == service,
        }
    }
}

/// One incident of the benchmark.
pub(crate) struct BenchIncident {
    tables: TelemetryTables,
    window: TimeRange,
    tasks: Vec<ToolTask>,
    truth: Truth,
}

fn lifecycle(inventory: ToolInventory) -> ToolLifecycle {
    let reasoner: Arc<dyn ContractWriter> = Arc::new(TemplatePolicy);
    let forge = ToolForge::new(reasoner, Arc::new(FirstDraftCoder));
    ToolLifecycle::new(
        inventory,
        ToolSelector::new(Arc::new(HashingEmbedder::default())),
        forge,
    )
}

fn add_calls(stats: &mut RunStats, calls: RoleCalls) {
    stats.role_calls += calls.reasoning + calls.coding;
}

/// How a run obtains each sub-task's tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every sub-task's tool is generated afresh (an empty inventory per sub-task).
    Cold,
    /// Tools come from the shared lifecycle's inventory when one fits.
    Warm,
}

/// Runs one incident's sub-tasks; records the outcome in `stats`.
async fn diagnose(
    shared: &ToolLifecycle,
    mode: Mode,
    inc: &BenchIncident,
    stats: &mut RunStats,
) -> Result<(), LifecycleBenchError> {
    stats.incidents += 1;
    let mut sequence: Vec<String> = Vec::new();
    let mut found = false;
    for (index, task) in inc.tasks.iter().enumerate() {
        let fresh;
        let lc = match mode {
            Mode::Cold => {
                fresh = lifecycle(ToolInventory::new());
                &fresh
            }
            Mode::Warm => shared,
        };
        stats.acquisitions += 1;
        let got = lc
            .acquire(task, sequence.last().map(String::as_str), &inc.tables)
            .await?;
        add_calls(stats, got.calls());
        match &got {
            Acquisition::Reused { .. } => stats.reused += 1,
            Acquisition::Generated { .. } => stats.generated += 1,
            Acquisition::Escalated(_) => stats.escalated += 1,
        }
        let Some(name) = got.tool_name() else {
            continue;
        };
        let Ok(result) = lc
            .run(
                name,
                &serde_json::Value::Null,
                Some(inc.window),
                &inc.tables,
            )
            .await
        else {
            continue;
        };
        sequence.push(name.to_string());
        if let Some(Value::Text(top)) = result.value(0, "component")
            && inc.truth.found(index, top)
        {
            stats.fault_found += 1;
            found = true;
        }
    }
    if mode == Mode::Warm {
        shared.record_diagnosis(&sequence, found)?;
    }
    Ok(())
}

/// Runs the benchmark.
pub async fn run(
    config: LifecycleBenchConfig,
) -> Result<LifecycleBenchReport, LifecycleBenchError> {
    let limits = SandboxLimits {
        max_rows: 1000,
        memory_bytes: 512 * 1024 * 1024,
        timeout: Duration::from_secs(60),
    };
    let mut rng = SeededRng::new(config.seed);
    let (source, past, measured) = match &config.set {
        IncidentSet::Synthetic {
            incidents,
            warm_up_incidents,
        } => {
            let past: Vec<BenchIncident> = (0..*warm_up_incidents)
                .map(|_| synthetic::incident(&mut rng, limits))
                .collect::<Result<_, _>>()?;
            let measured: Vec<BenchIncident> = (0..*incidents)
                .map(|_| synthetic::incident(&mut rng, limits))
                .collect::<Result<_, _>>()?;
            ("Synthetic incidents".to_string(), past, measured)
        }
        IncidentSet::Nezha {
            root,
            day,
            warm_up_incidents,
            limit,
        } => {
            let (day, mut all) = nezha::incidents(root, day.as_deref(), *limit, &mut rng, limits)?;
            if all.len() <= *warm_up_incidents {
                return Err(LifecycleBenchError::NoData(format!(
                    "day {day} has {} cases; the warm-up takes {warm_up_incidents} and none would \
                     be left to measure",
                    all.len()
                )));
            }
            let measured = all.split_off(*warm_up_incidents);
            let source = format!(
                "Nezha day {day}: the first {} cases warm up, the next {} are measured",
                all.len(),
                measured.len()
            );
            (source, all, measured)
        }
    };

    // Cold: every sub-task's tool is generated afresh.
    let unused = lifecycle(ToolInventory::new());
    let mut cold = RunStats::default();
    for inc in &measured {
        diagnose(&unused, Mode::Cold, inc, &mut cold).await?;
    }

    // Warm: one inventory, warmed up on past incidents' sub-tasks, kept across incidents.
    let warm_lc = lifecycle(ToolInventory::new());
    let mut warm_up = WarmUpReport::default();
    for inc in &past {
        let r = warm_lc.warm_up(&inc.tasks, &inc.tables).await?;
        warm_up.reused += r.reused;
        warm_up.generated += r.generated;
        warm_up.escalated += r.escalated;
        warm_up.calls.add(&r.calls);
    }
    let mut warm = RunStats::default();
    for inc in &measured {
        diagnose(&warm_lc, Mode::Warm, inc, &mut warm).await?;
    }
    let inventory = warm_lc.inventory()?;
    Ok(LifecycleBenchReport {
        config,
        source,
        cold,
        warm,
        warm_up,
        inventory_tools: inventory.len(),
        graph_edges: inventory.graph().len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warm_runs_reuse_tools_and_spend_fewer_calls() {
        let report = run(LifecycleBenchConfig {
            set: IncidentSet::Synthetic {
                incidents: 4,
                warm_up_incidents: 2,
            },
            seed: 3,
        })
        .await
        .unwrap();
        assert_eq!(report.cold.acquisitions, 12);
        assert_eq!(report.cold.reused, 0, "a cold run has nothing to reuse");
        // Each cold tool costs one contract and two coding rounds.
        assert_eq!(report.cold.role_calls, 3 * report.cold.generated);
        assert!(report.warm.reuse_rate() > 0.0);
        assert!(report.warm.calls_per_incident() < report.cold.calls_per_incident());
        assert!(
            report
                .markdown()
                .contains("| warm (persistent inventory) | 4 | 12 |")
        );
    }

    #[tokio::test]
    async fn a_missing_day_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("rca-lc-nodata-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rca_data")).unwrap();
        let err = run(LifecycleBenchConfig {
            set: IncidentSet::Nezha {
                root: dir.clone(),
                day: Some("1999-01-01".into()),
                warm_up_incidents: 1,
                limit: None,
            },
            seed: 1,
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("no day folder"), "{err}");
        std::fs::remove_dir_all(dir).ok();
    }
}
