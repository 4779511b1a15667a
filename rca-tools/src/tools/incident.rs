//! A [`ToolRegistry`] over an incident directory: the information-gathering tools over its
//! sources and the two experts.
//!
//! Besides the files its manifest lists (logs, metrics, traces), an incident directory may hold
//! two more things by convention: CSV tables under `tables/` (one table per file, read by
//! `get_db_records`) and a code tree under `code/` (read by `analyze_code`). Every source is
//! cut at the detection time.

use std::sync::Arc;

use rca_core::embed::Embedder;
use rca_core::llm::ChatModel;
use rca_core::source::{CodeSource, LogSource, MetricSource, TableSource, TraceSource};
use rca_core::tool::ToolRegistry;
use rca_core::{Incident, ToolError};
use rca_llm::{HashingConfig, HashingEmbedder};

use super::{AnalyzeCode, AnalyzeLogs, GetDbRecords, GetLogs, GetMetrics, GetTraces};
use crate::code::CodeDirectory;
use crate::experts::ExpertError;
use crate::experts::code::{
    CodeAnalyst, CodeExpert, CodeExpertLimits, HeuristicCodeAnalyst, ModelCodeAnalyst,
};
use crate::experts::logs::{
    HeuristicLogAnalyst, LogAnalyst, LogExample, LogExampleStore, LogExpert, LogExpertConfig,
    ModelLogAnalyst,
};
use crate::incident_dir::IncidentDir;
use crate::records::{CsvTables, TableOptions};

/// Characters of text a tool returns at most by default: its output goes into prompts as it
/// is where no snapshot keys cut it.
pub const DEFAULT_OUTPUT_CHARS: usize = 6_000;

/// Characters of text a tool returns at most when the caller keeps full outputs in a snapshot
/// store and shows the model only their head (the RCAgent controller with OBSK): a memory
/// bound, far above what a prompt holds.
pub const FULL_OUTPUT_CHARS: usize = 400_000;

/// The folder of an incident directory that holds CSV tables.
pub const TABLES_DIR: &str = "tables";
/// The folder of an incident directory that holds the code tree.
pub const CODE_DIR: &str = "code";

/// The sources of one incident, ready to become tools.
pub struct IncidentTools {
    /// The incident.
    pub incident: Incident,
    /// Logs, when there are any.
    pub logs: Option<Arc<dyn LogSource>>,
    /// Metrics, when there are any.
    pub metrics: Option<Arc<dyn MetricSource>>,
    /// Spans, when there are any.
    pub traces: Option<Arc<dyn TraceSource>>,
    /// Tables, when there are any.
    pub tables: Option<Arc<dyn TableSource>>,
    /// The code repository, when there is one.
    pub code: Option<Arc<dyn CodeSource>>,
    /// Embeds log text for segmentation and example retrieval (default: [`HashingEmbedder`]).
    pub embedder: Arc<dyn Embedder>,
    /// Past log analyses the log expert retrieves as in-context examples.
    pub log_examples: Vec<LogExample>,
    /// Settings of the log expert.
    pub log_expert: LogExpertConfig,
    /// Limits of the code expert.
    pub code_expert: CodeExpertLimits,
    /// Characters of text each tool returns at most ([`DEFAULT_OUTPUT_CHARS`]; use
    /// [`FULL_OUTPUT_CHARS`] when snapshot keys cut observations for the prompt).
    pub output_chars: usize,
}

impl std::fmt::Debug for IncidentTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncidentTools")
            .field("incident", &self.incident.id)
            .field("logs", &self.logs.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("traces", &self.traces.is_some())
            .field("tables", &self.tables.is_some())
            .field("code", &self.code.is_some())
            .finish()
    }
}

impl IncidentTools {
    /// Tools over no source yet (add them through the public fields).
    pub fn new(incident: Incident) -> Self {
        IncidentTools {
            incident,
            logs: None,
            metrics: None,
            traces: None,
            tables: None,
            code: None,
            embedder: Arc::new(HashingEmbedder::new(HashingConfig::default())),
            log_examples: Vec::new(),
            log_expert: LogExpertConfig::default(),
            code_expert: CodeExpertLimits::default(),
            output_chars: DEFAULT_OUTPUT_CHARS,
        }
    }

