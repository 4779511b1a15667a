//! The log expert: RCAgent Algorithm 1 end to end.
//!
//! 1. The log is segmented into contiguous blocks of related lines (a [`LogSegmenter`], by
//!    default the [`SemanticSegmenter`]).
//! 2. For each block (the most severe first, at most [`LogExpertConfig::max_blocks`]) the
//!    most similar past analyses are retrieved from a [`LogExampleStore`] (embedder + cosine,
//!    top N) as in-context examples.
//! 3. A [`LogAnalyst`] explains the block, quoting evidence verbatim.
//! 4. Quotes that fail the Levenshtein filter ([`evidence_supported`]) are dropped, and so is
//!    every explanation left without a supported quote.
//! 5. The analyst summarises what remains.
//!
//! Prompts are bounded: a block longer than [`LogExpertConfig::max_block_chars`] is shown with
//! similar lines merged and then cut; examples are dropped until the prompt fits
//! [`LogExpertConfig::max_prompt_chars`]. [`HeuristicLogAnalyst`] is the deterministic policy.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::embed::Embedder;
use rca_core::llm::{ChatModel, CompletionRequest, Message, Usage};
use rca_core::logs::{LogBlock, LogSegmenter};
use rca_core::source::Level;
use rca_llm::vectors::EmbeddingMatrix;
use serde::{Deserialize, Serialize};

use super::ExpertError;
use crate::logs::{
    DEFAULT_MIN_EVIDENCE_CHARS, DEFAULT_MIN_LEVEL, SegmentConfig, SemanticSegmenter, dedup_lines,
    evidence_supported, line_level,
};

/// A past log analysis: a log excerpt and what an expert concluded from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogExample {
    /// The log excerpt.
    pub log: String,
    /// The analysis written for it.
    pub analysis: String,
}

/// Past analyses, retrieved by the cosine similarity of their embedded logs (one row each of
/// an [`EmbeddingMatrix`], so a lookup is one matrix-vector product).
pub struct LogExampleStore {
    embedder: Arc<dyn Embedder>,
    examples: Vec<LogExample>,
    vectors: EmbeddingMatrix,
}

impl std::fmt::Debug for LogExampleStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogExampleStore")
            .field("examples", &self.examples.len())
            .finish()
    }
}

impl LogExampleStore {
    /// An empty store embedding through `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        LogExampleStore {
            embedder,
            examples: Vec::new(),
            vectors: EmbeddingMatrix::default(),
        }
    }

    /// Adds examples (their logs are embedded once, here).
    pub async fn add_all(&mut self, examples: Vec<LogExample>) -> Result<(), ExpertError> {
        if examples.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = examples.iter().map(|e| e.log.clone()).collect();
        let vectors = self.embedder.embed(&texts).await?;
        if vectors.len() != examples.len() {
            return Err(ExpertError::Embed(rca_core::EmbedError::Failed {
                message: format!("{} vectors for {} examples", vectors.len(), examples.len()),
            }));
        }
        let mut matrix = self.vectors.clone();
        for v in &vectors {
            matrix.push(v)?;
        }
        self.vectors = matrix;
        self.examples.extend(examples);
        Ok(())
    }

    /// How many examples it holds.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }

    /// The `n` examples most similar to `text`, most similar first, with their cosine.
    pub async fn nearest(
        &self,
        text: &str,
        n: usize,
    ) -> Result<Vec<(f32, LogExample)>, ExpertError> {
        if self.examples.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let v = self.embedder.embed(&[text.to_string()]).await?;
        let Some(v) = v.first() else {
            return Ok(Vec::new());
        };
        Ok(self
            .vectors
            .nearest(v, n)?
            .into_iter()
            .filter_map(|(i, s)| self.examples.get(i).map(|e| (s, e.clone())))
            .collect())
    }
}

