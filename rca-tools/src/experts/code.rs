//! The code expert: recursive reading of a code repository through a task queue.
//!
//! Given a question and starting symbols, the expert finds each symbol's definition in a
//! [`CodeSource`], has a [`CodeAnalyst`] explain the excerpt and name further symbols worth
//! reading, and queues those it has not visited. It stops when nothing new is proposed, when
//! only external dependencies (symbols with no definition in the repository) remain, or at its
//! limits on depth, files and tokens; then the analyst summarises everything for the
//! controller.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, CompletionRequest, Message, Usage, estimate_tokens};
use rca_core::source::{CodeSource, Definition};
use serde::{Deserialize, Serialize};

pub use super::error::ExpertError;

/// Limits of one code investigation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeExpertLimits {
    /// How many hops from the starting symbols (0: only them). Default 3.
    pub max_depth: usize,
    /// How many files to analyse in all. Default 12.
    pub max_files: usize,
    /// Prompt and completion tokens to spend in all. Default 60,000.
    pub max_tokens: u64,
    /// Characters of a file shown around the definition. Default 6,000.
    pub excerpt_chars: usize,
}

impl Default for CodeExpertLimits {
    fn default() -> Self {
        CodeExpertLimits {
            max_depth: 3,
            max_files: 12,
            max_tokens: 60_000,
            excerpt_chars: 6_000,
        }
    }
}

/// One analysed definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeAnalysis {
    /// The symbol that was looked up.
    pub symbol: String,
    /// Where it is defined.
    pub path: String,
    /// 1-based line of the definition.
    pub line: usize,
    /// Hops from a starting symbol.
    pub depth: usize,
    /// What the analyst said.
    pub analysis: String,
    /// The symbols it proposed reading next.
    pub proposed: Vec<String>,
}

/// Why the investigation stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeStop {
    /// Nothing new was proposed (or only external dependencies remained).
    Exhausted,
    /// The depth limit cut proposals off.
    DepthLimit,
    /// The file limit was reached.
    FileLimit,
    /// The token budget was spent.
    TokenLimit,
}

/// The result of an investigation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeInvestigation {
    /// Every analysis, in the order made.
    pub analyses: Vec<CodeAnalysis>,
    /// Proposed symbols with no definition in the repository (external dependencies).
    pub external: Vec<String>,
    /// The summary for the controller.
    pub summary: String,
    /// Why it stopped.
    pub stop: CodeStop,
    /// Tokens spent.
    pub usage: Usage,
}

/// Explains code excerpts and summarises analyses: a model, or a deterministic policy.
#[async_trait]
pub trait CodeAnalyst: Send + Sync {
    /// Analyses `excerpt` (around `definition`) for `question`; returns the analysis and the
    /// further symbols worth reading.
    async fn analyse(
        &self,
        question: &str,
        definition: &Definition,
        excerpt: &str,
    ) -> Result<(String, Vec<String>, Usage), ExpertError>;

    /// Summarises all analyses for the controller.
    async fn summarise(
        &self,
        question: &str,
        analyses: &[CodeAnalysis],
    ) -> Result<(String, Usage), ExpertError>;
}

/// The excerpt of `text` around 1-based `line`: up to `max_chars` characters, starting a few
/// lines above the definition.
pub fn excerpt_around(text: &str, line: usize, max_chars: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = line.saturating_sub(4);
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate().skip(start) {
        if out.len() + l.len() + 8 > max_chars {
            break;
        }
        out.push_str(&format!("{:>5} {l}\n", i + 1));
    }
    out
}

/// The code expert.
pub struct CodeExpert {
    source: Arc<dyn CodeSource>,
    analyst: Arc<dyn CodeAnalyst>,
    limits: CodeExpertLimits,
}

impl std::fmt::Debug for CodeExpert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeExpert")
            .field("limits", &self.limits)
            .finish()
    }
}

impl CodeExpert {
    /// An expert reading `source` with `analyst`.
    pub fn new(
        source: Arc<dyn CodeSource>,
        analyst: Arc<dyn CodeAnalyst>,
        limits: CodeExpertLimits,
    ) -> Self {
        CodeExpert {
            source,
            analyst,
            limits,
        }
    }