    /// The sources of a loaded incident directory, plus its `tables/` and `code/` folders
    /// when present (tables cut at the detection time).
    pub fn from_dir(dir: IncidentDir) -> Result<Self, rca_core::SourceError> {
        let mut out = IncidentTools::new(dir.incident.clone());
        // A modality with no records gets no tool.
        if !dir.logs.records().is_empty() {
            out.logs = Some(Arc::new(dir.logs.clone()) as Arc<dyn LogSource>);
        }
        if !dir.metrics.samples_all().is_empty() {
            out.metrics = Some(Arc::new(dir.metrics.clone()) as Arc<dyn MetricSource>);
        }
        if !dir.traces.spans_all().is_empty() {
            out.traces = Some(Arc::new(dir.traces.clone()) as Arc<dyn TraceSource>);
        }
        let tables = dir.dir.join(TABLES_DIR);
        if tables.is_dir() {
            let options = TableOptions {
                cutoff: Some(dir.incident.detected_at),
                ..TableOptions::default()
            };
            out.tables = Some(Arc::new(CsvTables::load_dir(&tables, options)?));
        }
        let code = dir.dir.join(CODE_DIR);
        if code.is_dir() {
            out.code = Some(Arc::new(CodeDirectory::new(code)?));
        }
        Ok(out)
    }

    /// The tools: `get_logs`, `get_metrics`, `get_traces`, `get_db_records` for the sources
    /// present, `analyze_logs` always, `analyze_code` when there is code. The experts ask
    /// `model`; without one they run their deterministic policies.
    pub async fn registry(
        &self,
        model: Option<Arc<dyn ChatModel>>,
    ) -> Result<ToolRegistry, ToolError> {
        let mut r = ToolRegistry::new();
        let max_chars = self.output_chars.max(1);
        if let Some(s) = &self.logs {
            let mut tool = GetLogs::new(Arc::clone(s));
            tool.max_chars = max_chars;
            r.register_typed(tool)?;
        }
        if let Some(s) = &self.metrics {
            let mut tool = GetMetrics::new(Arc::clone(s));
            tool.max_chars = max_chars;
            r.register_typed(tool)?;
        }
        if let Some(s) = &self.traces {
            let mut tool = GetTraces::new(Arc::clone(s));
            tool.max_chars = max_chars;
            r.register_typed(tool)?;
        }
        if let Some(s) = &self.tables {
            let mut tool = GetDbRecords::new(Arc::clone(s));
            tool.max_chars = max_chars;
            r.register_typed(tool)?;
        }
        let mut store = LogExampleStore::new(Arc::clone(&self.embedder));
        store
            .add_all(self.log_examples.clone())
            .await
            .map_err(|e: ExpertError| ToolError::failed(e.to_string()))?;
        let log_analyst: Arc<dyn LogAnalyst> = match &model {
            Some(m) => Arc::new(ModelLogAnalyst::new(Arc::clone(m))),
            None => Arc::new(HeuristicLogAnalyst::default()),
        };
        let expert = LogExpert::semantic(
            Arc::clone(&self.embedder),
            Arc::new(store),
            log_analyst,
            self.log_expert.clone(),
        );
        let mut tool = AnalyzeLogs::new(Arc::new(expert));
        tool.max_chars = max_chars;
        r.register_typed(tool)?;
        if let Some(code) = &self.code {
            let analyst: Arc<dyn CodeAnalyst> = match &model {
                Some(m) => Arc::new(ModelCodeAnalyst::new(Arc::clone(m))),
                None => Arc::new(HeuristicCodeAnalyst),
            };
            let expert = CodeExpert::new(Arc::clone(code), analyst, self.code_expert.clone());
            let mut tool = AnalyzeCode::new(Arc::new(expert));
            tool.max_chars = max_chars;
            r.register_typed(tool)?;
        }
        Ok(r)
    }
}
