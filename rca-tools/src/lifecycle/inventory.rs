//! The tool inventory: every generated tool with its success and failure history, its
//! quality score and the tool graph; persisted as versioned JSON.

use std::collections::BTreeMap;
use std::path::Path;

use rca_core::StoreError;
use serde::{Deserialize, Serialize};

use super::contract::ToolContract;
use super::error::LifecycleError;
use super::graph::{ToolEdge, ToolGraph};

/// The inventory file format this build reads and writes.
pub const INVENTORY_FORMAT_VERSION: u32 = 1;

/// The quality score Qual(t) = s² / (s + f) of a tool with `s` successes and `f` failures
/// (0 for a tool never run). It grows with successes and is discounted by the failure rate:
/// a tool with 9 successes and 1 failure scores 8.1, one with 1 success and 0 failures 1.
pub fn quality(successes: u64, failures: u64) -> f64 {
    let total = successes + failures;
    if total == 0 {
        0.0
    } else {
        (successes as f64) * (successes as f64) / total as f64
    }
}

/// A tool in the inventory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredTool {
    /// Its contract (name, purpose, parameters, output, checks).
    pub contract: ToolContract,
    /// Its SQL.
    pub sql: String,
    /// Runs that succeeded (including the trial run that admitted it).
    pub successes: u64,
    /// Runs that failed.
    pub failures: u64,
    /// The task description it was generated for (selection compares new tasks with it as
    /// well as with the contract's description).
    #[serde(default)]
    pub origin: String,
    /// Other task descriptions it was generated for again (the same SQL), at most
    /// [`MAX_TASKS_REMEMBERED`]; selection compares new tasks with these too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_for: Vec<String>,
}

/// How many further task descriptions a stored tool remembers.
pub const MAX_TASKS_REMEMBERED: usize = 8;

impl StoredTool {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.contract.name
    }

    /// The task descriptions it is known to serve: its origin, then the others.
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.origin.as_str())
            .chain(self.also_for.iter().map(String::as_str))
            .filter(|t| !t.trim().is_empty())
    }

    /// Qual(t), see [`quality`].
    pub fn quality(&self) -> f64 {
        quality(self.successes, self.failures)
    }
}

/// The on-disk form.
#[derive(Serialize, Deserialize)]
struct InventoryFile {
    format_version: u32,
    tools: Vec<StoredTool>,
    graph: Vec<ToolEdge>,
}

/// The stored tools and the tool graph.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolInventory {
    tools: BTreeMap<String, StoredTool>,
    graph: ToolGraph,
}

impl ToolInventory {
    /// An empty inventory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, replacing (and forgetting the history of) any tool of the same name.
    pub fn insert(&mut self, tool: StoredTool) {
        self.tools.insert(tool.contract.name.clone(), tool);
    }

    /// Admits a newly generated tool and returns the name it is stored under. A tool of the
    /// same name and the same SQL is the same tool generated again: its history is kept, the
    /// new tool's runs are added to it, and it remembers the new task description. A different tool that happens to take a stored
    /// name gets the first free name `<name>_v2`, `<name>_v3`, ... so no history is lost.
    pub fn admit(&mut self, mut tool: StoredTool) -> String {
        let base = tool.contract.name.clone();
        let mut name = base.clone();
        let mut version = 1;
        loop {
            match self.tools.get_mut(&name) {
                Some(stored) if stored.sql == tool.sql => {
                    stored.successes += tool.successes;
                    stored.failures += tool.failures;
                    let task = tool.origin;
                    if !task.trim().is_empty()
                        && !stored.tasks().any(|t| t == task)
                        && stored.also_for.len() < MAX_TASKS_REMEMBERED
                    {
                        stored.also_for.push(task);
                    }
                    return name;
                }
                Some(_) => {
                    version += 1;
                    name = format!("{base}_v{version}");
                }
                None => {
                    tool.contract.name = name.clone();
                    self.tools.insert(name.clone(), tool);
                    return name;
                }
            }
        }
    }

