//! Troubleshooting guides (TSGs) in Markdown, read into ordered diagnosis plans.
//!
//! The format (documented in `docs/guides/flash.md`):
//!
//! ```markdown
//! # Database connection timeouts          <- title (optional)
//! ## Check the connection pool            <- a step (a `##`/`###` heading, or a numbered item)
//! Look at the pool of the failing service. <- free text: the step's detail
//! Action: get_metrics {"component": "{component}", "metric": "pool_active"}
//! If `exhausted|saturated`: conclude "connection pool exhausted" and go to step 4
//! If `timeout`: go to step 3
//! ```
//!
//! `Action:` names a tool and its JSON arguments; `{name}` placeholders are filled from the
//! working memory's facts. `If` lines are branches on the step's observations (a regular
//! expression between backticks): `conclude "..."` records a conclusion, `go to step N` skips
//! ahead; a conclusion without a jump finishes the diagnosis. `Fact: name = `regex`` sets the
//! fact `name` to the first capture group of the first observation of the step that matches.
//!
//! Before the first step, `Trigger: `regex`` lines say which incidents the guide is for (an
//! alert or an early observation matching any of them), and `Unless: `regex`` lines which ones
//! it is not for; [`super::triage`] picks a guide by them.

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::FlashError;

/// A tool call a plan step prescribes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedAction {
    /// The tool.
    pub tool: String,
    /// Its arguments (may hold `{fact}` placeholders).
    pub args: serde_json::Value,
}

/// A fact a step reads from its observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactCapture {
    /// The fact's name (a `{name}` placeholder of later steps).
    pub name: String,
    /// A regular expression with a capture group, matched against each observation
    /// (case-insensitive, `^` and `$` at line ends).
    pub pattern: String,
}

impl FactCapture {
    /// The first capture group of the first of `observations` that matches.
    pub fn capture(&self, observations: &[String]) -> Option<String> {
        let re = Regex::new(&format!("(?im){}", self.pattern)).ok()?;
        observations.iter().find_map(|o| {
            re.captures(o)
                .and_then(|c| c.get(1).or_else(|| c.get(0)))
                .map(|m| m.as_str().to_string())
        })
    }
}

/// A branch on a step's observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    /// A regular expression matched against the step's observations (case-insensitive).
    pub pattern: String,
    /// A conclusion to record when it matches.
    pub conclusion: Option<String>,
    /// The 1-based step to go to when it matches.
    pub goto: Option<usize>,
}

/// One step of a diagnosis plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    /// 1-based position.
    pub number: usize,
    /// The step's title.
    pub title: String,
    /// Free text under the title.
    pub detail: String,
    /// Prescribed tool calls, in order.
    pub actions: Vec<PlannedAction>,
    /// Branches, checked in order; the first that matches wins.
    pub branches: Vec<Branch>,
    /// Facts the step reads from its observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captures: Vec<FactCapture>,
}

/// An ordered plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DiagnosisPlan {
    /// The guide's title, if it has one.
    pub title: String,
    /// The steps in order.
    pub steps: Vec<PlanStep>,
    /// Which incidents the guide is for: regular expressions over the alert and early
    /// observations (`Trigger:` lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<String>,
    /// Which incidents it is not for, though a trigger matches (`Unless:` lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unless: Vec<String>,
}

fn step_heading(line: &str) -> Option<String> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("###").or_else(|| t.strip_prefix("##")) {
        let rest = rest.trim_start_matches('#').trim();
        // "## 1. Check x" and "## Step 1: Check x" both name the step "Check x".
        let rest = rest
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches(['.', ')', ':'])
            .trim();
        let lower = rest.to_ascii_lowercase();
        let rest = if lower.starts_with("step ") {
            rest[5..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start_matches(['.', ')', ':'])
                .trim()
        } else {
            rest
        };
        return Some(rest.to_string());
    }
    None
}

fn numbered_item(line: &str) -> Option<String> {
    let t = line.trim_start();
    if line.len() - t.len() > 1 {
        return None; // nested items are details, not steps
    }
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &t[digits..];
    let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')'))?;
    Some(rest.trim().to_string())
}

fn parse_action(text: &str) -> Option<PlannedAction> {
    let text = text.trim().trim_matches('`').trim();
    let (tool, rest) = match text.find(|c: char| c.is_whitespace() || c == '{' || c == '(') {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    };
    if tool.is_empty()
        || !tool
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return None;
    }
    let args = if rest.is_empty() {
        serde_json::json!({})
    } else {
        let inner = rest.trim_start_matches('(').trim_end_matches(')').trim();
        rca_llm::json::repair(inner).ok()?.value
    };
    Some(PlannedAction {
        tool: tool.to_string(),
        args,
    })
}

