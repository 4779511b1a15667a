//! Text self-consistency measured on a real model: for each question, one greedy answer
//! (what the controller gives without SC) against `k` sampled answers aggregated by the
//! embedding vote and by a model merge. Reported: how often each aggregate differs from the
//! single answer, how often each names the root cause, and what the samples cost in tokens.
//!
//! The questions come from seeded simulated incidents ([`crate::stability::sim`]): the alert,
//! the call path and the root's log line are stated, and the answer should name the root
//! service. The questions are written for this benchmark; the answers are the model's.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use rca_agents::consistency::{EmbeddingVote, LlmMerge, SamplingConfig, text_self_consistency};
use rca_core::LlmError;
use rca_core::consistency::Aggregator;
use rca_core::embed::Embedder;
use rca_core::llm::{ChatModel, CompletionRequest, CompletionResponse, Message, Usage};
use serde::Serialize;

use crate::stability::sim::SimIncident;

/// Settings of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScSettings {
    /// Questions (simulated incident `seed + i`).
    pub questions: usize,
    /// First seed.
    pub seed: u64,
    /// Samples per question.
    pub samples: usize,
    /// Sampling temperature.
    pub temperature: f32,
    /// Completion tokens per answer.
    pub max_tokens: u32,
}

impl Default for ScSettings {
    fn default() -> Self {
        ScSettings {
            questions: 20,
            seed: 0,
            samples: 3,
            temperature: 0.8,
            max_tokens: 48,
        }
    }
}

/// One question's answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScQuestion {
    /// The simulated incident.
    pub incident: String,
    /// The root-cause service.
    pub root: String,
    /// The greedy answer.
    pub single: String,
    /// The sampled answers.
    pub samples: Vec<String>,
    /// The embedding vote's choice.
    pub vote: String,
    /// The model merge's answer.
    pub merge: String,
    /// The trivial baseline's answer: the component the summary names most often.
    pub most_mentioned: String,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScReport {
    /// The model.
    pub model: String,
    /// Samples per question.
    pub samples: usize,
    /// Per question.
    pub questions: Vec<ScQuestion>,
    /// Share of questions whose vote differs from the single answer.
    pub vote_differs: f64,
    /// Share of questions whose merge differs from the single answer.
    pub merge_differs: f64,
    /// Share of questions where the trivial baseline (the component the summary names most
    /// often, [`most_mentioned`]) is the root.
    pub baseline_names_root: f64,
    /// Share of questions whose single answer names the root.
    pub single_names_root: f64,
    /// The same for the vote.
    pub vote_names_root: f64,
    /// The same for the merge.
    pub merge_names_root: f64,
    /// Tokens of the greedy answers.
    pub single_usage: Usage,
    /// Tokens of the samples.
    pub samples_usage: Usage,
    /// Tokens of the merge calls.
    pub merge_usage: Usage,
    /// Wall time per question, seconds.
    pub seconds_per_question: f64,
}

/// The telemetry summary of one simulated incident, as a diagnosis would see it: the alerts,
/// the call graph, every component's metrics (in name order, so the order does not give the
/// answer away) and the warning and error lines of every component's logs. The failing path
/// and its end are not stated: the model has to find where the errors start.
pub fn telemetry_summary(sim: &SimIncident) -> String {
    let mut text = format!("Alerts:\n{}\n\nCall graph:\n", sim.alerts_text());
    for (caller, callees) in &sim.callees {
        if !callees.is_empty() {
            text.push_str(&format!("- {caller} calls {}\n", callees.join(", ")));
        }
    }
    text.push_str("\nMetrics:\n");
    for component in sim.callees.keys() {
        text.push_str(&sim.metrics_text(component));
        text.push('\n');
    }
    text.push_str(
        "\nLog lines at WARN or ERROR (repeats counted, as a log explorer condenses them):\n",
    );
    for component in sim.callees.keys() {
        // (line without its time, first time, count), in order of first appearance.
        let mut seen: Vec<(&str, &str, usize)> = Vec::new();
        let logs = sim.logs(component);
        for line in logs.lines() {
            if !(line.contains(" WARN ") || line.contains(" ERROR ")) {
                continue;
            }
            let (time, rest) = line.split_once(' ').unwrap_or(("", line));
            match seen.iter_mut().find(|(r, _, _)| *r == rest) {
                Some(entry) => entry.2 += 1,
                None => seen.push((rest, time, 1)),
            }
        }
        for (rest, time, count) in seen {
            text.push_str(&format!("{rest} (x{count}, first at {time})\n"));
        }
    }
    text
}

/// The question for one simulated incident, and its root service.
pub fn question(sim: &SimIncident) -> (Vec<Message>, String) {
    let text = format!(
        "{}\nWhich service is the root cause, and what is the fault? Answer in one sentence.",
        telemetry_summary(sim)
    );
    (
        vec![
            Message::system("You are an SRE diagnosing an incident. Be brief."),
            Message::user(text),
        ],
        sim.root().to_string(),
    )
}

