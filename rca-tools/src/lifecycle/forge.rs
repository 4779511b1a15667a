//! Generating a tool: the reasoning role writes a contract, the coding role writes SQL, a
//! trial run in the engine judges it, and feedback drives refinement — up to `MG` coding
//! rounds per contract, then up to `MA` analysis-level retries with a new contract, then an
//! [`Escalation`] for the orchestration.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::contract::ToolContract;
use super::error::LifecycleError;
use super::feedback::judge;
use super::roles::{ContractWriter, Feedback, FeedbackKind, SqlWriter, ToolTask};
use crate::tables::{QueryResult, TableEngine};

/// Coding rounds per contract by default (the paper's MG).
pub const DEFAULT_MAX_ROUNDS: usize = 3;
/// Analysis-level retries by default (the paper's MA).
pub const DEFAULT_MAX_ANALYSIS_RETRIES: usize = 2;

/// How hard the forge tries before escalating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeLimits {
    /// Coding rounds per contract, counting the first query (MG, at least 1).
    pub max_rounds: usize,
    /// New contracts after the first one fails (MA).
    pub max_analysis_retries: usize,
}

impl Default for ForgeLimits {
    fn default() -> Self {
        ForgeLimits {
            max_rounds: DEFAULT_MAX_ROUNDS,
            max_analysis_retries: DEFAULT_MAX_ANALYSIS_RETRIES,
        }
    }
}

/// How many times each role was asked, and how many of those were model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCalls {
    /// Contracts asked for.
    pub reasoning: usize,
    /// Queries asked for.
    pub coding: usize,
    /// Of those, calls answered by a language model.
    pub model_calls: usize,
}

impl RoleCalls {
    /// Adds another count to this one.
    pub fn add(&mut self, other: &RoleCalls) {
        self.reasoning += other.reasoning;
        self.coding += other.coding;
        self.model_calls += other.model_calls;
    }
}

/// A tool that passed its trial run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgedTool {
    /// Its contract.
    pub contract: ToolContract,
    /// Its SQL.
    pub sql: String,
    /// Coding rounds on the final contract (1 = the first query passed).
    pub rounds: usize,
    /// Contracts written (1 = the first contract led to the tool).
    pub analysis_attempts: usize,
    /// The trial run's output.
    pub sample: QueryResult,
    /// Role calls spent.
    pub calls: RoleCalls,
    /// Every piece of feedback given along the way, in order.
    pub feedback: Vec<Feedback>,
}

/// Generation gave up: what the orchestration gets to act on (replan, use another modality,
/// ask a person).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Escalation {
    /// The task no tool could be made for.
    pub task: ToolTask,
    /// Why, in one sentence.
    pub reason: String,
    /// The contracts tried, by name.
    pub contracts_tried: Vec<String>,
    /// Every piece of feedback given, in order.
    pub feedback: Vec<Feedback>,
    /// Role calls spent.
    pub calls: RoleCalls,
}

/// What generation produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum ForgeOutcome {
    /// A tool that passed its trial run.
    Ready(ForgedTool),
    /// No tool; the orchestration must act.
    Escalated(Escalation),
}

/// The two roles and the limits of refinement.
#[derive(Clone)]
pub struct ToolForge {
    reasoner: Arc<dyn ContractWriter>,
    coder: Arc<dyn SqlWriter>,
    limits: ForgeLimits,
}

