//! Choosing stored tools for a task: relevance of the task to each tool's description or to
//! the tasks it was generated for (embedding cosine, the largest), a minimum-relevance
//! threshold, ranking by quality (top 5) with the tool-graph successors of the last tool used
//! first, plus the successors that are not relevant enough on their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rca_core::EmbedError;
use rca_core::embed::Embedder;
use rca_llm::vectors::EmbeddingMatrix;
use serde::{Deserialize, Serialize};

use super::error::LifecycleError;
use super::inventory::ToolInventory;

/// The knobs of selection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelectionPolicy {
    /// Tools whose description is less relevant than this (cosine) are not candidates.
    pub min_relevance: f32,
    /// How many relevant tools to keep after ranking by quality.
    pub top_k: usize,
    /// How many graph successors of the last tool to add.
    pub max_successors: usize,
    /// A graph successor that is not relevant enough to be a candidate on its own is still
    /// reused (instead of generating a tool) when its relevance reaches this.
    #[serde(default = "default_successor_relevance")]
    pub min_successor_relevance: f32,
}

fn default_successor_relevance() -> f32 {
    0.2
}

impl Default for SelectionPolicy {
    fn default() -> Self {
        SelectionPolicy {
            min_relevance: 0.35,
            top_k: 5,
            max_successors: 3,
            min_successor_relevance: default_successor_relevance(),
        }
    }
}

/// Why a tool was offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SelectionReason {
    /// Its description is relevant to the task.
    Relevant,
    /// It followed the last tool used in earlier successful diagnoses.
    Successor {
        /// The last tool used.
        of: String,
        /// How many times it followed it.
        count: u64,
    },
}

/// A tool offered for a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The tool's name.
    pub name: String,
    /// Cosine relevance of its description to the task.
    pub relevance: f32,
    /// Its quality score Qual(t).
    pub quality: f64,
    /// Why it is offered.
    pub reason: SelectionReason,
    /// How many times it followed the last tool used in earlier successful diagnoses (0:
    /// never, or no last tool).
    #[serde(default)]
    pub follows: u64,
}

/// Selects stored tools, caching the embeddings of tool descriptions.
pub struct ToolSelector {
    embedder: Arc<dyn Embedder>,
    policy: SelectionPolicy,
    cache: Mutex<HashMap<String, Vec<f32>>>,
}