/// The trivial baseline: the component named most often in the telemetry summary (ties to
/// the first in name order).
pub fn most_mentioned(sim: &SimIncident) -> String {
    let summary = telemetry_summary(sim);
    let mut best: Option<(&str, usize)> = None;
    for component in sim.callees.keys() {
        // Whole names only: `svc-ab` must not count inside `svc-abc`.
        let count = summary
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| w == component)
            .count();
        if best.is_none_or(|(_, n)| count > n) {
            best = Some((component, count));
        }
    }
    best.map(|(c, _)| c.to_string()).unwrap_or_default()
}

/// Sums the usage of every call it passes on.
struct Counting {
    inner: Arc<dyn ChatModel>,
    usage: Mutex<Usage>,
}

#[async_trait]
impl ChatModel for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    async fn complete(&self, req: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let r = self.inner.complete(req).await?;
        if let Ok(mut u) = self.usage.lock() {
            u.prompt_tokens += r.usage.prompt_tokens;
            u.completion_tokens += r.usage.completion_tokens;
            u.estimated |= r.usage.estimated;
        }
        Ok(r)
    }
}

impl Counting {
    fn take(&self) -> Usage {
        self.usage
            .lock()
            .map(|mut u| std::mem::take(&mut *u))
            .unwrap_or_default()
    }
}

fn same(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    norm(a) == norm(b)
}

fn add(total: &mut Usage, u: Usage) {
    total.prompt_tokens += u.prompt_tokens;
    total.completion_tokens += u.completion_tokens;
    total.estimated |= u.estimated;
}

/// Runs the benchmark with `model`, voting with `embedder`. A failed call is an error (the
/// figures would otherwise be silently short).
pub async fn run_sc(
    model: Arc<dyn ChatModel>,
    embedder: Arc<dyn Embedder>,
    settings: &ScSettings,
) -> Result<ScReport, String> {
    let counting = Arc::new(Counting {
        inner: model.clone(),
        usage: Mutex::new(Usage::default()),
    });
    let vote = EmbeddingVote::new(embedder);
    let merge = LlmMerge::new(counting.clone());
    let (mut single_usage, mut samples_usage, mut merge_usage) =
        (Usage::default(), Usage::default(), Usage::default());
    let mut questions = Vec::new();
    let started = Instant::now();
    for i in 0..settings.questions {
        let sim = SimIncident::generate(settings.seed + i as u64, 1 + i % 3);
        let (messages, root) = question(&sim);
        let mut req = CompletionRequest::new(messages);
        req.max_tokens = Some(settings.max_tokens);
        let mut greedy = req.clone();
        greedy.temperature = Some(0.0);
        let single = counting
            .complete(greedy)
            .await
            .map_err(|e| format!("{}: greedy answer: {e}", sim.id))?;
        add(&mut single_usage, counting.take());
        let sampling = SamplingConfig {
            k: settings.samples.max(1),
            temperature: settings.temperature,
            base_seed: settings.seed.wrapping_mul(1000) + i as u64 * 100,
            concurrency: 1,
        };
        let voted = text_self_consistency(counting.as_ref(), &req, &sampling, &vote)
            .await
            .map_err(|e| format!("{}: samples: {e}", sim.id))?;
        if !voted.failures.is_empty() {
            return Err(format!("{}: failed samples {:?}", sim.id, voted.failures));
        }
        add(&mut samples_usage, counting.take());
        let merged = merge
            .aggregate(&voted.candidates)
            .await
            .map_err(|e| format!("{}: merge: {e}", sim.id))?;
        add(&mut merge_usage, counting.take());
        questions.push(ScQuestion {
            incident: sim.id.clone(),
            root,
            single: single.text().to_string(),
            samples: voted.candidates,
            vote: voted.answer,
            merge: merged.text,
            most_mentioned: most_mentioned(&sim),
        });
    }
    let n = questions.len().max(1) as f64;
    let share =
        |f: &dyn Fn(&ScQuestion) -> bool| questions.iter().filter(|q| f(q)).count() as f64 / n;
    let names = |answer: &str, root: &str| answer.contains(root);
    Ok(ScReport {
        model: model.model_id().to_string(),
        samples: settings.samples.max(1),
        vote_differs: share(&|q| !same(&q.vote, &q.single)),
        merge_differs: share(&|q| !same(&q.merge, &q.single)),
        baseline_names_root: share(&|q| q.most_mentioned == q.root),
        single_names_root: share(&|q| names(&q.single, &q.root)),
        vote_names_root: share(&|q| names(&q.vote, &q.root)),
        merge_names_root: share(&|q| names(&q.merge, &q.root)),
        single_usage,
        samples_usage,
        merge_usage,
        seconds_per_question: started.elapsed().as_secs_f64() / n,
        questions,
    })
}

