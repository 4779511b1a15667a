//! Self-consistency (RCAgent 3.4).
//!
//! - Text SC: sample `k` answers to one prompt and aggregate them, by embedding voting
//!   ([`EmbeddingVote`]: the candidate closest to the mean embedding) or by model merging
//!   ([`LlmMerge`]: the model writes one answer of similar form and length).
//! - Trajectory-level SC ([`TrajectoryConsistency`]): run the controller greedily until it is
//!   about to finalize, then sample `k` continuations from that shared prefix at a temperature
//!   above zero and aggregate their reports. With the step-wise filter only samples that
//!   finalize at the same step as the greedy run count.
//!
//! Sample `i` uses seed `base_seed + i`; samples are gathered concurrently (at most
//! `concurrency` at once) and sorted by index before aggregation, and ties are broken by the
//! lower index, so a scripted model gives the same result on every run.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use rca_core::consistency::{AggregateError, Aggregated, Aggregator};
use rca_core::embed::Embedder;
use rca_core::incident::Incident;
use rca_core::llm::{ChatModel, CompletionRequest, Message};
use rca_core::trajectory::{DiagnosisReport, Outcome, Responsibility};
use rca_core::{LlmError, Usage};
use rca_llm::vectors::EmbeddingMatrix;
use serde::{Deserialize, Serialize};

use crate::react::{Cancellation, DriveEnd, ReactAgent, ReactRun, Sampling};

/// Picks the candidate whose embedding is closest (cosine) to the mean of all embeddings.
#[derive(Clone)]
pub struct EmbeddingVote {
    embedder: Arc<dyn Embedder>,
}

impl EmbeddingVote {
    /// Voting with this embedder.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        EmbeddingVote { embedder }
    }
}

#[async_trait]
impl Aggregator for EmbeddingVote {
    async fn aggregate(&self, candidates: &[String]) -> Result<Aggregated, AggregateError> {
        if candidates.is_empty() {
            return Err(AggregateError::Empty);
        }
        let vectors = self.embedder.embed(candidates).await?;
        // The sample closest to the mean of the unit embeddings (ties: the lower index).
        let best = EmbeddingMatrix::from_rows(&vectors)?
            .central()
            .ok_or(AggregateError::Empty)?;
        Ok(Aggregated {
            text: candidates[best.0].clone(),
            chosen: Some(best.0),
        })
    }
}

/// Asks a model to merge the candidates into one answer of similar form and length.
#[derive(Clone)]
pub struct LlmMerge {
    model: Arc<dyn ChatModel>,
    temperature: Option<f32>,
}

impl LlmMerge {
    /// Merging with this model, decoded greedily.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        LlmMerge {
            model,
            temperature: Some(0.0),
        }
    }

    /// The prompt sent for these candidates.
    pub fn prompt(candidates: &[String]) -> Vec<Message> {
        let mut listed = String::new();
        for (i, c) in candidates.iter().enumerate() {
            listed.push_str(&format!("Candidate {}:\n{}\n\n", i + 1, c.trim()));
        }
        vec![
            Message::system(
                "You combine several candidate answers to the same question into one answer. \
                 Keep what most candidates agree on, drop what only one claims, and write an \
                 answer of similar form and length to the candidates. Answer with the combined \
                 answer only.",
            ),
            Message::user(listed),
        ]
    }
}

/// Completion tokens allowed for a merge: the merge should be of the candidates' length, so
/// twice the longest candidate (at about four bytes a token) plus a margin of 16 is enough,
/// and a model that rambles is cut instead of writing until the server's default limit.
pub fn merge_budget(candidates: &[String]) -> u32 {
    let longest = candidates.iter().map(|c| c.trim().len()).max().unwrap_or(0);
    u32::try_from(longest.div_ceil(4).saturating_mul(2).saturating_add(16)).unwrap_or(u32::MAX)
}