/// Settings of the log expert.
#[derive(Debug, Clone, PartialEq)]
pub struct LogExpertConfig {
    /// Blocks analysed at most (the most severe first). Default 8.
    pub max_blocks: usize,
    /// In-context examples per block. Default 3.
    pub examples_per_block: usize,
    /// Characters of a block shown. Default 6,000.
    pub max_block_chars: usize,
    /// Characters of a whole prompt (block and examples). Default 12,000.
    pub max_prompt_chars: usize,
    /// Quotes shorter than this never count as evidence.
    pub min_evidence_chars: usize,
    /// Blocks with no line at or above this level are analysed only when slots remain.
    pub min_level: Level,
}

impl Default for LogExpertConfig {
    fn default() -> Self {
        LogExpertConfig {
            max_blocks: 8,
            examples_per_block: 3,
            max_block_chars: 6000,
            max_prompt_chars: 12_000,
            min_evidence_chars: DEFAULT_MIN_EVIDENCE_CHARS,
            min_level: DEFAULT_MIN_LEVEL,
        }
    }
}

/// One explanation an analyst gave, with the quotes offered as evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// What the lines mean.
    pub explanation: String,
    /// Lines copied verbatim from the block.
    pub evidence: Vec<String>,
}

/// An explanation that survived the evidence filter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockFinding {
    /// The block it explains.
    pub block: LogBlock,
    /// The explanation.
    pub explanation: String,
    /// Its supported quotes.
    pub evidence: Vec<String>,
}

/// What the analyst is shown about one block.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockPrompt<'a> {
    /// The question of the caller (the incident).
    pub question: &'a str,
    /// The block text as shown (bounded).
    pub text: &'a str,
    /// The retrieved past analyses, most similar first, with their cosine.
    pub examples: &'a [(f32, LogExample)],
    /// Characters the whole prompt may take.
    pub max_prompt_chars: usize,
}

/// Explains log blocks and summarises findings: a model, or a deterministic policy.
#[async_trait]
pub trait LogAnalyst: Send + Sync {
    /// Explanations of one block, each with quotes copied from it.
    async fn explain(
        &self,
        prompt: &BlockPrompt<'_>,
    ) -> Result<(Vec<Explanation>, Usage), ExpertError>;
    /// A summary of the findings that survived the evidence filter (never called with none).
    async fn summarise(
        &self,
        question: &str,
        findings: &[BlockFinding],
    ) -> Result<(String, Usage), ExpertError>;
}

/// The result of a log analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogInvestigation {
    /// Every block of the log.
    pub blocks: Vec<LogBlock>,
    /// The blocks analysed, in log order.
    pub analysed: Vec<LogBlock>,
    /// The explanations kept, in log order.
    pub findings: Vec<BlockFinding>,
    /// Explanations dropped because none of their quotes is in the block.
    pub dropped_explanations: usize,
    /// Quotes dropped by the evidence filter.
    pub dropped_quotes: usize,
    /// The summary for the controller.
    pub summary: String,
    /// Tokens spent.
    pub usage: Usage,
}

/// The log expert.
pub struct LogExpert {
    segmenter: Arc<dyn LogSegmenter>,
    examples: Arc<LogExampleStore>,
    analyst: Arc<dyn LogAnalyst>,
    config: LogExpertConfig,
}

impl std::fmt::Debug for LogExpert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogExpert")
            .field("examples", &self.examples)
            .field("config", &self.config)
            .finish()
    }
}

/// The block's text as shown: its lines, or when too long its lines with similar ones merged
/// (`(xN) line`), cut at `max_chars`.
pub fn block_text(lines: &[String], max_chars: usize) -> String {
    let raw = lines.join("\n");
    if raw.chars().count() <= max_chars {
        return raw;
    }
    let mut out = String::new();
    for g in dedup_lines(lines) {
        let line = if g.count > 1 {
            format!("(x{}) {}\n", g.count, g.example)
        } else {
            format!("{}\n", g.example)
        };
        if out.chars().count() + line.chars().count() > max_chars {
            break;
        }
        out.push_str(&line);
    }
    out.trim_end().to_string()
}