/// The regular expression between the first pair of backticks of `text`, if it compiles, and
/// the text after it.
fn backticked(text: &str) -> Option<(String, &str)> {
    let open = text.find('`')?;
    let close = open + 1 + text[open + 1..].find('`')?;
    let pattern = text[open + 1..close].to_string();
    Regex::new(&format!("(?i){pattern}")).ok()?;
    Some((pattern, &text[close + 1..]))
}

fn parse_capture(text: &str) -> Option<FactCapture> {
    // Fact: name = `pattern`
    let (name, rest) = text.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    Some(FactCapture {
        name: name.to_string(),
        pattern: backticked(rest)?.0,
    })
}

fn parse_branch(text: &str) -> Option<Branch> {
    // If `pattern`: conclude "..." and go to step N
    let (pattern, after) = backticked(text.trim())?;
    let tail = after.trim_start_matches([':', ',', ' ']).to_string();
    let lower = tail.to_ascii_lowercase();
    let conclusion = lower.find("conclude").and_then(|i| {
        let after = &tail[i + "conclude".len()..];
        let q1 = after.find('"')?;
        let q2 = q1 + 1 + after[q1 + 1..].find('"')?;
        Some(after[q1 + 1..q2].to_string())
    });
    let goto = lower.find("go to step").and_then(|i| {
        lower[i + "go to step".len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse()
            .ok()
    });
    (conclusion.is_some() || goto.is_some()).then_some(Branch {
        pattern,
        conclusion,
        goto,
    })
}

/// Reads a troubleshooting guide. Steps are `##`/`###` headings or, when there are none,
/// top-level numbered items. An error when no step is found.
pub fn parse_tsg(markdown: &str) -> Result<DiagnosisPlan, FlashError> {
    let text = markdown.replace("\r\n", "\n");
    let use_headings = text.lines().any(|l| step_heading(l).is_some());
    let mut plan = DiagnosisPlan::default();
    let mut current: Option<PlanStep> = None;
    for line in text.lines() {
        let t = line.trim();
        if plan.title.is_empty() && current.is_none() && t.starts_with("# ") {
            plan.title = t[2..].trim().to_string();
            continue;
        }
        let title = if use_headings {
            step_heading(line)
        } else {
            numbered_item(line)
        };
        if let Some(title) = title {
            if let Some(done) = current.take() {
                plan.steps.push(done);
            }
            current = Some(PlanStep {
                number: plan.steps.len() + 1,
                title,
                detail: String::new(),
                actions: Vec::new(),
                branches: Vec::new(),
                captures: Vec::new(),
            });
            continue;
        }
        let body = t.trim_start_matches(['-', '*']).trim();
        let lower = body.to_ascii_lowercase();
        let Some(step) = current.as_mut() else {
            if lower.starts_with("trigger:")
                && let Some((p, _)) = backticked(&body["trigger:".len()..])
            {
                plan.triggers.push(p);
            } else if lower.starts_with("unless:")
                && let Some((p, _)) = backticked(&body["unless:".len()..])
            {
                plan.unless.push(p);
            }
            continue;
        };
        if lower.starts_with("fact:")
            && let Some(c) = parse_capture(&body["fact:".len()..])
        {
            step.captures.push(c);
            continue;
        }
        if lower.starts_with("action:")
            && let Some(a) = parse_action(&body["action:".len()..])
        {
            step.actions.push(a);
            continue;
        }
        if lower.starts_with("if ")
            && let Some(b) = parse_branch(&body[3..])
        {
            step.branches.push(b);
            continue;
        }
        if !body.is_empty() {
            if !step.detail.is_empty() {
                step.detail.push(' ');
            }
            step.detail.push_str(body);
        }
    }
    if let Some(done) = current.take() {
        plan.steps.push(done);
    }
    if plan.steps.is_empty() {
        return Err(FlashError::Guide(
            "no steps found: use `## Step title` headings or a numbered list".into(),
        ));
    }
    Ok(plan)
}

impl DiagnosisPlan {
    /// The plan with only the steps numbered in `numbers` (1-based, ascending), renumbered
    /// from 1. A branch that jumped to a dropped step jumps to the next kept one, or past the
    /// last step when none is left.
    pub fn select(&self, numbers: &[usize]) -> DiagnosisPlan {
        let kept: Vec<&PlanStep> = self
            .steps
            .iter()
            .filter(|s| numbers.contains(&s.number))
            .collect();
        let renumber = |old: usize| -> usize {
            kept.iter()
                .position(|s| s.number >= old)
                .map_or(kept.len() + 1, |i| i + 1)
        };
        DiagnosisPlan {
            title: self.title.clone(),
            triggers: self.triggers.clone(),
            unless: self.unless.clone(),
            steps: kept
                .iter()
                .enumerate()
                .map(|(i, s)| PlanStep {
                    number: i + 1,
                    branches: s
                        .branches
                        .iter()
                        .map(|b| Branch {
                            goto: b.goto.map(renumber),
                            ..b.clone()
                        })
                        .collect(),
                    ..(*s).clone()
                })
                .collect(),
        }
    }
}

impl PlanStep {
    /// The first branch whose pattern matches any of `observations`.
    pub fn matching_branch(&self, observations: &[String]) -> Option<&Branch> {
        self.branches.iter().find(|b| {
            Regex::new(&format!("(?i){}", b.pattern))
                .map(|re| observations.iter().any(|o| re.is_match(o)))
                .unwrap_or(false)
        })
    }
}

/// Fills `{name}` placeholders in every string of `args` from `facts`.
pub fn fill_placeholders(
    args: &serde_json::Value,
    facts: &std::collections::BTreeMap<String, serde_json::Value>,
) -> serde_json::Value {
    match args {
        serde_json::Value::String(s) => {
            let mut out = s.clone();
            for (k, v) in facts {
                let needle = format!("{{{k}}}");
                if out.contains(&needle) {
                    let text = match v {
                        serde_json::Value::String(t) => t.clone(),
                        other => other.to_string(),
                    };
                    out = out.replace(&needle, &text);
                }
            }
            serde_json::Value::String(out)
        }
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.iter().map(|v| fill_placeholders(v, facts)).collect())
        }
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), fill_placeholders(v, facts)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUIDE: &str = "# DB timeouts\n\nIntro text.\n\n## 1. Check the connection pool\nLook at the pool.\nAction: get_metrics {\"component\": \"{component}\", \"metric\": \"pool_active\"}\nIf `exhausted|saturated`: conclude \"connection pool exhausted\" and go to step 3\n\n## Step 2: Check slow queries\nAction: get_logs {\"component\": \"{component}\"}\nIf `deadlock`: conclude \"lock contention\"\n\n## Confirm the root cause\nAction: llm_reasoning {\"question\": \"Which change caused it?\"}\n";

    #[test]
    fn reads_headings_actions_and_branches() {
        let plan = parse_tsg(GUIDE).unwrap();
        assert_eq!(plan.title, "DB timeouts");
        let titles: Vec<&str> = plan.steps.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Check the connection pool",
                "Check slow queries",
                "Confirm the root cause"
            ]
        );
        assert_eq!(plan.steps[0].detail, "Look at the pool.");
        assert_eq!(plan.steps[0].actions[0].tool, "get_metrics");
        assert_eq!(plan.steps[0].branches[0].goto, Some(3));
        assert_eq!(
            plan.steps[0].branches[0].conclusion.as_deref(),
            Some("connection pool exhausted")
        );
        assert_eq!(plan.steps[1].branches[0].goto, None);
        let hit = plan.steps[0].matching_branch(&["pool SATURATED at 100%".into()]);
        assert!(hit.is_some());
        assert!(
            plan.steps[0]
                .matching_branch(&["all fine".into()])
                .is_none()
        );
    }

    #[test]
    fn triggers_and_fact_captures() {
        let plan = parse_tsg(
            "# Slow pods\nTrigger: `latency|slow`\nTrigger: `(unclosed`\nUnless: `exception`\n\
             ## Find the pod\nAction: rank_components {}\nFact: component = `^1\\. (\\S+)`\n\
             Fact: bad name = `x`\n",
        )
        .unwrap();
        assert_eq!(plan.triggers, ["latency|slow"]);
        assert_eq!(plan.unless, ["exception"]);
        let capture = &plan.steps[0].captures[0];
        assert_eq!(capture.name, "component");
        let seen = vec!["Ranked:\n1. pod-a (score 2)\n2. pod-b".to_string()];
        assert_eq!(capture.capture(&seen).as_deref(), Some("pod-a"));
        assert_eq!(capture.capture(&["nothing".to_string()]), None);
        assert_eq!(plan.steps[0].captures.len(), 1, "a bad fact line is detail");
        assert_eq!(plan.select(&[1]).triggers, plan.triggers);
    }

    #[test]
    fn numbered_lists_and_placeholders() {
        let plan = parse_tsg("1. Check disk\n   - nested detail\n2) Restart the agent\n").unwrap();
        assert_eq!(plan.steps.len(), 2);
        assert_eq!(plan.steps[0].detail, "nested detail");
        let mut facts = std::collections::BTreeMap::new();
        facts.insert("component".to_string(), serde_json::json!("orders"));
        let filled = fill_placeholders(
            &serde_json::json!({"c": "{component}", "n": ["{missing}"]}),
            &facts,
        );
        assert_eq!(
            filled,
            serde_json::json!({"c": "orders", "n": ["{missing}"]})
        );
    }

    #[test]
    fn bad_guides_are_errors_not_panics() {
        assert!(parse_tsg("").is_err());
        assert!(parse_tsg("just prose, no steps").is_err());
        let plan = parse_tsg(
            "## A\nAction: ???\nIf `(unclosed`: conclude \"x\"\nIf no backticks: go to step 2\n",
        )
        .unwrap();
        assert!(plan.steps[0].actions.is_empty() && plan.steps[0].branches.is_empty());
        assert!(!plan.steps[0].detail.is_empty());
    }
}