#[async_trait]
impl Aggregator for LlmMerge {
    async fn aggregate(&self, candidates: &[String]) -> Result<Aggregated, AggregateError> {
        if candidates.is_empty() {
            return Err(AggregateError::Empty);
        }
        let mut req = CompletionRequest::new(Self::prompt(candidates));
        req.temperature = self.temperature;
        req.max_tokens = Some(merge_budget(candidates));
        let resp = self.model.complete(req).await?;
        let text = resp.text().trim().to_string();
        if text.is_empty() {
            return Err(AggregateError::Llm(LlmError::Malformed {
                message: "the model returned an empty merge".into(),
                raw: resp.text().to_string(),
            }));
        }
        Ok(Aggregated { text, chosen: None })
    }
}

/// How a configured self-consistency aggregates its samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// [`EmbeddingVote`] with the controller's embedder.
    #[default]
    EmbeddingVote,
    /// [`LlmMerge`] with the controller's model.
    ModelMerge,
}

/// Self-consistency as part of the controller's configuration
/// ([`crate::react::ReactConfig::self_consistency`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SelfConsistency {
    /// One greedy run.
    #[default]
    Off,
    /// Text SC of the final answer: `k` samples of the finalizing turn (the same prompt as
    /// the greedy run's `finalize`), their root causes and solutions aggregated.
    Text {
        /// How samples are drawn.
        sampling: SamplingConfig,
        /// How they are aggregated.
        aggregation: Aggregation,
    },
    /// Trajectory SC ([`TrajectoryConsistency`]): `k` continuations from the greedy prefix
    /// before finalizing.
    Trajectory {
        /// How samples are drawn.
        sampling: SamplingConfig,
        /// Discard, before they act, samples that would not finalize where the greedy run did.
        stepwise: bool,
        /// How they are aggregated.
        aggregation: Aggregation,
    },
}

/// What self-consistency did in a run ([`crate::react::ReactRun::consistency`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsistencySummary {
    /// `text`, `trajectory` or `trajectory-stepwise`.
    pub kind: String,
    /// Samples drawn.
    pub samples: usize,
    /// Samples whose reports were aggregated.
    pub kept: usize,
    /// The greedy run's root cause.
    pub greedy_root_cause: Option<String>,
    /// Whether the aggregated root cause differs from the greedy one.
    pub changed: bool,
    /// Tokens the samples spent beyond the greedy run.
    pub extra_usage: Usage,
    /// Why the greedy report was kept although samples were drawn, if aggregation failed.
    pub aggregation_error: Option<String>,
}

/// How samples are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplingConfig {
    /// Number of samples.
    pub k: usize,
    /// Sampling temperature (above zero).
    pub temperature: f32,
    /// Sample `i` uses seed `base_seed + i`.
    pub base_seed: u64,
    /// At most this many samples run at once.
    pub concurrency: usize,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            k: 5,
            temperature: 0.7,
            base_seed: 0,
            concurrency: 4,
        }
    }
}

/// The result of text self-consistency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextConsistency {
    /// Tokens of every sample.
    #[serde(default)]
    pub usage: Usage,
    /// The sampled answers, by sample index (failed samples are left out).
    pub candidates: Vec<String>,
    /// Samples that failed, with their errors.
    pub failures: Vec<(usize, String)>,
    /// The aggregated answer.
    pub answer: String,
    /// The chosen candidate (voting) or `None` (merging).
    pub chosen: Option<usize>,
}

/// Samples `k` answers to `request` (seed `base_seed + i`, one choice each) and aggregates them.
pub async fn text_self_consistency(
    model: &dyn ChatModel,
    request: &CompletionRequest,
    sampling: &SamplingConfig,
    aggregator: &dyn Aggregator,
) -> Result<TextConsistency, AggregateError> {
    let mut results: Vec<(usize, Result<rca_core::CompletionResponse, LlmError>)> =
        futures::stream::iter(0..sampling.k)
            .map(|i| {
                let mut req = request.clone();
                req.n = 1;
                req.temperature = Some(sampling.temperature);
                req.seed = Some(sampling.base_seed.wrapping_add(i as u64));
                async move { (i, model.complete(req).await) }
            })
            .buffer_unordered(sampling.concurrency.max(1))
            .collect()
            .await;
    results.sort_by_key(|(i, _)| *i);
    let mut candidates = Vec::new();
    let mut failures = Vec::new();
    let mut usage = Usage::default();
    for (i, r) in results {
        match r {
            Ok(resp) => {
                usage.add(&resp.usage);
                candidates.push(resp.text().to_string());
            }
            Err(e) => failures.push((i, e.to_string())),
        }
    }
    let agg = aggregator.aggregate(&candidates).await?;
    Ok(TextConsistency {
        usage,
        candidates,
        failures,
        answer: agg.text,
        chosen: agg.chosen,
    })
}

