//! Every agent of the workspace run end to end on one model (the local Gemma 3 270M server in
//! the test suite, a replayed recording of it offline), each on bundled data, each checked for
//! what must hold whatever the model says: the run ends within its budgets, every model call
//! carries the server's token counts, invalid turns are counted and repaired or regenerated
//! (never a panic), and the agent's invariants hold (two-modality convergence, TNR's visible
//! severity, read-only diagnosis, sandboxed SQL).
//!
//! `rca bench agents` runs them, records each agent's calls into a cassette
//! ([`rca_llm::RecordingModel`] with [`rca_llm::ModelProvenance`]) and writes the table of
//! `docs/benchmarks.md`; the replay test runs the same functions on those cassettes with no
//! server. The answers need not be right: a 270M base model exercises the mechanisms.

mod audit;
mod runs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rca_core::llm::ChatModel;
use serde::{Deserialize, Serialize};

pub use audit::{CallRecord, TurnAudit, TurnVerdict};
pub use runs::{AGENTS, run_agent};

/// Limits every agent run gets (small: a 2-core machine writes about 27 tokens a second).
/// The step budgets bind; the wall-time budget is a safety net set well above them, so a
/// replay (which answers at once) takes the same path as the recorded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBudgets {
    /// Steps (ReAct turns, FLASH iterations, STRATUS attempts scale from it).
    pub max_steps: usize,
    /// Completion tokens per model turn.
    pub max_turn_tokens: u32,
    /// Wall time of one agent's run.
    pub wall_time: Duration,
    /// Samples for self-consistency.
    pub samples: usize,
    /// The seed of the run (sample `i` uses `seed + i`).
    pub seed: u64,
}

impl Default for RunBudgets {
    fn default() -> Self {
        RunBudgets {
            max_steps: 3,
            max_turn_tokens: 128,
            wall_time: Duration::from_secs(300),
            samples: 2,
            seed: 7,
        }
    }
}

impl RunBudgets {
    /// The sampling settings, for a recording's provenance.
    pub fn sampling(&self) -> serde_json::Value {
        serde_json::json!({
            "temperature": 0.0,
            "self_consistency_temperature": 0.7,
            "seed": self.seed,
            "max_turn_tokens": self.max_turn_tokens,
            "max_steps": self.max_steps,
            "samples": self.samples,
        })
    }
}

/// Where the bundled data is: the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledData {
    root: PathBuf,
}

