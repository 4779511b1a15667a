//! The rules that supervise a model-driven run: which statuses the guide allows next, whether
//! the model's status stands, and what of the model's plan and step refinement the parsed
//! guide accepts. Without a model the rules decide alone ([`super::state::detect_by_rules`]).

use serde::{Deserialize, Serialize};

use super::memory::GlobalMemory;
use super::state::{FlashState, detect_by_rules};
use super::tsg::{DiagnosisPlan, PlanStep, PlannedAction};

/// The statuses the guide allows after what working memory holds. A run with a final answer
/// or past its last step allows only [`FlashState::Finished`]; without a plan only planning;
/// a step without refined actions only its initialization; a step with actions pending only
/// execution, or completion once it has observations to judge; a step whose last action
/// failed with nothing pending either a retry or completion; otherwise completion.
pub fn allowed_states(memory: &GlobalMemory) -> Vec<FlashState> {
    if memory.final_answer.is_some() {
        return vec![FlashState::Finished];
    }
    let Some(plan) = &memory.plan else {
        return vec![FlashState::DiagnosisPlanning];
    };
    if memory.current >= plan.steps.len() {
        return vec![FlashState::Finished];
    }
    let observed = memory
        .results
        .iter()
        .any(|r| r.step == memory.current + 1 && !r.observations.is_empty());
    match &memory.pending {
        None => vec![FlashState::StepInitialization],
        Some(p) if !p.is_empty() && observed => {
            vec![FlashState::StepExecution, FlashState::StepCompletion]
        }
        Some(p) if !p.is_empty() => vec![FlashState::StepExecution],
        Some(_) if memory.last_action_failed => {
            vec![FlashState::StepCompletion, FlashState::StepExecution]
        }
        Some(_) => vec![FlashState::StepCompletion],
    }
}

/// How the status of one iteration was decided: what the rules and the model said, and what
/// stood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDecision {
    /// The rules' status (`None` where they cannot tell: a failed action with nothing pending).
    pub rules: Option<FlashState>,
    /// The model's status, when a model read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<FlashState>,
    /// Why the model's reading is missing, when it was asked and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_error: Option<String>,
    /// The status that stood.
    pub chosen: FlashState,
    /// Whether the model's status was overruled because the guide does not allow it here.
    pub overruled: bool,
}

impl StatusDecision {
    /// The note a trajectory step carries about it; empty when no model was asked.
    pub fn note(&self) -> String {
        match (&self.model, &self.model_error) {
            (Some(m), _) if self.overruled => format!(
                "(status: the model said {m}, not allowed here; the rules chose {}) ",
                self.chosen
            ),
            (Some(m), _) if Some(*m) != self.rules => format!(
                "(status: the model's {m}; the rules would have said {}) ",
                self.rules
                    .map_or_else(|| "nothing".to_string(), |r| r.to_string())
            ),
            (None, Some(e)) => format!("(status: the model failed ({e}); the rules decided) "),
            _ => String::new(),
        }
    }
}

/// The status of this iteration: the model's reading when the guide allows it, else the
/// rules' (completion where the rules cannot tell).
pub fn supervise_status(
    memory: &GlobalMemory,
    model: Result<Option<FlashState>, String>,
) -> StatusDecision {
    let rules = detect_by_rules(memory);
    let allowed = allowed_states(memory);
    let fallback = rules.unwrap_or(FlashState::StepCompletion);
    let (model, model_error) = match model {
        Ok(m) => (m, None),
        Err(e) => (None, Some(e)),
    };
    let (chosen, overruled) = match model {
        Some(m) if allowed.contains(&m) => (m, false),
        Some(_) => (fallback, true),
        None => (fallback, false),
    };
    StatusDecision {
        rules,
        model,
        model_error,
        chosen,
        overruled,
    }
}

/// Reads a status name as a model writes it (`step_execution`, `Step Execution`, ...).
pub fn parse_state(text: &str) -> Option<FlashState> {
    let key: String = text
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    FlashState::ALL.into_iter().find(|s| {
        s.to_string()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .eq_ignore_ascii_case(&key)
    })
}

/// What the guide check made of a model's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCheck {
    /// The plan that stands.
    pub plan: DiagnosisPlan,
    /// Whether it is the model's selection (else the guide's whole plan).
    pub from_model: bool,
    /// What the check rejected, and why.
    pub notes: Vec<String>,
}