    /// Removes a tool and its graph edges (an obsolete tool, e.g. after a schema change).
    pub fn remove(&mut self, name: &str) -> Option<StoredTool> {
        self.graph.remove_tool(name);
        self.tools.remove(name)
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<&StoredTool> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &StoredTool> {
        self.tools.values()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Records one run of a tool.
    pub fn record_run(&mut self, name: &str, succeeded: bool) -> Result<(), LifecycleError> {
        let tool = self
            .tools
            .get_mut(name)
            .ok_or_else(|| LifecycleError::UnknownTool {
                name: name.to_string(),
            })?;
        if succeeded {
            tool.successes += 1;
        } else {
            tool.failures += 1;
        }
        Ok(())
    }

    /// Records the tool sequence of a finished diagnosis: only successful diagnoses teach the
    /// graph; names not in the inventory are skipped.
    pub fn record_diagnosis(&mut self, sequence: &[String], succeeded: bool) {
        if succeeded {
            let known: Vec<String> = sequence
                .iter()
                .filter(|n| self.tools.contains_key(n.as_str()))
                .cloned()
                .collect();
            self.graph.record_sequence(&known);
        }
    }

    /// The tool graph.
    pub fn graph(&self) -> &ToolGraph {
        &self.graph
    }

    /// Serialises the inventory (format version included).
    pub fn to_json(&self) -> Result<String, StoreError> {
        let file = InventoryFile {
            format_version: INVENTORY_FORMAT_VERSION,
            tools: self.tools.values().cloned().collect(),
            graph: self.graph.edges(),
        };
        serde_json::to_string_pretty(&file).map_err(|e| StoreError::Io {
            message: e.to_string(),
        })
    }

    /// Reads an inventory; `location` names the source in errors. A different format version
    /// is a [`StoreError::UnsupportedVersion`], never a guess.
    pub fn from_json(text: &str, location: &str) -> Result<Self, StoreError> {
        let corrupt = |message: String| StoreError::Corrupt {
            location: location.to_string(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        let found = value
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| corrupt("no `format_version` field".to_string()))?;
        if found != u64::from(INVENTORY_FORMAT_VERSION) {
            return Err(StoreError::UnsupportedVersion {
                location: location.to_string(),
                found: u32::try_from(found).unwrap_or(u32::MAX),
                expected: INVENTORY_FORMAT_VERSION,
            });
        }
        let file: InventoryFile =
            serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        let mut inv = ToolInventory::new();
        for t in file.tools {
            inv.insert(t);
        }
        inv.graph = ToolGraph::from_edges(file.graph);
        Ok(inv)
    }

    /// Writes the inventory to `path` atomically: a temporary file in the same directory,
    /// then a rename over the target.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let io = |e: std::io::Error| StoreError::Io {
            message: format!("{}: {e}", path.display()),
        };
        let text = self.to_json()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads the inventory at `path`.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let text = std::fs::read_to_string(path).map_err(|e| StoreError::Io {
            message: format!("{}: {e}", path.display()),
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Reads the inventory at `path`, or an empty one when the file does not exist yet.
    pub fn load_or_new(path: &Path) -> Result<Self, StoreError> {
        if path.exists() {
            Self::load(path)
        } else {
            Ok(Self::new())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lifecycle::contract::ToolContract;

    pub(crate) fn tool(name: &str, purpose: &str, s: u64, f: u64) -> StoredTool {
        StoredTool {
            contract: ToolContract {
                name: name.into(),
                purpose: purpose.into(),
                parameters: vec![],
                output_columns: vec!["x".into()],
                sanity_checks: vec![],
            },
            sql: "SELECT 1 AS x".into(),
            successes: s,
            failures: f,
            origin: String::new(),
            also_for: Vec::new(),
        }
    }

    #[test]
    fn admitting_keeps_history_and_never_overwrites_a_different_tool() {
        let mut inv = ToolInventory::new();
        inv.insert(tool("errors", "count errors", 5, 1));
        // The same tool generated again: history kept, the trial run added, the task
        // remembered.
        let mut again = tool("errors", "count errors", 1, 0);
        again.origin = "error lines per host".into();
        assert_eq!(inv.admit(again), "errors");
        let stored = inv.get("errors").unwrap();
        assert_eq!((stored.successes, stored.failures), (6, 1));
        assert_eq!(
            stored.tasks().collect::<Vec<_>>(),
            vec!["error lines per host"]
        );
        // A different tool under a taken name gets a fresh one.
        let mut other = tool("errors", "count errors by host", 1, 0);
        other.sql = "SELECT 2 AS x".into();
        assert_eq!(inv.admit(other.clone()), "errors_v2");
        assert_eq!(inv.get("errors_v2").unwrap().contract.name, "errors_v2");
        other.sql = "SELECT 3 AS x".into();
        assert_eq!(inv.admit(other), "errors_v3");
        assert_eq!(inv.get("errors").unwrap().successes, 6);
        assert_eq!(inv.len(), 3);
    }

    #[test]
    fn quality_is_s_squared_over_runs() {
        assert_eq!(quality(0, 0), 0.0);
        assert_eq!(quality(0, 5), 0.0);
        assert_eq!(quality(1, 0), 1.0);
        assert!((quality(9, 1) - 8.1).abs() < 1e-12);
        assert!((quality(3, 3) - 1.5).abs() < 1e-12);
        // More evidence of the same reliability scores higher.
        assert!(quality(10, 10) > quality(1, 1));
        // At equal successes, failures lower the score.
        assert!(quality(4, 0) > quality(4, 4));
    }

    #[test]
    fn runs_and_diagnoses_update_history_and_graph() {
        let mut inv = ToolInventory::new();
        inv.insert(tool("a", "p", 1, 0));
        inv.insert(tool("b", "p", 0, 0));
        inv.record_run("a", true).unwrap();
        inv.record_run("a", false).unwrap();
        assert_eq!(
            inv.get("a").map(|t| (t.successes, t.failures)),
            Some((2, 1))
        );
        assert!((inv.get("a").unwrap().quality() - 4.0 / 3.0).abs() < 1e-12);
        assert!(matches!(
            inv.record_run("zz", true),
            Err(LifecycleError::UnknownTool { .. })
        ));
        let seq = vec!["a".to_string(), "ghost".to_string(), "b".to_string()];
        inv.record_diagnosis(&seq, false);
        assert!(inv.graph().is_empty(), "failed diagnoses teach nothing");
        inv.record_diagnosis(&seq, true);
        assert_eq!(inv.graph().weight("a", "b"), 1);
        inv.remove("b");
        assert!(inv.graph().is_empty());
    }

    #[test]
    fn persistence_round_trip_and_version_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("inventory.json");
        let mut inv = ToolInventory::new();
        inv.insert(tool("a", "first", 3, 1));
        inv.insert(tool("b", "second", 1, 0));
        inv.record_diagnosis(&["a".to_string(), "b".to_string()], true);
        inv.save(&path).unwrap();
        assert!(!dir.path().join("sub").join("inventory.json.tmp").exists());
        let back = ToolInventory::load(&path).unwrap();
        assert_eq!(back, inv);

        let text = std::fs::read_to_string(&path).unwrap();
        let future = text.replace("\"format_version\": 1", "\"format_version\": 99");
        std::fs::write(&path, future).unwrap();
        match ToolInventory::load(&path) {
            Err(StoreError::UnsupportedVersion {
                found, expected, ..
            }) => assert_eq!((found, expected), (99, INVENTORY_FORMAT_VERSION)),
            other => panic!("expected a version error, got {other:?}"),
        }
        std::fs::write(&path, "{\"tools\": []}").unwrap();
        assert!(matches!(
            ToolInventory::load(&path),
            Err(StoreError::Corrupt { .. })
        ));
        let missing = dir.path().join("none.json");
        assert!(ToolInventory::load_or_new(&missing).unwrap().is_empty());
        assert!(ToolInventory::load(&missing).is_err());
    }
}
