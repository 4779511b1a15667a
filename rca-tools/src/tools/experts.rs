//! The experts as tools: `analyze_logs` (the log expert) and `analyze_code` (the code expert).
//! Trivial input is refused with an explanation, so the controller's model can correct itself.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::incident::{Evidence, Modality};
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};
use rca_core::{Timestamp, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

use super::args::bounded;
use crate::experts::ExpertError;
use crate::experts::code::CodeExpert;
use crate::experts::logs::LogExpert;
use crate::sources::parse_time;

fn expert_error(tool: &str, e: ExpertError) -> ToolError {
    match e {
        ExpertError::TrivialInput(why) => ToolError::Refused {
            reason: format!(
                "`{tool}` needs real content to analyse: {why}. Pass the text itself or the \
                 snapshot key of an earlier observation that holds it."
            ),
        },
        other => ToolError::failed(other.to_string()),
    }
}

/// Arguments of `analyze_logs`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeLogsArgs {
    /// The log text to analyse, or the snapshot key of an earlier observation that holds it.
    pub text: String,
    /// What to look for (the incident in a sentence); default: the cause of the failure.
    #[serde(default)]
    pub question: Option<String>,
    /// The component the log belongs to, for the evidence; default `logs`.
    #[serde(default)]
    pub entity: Option<String>,
}

/// `analyze_logs`: the log expert as a tool.
pub struct AnalyzeLogs {
    expert: Arc<LogExpert>,
    /// Fewer characters of text than this is refused as trivial. Default 64.
    pub min_chars: usize,
    /// Characters of text returned at most. Default 6,000.
    pub max_chars: usize,
}

impl std::fmt::Debug for AnalyzeLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnalyzeLogs")
            .field("expert", &self.expert)
            .finish()
    }
}

impl AnalyzeLogs {
    /// The tool over `expert`.
    pub fn new(expert: Arc<LogExpert>) -> Self {
        AnalyzeLogs {
            expert,
            min_chars: 64,
            max_chars: 6000,
        }
    }
}

/// The time at the start of a log line, when it has one.
fn line_time(line: &str) -> Option<Timestamp> {
    let mut words = line.split_whitespace();
    let first = words.next()?.trim_start_matches('[').trim_end_matches(']');
    parse_time(first).or_else(|| {
        let second = words.next()?.trim_end_matches(']');
        parse_time(&format!("{first} {second}"))
    })
}

#[async_trait]
impl TypedTool for AnalyzeLogs {
    type Args = AnalyzeLogsArgs;

    fn name(&self) -> &str {
        "analyze_logs"
    }

    fn description(&self) -> &str {
        "Log expert: splits log text into blocks of related lines, explains the problems each \
         block shows with evidence lines quoted from it (unsupported quotes are dropped), and \
         summarises. Pass the log text or the snapshot key of an observation holding it."
    }

    async fn run(&self, args: AnalyzeLogsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let chars = args.text.trim().chars().count();
        if chars < self.min_chars {
            return Err(expert_error(
                self.name(),
                ExpertError::TrivialInput(format!(
                    "{chars} characters of text given, at least {} needed",
                    self.min_chars
                )),
            ));
        }
        let question = args
            .question
            .clone()
            .filter(|q| !q.trim().is_empty())
            .unwrap_or_else(|| "What in these logs explains the failure?".to_string());
        let lines: Vec<String> = args.text.lines().map(str::to_string).collect();
        let out = self
            .expert
            .analyse(&question, &lines)
            .await
            .map_err(|e| expert_error(self.name(), e))?;
        let entity = args.entity.unwrap_or_else(|| "logs".to_string());
        let mut text = format!(
            "{} line(s) in {} block(s); {} analysed; {} finding(s) kept, {} explanation(s) dropped for unsupported evidence.\n{}\n",
            lines.len(),
            out.blocks.len(),
            out.analysed.len(),
            out.findings.len(),
            out.dropped_explanations,
            out.summary.trim()
        );
        let mut evidence = Vec::new();
        for f in &out.findings {
            text.push_str(&format!(
                "- {} Evidence: \"{}\"\n",
                f.explanation,
                f.evidence.join("\" | \"")
            ));
            let at = f
                .evidence
                .iter()
                .find_map(|q| line_time(q))
                .filter(|t| ctx.cutoff.is_none_or(|c| *t < c))
                .or(ctx.cutoff)
                .unwrap_or(Timestamp(0));
            evidence.push(
                Evidence::new(
                    Modality::Logs,
                    at,
                    entity.clone(),
                    format!("{} (\"{}\")", f.explanation, f.evidence.join("\" | \"")),
                )
                .with_kind("log_expert")
                .with_score(f.evidence.len() as f64),
            );
        }
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: serde_json::to_value(&out).ok(),
            evidence,
        })
    }
}

/// Arguments of `analyze_code`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeCodeArgs {
    /// What to find out (the failure seen, e.g. an exception and where it was thrown).
    pub question: String,
    /// Classes, functions or types to start reading from, as named in logs or stack traces.
    pub symbols: Vec<String>,
}

/// `analyze_code`: the code expert as a tool.
pub struct AnalyzeCode {
    expert: Arc<CodeExpert>,
    /// Characters of text returned at most. Default 6,000.
    pub max_chars: usize,
}

impl std::fmt::Debug for AnalyzeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnalyzeCode")
            .field("expert", &self.expert)
            .finish()
    }
}

impl AnalyzeCode {
    /// The tool over `expert`.
    pub fn new(expert: Arc<CodeExpert>) -> Self {
        AnalyzeCode {
            expert,
            max_chars: 6000,
        }
    }
}

#[async_trait]
impl TypedTool for AnalyzeCode {
    type Args = AnalyzeCodeArgs;

    fn name(&self) -> &str {
        "analyze_code"
    }

    fn description(&self) -> &str {
        "Code expert: finds the named classes or functions in the job's code repository, reads \
         them and the related code they lead to, and explains what could cause the problem."
    }

    async fn run(&self, args: AnalyzeCodeArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.question.trim().chars().count() < 8 {
            return Err(expert_error(
                self.name(),
                ExpertError::TrivialInput("the question is empty or too short".into()),
            ));
        }
        let out = self
            .expert
            .investigate(&args.question, &args.symbols)
            .await
            .map_err(|e| expert_error(self.name(), e))?;
        let mut text = format!(
            "{} definition(s) read (stopped: {:?}); external: {}.\n{}\n",
            out.analyses.len(),
            out.stop,
            if out.external.is_empty() {
                "none".to_string()
            } else {
                out.external.join(", ")
            },
            out.summary.trim()
        );
        for a in &out.analyses {
            text.push_str(&format!(
                "- {} ({}:{}): {}\n",
                a.symbol, a.path, a.line, a.analysis
            ));
        }
        let evidence = out
            .analyses
            .iter()
            .map(|a| {
                Evidence::new(
                    Modality::Code,
                    ctx.cutoff.unwrap_or(Timestamp(0)),
                    format!("{}:{}", a.path, a.line),
                    format!("{}: {}", a.symbol, a.analysis),
                )
                .with_kind(format!("code:{}", a.symbol))
            })
            .collect();
        Ok(ToolOutput {
            text: bounded(&text, self.max_chars),
            data: serde_json::to_value(&out).ok(),
            evidence,
        })
    }
}
