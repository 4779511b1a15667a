//! The lifecycle as one object: select a stored tool for a task or generate one, run tools
//! while recording their successes and failures, learn the tool graph from successful
//! diagnoses, warm up from past incidents, and persist it all.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rca_core::source::Value;
use rca_core::{StoreError, TimeRange};
use serde::{Deserialize, Serialize};

use super::error::LifecycleError;
use super::forge::{Escalation, ForgeOutcome, ForgedTool, RoleCalls, ToolForge};
use super::inventory::{StoredTool, ToolInventory};
use super::roles::ToolTask;
use super::select::{Candidate, SelectionReason, ToolSelector};
use super::tool::LifecycleTool;
use crate::tables::{QueryResult, TableEngine};

/// How a tool for a task was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Acquisition {
    /// A stored tool fits: the best-ranked relevant candidate is `name`.
    Reused {
        /// The tool chosen.
        name: String,
        /// Every candidate (relevant ones by quality, then graph successors).
        candidates: Vec<Candidate>,
    },
    /// Nothing fitted, so a tool was generated and stored.
    Generated {
        /// The new tool's name.
        name: String,
        /// How it was made.
        forged: ForgedTool,
        /// Graph successors offered alongside (no relevant tool existed).
        candidates: Vec<Candidate>,
    },
    /// Nothing fitted and generation gave up.
    Escalated(Escalation),
}

impl Acquisition {
    /// The tool to use, if any.
    pub fn tool_name(&self) -> Option<&str> {
        match self {
            Acquisition::Reused { name, .. } | Acquisition::Generated { name, .. } => Some(name),
            Acquisition::Escalated(_) => None,
        }
    }

    /// Role calls spent obtaining it (zero when reused).
    pub fn calls(&self) -> RoleCalls {
        match self {
            Acquisition::Reused { .. } => RoleCalls::default(),
            Acquisition::Generated { forged, .. } => forged.calls,
            Acquisition::Escalated(e) => e.calls,
        }
    }
}

/// What a warm-up did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmUpReport {
    /// Tasks for which a stored tool already fitted.
    pub reused: usize,
    /// Tools generated.
    pub generated: usize,
    /// Tasks for which generation escalated.
    pub escalated: usize,
    /// Role calls spent.
    pub calls: RoleCalls,
}

/// Inventory, selection and generation together.
pub struct ToolLifecycle {
    inventory: Mutex<ToolInventory>,
    selector: ToolSelector,
    forge: ToolForge,
}

