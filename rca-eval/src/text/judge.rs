//! An LLM judge: scores a generated root cause or solution against a reference for
//! correctness and helpfulness, each 0 to 10 (RCAgent's G-Correctness and G-Helpfulness).

use rca_core::LlmError;
use rca_core::llm::{ChatModel, CompletionRequest, Message};
use rca_llm::json::repair;
use serde::{Deserialize, Serialize};

/// The judge's scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeScores {
    /// How well the answer matches the reference, 0 to 10.
    pub correctness: f64,
    /// How useful the answer would be to an on-call engineer, 0 to 10.
    pub helpfulness: f64,
    /// The judge's short explanation, when it gave one.
    #[serde(default)]
    pub reason: String,
}

/// Why judging failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// The judge's answer held no readable scores.
    #[error("could not read scores from the judge's answer: {raw}")]
    Unparseable {
        /// The answer.
        raw: String,
    },
    /// The model failed.
    #[error(transparent)]
    Model(#[from] LlmError),
}

const SYSTEM: &str = "You grade root-cause analyses of cloud incidents. Compare the candidate \
    answer with the reference answer written by the engineers who resolved the incident. \
    Score correctness (does it identify the same cause or remedy; 0 = unrelated, 10 = \
    equivalent) and helpfulness (would it help an on-call engineer act; 0 = useless, 10 = \
    directly actionable), each an integer from 0 to 10. Answer with one JSON object: \
    {\"correctness\": <0-10>, \"helpfulness\": <0-10>, \"reason\": \"<one sentence>\"}.";

/// The messages sent to the judge.
pub fn judge_prompt(task: &str, reference: &str, candidate: &str) -> Vec<Message> {
    vec![
        Message::system(SYSTEM),
        Message::user(format!(
            "Task: {task}\n\nReference answer:\n{reference}\n\nCandidate answer:\n{candidate}"
        )),
    ]
}

/// Asks `model` to grade `candidate` against `reference` for `task` (for example "root
/// cause" or "solution"). The model is decoded greedily.
pub async fn judge(
    model: &dyn ChatModel,
    task: &str,
    reference: &str,
    candidate: &str,
) -> Result<JudgeScores, JudgeError> {
    let req = CompletionRequest::new(judge_prompt(task, reference, candidate))
        .with_temperature(0.0)
        .json();
    let resp = model.complete(req).await?;
    parse_scores(resp.text())
}

/// Reads scores from a judge's answer: JSON (repaired when needed) or, failing that,
/// `correctness: 7` style text. Scores are clamped to 0..=10; a score out of 100 or a fraction
/// like `7/10` is not guessed at.
pub fn parse_scores(text: &str) -> Result<JudgeScores, JudgeError> {
    let unparseable = || JudgeError::Unparseable {
        raw: text.to_string(),
    };
    if let Ok(r) = repair(text) {
        let v = &r.value;
        let num = |k: &str| {
            v.get(k).and_then(|x| {
                x.as_f64()
                    .or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()))
            })
        };
        if let (Some(c), Some(h)) = (num("correctness"), num("helpfulness")) {
            return Ok(JudgeScores {
                correctness: c.clamp(0.0, 10.0),
                helpfulness: h.clamp(0.0, 10.0),
                reason: v
                    .get("reason")
                    .and_then(|r| r.as_str())
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    let c = labelled_number(text, "correctness").ok_or_else(unparseable)?;
    let h = labelled_number(text, "helpfulness").ok_or_else(unparseable)?;
    Ok(JudgeScores {
        correctness: c.clamp(0.0, 10.0),
        helpfulness: h.clamp(0.0, 10.0),
        reason: String::new(),
    })
}

/// The first number after `label` (case-insensitive), skipping `:`, `=`, quotes and spaces.
fn labelled_number(text: &str, label: &str) -> Option<f64> {
    let lower = text.to_lowercase();
    let at = lower.find(label)? + label.len();
    let rest = lower.get(at..)?;
    let rest = rest.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, ':' | '=' | '"' | '\'' | '*')
    });
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest.get(..end)?.parse().ok()
}
