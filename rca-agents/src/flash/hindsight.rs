//! Hindsight: lessons from failed runs, injected when their trigger recurs.
//!
//! A lesson is a [`Trigger`] (a state, a tool, and patterns over the arguments and the
//! observation) and a [`Hint`] (text for the model, optionally a suggested action a
//! deterministic policy follows). The [`HindsightBase`] is persisted as versioned JSON,
//! written atomically. After a failed run whose correct answer is known, a model compares the
//! trajectory with the answer and writes a lesson; lessons are deduplicated by embedding.

use std::path::Path;

use rca_core::embed::{Embedder, cosine};
use rca_core::llm::{ChatModel, CompletionRequest, Message};
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::FlashError;
use super::state::FlashState;
use super::tsg::PlannedAction;

/// The hindsight file format this build reads and writes.
pub const HINDSIGHT_FORMAT_VERSION: u32 = 1;

/// When a lesson applies. Every field that is set must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Trigger {
    /// The state the action was taken in.
    #[serde(default)]
    pub state: Option<FlashState>,
    /// The tool that was called.
    #[serde(default)]
    pub tool: Option<String>,
    /// A regular expression over the arguments as JSON text (case-insensitive).
    #[serde(default)]
    pub args_pattern: Option<String>,
    /// A regular expression over the observation (case-insensitive).
    #[serde(default)]
    pub observation_pattern: Option<String>,
}

fn matches(pattern: &Option<String>, text: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => Regex::new(&format!("(?i){p}"))
            .map(|re| re.is_match(text))
            .unwrap_or(false),
    }
}

impl Trigger {
    /// Whether the trigger matches an action and its observation. A trigger with no field set
    /// matches nothing (it would fire everywhere).
    pub fn matches(
        &self,
        state: FlashState,
        tool: &str,
        args: &serde_json::Value,
        observation: &str,
    ) -> bool {
        let any = self.state.is_some()
            || self.tool.is_some()
            || self.args_pattern.is_some()
            || self.observation_pattern.is_some();
        any && self.state.is_none_or(|s| s == state)
            && self.tool.as_ref().is_none_or(|t| t == tool)
            && matches(&self.args_pattern, &args.to_string())
            && matches(&self.observation_pattern, observation)
    }
}

/// What to tell the agent when a trigger matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// Advice for the model ("common mistakes with this tool here: ...; instead ...").
    pub text: String,
    /// An action to take next, for deterministic policies (and shown to models).
    #[serde(default)]
    pub suggested_action: Option<PlannedAction>,
}

/// A lesson: a trigger and its hint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lesson {
    /// When it applies.
    pub trigger: Trigger,
    /// What to say.
    pub hint: Hint,
    /// The embedding of the hint text, for deduplication.
    #[serde(default)]
    pub embedding: Vec<f32>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format_version: u32,
    lessons: Vec<Lesson>,
}

/// The knowledge base of lessons.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HindsightBase {
    lessons: Vec<Lesson>,
    /// Lessons closer than this (cosine of hint embeddings) to a stored one are duplicates.
    pub duplicate_threshold: f32,
}

impl HindsightBase {
    /// An empty base (duplicates above cosine 0.9).
    pub fn new() -> Self {
        HindsightBase {
            lessons: Vec::new(),
            duplicate_threshold: 0.9,
        }
    }

    /// The lessons.
    pub fn lessons(&self) -> &[Lesson] {
        &self.lessons
    }

    /// Adds a lesson unless it duplicates one (same trigger, or a hint embedding above the
    /// threshold). Returns whether it was added.
    pub fn add(&mut self, lesson: Lesson) -> bool {
        let duplicate = self.lessons.iter().any(|l| {
            l.trigger == lesson.trigger
                || (!l.embedding.is_empty()
                    && !lesson.embedding.is_empty()
                    && cosine(&l.embedding, &lesson.embedding) >= self.duplicate_threshold)
        });
        if !duplicate {
            self.lessons.push(lesson);
        }
        !duplicate
    }

    /// The hints whose triggers match.
    pub fn hints_for(
        &self,
        state: FlashState,
        tool: &str,
        args: &serde_json::Value,
        observation: &str,
    ) -> Vec<Hint> {
        self.lessons
            .iter()
            .filter(|l| l.trigger.matches(state, tool, args, observation))
            .map(|l| l.hint.clone())
            .collect()
    }