impl ToolLifecycle {
    /// A lifecycle over an inventory (empty, or loaded with [`ToolInventory::load_or_new`]).
    pub fn new(inventory: ToolInventory, selector: ToolSelector, forge: ToolForge) -> Self {
        ToolLifecycle {
            inventory: Mutex::new(inventory),
            selector,
            forge,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, ToolInventory>, LifecycleError> {
        self.inventory.lock().map_err(|_| {
            LifecycleError::Store(StoreError::Io {
                message: "the tool inventory lock is poisoned".into(),
            })
        })
    }

    /// A copy of the inventory as it is now.
    pub fn inventory(&self) -> Result<ToolInventory, LifecycleError> {
        Ok(self.lock()?.clone())
    }

    /// The stored tool of that name.
    pub fn tool(&self, name: &str) -> Result<StoredTool, LifecycleError> {
        self.lock()?
            .get(name)
            .cloned()
            .ok_or_else(|| LifecycleError::UnknownTool {
                name: name.to_string(),
            })
    }

    /// Saves the inventory atomically.
    pub fn save(&self, path: &Path) -> Result<(), LifecycleError> {
        let snapshot = self.inventory()?;
        Ok(snapshot.save(path)?)
    }

    /// The candidates for a task (see [`ToolSelector::select`]).
    pub async fn candidates(
        &self,
        task: &str,
        last_tool: Option<&str>,
    ) -> Result<Vec<Candidate>, LifecycleError> {
        let snapshot = self.inventory()?;
        self.selector.select(&snapshot, task, last_tool).await
    }

    /// A tool for `task`: the best relevant stored tool if one passes the threshold, else a
    /// newly generated one (admitted with the trial run as its first success, see
    /// [`ToolInventory::admit`]), else an escalation.
    pub async fn acquire(
        &self,
        task: &ToolTask,
        last_tool: Option<&str>,
        engine: &dyn TableEngine,
    ) -> Result<Acquisition, LifecycleError> {
        let candidates = self.candidates(&task.description, last_tool).await?;
        // A relevant tool (one that followed the last tool in successful diagnoses ranks
        // first), else a graph successor relevant enough, else a new tool.
        let min_successor = self.selector.policy().min_successor_relevance;
        if let Some(best) = candidates
            .iter()
            .find(|c| c.reason == SelectionReason::Relevant)
            .or_else(|| {
                candidates.iter().find(|c| {
                    matches!(c.reason, SelectionReason::Successor { .. })
                        && c.relevance >= min_successor
                })
            })
        {
            return Ok(Acquisition::Reused {
                name: best.name.clone(),
                candidates,
            });
        }
        match self.forge.forge(task, engine).await? {
            ForgeOutcome::Ready(forged) => {
                let name = self.lock()?.admit(StoredTool {
                    contract: forged.contract.clone(),
                    sql: forged.sql.clone(),
                    successes: 1,
                    failures: 0,
                    origin: task.description.clone(),
                    also_for: Vec::new(),
                });
                Ok(Acquisition::Generated {
                    name,
                    forged,
                    candidates,
                })
            }
            ForgeOutcome::Escalated(e) => Ok(Acquisition::Escalated(e)),
        }
    }

    /// Runs a stored tool with call arguments (a JSON object; window parameters default to
    /// `window`) and records the run: a success when the query ran and returned the contract's
    /// columns, a failure otherwise. Arguments that do not bind are the caller's mistake and
    /// are not held against the tool.
    pub async fn run(
        &self,
        name: &str,
        args: &serde_json::Value,
        window: Option<TimeRange>,
        engine: &dyn TableEngine,
    ) -> Result<QueryResult, LifecycleError> {
        let tool = self.tool(name)?;
        let params: Vec<Value> =
            tool.contract
                .bind(args, window)
                .map_err(|e| LifecycleError::InvalidArgs {
                    tool: name.to_string(),
                    message: e.to_string(),
                })?;
        let outcome = engine.run(&tool.sql, &params).await;
        let ok = match &outcome {
            Ok(r) => {
                r.is_empty()
                    || tool
                        .contract
                        .output_columns
                        .iter()
                        .all(|c| r.column_index(c).is_some())
            }
            Err(_) => false,
        };
        self.lock()?.record_run(name, ok)?;
        Ok(outcome?)
    }

    /// Records the tool sequence of a finished diagnosis (successful ones teach the graph).
    pub fn record_diagnosis(
        &self,
        sequence: &[String],
        succeeded: bool,
    ) -> Result<(), LifecycleError> {
        self.lock()?.record_diagnosis(sequence, succeeded);
        Ok(())
    }

    /// Pre-generates tools for past incidents' tasks so that later diagnoses reuse them.
    pub async fn warm_up(
        &self,
        tasks: &[ToolTask],
        engine: &dyn TableEngine,
    ) -> Result<WarmUpReport, LifecycleError> {
        let mut report = WarmUpReport::default();
        for task in tasks {
            let got = self.acquire(task, None, engine).await?;
            report.calls.add(&got.calls());
            match got {
                Acquisition::Reused { .. } => report.reused += 1,
                Acquisition::Generated { .. } => report.generated += 1,
                Acquisition::Escalated(_) => report.escalated += 1,
            }
        }
        Ok(report)
    }

    /// The stored tool `name` as an [`rca_core::Tool`] an explorer can call: it runs on
    /// `engine`, defaults its window to `window`, and records every run in the inventory.
    pub fn as_tool(
        self: &Arc<Self>,
        name: &str,
        engine: Arc<dyn TableEngine>,
        window: Option<TimeRange>,
    ) -> Result<LifecycleTool, LifecycleError> {
        let stored = self.tool(name)?;
        Ok(LifecycleTool::new(
            Arc::clone(self),
            &stored,
            engine,
            window,
        ))
    }
}