    /// Investigates `question` starting from `symbols`.
    pub async fn investigate(
        &self,
        question: &str,
        symbols: &[String],
    ) -> Result<CodeInvestigation, ExpertError> {
        let start: Vec<String> = symbols
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| s.chars().any(char::is_alphanumeric))
            .collect();
        if start.is_empty() {
            return Err(ExpertError::TrivialInput(
                "name at least one class or symbol to read".into(),
            ));
        }
        let mut queue: VecDeque<(String, usize)> = start.into_iter().map(|s| (s, 0)).collect();
        let mut visited_symbols: BTreeSet<String> = BTreeSet::new();
        let mut visited_defs: BTreeSet<(String, usize)> = BTreeSet::new();
        let mut analyses = Vec::new();
        let mut external = Vec::new();
        let mut usage = Usage::default();
        let mut stop = CodeStop::Exhausted;
        while let Some((symbol, depth)) = queue.pop_front() {
            if !visited_symbols.insert(symbol.clone()) {
                continue;
            }
            if analyses.len() >= self.limits.max_files {
                stop = CodeStop::FileLimit;
                break;
            }
            if usage.total() >= self.limits.max_tokens {
                stop = CodeStop::TokenLimit;
                break;
            }
            let defs = self.source.find_definition(&symbol).await?;
            let Some(def) = defs
                .into_iter()
                .find(|d| !visited_defs.contains(&(d.path.clone(), d.line)))
            else {
                if !analyses.iter().any(|a: &CodeAnalysis| a.symbol == symbol) {
                    external.push(symbol);
                }
                continue;
            };
            visited_defs.insert((def.path.clone(), def.line));
            let file = self.source.read(&def.path).await?;
            let excerpt = excerpt_around(&file.text, def.line, self.limits.excerpt_chars);
            let (analysis, proposed, used) = self.analyst.analyse(question, &def, &excerpt).await?;
            usage.add(&used);
            for p in &proposed {
                if visited_symbols.contains(p) || queue.iter().any(|(q, _)| q == p) {
                    continue;
                }
                if depth + 1 > self.limits.max_depth {
                    stop = CodeStop::DepthLimit;
                    continue;
                }
                queue.push_back((p.clone(), depth + 1));
            }
            analyses.push(CodeAnalysis {
                symbol,
                path: def.path,
                line: def.line,
                depth,
                analysis,
                proposed,
            });
        }
        let (summary, used) = if analyses.is_empty() {
            (
                format!(
                    "none of the symbols is defined in the repository (external: {})",
                    external.join(", ")
                ),
                Usage::default(),
            )
        } else {
            self.analyst.summarise(question, &analyses).await?
        };
        usage.add(&used);
        Ok(CodeInvestigation {
            analyses,
            external,
            summary,
            stop,
            usage,
        })
    }
}

/// A deterministic analyst: reports the definition's signature, the failure sites in the
/// excerpt (throw/raise/panic/error returns), and proposes the capitalised type names the
/// excerpt uses.
#[derive(Debug, Clone, Default)]
pub struct HeuristicCodeAnalyst;

const FAILURE_MARKERS: &[&str] = &[
    "throw ",
    "raise ",
    "panic!",
    "unwrap()",
    "expect(",
    "errors.New",
    "fmt.Errorf",
    "Err(",
    "catch",
    "except",
    "error(",
    ".error(",
    "log.error",
    "LOG.error",
    "assert",
];

fn type_names(excerpt: &str, own: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in excerpt.lines() {
        let code = line.get(6..).unwrap_or(line);
        let t = code.trim_start();
        if t.starts_with("//")
            || t.starts_with("/*")
            || t.starts_with('#')
            || t.starts_with('*')
            || t.starts_with("import ")
        {
            continue;
        }
        for word in code.split(|c: char| !c.is_alphanumeric() && c != '_') {
            let mut chars = word.chars();
            let upper = chars.next().is_some_and(|c| c.is_ascii_uppercase());
            let mixed = word.chars().any(|c| c.is_ascii_lowercase());
            if upper && mixed && word.len() > 2 && word != own && !out.iter().any(|w| w == word) {
                out.push(word.to_string());
            }
        }
    }
    out
}

#[async_trait]
impl CodeAnalyst for HeuristicCodeAnalyst {
    async fn analyse(
        &self,
        _question: &str,
        definition: &Definition,
        excerpt: &str,
    ) -> Result<(String, Vec<String>, Usage), ExpertError> {
        let number = definition.line.to_string();
        let signature = excerpt
            .lines()
            .find(|l| l.get(..5).map(str::trim) == Some(number.as_str()))
            .map(|l| l.get(6..).unwrap_or(l).trim().to_string())
            .unwrap_or_default();
        let failures: Vec<String> = excerpt
            .lines()
            .filter(|l| FAILURE_MARKERS.iter().any(|m| l.contains(m)))
            .take(5)
            .map(|l| l.trim().to_string())
            .collect();
        let mut analysis = format!(
            "{} is defined at {}:{}: `{signature}`.",
            definition.symbol, definition.path, definition.line
        );
        if failures.is_empty() {
            analysis.push_str(" No failure sites in the excerpt.");
        } else {
            analysis.push_str(&format!(" Failure sites: {}.", failures.join(" | ")));
        }
        Ok((
            analysis,
            type_names(excerpt, &definition.symbol),
            Usage::default(),
        ))
    }