impl ToolSelector {
    /// A selector with the default policy.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        ToolSelector {
            embedder,
            policy: SelectionPolicy::default(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Sets the policy.
    pub fn with_policy(mut self, policy: SelectionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The policy.
    pub fn policy(&self) -> SelectionPolicy {
        self.policy
    }

    async fn embeddings(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LifecycleError> {
        let missing: Vec<String> = {
            let cache = self.cache.lock().map_err(|_| poisoned())?;
            let mut m: Vec<String> = texts
                .iter()
                .filter(|t| !cache.contains_key(*t))
                .cloned()
                .collect();
            m.sort();
            m.dedup();
            m
        };
        if !missing.is_empty() {
            let vectors = self.embedder.embed(&missing).await?;
            if vectors.len() != missing.len() {
                return Err(EmbedError::Failed {
                    message: format!(
                        "the embedder returned {} vectors for {} texts",
                        vectors.len(),
                        missing.len()
                    ),
                }
                .into());
            }
            let mut cache = self.cache.lock().map_err(|_| poisoned())?;
            cache.extend(missing.into_iter().zip(vectors));
        }
        let cache = self.cache.lock().map_err(|_| poisoned())?;
        Ok(texts
            .iter()
            .map(|t| cache.get(t).cloned().unwrap_or_default())
            .collect())
    }

    /// The candidates for `task`: relevant tools, those that followed `last_tool` in earlier
    /// successful diagnoses first (the tool graph), then by quality (then relevance, then
    /// name), at most `top_k`; followed by up to `max_successors` graph successors of
    /// `last_tool` that are not already listed.
    pub async fn select(
        &self,
        inventory: &ToolInventory,
        task: &str,
        last_tool: Option<&str>,
    ) -> Result<Vec<Candidate>, LifecycleError> {
        let tools: Vec<_> = inventory.tools().collect();
        // Per tool: its description, then the tasks it is known to serve.
        let mut texts: Vec<String> = Vec::with_capacity(2 * tools.len() + 1);
        let mut spans: Vec<std::ops::Range<usize>> = Vec::with_capacity(tools.len());
        for t in &tools {
            let start = texts.len();
            texts.push(t.contract.description_text());
            texts.extend(t.tasks().map(str::to_string));
            spans.push(start..texts.len());
        }
        texts.push(task.to_string());
        let vectors = self.embeddings(&texts).await?;
        let task_vec = vectors.last().cloned().unwrap_or_default();
        // One matrix-vector product: the task against every description and task text.
        let sims = EmbeddingMatrix::from_rows(&vectors)?.similarities(&task_vec)?;
        let relevance: HashMap<&str, f32> = tools
            .iter()
            .zip(spans)
            .map(|(t, span)| {
                let best = sims
                    .get(span)
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .fold(0.0f32, f32::max);
                (t.name(), best)
            })
            .collect();
        let follows: HashMap<String, u64> = last_tool
            .map(|last| inventory.graph().successors(last).into_iter().collect())
            .unwrap_or_default();
        let mut relevant: Vec<Candidate> = tools
            .iter()
            .filter_map(|t| {
                let r = relevance.get(t.name()).copied().unwrap_or(0.0);
                (r >= self.policy.min_relevance).then(|| Candidate {
                    name: t.name().to_string(),
                    relevance: r,
                    quality: t.quality(),
                    reason: SelectionReason::Relevant,
                    follows: follows.get(t.name()).copied().unwrap_or(0),
                })
            })
            .collect();
        relevant.sort_by(|a, b| {
            (b.follows > 0).cmp(&(a.follows > 0)).then(
                b.quality
                    .total_cmp(&a.quality)
                    .then(b.relevance.total_cmp(&a.relevance))
                    .then_with(|| a.name.cmp(&b.name)),
            )
        });
        relevant.truncate(self.policy.top_k);
        if let Some(last) = last_tool {
            let successors: Vec<Candidate> = inventory
                .graph()
                .successors(last)
                .into_iter()
                .filter(|(name, _)| !relevant.iter().any(|c| &c.name == name))
                .filter_map(|(name, count)| {
                    let tool = inventory.get(&name)?;
                    Some(Candidate {
                        relevance: relevance.get(name.as_str()).copied().unwrap_or(0.0),
                        quality: tool.quality(),
                        reason: SelectionReason::Successor {
                            of: last.to_string(),
                            count,
                        },
                        follows: count,
                        name,
                    })
                })
                .take(self.policy.max_successors)
                .collect();
            relevant.extend(successors);
        }
        Ok(relevant)
    }
}

fn poisoned() -> LifecycleError {
    LifecycleError::Embed(EmbedError::Failed {
        message: "the embedding cache lock is poisoned".into(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lifecycle::inventory::tests::tool;
    use async_trait::async_trait;

    /// Bag of words hashed into 64 buckets: enough to make related descriptions close.
    pub(crate) struct Words;

    #[async_trait]
    impl Embedder for Words {
        fn dimension(&self) -> usize {
            64
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; 64];
                    for w in t
                        .split(|c: char| !c.is_ascii_alphanumeric())
                        .filter(|w| w.len() > 2)
                    {
                        let h = w
                            .to_ascii_lowercase()
                            .bytes()
                            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
                        v[(h % 64) as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    fn inventory() -> ToolInventory {
        let mut inv = ToolInventory::new();
        inv.insert(tool("errors_a", "count error log lines per service", 2, 2));
        inv.insert(tool(
            "errors_b",
            "count error log lines per service host",
            9,
            1,
        ));
        inv.insert(tool(
            "latency",
            "latency percentiles of spans per operation",
            5,
            0,
        ));
        inv.insert(tool("cpu", "cpu memory metric anomalies", 1, 0));
        inv
    }

    #[tokio::test]
    async fn threshold_then_quality_ranking_then_successors() {
        let mut inv = inventory();
        let sel = ToolSelector::new(Arc::new(Words));
        let got = sel
            .select(&inv, "count error log lines for each service", None)
            .await
            .unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["errors_b", "errors_a"], "{got:?}");
        assert!(got.iter().all(|c| c.relevance >= 0.35));

        // A strict threshold leaves nothing: a new tool would be generated.
        let strict = ToolSelector::new(Arc::new(Words)).with_policy(SelectionPolicy {
            min_relevance: 0.99,
            ..SelectionPolicy::default()
        });
        assert!(
            strict
                .select(&inv, "count error log lines for each service", None)
                .await
                .unwrap()
                .is_empty()
        );

        inv.record_diagnosis(&["errors_b".to_string(), "latency".to_string()], true);
        inv.record_diagnosis(&["errors_b".to_string(), "cpu".to_string()], true);
        inv.record_diagnosis(&["errors_b".to_string(), "latency".to_string()], true);
        let got = sel
            .select(
                &inv,
                "count error log lines for each service",
                Some("errors_b"),
            )
            .await
            .unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["errors_b", "errors_a", "latency", "cpu"]);
        assert_eq!(
            got[2].reason,
            SelectionReason::Successor {
                of: "errors_b".into(),
                count: 2
            }
        );
    }

    #[tokio::test]
    async fn a_relevant_tool_that_followed_the_last_one_ranks_first() {
        let mut inv = inventory();
        let sel = ToolSelector::new(Arc::new(Words));
        let task = "count error log lines for each service";
        // errors_b has the higher quality, but errors_a followed `latency` in successful
        // diagnoses.
        inv.record_diagnosis(&["latency".to_string(), "errors_a".to_string()], true);
        let got = sel.select(&inv, task, Some("latency")).await.unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["errors_a", "errors_b"], "{got:?}");
        assert_eq!(got[0].follows, 1);
        assert_eq!(got[0].reason, SelectionReason::Relevant);
        assert_eq!(got[1].follows, 0);
        // A failed diagnosis teaches the graph nothing.
        let mut fresh = inventory();
        fresh.record_diagnosis(&["latency".to_string(), "errors_a".to_string()], false);
        let got = sel.select(&fresh, task, Some("latency")).await.unwrap();
        assert_eq!(got[0].name, "errors_b");
    }

    #[tokio::test]
    async fn the_task_a_tool_was_made_for_counts_as_relevant() {
        let mut inv = ToolInventory::new();
        let mut t = tool("t", "zz qq", 1, 0);
        inv.insert(t.clone());
        let sel = ToolSelector::new(Arc::new(Words));
        let task = "which services log failures";
        assert!(sel.select(&inv, task, None).await.unwrap().is_empty());
        t.origin = "which services log failures now".into();
        inv.insert(t);
        let got = sel.select(&inv, task, None).await.unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].relevance > 0.8, "{got:?}");
    }

    #[tokio::test]
    async fn keeps_only_top_k() {
        let mut inv = ToolInventory::new();
        for i in 0..8 {
            inv.insert(tool(&format!("t{i}"), "count error lines", i, 0));
        }
        let sel = ToolSelector::new(Arc::new(Words));
        let got = sel.select(&inv, "count error lines", None).await.unwrap();
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["t7", "t6", "t5", "t4", "t3"]);
    }
}