    /// Reads a base; a missing file is an empty base.
    pub fn load(path: &Path) -> Result<Self, FlashError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new()),
            Err(e) => return Err(FlashError::Store(format!("{}: {e}", path.display()))),
        };
        let stored: Stored = serde_json::from_str(&text)
            .map_err(|e| FlashError::Store(format!("{}: {e}", path.display())))?;
        if stored.format_version != HINDSIGHT_FORMAT_VERSION {
            return Err(FlashError::Store(format!(
                "{}: format version {} (this build reads {HINDSIGHT_FORMAT_VERSION})",
                path.display(),
                stored.format_version
            )));
        }
        Ok(HindsightBase {
            lessons: stored.lessons,
            ..Self::new()
        })
    }

    /// Writes the base atomically (a temporary file renamed over the old one).
    pub fn save(&self, path: &Path) -> Result<(), FlashError> {
        let err = |e: std::io::Error| FlashError::Store(format!("{}: {e}", path.display()));
        let text = serde_json::to_string_pretty(&Stored {
            format_version: HINDSIGHT_FORMAT_VERSION,
            lessons: self.lessons.clone(),
        })
        .map_err(|e| FlashError::Store(e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        rca_tools::files::write_atomic(path, text.as_bytes()).map_err(err)
    }
}

const COLLECT_SYSTEM: &str = "You review a failed incident diagnosis. Compare the agent's \
trajectory with the correct answer, find the first action that went wrong, and write one \
lesson that would have prevented it: a trigger (the state, the tool, and optional regular \
expressions over the arguments and over the observation that identify the situation) and a \
hint (what to avoid and what to do instead, optionally the action to take). Answer with JSON: \
{\"trigger\": {\"state\": \"step_execution\", \"tool\": \"...\", \"args_pattern\": null, \
\"observation_pattern\": \"...\"}, \"hint\": {\"text\": \"...\", \"suggested_action\": \
{\"tool\": \"...\", \"args\": {}}}}. Answer {\"lesson\": null} if nothing can be learned.";

/// Asks `model` for a lesson from a failed run (its trajectory as JSON text) and the correct
/// answer, embeds the hint with `embedder`, and adds it to `base` unless it is a duplicate.
/// Returns the lesson when one was added. ([`super::review::ModelReviewer`] is the same
/// review behind the [`super::review::Reviewer`] trait.)
pub async fn collect_lesson(
    model: &dyn ChatModel,
    embedder: &dyn Embedder,
    base: &mut HindsightBase,
    trajectory: &str,
    correct_answer: &str,
) -> Result<Option<Lesson>, FlashError> {
    let Some((trigger, hint)) = model_lesson(model, trajectory, correct_answer).await? else {
        return Ok(None);
    };
    let embedding = embedder
        .embed(std::slice::from_ref(&hint.text))
        .await
        .map_err(|e| FlashError::Model(e.to_string()))?
        .pop()
        .unwrap_or_default();
    let lesson = Lesson {
        trigger,
        hint,
        embedding,
    };
    Ok(base.add(lesson.clone()).then_some(lesson))
}

/// The model's lesson (trigger and hint) from a failed run's trajectory and the correct
/// answer; `None` when it says nothing can be learned.
pub(crate) async fn model_lesson(
    model: &dyn ChatModel,
    trajectory: &str,
    correct_answer: &str,
) -> Result<Option<(Trigger, Hint)>, FlashError> {
    let request = CompletionRequest::new(vec![
        Message::system(COLLECT_SYSTEM),
        Message::user(format!(
            "Correct answer: {correct_answer}\n\nTrajectory:\n{}",
            trajectory.chars().take(24_000).collect::<String>()
        )),
    ])
    .with_temperature(0.0)
    .json();
    let response = model
        .complete(request)
        .await
        .map_err(|e| FlashError::Model(e.to_string()))?;
    let value = rca_llm::json::repair(response.text())
        .map_err(|e| FlashError::Model(e.to_string()))?
        .value;
    if value.get("lesson").is_some_and(|l| l.is_null()) {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Answer {
        trigger: Trigger,
        hint: Hint,
    }
    let answer: Answer = serde_json::from_value(value)
        .map_err(|e| FlashError::Model(format!("lesson does not fit the schema: {e}")))?;
    Ok(Some((answer.trigger, answer.hint)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(tool: &str, pattern: &str, text: &str, emb: Vec<f32>) -> Lesson {
        Lesson {
            trigger: Trigger {
                state: Some(FlashState::StepExecution),
                tool: Some(tool.into()),
                args_pattern: None,
                observation_pattern: Some(pattern.into()),
            },
            hint: Hint {
                text: text.into(),
                suggested_action: None,
            },
            embedding: emb,
        }
    }

    #[test]
    fn triggers_match_and_dedupe() {
        let mut base = HindsightBase::new();
        assert!(base.add(lesson(
            "get_logs",
            "no (lines|data)",
            "query metrics first",
            vec![1.0, 0.0]
        )));
        assert!(
            !base.add(lesson(
                "get_logs",
                "no (lines|data)",
                "other text",
                vec![0.0, 1.0]
            )),
            "same trigger"
        );
        assert!(
            !base.add(lesson(
                "get_traces",
                "x",
                "query metrics first!",
                vec![0.99, 0.05]
            )),
            "near-identical hint"
        );
        assert!(base.add(lesson(
            "get_traces",
            "x",
            "check the callee",
            vec![0.0, 1.0]
        )));
        let hits = base.hints_for(
            FlashState::StepExecution,
            "get_logs",
            &serde_json::json!({}),
            "No DATA in window",
        );
        assert_eq!(hits.len(), 1);
        assert!(
            base.hints_for(
                FlashState::StepCompletion,
                "get_logs",
                &serde_json::json!({}),
                "no data"
            )
            .is_empty()
        );
        assert!(!Trigger::default().matches(
            FlashState::StepExecution,
            "t",
            &serde_json::json!({}),
            "x"
        ));
    }

    #[test]
    fn persists_with_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hindsight.json");
        assert!(HindsightBase::load(&p).unwrap().lessons().is_empty());
        let mut base = HindsightBase::new();
        base.add(lesson("get_logs", "x", "t", vec![]));
        base.save(&p).unwrap();
        assert_eq!(HindsightBase::load(&p).unwrap().lessons(), base.lessons());
        std::fs::write(&p, r#"{"format_version": 7, "lessons": []}"#).unwrap();
        assert!(
            HindsightBase::load(&p)
                .unwrap_err()
                .to_string()
                .contains("format version 7")
        );
        std::fs::write(&p, "garbage").unwrap();
        assert!(HindsightBase::load(&p).is_err());
    }

    #[test]
    fn saving_leaves_sibling_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("base.json");
        let sibling = dir.path().join("base.tmp");
        std::fs::write(&sibling, "the host's own file").unwrap();
        let mut base = HindsightBase::new();
        base.add(lesson("get_logs", "x", "t", vec![]));
        base.save(&p).unwrap();
        base.save(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&sibling).unwrap(),
            "the host's own file"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        assert_eq!(HindsightBase::load(&p).unwrap().lessons(), base.lessons());
    }
}
