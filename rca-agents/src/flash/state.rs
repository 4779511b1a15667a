//! Statuses of a FLASH run and what each one sees.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::memory::GlobalMemory;

/// Where the diagnosis stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlashState {
    /// No plan yet: turn the troubleshooting guide into a plan.
    DiagnosisPlanning,
    /// A step is next: refine it into executable actions.
    StepInitialization,
    /// The step's actions are running.
    StepExecution,
    /// The step's actions are done: decide the next step or the final answer.
    StepCompletion,
    /// The diagnosis is over.
    Finished,
}

impl fmt::Display for FlashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlashState::DiagnosisPlanning => "Diagnosis Planning",
            FlashState::StepInitialization => "Step Initialization",
            FlashState::StepExecution => "Step Execution",
            FlashState::StepCompletion => "Step Completion",
            FlashState::Finished => "Finished",
        })
    }
}

impl FlashState {
    /// Every state, in order.
    pub const ALL: [FlashState; 5] = [
        FlashState::DiagnosisPlanning,
        FlashState::StepInitialization,
        FlashState::StepExecution,
        FlashState::StepCompletion,
        FlashState::Finished,
    ];

    /// The instructions this state's context holds (and no other state's).
    pub fn instructions(self) -> &'static str {
        match self {
            FlashState::DiagnosisPlanning => {
                "You are planning the diagnosis. Call `diagnosis_planning` with `steps`, the \
                 numbers of the guide's steps to follow in order (all of them unless a step \
                 clearly does not apply to this incident). Do not run diagnostic tools yet."
            }
            FlashState::StepInitialization => {
                "You are starting the current plan step. Call `plan_refining` to turn it into \
                 executable tool calls, `human_query` if information is missing, or \
                 `dummy_action` if the step needs no action."
            }
            FlashState::StepExecution => {
                "You are executing the current plan step. Call the data tools the step needs, \
                 one at a time, with the arguments it prescribes; use `llm_reasoning` to reason \
                 over what you have seen."
            }
            FlashState::StepCompletion => {
                "The current step's actions are done. Call `step_complete` with `next` set to \
                 \"next\" (the following step), a later step number (when an observation \
                 already settles the steps in between) or \"final\" with the final answer \
                 when the root cause is established."
            }
            FlashState::Finished => "The diagnosis is finished.",
        }
    }

    /// The system tools this state offers (data tools are added in Step Execution).
    pub fn system_tools(self) -> &'static [&'static str] {
        match self {
            FlashState::DiagnosisPlanning => &["diagnosis_planning"],
            FlashState::StepInitialization => &["plan_refining", "human_query", "dummy_action"],
            FlashState::StepExecution => &["llm_reasoning", "human_query", "dummy_action"],
            FlashState::StepCompletion => &["step_complete"],
            FlashState::Finished => &[],
        }
    }

    /// Whether this state offers the data tools.
    pub fn offers_data_tools(self) -> bool {
        self == FlashState::StepExecution
    }
}

/// Detects the state from working memory. `None` when the rules cannot tell: the last action
/// of the step failed and the step has no more prescribed actions (retry, or complete the
/// step?), which is where a model fallback decides.
pub fn detect_by_rules(memory: &GlobalMemory) -> Option<FlashState> {
    if memory.final_answer.is_some() {
        return Some(FlashState::Finished);
    }
    let Some(plan) = &memory.plan else {
        return Some(FlashState::DiagnosisPlanning);
    };
    if memory.current >= plan.steps.len() {
        return Some(FlashState::Finished);
    }
    match &memory.pending {
        None => Some(FlashState::StepInitialization),
        Some(actions) if !actions.is_empty() => Some(FlashState::StepExecution),
        Some(_) if memory.last_action_failed => None,
        Some(_) => Some(FlashState::StepCompletion),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::tsg::parse_tsg;

    #[test]
    fn rules_follow_memory() {
        let mut m = GlobalMemory::default();
        assert_eq!(detect_by_rules(&m), Some(FlashState::DiagnosisPlanning));
        m.plan = Some(parse_tsg("## a\n## b\n").unwrap());
        assert_eq!(detect_by_rules(&m), Some(FlashState::StepInitialization));
        m.pending = Some(vec![crate::flash::tsg::PlannedAction {
            tool: "t".into(),
            args: serde_json::json!({}),
        }]);
        assert_eq!(detect_by_rules(&m), Some(FlashState::StepExecution));
        m.pending = Some(vec![]);
        assert_eq!(detect_by_rules(&m), Some(FlashState::StepCompletion));
        m.last_action_failed = true;
        assert_eq!(detect_by_rules(&m), None);
        m.current = 2;
        assert_eq!(detect_by_rules(&m), Some(FlashState::Finished));
        for s in FlashState::ALL {
            assert!(!s.instructions().is_empty());
        }
    }
}