impl BundledData {
    /// The data under the workspace root `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        BundledData { root: root.into() }
    }

    /// The bundled real incident: the first folder (by name) of `examples/incidents`.
    pub fn real_incident(&self) -> Result<PathBuf, String> {
        first_folder(&self.root.join("examples/incidents"))
    }

    /// The first STRATUS scenario file (by name) of the held-out directory: one none of the
    /// agents was written for.
    pub fn heldout_scenario(&self) -> Result<PathBuf, String> {
        let dir = self.root.join("rca-agents/scenarios/heldout");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        files
            .into_iter()
            .next()
            .ok_or_else(|| format!("no scenario file in {}", dir.display()))
    }

    /// The stream-job incident (example data written for the example, with code).
    pub fn stream_job_incident(&self) -> PathBuf {
        self.root.join("examples/stream-job/data")
    }

    /// The first case (by name) of the recurring-incident suite (guide and alert).
    pub fn recurring_case(&self) -> Result<PathBuf, String> {
        first_folder(&self.root.join("examples/recurring-incidents/cases"))
    }

    /// Every bundled real incident directory: the folders of `examples/incidents` and the
    /// `incident` folders of the recurring-incident cases, by path.
    pub fn incident_dirs(&self) -> Result<Vec<PathBuf>, String> {
        let mut out = Vec::new();
        for (dir, inner) in [
            (self.root.join("examples/incidents"), None),
            (
                self.root.join("examples/recurring-incidents/cases"),
                Some("incident"),
            ),
        ] {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            for e in entries.filter_map(Result::ok) {
                let path = match inner {
                    Some(sub) => e.path().join(sub),
                    None => e.path(),
                };
                if path.join("incident.json").is_file() {
                    out.push(path);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The committed recordings of `model`'s runs.
    pub fn recordings(&self, model: &str) -> PathBuf {
        self.root.join("rca-eval/data/recordings").join(model)
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// The first sub-folder of `dir` by name.
fn first_folder(dir: &Path) -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .ok_or_else(|| format!("{} holds no folder", dir.display()))
}

/// The name of a folder, for labels.
pub(crate) fn folder_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One property checked on a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invariant {
    /// What must hold.
    pub name: String,
    /// Whether it held.
    pub held: bool,
    /// What was seen.
    pub detail: String,
}

impl Invariant {
    /// A checked property.
    pub fn new(name: impl Into<String>, held: bool, detail: impl Into<String>) -> Self {
        Invariant {
            name: name.into(),
            held,
            detail: detail.into(),
        }
    }
}

/// What one agent did with the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    /// The agent (`react`, `flash`, ...).
    pub agent: String,
    /// The data it ran on.
    pub data: String,
    /// The model id as the backend named it.
    pub model: String,
    /// How the run ended, in the agent's words.
    pub outcome: String,
    /// Steps (or iterations, attempts) the agent took.
    pub steps: usize,
    /// Model calls, regenerations included.
    pub model_calls: usize,
    /// Calls whose JSON answer was not valid as written.
    pub invalid_turns: usize,
    /// Of those, how many local repair read.
    pub repairable_turns: usize,
    /// Regeneration rounds the agent asked for (where it counts them).
    pub regenerations: u64,
    /// Calls cut at the token limit.
    pub truncated_turns: usize,
    /// Calls that failed.
    pub failed_calls: usize,
    /// Prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the server counted them.
    pub completion_tokens: u64,
    /// Whether every call carried the server's own counts.
    pub server_counted: bool,
    /// Wall time of the run, in seconds.
    pub seconds: f64,
    /// The properties checked.
    pub invariants: Vec<Invariant>,
}

impl AgentRun {
    /// A run summary from the audited calls; the agent fills in the rest.
    pub fn from_calls(
        agent: &str,
        data: &str,
        model: &dyn ChatModel,
        calls: &[CallRecord],
    ) -> Self {
        AgentRun {
            agent: agent.to_string(),
            data: data.to_string(),
            model: model.model_id().to_string(),
            outcome: String::new(),
            steps: 0,
            model_calls: calls.len(),
            invalid_turns: calls
                .iter()
                .filter(|c| matches!(c.verdict, TurnVerdict::Invalid | TurnVerdict::Repairable))
                .filter(|c| c.error.is_none())
                .count(),
            repairable_turns: calls
                .iter()
                .filter(|c| c.verdict == TurnVerdict::Repairable)
                .count(),
            regenerations: 0,
            truncated_turns: calls.iter().filter(|c| c.truncated).count(),
            failed_calls: calls.iter().filter(|c| c.error.is_some()).count(),
            prompt_tokens: calls.iter().map(|c| c.prompt_tokens).sum(),
            completion_tokens: calls.iter().map(|c| c.completion_tokens).sum(),
            server_counted: calls
                .iter()
                .filter(|c| c.error.is_none())
                .all(|c| !c.estimated && c.prompt_tokens > 0),
            seconds: 0.0,
            invariants: Vec::new(),
        }
    }

    /// Whether every invariant held.
    pub fn invariants_held(&self) -> bool {
        self.invariants.iter().all(|i| i.held)
    }

    /// The invariants that did not hold.
    pub fn broken(&self) -> Vec<&Invariant> {
        self.invariants.iter().filter(|i| !i.held).collect()
    }
}

/// The runs as a Markdown table (one row per agent), for `docs/benchmarks.md`.
pub fn markdown_table(runs: &[AgentRun]) -> String {
    let mut out = String::from(
        "| agent | data | outcome | steps | model calls | invalid turns (repairable) | regenerations | truncated | prompt tokens | completion tokens | seconds | invariants |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let rate = if r.model_calls == 0 {
            0.0
        } else {
            r.invalid_turns as f64 / r.model_calls as f64
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} ({:.0}%; {}) | {} | {} | {} | {} | {:.1} | {} |\n",
            r.agent,
            r.data,
            r.outcome.replace('|', "/"),
            r.steps,
            r.model_calls,
            r.invalid_turns,
            100.0 * rate,
            r.repairable_turns,
            r.regenerations,
            r.truncated_turns,
            r.prompt_tokens,
            r.completion_tokens,
            r.seconds,
            if r.invariants_held() {
                format!("{} held", r.invariants.len())
            } else {
                format!(
                    "BROKEN: {}",
                    r.broken()
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    }
    out
}

/// The model an agent run talks to: audited, and handed out as a trait object.
pub(crate) fn audited(model: Arc<dyn ChatModel>) -> (Arc<TurnAudit>, Arc<dyn ChatModel>) {
    let audit = Arc::new(TurnAudit::new(model));
    let as_model: Arc<dyn ChatModel> = audit.clone();
    (audit, as_model)
}

/// The provenance of a recording made against the test suite's model server, from the
/// variables `scripts/services.sh` writes into `.services/env` (`RCA_LLM_MODEL`,
/// `RCA_LLM_MODEL_FILE`, `RCA_LLM_MODEL_SHA256`, `RCA_LLM_QUANTIZATION`, `RCA_LLM_SERVER`,
/// `RCA_LLM_SERVER_VERSION`). A missing variable is an error: a recording must say what made
/// it.
pub fn provenance_from_env(budgets: &RunBudgets) -> Result<rca_llm::ModelProvenance, String> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                format!("{name} is not set; source .services/env (scripts/services.sh start)")
            })
    };
    let file = var("RCA_LLM_MODEL_FILE")?;
    let file_name = Path::new(&file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(file);
    Ok(rca_llm::ModelProvenance {
        model: var("RCA_LLM_MODEL")?,
        model_file: file_name,
        model_sha256: var("RCA_LLM_MODEL_SHA256")?,
        quantization: var("RCA_LLM_QUANTIZATION")?,
        server: var("RCA_LLM_SERVER")?,
        server_version: var("RCA_LLM_SERVER_VERSION")?,
        sampling: budgets.sampling(),
    })
}