fn step_number(entry: &serde_json::Value, guide: &DiagnosisPlan) -> Option<usize> {
    match entry {
        serde_json::Value::Number(n) => n.as_u64().map(|n| n as usize),
        serde_json::Value::String(s) => {
            let digits: String = s
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok().or_else(|| {
                let s = s.trim().to_ascii_lowercase();
                guide
                    .steps
                    .iter()
                    .find(|st| st.title.to_ascii_lowercase() == s)
                    .map(|st| st.number)
            })
        }
        serde_json::Value::Object(o) => o.get("number").or_else(|| o.get("step")).and_then(|v| {
            step_number(v, guide).or_else(|| o.get("title").and_then(|t| step_number(t, guide)))
        }),
        _ => None,
    }
}

/// Checks a model's plan (`steps`: the guide's step numbers or titles to follow, in order)
/// against the parsed guide. A step the guide does not have, a repeat, or a step before one
/// already chosen (guides run forward) is dropped with a note; a proposal with nothing left
/// (or none at all) gives the guide's whole plan. Branch jumps to a dropped step go to the
/// next kept one.
pub fn check_plan(guide: &DiagnosisPlan, proposal: &serde_json::Value) -> PlanCheck {
    let mut notes = Vec::new();
    let entries = match proposal {
        serde_json::Value::Array(a) if !a.is_empty() => a.clone(),
        serde_json::Value::Null => Vec::new(),
        serde_json::Value::Array(_) => Vec::new(),
        other => {
            notes.push(format!("`steps` is not a list: {other}"));
            Vec::new()
        }
    };
    let mut kept: Vec<usize> = Vec::new();
    for entry in &entries {
        match step_number(entry, guide) {
            Some(n) if n == 0 || n > guide.steps.len() => {
                notes.push(format!("the guide has no step {n}"));
            }
            Some(n) if kept.contains(&n) => notes.push(format!("step {n} repeated")),
            Some(n) if kept.last().is_some_and(|&l| n < l) => {
                notes.push(format!("step {n} after a later step: a guide runs forward"));
            }
            Some(n) => kept.push(n),
            None => notes.push(format!("not a step of the guide: {entry}")),
        }
    }
    if kept.is_empty() {
        if entries.is_empty() && notes.is_empty() && !proposal.is_null() {
            notes.push("no steps proposed".into());
        }
        return PlanCheck {
            plan: guide.clone(),
            from_model: false,
            notes,
        };
    }
    PlanCheck {
        plan: guide.select(&kept),
        from_model: true,
        notes,
    }
}