    async fn summarise(
        &self,
        question: &str,
        analyses: &[CodeAnalysis],
    ) -> Result<(String, Usage), ExpertError> {
        let mut out = format!("Code read for: {question}\n");
        for a in analyses {
            out.push_str(&format!("- (depth {}) {}\n", a.depth, a.analysis));
        }
        Ok((out, Usage::default()))
    }
}

/// An analyst backed by a chat model. It asks for
/// `{"analysis": "...", "related": ["Symbol", ...]}` and repairs malformed JSON.
pub struct ModelCodeAnalyst {
    model: Arc<dyn ChatModel>,
}

impl std::fmt::Debug for ModelCodeAnalyst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCodeAnalyst")
            .field("model", &self.model.model_id())
            .finish()
    }
}

impl ModelCodeAnalyst {
    /// An analyst asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelCodeAnalyst { model }
    }
}

const ANALYST_SYSTEM: &str = "You are a code expert helping to find the root cause of a cloud \
incident. Read the code excerpt and explain what in it could cause the problem described. Then \
name the further classes, functions or types from this repository that are worth reading next \
(only names that appear in the excerpt; none if nothing else matters). Answer with one JSON \
object: {\"analysis\": \"...\", \"related\": [\"Name\", ...]}.";

#[async_trait]
impl CodeAnalyst for ModelCodeAnalyst {
    async fn analyse(
        &self,
        question: &str,
        definition: &Definition,
        excerpt: &str,
    ) -> Result<(String, Vec<String>, Usage), ExpertError> {
        let request = CompletionRequest::new(vec![
            Message::system(ANALYST_SYSTEM),
            Message::user(format!(
                "Problem: {question}\n\nSymbol `{}` in {} (line {}):\n```\n{excerpt}```",
                definition.symbol, definition.path, definition.line
            )),
        ])
        .with_temperature(0.0)
        .with_max_tokens(super::EXPERT_MAX_TOKENS)
        .json();
        let response = self.model.complete(request).await?;
        let text = response.text();
        let value = rca_llm::json::repair(text)
            .map_err(|e| ExpertError::Unusable(e.to_string()))?
            .value;
        let analysis = value["analysis"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ExpertError::Unusable(format!("no `analysis` field in {text}")))?;
        let related = value["related"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(|s| s.trim().to_string()))
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok((analysis, related, response.usage))
    }