impl ToolForge {
    /// A forge with the default limits (MG = 3, MA = 2).
    pub fn new(reasoner: Arc<dyn ContractWriter>, coder: Arc<dyn SqlWriter>) -> Self {
        ToolForge {
            reasoner,
            coder,
            limits: ForgeLimits::default(),
        }
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: ForgeLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits.
    pub fn limits(&self) -> ForgeLimits {
        self.limits
    }

    /// Generates a tool for `task` over the engine's tables. Errors are reserved for failures
    /// outside generation (the model backend, the engine's catalogue); a tool that cannot be
    /// made is an [`ForgeOutcome::Escalated`].
    pub async fn forge(
        &self,
        task: &ToolTask,
        engine: &dyn TableEngine,
    ) -> Result<ForgeOutcome, LifecycleError> {
        let tables = engine.schemas().await?;
        let mut calls = RoleCalls::default();
        let mut history: Vec<Feedback> = Vec::new();
        let mut analysis: Vec<Feedback> = Vec::new();
        let mut tried: Vec<String> = Vec::new();
        let attempts = 1 + self.limits.max_analysis_retries;
        for attempt in 1..=attempts {
            calls.reasoning += 1;
            calls.model_calls += usize::from(self.reasoner.uses_model());
            let contract = match self.reasoner.write_contract(task, &tables, &analysis).await {
                Ok(c) => c,
                Err(LifecycleError::Malformed { message, .. }) => {
                    let f = contract_feedback(
                        None,
                        format!("the contract could not be read: {message}"),
                    );
                    history.push(f.clone());
                    analysis.push(f);
                    continue;
                }
                Err(LifecycleError::NoTemplate { message }) => {
                    return Ok(ForgeOutcome::Escalated(Escalation {
                        task: task.clone(),
                        reason: message,
                        contracts_tried: tried,
                        feedback: history,
                        calls,
                    }));
                }
                Err(e) => return Err(e),
            };
            tried.push(contract.name.clone());
            let problems = contract.problems();
            if !problems.is_empty() {
                let f = contract_feedback(
                    Some(&contract.name),
                    format!("the contract is unusable: {}", problems.join("; ")),
                );
                history.push(f.clone());
                analysis.push(f);
                continue;
            }
            let params = match contract.bind(&serde_json::Value::Null, task.window) {
                Ok(p) => p,
                Err(e) => {
                    let f = contract_feedback(
                        Some(&contract.name),
                        format!("the tool cannot be tried: {e}"),
                    );
                    history.push(f.clone());
                    analysis.push(f);
                    continue;
                }
            };
            let mut round_feedback: Vec<Feedback> = Vec::new();
            let mut failed_sql: Vec<String> = Vec::new();
            for round in 1..=self.limits.max_rounds.max(1) {
                calls.coding += 1;
                calls.model_calls += usize::from(self.coder.uses_model());
                let sql = match self
                    .coder
                    .write_sql(&contract, &tables, &round_feedback)
                    .await
                {
                    Ok(sql) => sql,
                    Err(LifecycleError::Malformed { message, .. }) => {
                        let f = Feedback {
                            kind: FeedbackKind::Unreadable,
                            message: format!("the answer held no query: {message}"),
                            contract: Some(contract.name.clone()),
                            sql: None,
                        };
                        history.push(f.clone());
                        round_feedback.push(f);
                        continue;
                    }
                    Err(LifecycleError::NoTemplate { message }) => {
                        history.push(contract_feedback(Some(&contract.name), message));
                        break;
                    }
                    Err(e) => return Err(e),
                };
                if failed_sql.iter().any(|s| s.trim() == sql.trim()) {
                    // The coder repeats itself: more rounds on this contract are wasted.
                    let f = Feedback {
                        kind: FeedbackKind::Repeated,
                        message: "the same query was written again after it failed".into(),
                        contract: Some(contract.name.clone()),
                        sql: Some(sql),
                    };
                    history.push(f);
                    break;
                }
                let (result, feedback) = judge(engine, &contract, &sql, &params).await;
                match result {
                    Some(sample) if feedback.is_empty() => {
                        return Ok(ForgeOutcome::Ready(ForgedTool {
                            contract,
                            sql,
                            rounds: round,
                            analysis_attempts: attempt,
                            sample,
                            calls,
                            feedback: history,
                        }));
                    }
                    _ => {
                        history.extend(feedback.iter().cloned());
                        round_feedback.extend(feedback);
                        failed_sql.push(sql);
                    }
                }
            }
            let last = round_feedback
                .last()
                .map(|f| f.to_string())
                .unwrap_or_else(|| "no query was written".into());
            let f = contract_feedback(
                Some(&contract.name),
                format!("no query for this contract passed its trial; last problem: {last}"),
            );
            history.push(f.clone());
            analysis.push(f);
        }
        Ok(ForgeOutcome::Escalated(Escalation {
            task: task.clone(),
            reason: format!(
                "no tool passed its trial after {attempts} contract(s) of up to {} round(s) each",
                self.limits.max_rounds.max(1)
            ),
            contracts_tried: tried,
            feedback: history,
            calls,
        }))
    }
}

fn contract_feedback(contract: Option<&str>, message: String) -> Feedback {
    Feedback {
        kind: FeedbackKind::Contract,
        message,
        contract: contract.map(String::from),
        sql: None,
    }
}