/// Checks a model's refinement of `step` into actions. An action whose tool is not among
/// `known` is dropped with a note; the step's prescribed actions the model left out are added
/// after its own (the branches judge their observations). Returns the actions and the notes.
pub fn check_refinement(
    step: Option<&PlanStep>,
    proposed: Option<Vec<PlannedAction>>,
    known: &[String],
) -> (Vec<PlannedAction>, Vec<String>) {
    let prescribed = step.map(|s| s.actions.clone()).unwrap_or_default();
    let Some(proposed) = proposed.filter(|p| !p.is_empty()) else {
        return (prescribed, Vec::new());
    };
    let mut notes = Vec::new();
    let mut actions: Vec<PlannedAction> = Vec::new();
    for a in proposed {
        if known.contains(&a.tool) {
            actions.push(a);
        } else {
            notes.push(format!("`{}` is not a tool of this run", a.tool));
        }
    }
    for p in prescribed {
        if !actions.iter().any(|a| a.tool == p.tool) {
            notes.push(format!("the guide's `{}` added", p.tool));
            actions.push(p);
        }
    }
    (actions, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::tsg::parse_tsg;

    const GUIDE: &str = "## Read logs\nAction: get_logs {}\nIf `boom`: go to step 3\n\
        ## Read metrics\nAction: get_metrics {}\n## Conclude\nIf `x`: conclude \"done\"\n";

    #[test]
    fn the_guide_allows_statuses_by_what_memory_holds() {
        let mut m = GlobalMemory::default();
        assert_eq!(allowed_states(&m), [FlashState::DiagnosisPlanning]);
        m.plan = Some(parse_tsg(GUIDE).unwrap());
        assert_eq!(allowed_states(&m), [FlashState::StepInitialization]);
        m.pending = Some(vec![PlannedAction {
            tool: "get_logs".into(),
            args: serde_json::json!({}),
        }]);
        assert_eq!(allowed_states(&m), [FlashState::StepExecution]);
        m.current_result().observations.push("seen".into());
        assert!(allowed_states(&m).contains(&FlashState::StepCompletion));
        m.pending = Some(Vec::new());
        assert_eq!(allowed_states(&m), [FlashState::StepCompletion]);
        m.last_action_failed = true;
        assert_eq!(allowed_states(&m).len(), 2);
        m.final_answer = Some("x".into());
        assert_eq!(allowed_states(&m), [FlashState::Finished]);
    }

    #[test]
    fn the_model_status_stands_only_where_the_guide_allows_it() {
        let mut m = GlobalMemory {
            plan: Some(parse_tsg(GUIDE).unwrap()),
            ..Default::default()
        };
        let d = supervise_status(&m, Ok(Some(FlashState::StepCompletion)));
        assert_eq!(d.chosen, FlashState::StepInitialization);
        assert!(d.overruled && d.note().contains("not allowed"), "{d:?}");
        let d = supervise_status(&m, Ok(Some(FlashState::StepInitialization)));
        assert!(!d.overruled && d.note().is_empty());
        m.pending = Some(Vec::new());
        m.last_action_failed = true;
        let d = supervise_status(&m, Ok(Some(FlashState::StepExecution)));
        assert_eq!((d.rules, d.chosen), (None, FlashState::StepExecution));
        assert!(
            d.note().contains("the model's Step Execution"),
            "{}",
            d.note()
        );
        let d = supervise_status(&m, Err("bad json".into()));
        assert_eq!(d.chosen, FlashState::StepCompletion);
        assert!(d.note().contains("bad json"));
        assert_eq!(
            parse_state("Step Execution"),
            Some(FlashState::StepExecution)
        );
        assert_eq!(
            parse_state(" step_completion"),
            Some(FlashState::StepCompletion)
        );
        assert_eq!(parse_state("running"), None);
    }

    #[test]
    fn a_model_plan_is_checked_against_the_guide() {
        let guide = parse_tsg(GUIDE).unwrap();
        let c = check_plan(&guide, &serde_json::json!([1, 3]));
        assert!(c.from_model && c.notes.is_empty());
        assert_eq!(c.plan.steps.len(), 2);
        assert_eq!(c.plan.steps[1].title, "Conclude");
        assert_eq!(c.plan.steps[0].branches[0].goto, Some(2), "renumbered");
        let c = check_plan(
            &guide,
            &serde_json::json!(["2. Read metrics", 1, 9, 2, "Nope"]),
        );
        assert_eq!(c.plan.steps.len(), 1);
        assert_eq!(c.notes.len(), 4, "{:?}", c.notes);
        let c = check_plan(&guide, &serde_json::json!({"bad": 1}));
        assert!(!c.from_model && c.plan == guide && !c.notes.is_empty());
        let c = check_plan(&guide, &serde_json::Value::Null);
        assert!(!c.from_model && c.plan.steps.len() == 3 && c.notes.is_empty());
        let c = check_plan(&guide, &serde_json::json!([]));
        assert_eq!(c.notes, ["no steps proposed"]);
    }

    #[test]
    fn a_model_refinement_keeps_known_tools_and_the_prescribed_actions() {
        let guide = parse_tsg(GUIDE).unwrap();
        let known = vec!["get_logs".to_string(), "get_traces".to_string()];
        let proposed = vec![
            PlannedAction {
                tool: "get_traces".into(),
                args: serde_json::json!({}),
            },
            PlannedAction {
                tool: "rm_rf".into(),
                args: serde_json::json!({}),
            },
        ];
        let (actions, notes) = check_refinement(guide.steps.first(), Some(proposed), &known);
        let tools: Vec<&str> = actions.iter().map(|a| a.tool.as_str()).collect();
        assert_eq!(tools, ["get_traces", "get_logs"]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        let (actions, notes) = check_refinement(guide.steps.first(), None, &known);
        assert_eq!((actions.len(), notes.len()), (1, 0));
    }
}