impl LogExpert {
    /// An expert with any segmenter.
    pub fn new(
        segmenter: Arc<dyn LogSegmenter>,
        examples: Arc<LogExampleStore>,
        analyst: Arc<dyn LogAnalyst>,
        config: LogExpertConfig,
    ) -> Self {
        LogExpert {
            segmenter,
            examples,
            analyst,
            config,
        }
    }

    /// An expert segmenting with the [`SemanticSegmenter`] over `embedder`.
    pub fn semantic(
        embedder: Arc<dyn Embedder>,
        examples: Arc<LogExampleStore>,
        analyst: Arc<dyn LogAnalyst>,
        config: LogExpertConfig,
    ) -> Self {
        let segmenter = Arc::new(SemanticSegmenter::new(embedder, SegmentConfig::default()));
        Self::new(segmenter, examples, analyst, config)
    }

    /// The settings.
    pub fn config(&self) -> &LogExpertConfig {
        &self.config
    }

    /// Analyses `lines` for `question`.
    pub async fn analyse(
        &self,
        question: &str,
        lines: &[String],
    ) -> Result<LogInvestigation, ExpertError> {
        let lines: Vec<String> = lines
            .iter()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.trim().is_empty())
            .collect();
        if lines.is_empty() {
            return Err(ExpertError::TrivialInput("no log lines to analyse".into()));
        }
        let blocks = self.segmenter.segment(&lines).await?;
        // The most severe blocks first (then the larger, then the earlier), at most max_blocks.
        let mut ranked: Vec<(Level, usize, LogBlock)> = blocks
            .iter()
            .filter(|b| b.end <= lines.len() && !b.is_empty())
            .map(|b| {
                let severe = lines[b.start..b.end]
                    .iter()
                    .map(|l| line_level(l, None).unwrap_or_default())
                    .max()
                    .unwrap_or_default();
                (severe, b.len(), b.clone())
            })
            .collect();
        ranked.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.cmp(&a.1))
                .then(a.2.start.cmp(&b.2.start))
        });
        let severe_count = ranked
            .iter()
            .filter(|r| r.0 >= self.config.min_level)
            .count();
        let take = if severe_count > 0 {
            severe_count.min(self.config.max_blocks)
        } else {
            self.config.max_blocks
        };
        let mut analysed: Vec<LogBlock> = ranked.into_iter().take(take).map(|r| r.2).collect();
        analysed.sort_by_key(|b| b.start);

        let mut usage = Usage::default();
        let mut findings = Vec::new();
        let (mut dropped_explanations, mut dropped_quotes) = (0, 0);
        for block in &analysed {
            let text = block_text(&lines[block.start..block.end], self.config.max_block_chars);
            let examples = self
                .examples
                .nearest(&text, self.config.examples_per_block)
                .await?;
            let prompt = BlockPrompt {
                question,
                text: &text,
                examples: &examples,
                max_prompt_chars: self.config.max_prompt_chars,
            };
            let (explanations, used) = self.analyst.explain(&prompt).await?;
            usage.add(&used);
            for e in explanations {
                let offered = e.evidence.len();
                let kept: Vec<String> = e
                    .evidence
                    .into_iter()
                    .map(|q| q.trim().to_string())
                    .filter(|q| evidence_supported(q, &text, self.config.min_evidence_chars))
                    .collect();
                dropped_quotes += offered - kept.len();
                if kept.is_empty() || e.explanation.trim().is_empty() {
                    dropped_explanations += 1;
                    continue;
                }
                findings.push(BlockFinding {
                    block: block.clone(),
                    explanation: e.explanation.trim().to_string(),
                    evidence: kept,
                });
            }
        }
        let summary = if findings.is_empty() {
            format!(
                "No supported finding in {} analysed block(s) of {} line(s).",
                analysed.len(),
                lines.len()
            )
        } else {
            let (s, used) = self.analyst.summarise(question, &findings).await?;
            usage.add(&used);
            s
        };
        Ok(LogInvestigation {
            blocks,
            analysed,
            findings,
            dropped_explanations,
            dropped_quotes,
            summary,
            usage,
        })
    }
}

