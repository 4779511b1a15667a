//! Reviewers: after a run that failed, turn what went wrong into a hindsight lesson.
//!
//! A run failed when its answer does not match the host's [`Verdict`] (or it gave none). A
//! [`Reviewer`] reads the failed run and the verdict and writes at most one [`Lesson`]:
//! [`ModelReviewer`] asks a model to compare the trajectory with the verdict (FLASH's
//! hindsight collection); [`RuleReviewer`] needs no model: it takes the step whose branch ended
//! the run (its tool and the observation pattern that fired) as the trigger, and as the hint the
//! check that some known guide uses to conclude the verdict's fault. [`learn`] embeds the hint
//! and adds the lesson to a [`HindsightBase`] unless it duplicates one.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::embed::Embedder;
use rca_core::llm::ChatModel;

use super::FlashError;
use super::agent::FlashRun;
use super::hindsight::{HindsightBase, Hint, Lesson, Trigger, model_lesson};
use super::state::FlashState;
use super::tsg::{DiagnosisPlan, PlanStep, PlannedAction};

/// The correct answer a host knows for an incident: a fault label and the subject it must
/// name (`pool_exhausted` and the pod), written `label: subject`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The fault label an answer must start with (`pool_exhausted` in
    /// `pool_exhausted: the pool of ... is full`).
    pub label: String,
    /// What the answer must name (a pod, a service); empty: anything.
    pub subject: String,
}

impl Verdict {
    /// A verdict of `label` about `subject`.
    pub fn new(label: impl Into<String>, subject: impl Into<String>) -> Self {
        Verdict {
            label: label.into(),
            subject: subject.into(),
        }
    }

    /// Whether `answer` agrees: it starts with `label:` and names the subject.
    pub fn accepts(&self, answer: Option<&str>) -> bool {
        answer.is_some_and(|a| {
            label_of(a) == Some(self.label.as_str()) && a.contains(self.subject.as_str())
        })
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.label, self.subject)
    }
}

/// The label an answer or a conclusion starts with (the text before its first `:`), if any.
fn label_of(text: &str) -> Option<&str> {
    text.split_once(':')
        .map(|(l, _)| l.trim())
        .filter(|l| !l.is_empty() && !l.contains(char::is_whitespace))
}

/// Writes a lesson from a failed run.
#[async_trait]
pub trait Reviewer: Send + Sync {
    /// A name for records (`rule-reviewer`, `model-reviewer`).
    fn name(&self) -> &str;

    /// A lesson from `run`, whose answer the `verdict` rejects; `None` when nothing can be
    /// learned from it.
    async fn review(&self, run: &FlashRun, verdict: &Verdict)
    -> Result<Option<Lesson>, FlashError>;
}

/// Reviews a failed run, embeds the lesson's hint with `embedder` (when given, for
/// deduplication by meaning) and adds it to `base`. Returns the lesson when one was added; a
/// run the verdict accepts teaches nothing.
pub async fn learn(
    reviewer: &dyn Reviewer,
    embedder: Option<&dyn Embedder>,
    base: &mut HindsightBase,
    run: &FlashRun,
    verdict: &Verdict,
) -> Result<Option<Lesson>, FlashError> {
    if verdict.accepts(run.answer.as_deref()) {
        return Ok(None);
    }
    let Some(mut lesson) = reviewer.review(run, verdict).await? else {
        return Ok(None);
    };
    if let Some(embedder) = embedder {
        lesson.embedding = embedder
            .embed(std::slice::from_ref(&lesson.hint.text))
            .await
            .map_err(|e| FlashError::Model(e.to_string()))?
            .pop()
            .unwrap_or_default();
    }
    Ok(base.add(lesson.clone()).then_some(lesson))
}

/// A reviewer that is a model: it compares the trajectory with the verdict and writes the
/// lesson (as `hindsight::collect_lesson` does).
pub struct ModelReviewer {
    model: Arc<dyn ChatModel>,
}

impl ModelReviewer {
    /// A reviewer backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelReviewer { model }
    }
}

impl std::fmt::Debug for ModelReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelReviewer")
            .field("model", &self.model.model_id())
            .finish()
    }
}

#[async_trait]
impl Reviewer for ModelReviewer {
    fn name(&self) -> &str {
        "model-reviewer"
    }

