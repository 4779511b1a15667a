//! What each status needs to see of the troubleshooting guide, for a model's prompt.
//!
//! - Diagnosis Planning: the guide itself.
//! - Step Initialization: the current step in full (its text, `Action:` lines and branches).
//! - Step Execution: the actions chosen for the step, still to run.
//! - Step Completion: the branch conditions the step's observations are judged by.
//!
//! What earlier steps found is in the working-memory summary every status sees.

use super::memory::GlobalMemory;
use super::state::FlashState;
use super::tsg::{Branch, PlanStep, parse_tsg};

/// Characters of the guide a Diagnosis Planning prompt carries; a longer guide is cut with a
/// note saying so (its steps still reach the later statuses one by one).
pub const GUIDE_CHARS: usize = 12_000;

fn branch_line(b: &Branch) -> String {
    let then = match (&b.conclusion, b.goto) {
        (Some(c), Some(g)) => format!("conclude \"{c}\" and go to step {g}"),
        (Some(c), None) => format!("conclude \"{c}\""),
        (None, Some(g)) => format!("go to step {g}"),
        (None, None) => "continue".to_string(),
    };
    format!("- If an observation matches `{}`: {then}\n", b.pattern)
}

fn step_in_full(step: &PlanStep) -> String {
    let mut out = format!("Current step {}: {}\n", step.number, step.title);
    if !step.detail.trim().is_empty() {
        out.push_str(step.detail.trim());
        out.push('\n');
    }
    if !step.actions.is_empty() {
        out.push_str("Prescribed actions:\n");
        for a in &step.actions {
            out.push_str(&format!("- {} {}\n", a.tool, a.args));
        }
    }
    if !step.branches.is_empty() {
        out.push_str("Branches:\n");
        for b in &step.branches {
            out.push_str(&branch_line(b));
        }
    }
    out
}

/// The part of `guide` (the troubleshooting guide's Markdown) that `state` needs, given the
/// working memory; empty when the status needs none of it.
pub fn guide_view(state: FlashState, guide: &str, memory: &GlobalMemory) -> String {
    let step = memory
        .plan
        .as_ref()
        .and_then(|p| p.steps.get(memory.current));
    match state {
        FlashState::DiagnosisPlanning => {
            let total = guide.chars().count();
            let mut out = String::from("Troubleshooting guide:\n");
            out.extend(guide.chars().take(GUIDE_CHARS));
            if total > GUIDE_CHARS {
                out.push_str(&format!(
                    "\n[the guide continues: {GUIDE_CHARS} of {total} characters shown]"
                ));
            }
            out.push('\n');
            if let Ok(plan) = parse_tsg(guide) {
                out.push_str("Its steps, by number:\n");
                for s in &plan.steps {
                    out.push_str(&format!("{}. {}\n", s.number, s.title));
                }
            }
            out
        }
        FlashState::StepInitialization => step.map(step_in_full).unwrap_or_default(),
        FlashState::StepExecution => match &memory.pending {
            Some(pending) if !pending.is_empty() => {
                let mut out = format!(
                    "Actions chosen for step {}, still to run:\n",
                    memory.current + 1
                );
                for a in pending {
                    out.push_str(&format!("- {} {}\n", a.tool, a.args));
                }
                out
            }
            _ => step.map(step_in_full).unwrap_or_default(),
        },
        FlashState::StepCompletion => match step {
            Some(s) if !s.branches.is_empty() => {
                let mut out = format!(
                    "Step {} ({}) is judged by these branches, first match wins:\n",
                    s.number, s.title
                );
                for b in &s.branches {
                    out.push_str(&branch_line(b));
                }
                out
            }
            Some(s) => format!(
                "Step {} ({}) has no branches: complete it, or give the final answer after the \
                 last step.\n",
                s.number, s.title
            ),
            None => String::new(),
        },
        FlashState::Finished => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::tsg::{PlannedAction, parse_tsg};

    const GUIDE: &str = "# Error alert\n\n## Read the errors\nLook for stack traces first.\n\
        Action: get_logs {\"entity\": \"{component}\"}\n\
        If `exception`: conclude \"exception: {component} throws\"\n\
        If `clean`: go to step 2\n\n## Check CPU\nAction: get_metrics {\"entity\": \"{component}\"}\n";

    #[test]
    fn each_status_sees_its_part_of_the_guide() {
        let mut memory = GlobalMemory::default();
        let planning = guide_view(FlashState::DiagnosisPlanning, GUIDE, &memory);
        assert!(planning.contains("## Check CPU") && planning.contains("Look for stack traces"));
        assert!(planning.contains("by number:\n1. Read the errors\n2. Check CPU\n"));
        memory.plan = Some(parse_tsg(GUIDE).unwrap());
        let init = guide_view(FlashState::StepInitialization, GUIDE, &memory);
        assert!(init.contains("Current step 1: Read the errors"), "{init}");
        assert!(init.contains("Look for stack traces first."), "{init}");
        assert!(
            init.contains("- get_logs {\"entity\":\"{component}\"}"),
            "{init}"
        );
        assert!(init.contains("`clean`: go to step 2"), "{init}");
        assert!(!init.contains("Check CPU"), "only the current step: {init}");
        memory.pending = Some(vec![PlannedAction {
            tool: "get_logs".into(),
            args: serde_json::json!({"entity": "db"}),
        }]);
        let exec = guide_view(FlashState::StepExecution, GUIDE, &memory);
        assert!(
            exec.contains("still to run:\n- get_logs {\"entity\":\"db\"}"),
            "{exec}"
        );
        let done = guide_view(FlashState::StepCompletion, GUIDE, &memory);
        assert!(done.contains("`exception`: conclude \"exception: {component} throws\""));
        assert!(!done.contains("get_logs"), "{done}");
        memory.current = 1;
        let last = guide_view(FlashState::StepCompletion, GUIDE, &memory);
        assert!(last.contains("has no branches"), "{last}");
        assert_eq!(guide_view(FlashState::Finished, GUIDE, &memory), "");
    }

    #[test]
    fn a_long_guide_is_cut_with_a_note() {
        let long = format!("## Step\n{}", "x".repeat(GUIDE_CHARS + 10));
        let view = guide_view(
            FlashState::DiagnosisPlanning,
            &long,
            &GlobalMemory::default(),
        );
        assert!(view.contains(&format!(
            "{GUIDE_CHARS} of {} characters shown",
            long.chars().count()
        )));
    }
}