/// Trajectory-level self-consistency around a [`ReactAgent`].
#[derive(Clone)]
pub struct TrajectoryConsistency {
    /// How samples are drawn.
    pub sampling: SamplingConfig,
    /// Keep only samples that finalize at the greedy run's finalize step.
    pub stepwise: bool,
    /// Aggregates root causes and solutions.
    pub aggregator: Arc<dyn Aggregator>,
}

/// The result of trajectory-level self-consistency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TscRun {
    /// The greedy run (complete, including its own finalize step).
    pub greedy: ReactRun,
    /// Steps shared by every sample (the greedy prefix before finalizing).
    pub prefix_steps: usize,
    /// The sampled continuations by index (their trajectories include the shared prefix).
    pub samples: Vec<ReactRun>,
    /// Indices of the samples whose reports were aggregated.
    pub kept: Vec<usize>,
    /// The aggregated report (the greedy one when no sample was kept or aggregation failed).
    pub report: Option<DiagnosisReport>,
    /// Why aggregation fell back to the greedy report, if it did.
    pub aggregation_error: Option<String>,
    /// Tokens spent in all (greedy run, samples; aggregation calls are not included).
    pub usage: Usage,
}

impl TrajectoryConsistency {
    /// Runs the agent greedily to the point of finalizing, samples `k` continuations and
    /// aggregates their reports.
    pub async fn run(
        &self,
        agent: &ReactAgent,
        incident: &Incident,
        cancel: &Cancellation,
    ) -> TscRun {
        let mut state = agent.start(incident);
        let end = agent.drive(&mut state, agent.greedy(), true, cancel).await;
        let (prefix, end) = match end {
            DriveEnd::AboutToFinalize(prefix, report) => {
                (Some(prefix), DriveEnd::Finalized(report))
            }
            other => (None, other),
        };
        let greedy = agent.finish(state, end);
        let Some(prefix) = prefix else {
            let usage = greedy.trajectory.usage;
            return TscRun {
                report: greedy.report.clone(),
                greedy,
                prefix_steps: 0,
                samples: Vec::new(),
                kept: Vec::new(),
                aggregation_error: None,
                usage,
            };
        };
        let prefix_steps = prefix.trajectory.steps.len();
        let mut samples: Vec<(usize, ReactRun)> = futures::stream::iter(0..self.sampling.k)
            .map(|i| {
                let mut s = (*prefix).clone();
                let sampling = Sampling {
                    temperature: Some(self.sampling.temperature),
                    seed: Some(self.sampling.base_seed.wrapping_add(i as u64)),
                    branch_at: prefix_steps,
                    finalize_only: self.stepwise,
                };
                async move {
                    let end = agent.drive(&mut s, sampling, false, cancel).await;
                    (i, agent.finish(s, end))
                }
            })
            .buffer_unordered(self.sampling.concurrency.max(1))
            .collect()
            .await;
        samples.sort_by_key(|(i, _)| *i);
        let samples: Vec<ReactRun> = samples.into_iter().map(|(_, r)| r).collect();
        let greedy_steps = greedy.trajectory.steps.len();
        let kept: Vec<usize> = samples
            .iter()
            .enumerate()
            .filter(|(_, r)| r.trajectory.outcome == Outcome::Finalized && r.report.is_some())
            .filter(|(_, r)| !self.stepwise || r.trajectory.steps.len() == greedy_steps)
            .map(|(i, _)| i)
            .collect();
        let mut usage = greedy.trajectory.usage;
        for s in &samples {
            // Samples repeat the shared prefix; count only what they added.
            for step in s.trajectory.steps.iter().skip(prefix_steps) {
                usage.add(&step.usage);
            }
        }
        let reports: Vec<&DiagnosisReport> = kept
            .iter()
            .filter_map(|&i| samples.get(i).and_then(|r| r.report.as_ref()))
            .collect();
        let (report, aggregation_error) = match self.combine(&reports).await {
            Ok(Some(r)) => (Some(r), None),
            Ok(None) => (greedy.report.clone(), None),
            Err(e) => (greedy.report.clone(), Some(e.to_string())),
        };
        let report = report.map(|mut r| {
            r.usage = usage;
            r
        });
        TscRun {
            greedy,
            prefix_steps,
            samples,
            kept,
            report,
            aggregation_error,
            usage,
        }
    }