    async fn summarise(
        &self,
        question: &str,
        analyses: &[CodeAnalysis],
    ) -> Result<(String, Usage), ExpertError> {
        let mut notes = String::new();
        for a in analyses {
            notes.push_str(&format!(
                "- {} ({}:{}): {}\n",
                a.symbol, a.path, a.line, a.analysis
            ));
        }
        let request = CompletionRequest::new(vec![
            Message::system(
                "Summarise these code analyses for an incident investigator in at most 8 \
                 sentences: what the code does on the failing path and which code most likely \
                 causes the problem. Plain text.",
            ),
            Message::user(format!("Problem: {question}\n\nAnalyses:\n{notes}")),
        ])
        .with_temperature(0.0)
        .with_max_tokens(super::EXPERT_MAX_TOKENS);
        let response = self.model.complete(request).await?;
        let text = response.text().trim().to_string();
        if estimate_tokens(&text) == 0 {
            return Err(ExpertError::Unusable("empty summary".into()));
        }
        Ok((text, response.usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::CodeDirectory;
    use rca_llm::ScriptedModel;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (
                "src/JobRunner.java",
                "public class JobRunner {\n  private CheckpointCoordinator coordinator;\n  void run() { coordinator.trigger(); Logger.info(\"x\"); }\n}\n",
            ),
            (
                "src/CheckpointCoordinator.java",
                "public class CheckpointCoordinator {\n  private StateBackend backend;\n  void trigger() {\n    if (backend.full()) throw new IllegalStateException(\"checkpoint storage full\");\n  }\n}\n",
            ),
            (
                "src/StateBackend.java",
                "public class StateBackend {\n  boolean full() { return used > quota; }\n}\n",
            ),
        ];
        for (p, t) in files {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
        dir
    }

    fn expert(
        dir: &tempfile::TempDir,
        analyst: Arc<dyn CodeAnalyst>,
        limits: CodeExpertLimits,
    ) -> CodeExpert {
        CodeExpert::new(
            Arc::new(CodeDirectory::new(dir.path()).unwrap()),
            analyst,
            limits,
        )
    }

    #[tokio::test]
    async fn scripted_recursion_follows_proposals_and_stops() {
        let dir = repo();
        // Canned turns written for this test: one per file, then the summary.
        let model = ScriptedModel::from_texts(
            "scripted-code-expert-test",
            [
                r#"{"analysis": "JobRunner triggers checkpoints.", "related": ["CheckpointCoordinator", "Logger"]}"#,
                r#"```json
{"analysis": "trigger() throws when the backend is full.", "related": ["StateBackend", "JobRunner",],}
```"#,
                r#"{"analysis": "full() compares usage with a quota.", "related": []}"#,
                "Checkpoints fail because the state backend quota is exhausted.",
            ],
        );
        let e = expert(
            &dir,
            Arc::new(ModelCodeAnalyst::new(Arc::new(model.clone()))),
            CodeExpertLimits::default(),
        );
        let out = e
            .investigate("checkpoint failures", &["JobRunner".into()])
            .await
            .unwrap();
        let read: Vec<&str> = out.analyses.iter().map(|a| a.symbol.as_str()).collect();
        assert_eq!(read, ["JobRunner", "CheckpointCoordinator", "StateBackend"]);
        assert_eq!(out.analyses[2].depth, 2);
        assert_eq!(out.external, vec!["Logger".to_string()]);
        assert_eq!(out.stop, CodeStop::Exhausted);
        assert!(out.summary.contains("quota"));
        assert_eq!(model.remaining(), 0);
        assert_eq!(model.requests().len(), 4);
        assert!(
            model.requests()[1].messages[1]
                .content
                .contains("throw new IllegalStateException")
        );
    }

    #[tokio::test]
    async fn limits_cut_the_recursion() {
        let dir = repo();
        let limits = CodeExpertLimits {
            max_depth: 1,
            ..Default::default()
        };
        let e = expert(&dir, Arc::new(HeuristicCodeAnalyst), limits);
        let out = e.investigate("why", &["JobRunner".into()]).await.unwrap();
        assert_eq!(out.stop, CodeStop::DepthLimit);
        assert!(out.analyses.iter().all(|a| a.depth <= 1));
        assert!(
            out.analyses
                .iter()
                .any(|a| a.symbol == "CheckpointCoordinator")
        );
        assert!(!out.analyses.iter().any(|a| a.symbol == "StateBackend"));

        let limits = CodeExpertLimits {
            max_files: 1,
            ..Default::default()
        };
        let out = expert(&dir, Arc::new(HeuristicCodeAnalyst), limits)
            .investigate("why", &["JobRunner".into()])
            .await
            .unwrap();
        assert_eq!(out.stop, CodeStop::FileLimit);
        assert_eq!(out.analyses.len(), 1);
    }

    #[tokio::test]
    async fn heuristic_analyst_reports_failure_sites() {
        let dir = repo();
        let out = expert(
            &dir,
            Arc::new(HeuristicCodeAnalyst),
            CodeExpertLimits::default(),
        )
        .investigate("why", &["CheckpointCoordinator".into()])
        .await
        .unwrap();
        assert!(out.analyses[0].analysis.contains("IllegalStateException"));
        assert!(out.analyses.iter().any(|a| a.symbol == "StateBackend"));
        assert!(out.summary.contains("CheckpointCoordinator"));
    }

    #[tokio::test]
    async fn trivial_or_external_input() {
        let dir = repo();
        let e = expert(
            &dir,
            Arc::new(HeuristicCodeAnalyst),
            CodeExpertLimits::default(),
        );
        assert!(matches!(
            e.investigate("why", &[" ".into()]).await,
            Err(ExpertError::TrivialInput(_))
        ));
        let out = e.investigate("why", &["Nowhere".into()]).await.unwrap();
        assert!(out.analyses.is_empty());
        assert_eq!(out.external, vec!["Nowhere".to_string()]);
    }

    #[tokio::test]
    async fn unusable_model_answer_is_an_error() {
        let dir = repo();
        let model =
            ScriptedModel::from_texts("scripted-code-expert-garbage", ["I cannot help with that."]);
        let e = expert(
            &dir,
            Arc::new(ModelCodeAnalyst::new(Arc::new(model))),
            CodeExpertLimits::default(),
        );
        assert!(matches!(
            e.investigate("why", &["JobRunner".into()]).await,
            Err(ExpertError::Unusable(_))
        ));
    }
}