impl ScReport {
    /// A Markdown table of the figures.
    pub fn markdown(&self) -> String {
        let tokens = |u: &Usage| {
            format!(
                "{} + {}{}",
                u.prompt_tokens,
                u.completion_tokens,
                if u.estimated { " (estimated)" } else { "" }
            )
        };
        let q = self.questions.len();
        format!(
            "Model `{}`: {q} questions (seeded simulated incidents, written for this benchmark), \
             one greedy answer and {} samples at temperature above zero each; {:.1} s per \
             question. Each question is the telemetry summary a diagnosis would see (alerts, \
             call graph, every component's metrics in name order, warning and error log lines), \
             not the failing path. The trivial baseline names the component the summary \
             mentions most often. This measures the model on questions of our own making.\n\n\
             | answer | differs from the single answer | names the root service | tokens (prompt + completion) |\n\
             |---|---|---|---|\n\
             | trivial baseline (most-mentioned component) | - | {:.2} | 0 |\n\
             | single (greedy) | - | {:.2} | {} |\n\
             | embedding vote over the samples | {:.2} | {:.2} | {} (the samples) |\n\
             | model merge of the samples | {:.2} | {:.2} | {} (the merge calls, on top of the samples) |\n",
            self.model,
            self.samples,
            self.seconds_per_question,
            self.baseline_names_root,
            self.single_names_root,
            tokens(&self.single_usage),
            self.vote_differs,
            self.vote_names_root,
            tokens(&self.samples_usage),
            self.merge_differs,
            self.merge_names_root,
            tokens(&self.merge_usage),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_llm::{HashingConfig, HashingEmbedder, ScriptedModel};

    #[tokio::test]
    async fn figures_follow_the_answers() {
        let sim = SimIncident::generate(ScSettings::default().seed, 1);
        let (root, entry) = (sim.root().to_string(), sim.entry().to_string());
        // Greedy first, then three samples, then the merge, per question.
        let turns = [
            format!("{entry} is down"),
            format!("the root is {root}, out of memory"),
            format!("the root is {root}, out of memory"),
            format!("{entry} is down"),
            format!("merged: {root}"),
        ];
        let model = Arc::new(ScriptedModel::from_texts("scripted-sc-bench", turns));
        let embedder = Arc::new(HashingEmbedder::new(HashingConfig::default()));
        let settings = ScSettings {
            questions: 1,
            ..ScSettings::default()
        };
        let r = run_sc(model, embedder, &settings).await.unwrap();
        assert_eq!(r.questions.len(), 1);
        assert_eq!(r.questions[0].samples.len(), 3);
        assert_eq!(r.questions[0].root, root);
        // The vote takes the answer two samples agree on, which is not the greedy one.
        assert_eq!(
            r.questions[0].vote,
            format!("the root is {root}, out of memory")
        );
        assert_eq!(r.questions[0].merge, format!("merged: {root}"));
        assert_eq!((r.vote_differs, r.merge_differs), (1.0, 1.0));
        assert_eq!(
            (r.single_names_root, r.vote_names_root, r.merge_names_root),
            (0.0, 1.0, 1.0)
        );
        assert_eq!(
            r.baseline_names_root,
            if most_mentioned(&sim) == root {
                1.0
            } else {
                0.0
            }
        );
        assert!(r.single_usage.total() > 0 && r.samples_usage.total() > 0);
        assert!(
            r.markdown()
                .contains("| trivial baseline (most-mentioned component) |")
        );
        // A model that runs out of turns is an error, not a short table.
        let short = Arc::new(ScriptedModel::from_texts("scripted-sc-short", ["one"]));
        let embedder = Arc::new(HashingEmbedder::new(HashingConfig::default()));
        assert!(run_sc(short, embedder, &settings).await.is_err());
    }

    #[test]
    fn the_question_gives_telemetry_not_the_answer() {
        for seed in 0..20 {
            let sim = SimIncident::generate(seed, 1 + seed as usize % 3);
            let (messages, root) = question(&sim);
            let text = format!("{messages:?}");
            assert_eq!(root, sim.root());
            // The evidence is there: the fault's log line and every component's metrics.
            assert!(text.contains(sim.fault.log_message()));
            for component in sim.callees.keys() {
                assert!(text.contains(&format!("metrics of {component}:")));
            }
            // The failing path is not: neither as a chain nor as the order of the metrics.
            assert!(!text.contains(&sim.path.join(" -> ")));
            assert!(!text.contains("Error rates rise along"));
        }
    }

    #[test]
    fn the_baseline_counts_whole_names() {
        // Over seeds the most-mentioned component is sometimes the root and sometimes not:
        // a baseline that always or never found it would say nothing.
        let hits = (0..40)
            .map(|seed| SimIncident::generate(seed, 1 + seed as usize % 3))
            .filter(|sim| most_mentioned(sim) == sim.root())
            .count();
        assert!(hits < 40, "the summary gives the root away");
        let sim = SimIncident::generate(5, 2);
        let summary = telemetry_summary(&sim);
        let best = most_mentioned(&sim);
        let count = |c: &str| {
            summary
                .split(|ch: char| !(ch.is_alphanumeric() || ch == '-'))
                .filter(|w| *w == c)
                .count()
        };
        assert!(sim.callees.keys().all(|c| count(c) <= count(&best)));
    }
}