/// The deterministic policy: explains each group of similar lines at or above a level with its
/// count, quotes the first line of the group verbatim, and cites the most similar past analysis
/// when it is close.
#[derive(Debug, Clone, PartialEq)]
pub struct HeuristicLogAnalyst {
    /// Lines below this level are not explained. Default WARNING.
    pub min_level: Level,
    /// Groups explained per block at most. Default 3.
    pub max_groups: usize,
    /// A past analysis is cited when its cosine reaches this. Default 0.5.
    pub min_similarity: f32,
}

impl Default for HeuristicLogAnalyst {
    fn default() -> Self {
        HeuristicLogAnalyst {
            min_level: DEFAULT_MIN_LEVEL,
            max_groups: 3,
            min_similarity: 0.5,
        }
    }
}

#[async_trait]
impl LogAnalyst for HeuristicLogAnalyst {
    async fn explain(
        &self,
        prompt: &BlockPrompt<'_>,
    ) -> Result<(Vec<Explanation>, Usage), ExpertError> {
        let lines: Vec<&str> = prompt.text.lines().collect();
        let severe: Vec<(Level, &str)> = lines
            .iter()
            .filter_map(|l| {
                let level = line_level(l, None).unwrap_or_default();
                (level >= self.min_level).then_some((level, *l))
            })
            .collect();
        let texts: Vec<&str> = severe.iter().map(|s| s.1).collect();
        let mut groups: Vec<(Level, crate::logs::DedupedLine)> = dedup_lines(&texts)
            .into_iter()
            .map(|g| (severe.get(g.first_line).map_or(Level::Info, |s| s.0), g))
            .collect();
        groups.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.count.cmp(&a.1.count))
                .then(a.1.first_line.cmp(&b.1.first_line))
        });
        let past = prompt
            .examples
            .first()
            .filter(|(s, _)| *s >= self.min_similarity)
            .map(|(_, e)| e.analysis.clone());
        let out = groups
            .into_iter()
            .take(self.max_groups)
            .map(|(level, g)| {
                let mut explanation = format!("{} {level} line(s) like: {}", g.count, g.template);
                if let Some(p) = &past {
                    explanation.push_str(&format!(" (a similar past log was analysed as: {p})"));
                }
                Explanation {
                    explanation,
                    evidence: vec![g.example.clone()],
                }
            })
            .collect();
        Ok((out, Usage::default()))
    }

    async fn summarise(
        &self,
        question: &str,
        findings: &[BlockFinding],
    ) -> Result<(String, Usage), ExpertError> {
        let mut out = format!("Log findings for: {question}\n");
        for f in findings {
            out.push_str(&format!(
                "- lines {}-{}: {} Evidence: \"{}\"\n",
                f.block.start + 1,
                f.block.end,
                f.explanation,
                f.evidence.join("\" | \"")
            ));
        }
        Ok((out, Usage::default()))
    }
}

/// An analyst backed by a chat model. It asks for
/// `{"explanations": [{"explanation": "...", "evidence": ["verbatim line", ...]}]}` and repairs
/// malformed JSON.
pub struct ModelLogAnalyst {
    model: Arc<dyn ChatModel>,
}

impl std::fmt::Debug for ModelLogAnalyst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelLogAnalyst")
            .field("model", &self.model.model_id())
            .finish()
    }
}

impl ModelLogAnalyst {
    /// An analyst asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelLogAnalyst { model }
    }
}

const EXPLAIN_SYSTEM: &str = "You are a log expert helping to find the root cause of a cloud \
incident. Read the log block and explain each problem it shows. For every explanation copy the \
log lines that support it VERBATIM from the block as evidence (never paraphrase, never invent \
lines). Past analyses of similar logs may be given as examples. Answer with one JSON object: \
{\"explanations\": [{\"explanation\": \"...\", \"evidence\": [\"exact line\", ...]}]}; an empty \
list when the block shows no problem.";