    async fn combine(
        &self,
        reports: &[&DiagnosisReport],
    ) -> Result<Option<DiagnosisReport>, AggregateError> {
        combine_reports(self.aggregator.as_ref(), reports).await
    }
}

/// One report from several: root causes and solutions aggregated by `aggregator`, the
/// responsibility by majority, the confidence averaged; the rest from the report whose root
/// cause was chosen (the first when the aggregator merged).
async fn combine_reports(
    aggregator: &dyn Aggregator,
    reports: &[&DiagnosisReport],
) -> Result<Option<DiagnosisReport>, AggregateError> {
    {
        let Some(first) = reports.first() else {
            return Ok(None);
        };
        let roots: Vec<String> = reports.iter().map(|r| r.root_cause.clone()).collect();
        let solutions: Vec<String> = reports.iter().map(|r| r.solution.clone()).collect();
        let root = aggregator.aggregate(&roots).await?;
        let solution = aggregator.aggregate(&solutions).await?;
        let base = root
            .chosen
            .and_then(|i| reports.get(i))
            .copied()
            .unwrap_or(first);
        let confidence = reports.iter().map(|r| r.confidence).sum::<f64>() / reports.len() as f64;
        Ok(Some(DiagnosisReport {
            root_cause: root.text,
            solution: solution.text,
            responsibility: majority(reports.iter().map(|r| &r.responsibility)),
            confidence,
            ..(*base).clone()
        }))
    }
}

impl ReactAgent {
    /// The aggregator of a configured self-consistency.
    fn aggregator(&self, aggregation: Aggregation) -> Arc<dyn Aggregator> {
        match aggregation {
            Aggregation::EmbeddingVote => Arc::new(EmbeddingVote::new(Arc::clone(self.embedder()))),
            Aggregation::ModelMerge => Arc::new(LlmMerge::new(Arc::clone(self.model()))),
        }
    }

    /// Runs with the configured self-consistency (`Off` is a plain greedy run).
    pub(crate) async fn run_configured(
        &self,
        incident: &Incident,
        cancel: &Cancellation,
    ) -> ReactRun {
        match self.config().self_consistency {
            SelfConsistency::Off => {
                let mut state = self.start(incident);
                let end = self.drive(&mut state, self.greedy(), false, cancel).await;
                self.finish(state, end)
            }
            SelfConsistency::Trajectory {
                sampling,
                stepwise,
                aggregation,
            } => {
                let tsc = TrajectoryConsistency {
                    sampling,
                    stepwise,
                    aggregator: self.aggregator(aggregation),
                };
                let out = tsc.run(self, incident, cancel).await;
                let greedy_root = out.greedy.report.as_ref().map(|r| r.root_cause.clone());
                let summary = ConsistencySummary {
                    kind: if stepwise {
                        "trajectory-stepwise"
                    } else {
                        "trajectory"
                    }
                    .into(),
                    samples: out.samples.len(),
                    kept: out.kept.len(),
                    changed: out.report.as_ref().map(|r| &r.root_cause) != greedy_root.as_ref(),
                    greedy_root_cause: greedy_root,
                    extra_usage: Usage {
                        prompt_tokens: out.usage.prompt_tokens
                            - out.greedy.trajectory.usage.prompt_tokens,
                        completion_tokens: out.usage.completion_tokens
                            - out.greedy.trajectory.usage.completion_tokens,
                        estimated: out.usage.estimated,
                    },
                    aggregation_error: out.aggregation_error.clone(),
                };
                ReactRun {
                    report: out.report,
                    consistency: Some(summary),
                    ..out.greedy
                }
            }
            SelfConsistency::Text {
                sampling,
                aggregation,
            } => {
                self.run_text_consistent(incident, cancel, sampling, aggregation)
                    .await
            }
        }
    }

