//! The global working memory of a FLASH run: facts, the plan, and what each step found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tsg::{DiagnosisPlan, PlannedAction};

/// What one step found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StepResult {
    /// 1-based step number.
    pub step: usize,
    /// The step's title.
    pub title: String,
    /// Observations of its actions, in order.
    pub observations: Vec<String>,
    /// A conclusion drawn at its completion.
    pub conclusion: Option<String>,
}

/// Facts, plan and step results shared across steps; serialisable so it is visible in the
/// run record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GlobalMemory {
    /// Facts about the incident (`component`, `incident_id`, answers from humans...), also
    /// used to fill `{fact}` placeholders in planned arguments.
    pub facts: BTreeMap<String, serde_json::Value>,
    /// The plan, once made.
    pub plan: Option<DiagnosisPlan>,
    /// 0-based index of the current step.
    pub current: usize,
    /// The current step's remaining actions (`None`: not refined yet).
    pub pending: Option<Vec<PlannedAction>>,
    /// Whether the last action failed.
    pub last_action_failed: bool,
    /// Results of completed (and the current) steps.
    pub results: Vec<StepResult>,
    /// The final answer, once given.
    pub final_answer: Option<String>,
}

impl GlobalMemory {
    /// Memory holding these facts.
    pub fn with_facts(facts: BTreeMap<String, serde_json::Value>) -> Self {
        GlobalMemory {
            facts,
            ..Default::default()
        }
    }

    /// The result record of the current step, created on first use.
    pub fn current_result(&mut self) -> &mut StepResult {
        let number = self.current + 1;
        let title = self
            .plan
            .as_ref()
            .and_then(|p| p.steps.get(self.current))
            .map(|s| s.title.clone())
            .unwrap_or_default();
        if self.results.last().is_none_or(|r| r.step != number) {
            self.results.push(StepResult {
                step: number,
                title,
                ..Default::default()
            });
        }
        let last = self.results.len() - 1;
        &mut self.results[last]
    }

    /// Marks the step's next pending action done when it is a call of `tool` (an action the
    /// policy took on its own leaves the pending ones as they are).
    pub fn complete_pending(&mut self, tool: &str) {
        if let Some(p) = self.pending.as_mut()
            && p.first().is_some_and(|x| x.tool == tool)
        {
            p.remove(0);
        }
    }

    /// Moves to step `index` (0-based), clearing the pending actions.
    pub fn advance_to(&mut self, index: usize) {
        self.current = index;
        self.pending = None;
        self.last_action_failed = false;
    }

    /// A short summary for prompts: facts, plan progress and step results.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        if !self.facts.is_empty() {
            out.push_str("Facts:\n");
            for (k, v) in &self.facts {
                out.push_str(&format!("- {k}: {v}\n"));
            }
        }
        if let Some(plan) = &self.plan {
            out.push_str("Plan:\n");
            for (i, s) in plan.steps.iter().enumerate() {
                let mark = if i < self.current {
                    "done"
                } else if i == self.current {
                    "current"
                } else {
                    "todo"
                };
                out.push_str(&format!("{}. [{mark}] {}\n", s.number, s.title));
            }
        }
        for r in &self.results {
            out.push_str(&format!("Step {} ({}):\n", r.step, r.title));
            for o in &r.observations {
                out.push_str(&format!(
                    "  - {}\n",
                    o.chars().take(400).collect::<String>()
                ));
            }
            if let Some(c) = &r.conclusion {
                out.push_str(&format!("  conclusion: {c}\n"));
            }
        }
        out
    }
}