/// The user message for one block: examples are added, most similar first, while the whole
/// prompt stays within `max_prompt_chars`; the block itself is cut if it alone is too long.
pub fn explain_message(prompt: &BlockPrompt<'_>) -> String {
    let head = format!("Problem: {}\n\n", prompt.question);
    let budget = prompt
        .max_prompt_chars
        .saturating_sub(EXPLAIN_SYSTEM.chars().count());
    let block_part = |text: &str| format!("Log block to analyse:\n```\n{text}\n```");
    let mut block = block_part(prompt.text);
    let fixed = head.chars().count();
    if fixed + block.chars().count() > budget {
        let room = budget.saturating_sub(fixed + 40);
        let cut: String = prompt.text.chars().take(room).collect();
        block = block_part(&cut);
    }
    let mut examples = String::new();
    for (i, (_, e)) in prompt.examples.iter().enumerate() {
        let part = format!(
            "Past analysis {}:\nLog:\n```\n{}\n```\nAnalysis: {}\n\n",
            i + 1,
            e.log,
            e.analysis
        );
        if fixed + examples.chars().count() + part.chars().count() + block.chars().count() > budget
        {
            break;
        }
        examples.push_str(&part);
    }
    format!("{head}{examples}{block}")
}

fn parse_explanations(value: &serde_json::Value) -> Vec<Explanation> {
    let items = value
        .get("explanations")
        .and_then(|v| v.as_array())
        .or_else(|| value.as_array());
    items
        .map(|a| {
            a.iter()
                .filter_map(|item| {
                    let explanation = item.get("explanation")?.as_str()?.to_string();
                    let evidence = match item.get("evidence") {
                        Some(serde_json::Value::String(s)) => vec![s.clone()],
                        Some(serde_json::Value::Array(v)) => v
                            .iter()
                            .filter_map(|q| q.as_str().map(str::to_string))
                            .collect(),
                        _ => Vec::new(),
                    };
                    Some(Explanation {
                        explanation,
                        evidence,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait]
impl LogAnalyst for ModelLogAnalyst {
    async fn explain(
        &self,
        prompt: &BlockPrompt<'_>,
    ) -> Result<(Vec<Explanation>, Usage), ExpertError> {
        let request = CompletionRequest::new(vec![
            Message::system(EXPLAIN_SYSTEM),
            Message::user(explain_message(prompt)),
        ])
        .with_temperature(0.0)
        .with_max_tokens(super::EXPERT_MAX_TOKENS)
        .json();
        let response = self.model.complete(request).await?;
        let text = response.text();
        let value = rca_llm::json::repair(text)
            .map_err(|e| ExpertError::Unusable(e.to_string()))?
            .value;
        if value.get("explanations").is_none() && !value.is_array() {
            return Err(ExpertError::Unusable(format!(
                "no `explanations` field in {text}"
            )));
        }
        Ok((parse_explanations(&value), response.usage))
    }

    async fn summarise(
        &self,
        question: &str,
        findings: &[BlockFinding],
    ) -> Result<(String, Usage), ExpertError> {
        let mut notes = String::new();
        for f in findings {
            notes.push_str(&format!(
                "- lines {}-{}: {} Evidence: \"{}\"\n",
                f.block.start + 1,
                f.block.end,
                f.explanation,
                f.evidence.join("\" | \"")
            ));
        }
        let request = CompletionRequest::new(vec![
            Message::system(
                "Summarise these verified log findings for an incident investigator in at most \
                 6 sentences: what went wrong, in what order, and which component is most \
                 likely the cause. Keep the quoted evidence lines. Plain text.",
            ),
            Message::user(format!("Problem: {question}\n\nFindings:\n{notes}")),
        ])
        .with_temperature(0.0)
        .with_max_tokens(super::EXPERT_MAX_TOKENS);
        let response = self.model.complete(request).await?;
        let text = response.text().trim().to_string();
        if text.is_empty() {
            return Err(ExpertError::Unusable("empty summary".into()));
        }
        Ok((text, response.usage))
    }
}