    /// Text SC of the final answer: the greedy run up to its `finalize`, then `k` samples of
    /// that turn, whose valid `finalize` answers are combined.
    async fn run_text_consistent(
        &self,
        incident: &Incident,
        cancel: &Cancellation,
        sampling: SamplingConfig,
        aggregation: Aggregation,
    ) -> ReactRun {
        let mut state = self.start(incident);
        let end = self.drive(&mut state, self.greedy(), true, cancel).await;
        let DriveEnd::AboutToFinalize(prefix, report) = end else {
            return self.finish(state, end);
        };
        let greedy = self.finish(state, DriveEnd::Finalized(report));
        let mut request = CompletionRequest::new(prefix.messages.clone()).json();
        request.max_tokens = self.config().max_turn_tokens;
        let vote = EmbeddingVote::new(Arc::clone(self.embedder()));
        let samples = text_self_consistency(self.model().as_ref(), &request, &sampling, &vote)
            .await
            .ok();
        let reports: Vec<DiagnosisReport> = samples
            .iter()
            .flat_map(|s| s.candidates.iter())
            .filter_map(|text| {
                let value = rca_llm::json::repair(text).ok()?.value;
                let turn = crate::react::parse_turn(&value).ok()?;
                (turn.action.name == crate::react::FINALIZE).then_some(())?;
                let args = crate::react::FinalizeArgs::parse(&turn.action.args).ok()?;
                Some(args.into_report(&prefix.evidence, incident.detected_at))
            })
            .collect();
        let refs: Vec<&DiagnosisReport> = reports.iter().collect();
        let aggregator = self.aggregator(aggregation);
        let (combined, error) = match combine_reports(aggregator.as_ref(), &refs).await {
            Ok(r) => (r, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let extra = samples.as_ref().map(|s| s.usage).unwrap_or_default();
        let greedy_root = greedy.report.as_ref().map(|r| r.root_cause.clone());
        let report = combined
            .map(|mut r| {
                let mut usage = greedy.trajectory.usage;
                usage.add(&extra);
                r.usage = usage;
                r.elapsed_ms = greedy.trajectory.elapsed_ms;
                r
            })
            .or_else(|| greedy.report.clone());
        let summary = ConsistencySummary {
            kind: "text".into(),
            samples: sampling.k,
            kept: reports.len(),
            changed: report.as_ref().map(|r| &r.root_cause) != greedy_root.as_ref(),
            greedy_root_cause: greedy_root,
            extra_usage: extra,
            aggregation_error: error,
        };
        ReactRun {
            report,
            consistency: Some(summary),
            ..greedy
        }
    }
}

/// The most frequent label; ties go to the one seen first.
fn majority<'a>(labels: impl Iterator<Item = &'a Responsibility>) -> Responsibility {
    let mut counts: Vec<(&Responsibility, usize)> = Vec::new();
    for l in labels {
        match counts.iter_mut().find(|(x, _)| *x == l) {
            Some((_, n)) => *n += 1,
            None => counts.push((l, 1)),
        }
    }
    let mut best: Option<(&Responsibility, usize)> = None;
    for (l, n) in counts {
        if best.is_none_or(|(_, b)| n > b) {
            best = Some((l, n));
        }
    }
    best.map(|(l, _)| l.clone())
        .unwrap_or(Responsibility::Other("unknown".into()))
}

#[cfg(test)]
mod tests;