    async fn review(
        &self,
        run: &FlashRun,
        verdict: &Verdict,
    ) -> Result<Option<Lesson>, FlashError> {
        let trajectory = serde_json::to_string(&run.trajectory)
            .map_err(|e| FlashError::Model(format!("trajectory not serialisable: {e}")))?;
        Ok(
            model_lesson(self.model.as_ref(), &trajectory, &verdict.to_string())
                .await?
                .map(|(trigger, hint)| Lesson {
                    trigger,
                    hint,
                    embedding: Vec::new(),
                }),
        )
    }
}

/// A reviewer without a model. The step whose branch ended the run gives the trigger: the
/// tool its action called and the branch's pattern over the observation. The hint is the
/// check a known guide runs before concluding the verdict's fault: the first action of a step
/// (of the run's own guide first, then of `guides` in order) that has a branch concluding
/// `<label>:` and runs something other than the failing step. Nothing is learned when the
/// run ended on no branch, when it named the right fault (the subject was wrong: no check
/// tells which), or when no guide knows how to conclude the verdict's fault.
#[derive(Debug, Clone, Default)]
pub struct RuleReviewer {
    guides: Vec<DiagnosisPlan>,
}

impl RuleReviewer {
    /// A reviewer that knows these guides' checks.
    pub fn new(guides: Vec<DiagnosisPlan>) -> Self {
        RuleReviewer { guides }
    }
}

/// The step of `run` whose branch ended it, with that branch's pattern and conclusion.
fn failing_step(run: &FlashRun) -> Option<(&PlanStep, &str, Option<&str>)> {
    let plan = run.memory.plan.as_ref()?;
    run.memory.results.iter().rev().find_map(|result| {
        let step = plan.steps.get(result.step.checked_sub(1)?)?;
        let branch = step.matching_branch(&result.observations)?;
        Some((step, branch.pattern.as_str(), branch.conclusion.as_deref()))
    })
}

/// A step that concludes `label` and its first action, when that action differs from
/// `besides`.
fn check_for<'a>(
    step: &'a PlanStep,
    label: &str,
    besides: &PlannedAction,
) -> Option<&'a PlannedAction> {
    let concludes = step
        .branches
        .iter()
        .filter_map(|b| b.conclusion.as_deref())
        .any(|c| label_of(c) == Some(label));
    step.actions.first().filter(|a| concludes && *a != besides)
}

#[async_trait]
impl Reviewer for RuleReviewer {
    fn name(&self) -> &str {
        "rule-reviewer"
    }

    async fn review(
        &self,
        run: &FlashRun,
        verdict: &Verdict,
    ) -> Result<Option<Lesson>, FlashError> {
        if run.answer.as_deref().and_then(label_of) == Some(verdict.label.as_str()) {
            return Ok(None);
        }
        let Some((step, pattern, conclusion)) = failing_step(run) else {
            return Ok(None);
        };
        let Some(action) = step.actions.first() else {
            return Ok(None);
        };
        let own = run.memory.plan.iter();
        let Some((check_step, check)) = own
            .chain(self.guides.iter())
            .flat_map(|g| g.steps.iter())
            .find_map(|s| check_for(s, &verdict.label, action).map(|a| (s, a)))
        else {
            return Ok(None);
        };
        let concluded = conclusion.map_or_else(
            || "without a conclusion".to_string(),
            |c| format!("\"{c}\""),
        );
        let text = format!(
            "A run whose `{}` showed /{pattern}/ ended {concluded}, but the fault was {}. \
             Before closing the step, run `{}` as the step \"{}\" does.",
            action.tool, verdict.label, check.tool, check_step.title
        );
        Ok(Some(Lesson {
            trigger: Trigger {
                state: Some(FlashState::StepExecution),
                tool: Some(action.tool.clone()),
                args_pattern: None,
                observation_pattern: Some(pattern.to_string()),
            },
            hint: Hint {
                text,
                suggested_action: Some(check.clone()),
            },
            embedding: Vec::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_the_label_and_the_subject() {
        let v = Verdict::new("pool_exhausted", "pod-a");
        assert!(v.accepts(Some("pool_exhausted: the pool of pod-a is full")));
        assert!(!v.accepts(Some("pool_exhausted: the pool of pod-b is full")));
        assert!(!v.accepts(Some("disk_full: pod-a is out of space")));
        assert!(!v.accepts(Some("no pool_exhausted: pod-a")));
        assert!(!v.accepts(None));
        assert_eq!(v.to_string(), "pool_exhausted: pod-a");
        assert_eq!(label_of("no label here"), None);
        assert_eq!(label_of("two words: x"), None);
    }
}
