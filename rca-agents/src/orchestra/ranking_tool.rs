//! The deterministic diagnosis as a data tool: agents that follow guides (FLASH) call
//! `rank_components` to learn which components the telemetry points at, when the alert names
//! only a symptom at an entry point.

use async_trait::async_trait;
use rca_core::tool::{ToolContext, ToolOutput, TypedTool};
use rca_core::{Incident, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::OnceCell;

use super::pipeline::{DiagnosisPipeline, IncidentTelemetry, PipelineConfig, RoleModels};

/// How many components `rank_components` lists unless asked for another number.
pub const DEFAULT_TOP: usize = 5;
/// The most components it lists.
pub const MAX_TOP: usize = 20;

/// Arguments of `rank_components`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RankComponentsArgs {
    /// How many components to list (5 by default, at most 20).
    #[serde(default)]
    pub top: Option<usize>,
}

/// `rank_components`: the diagnosis pipeline's deterministic roles over an incident's
/// telemetry (every modality compared with its baseline, findings ranked across modalities),
/// listed as `N. component (score S; looks like: TYPE)`, most likely first.
/// The pipeline runs once per tool; later calls read its result.
pub struct RankComponents {
    telemetry: IncidentTelemetry,
    incident: Incident,
    config: PipelineConfig,
    ranked: OnceCell<Result<Vec<rca_core::trajectory::RootCauseCandidate>, String>>,
}

impl RankComponents {
    /// The tool over `telemetry` of `incident`, with the pipeline's default settings.
    pub fn new(telemetry: IncidentTelemetry, incident: Incident) -> Self {
        RankComponents {
            telemetry,
            incident,
            config: PipelineConfig::default(),
            ranked: OnceCell::new(),
        }
    }

    async fn rank(&self) -> Result<Vec<rca_core::trajectory::RootCauseCandidate>, String> {
        let pipeline = DiagnosisPipeline::over(
            self.telemetry.clone(),
            &self.incident,
            RoleModels::default(),
            self.config.clone(),
        )
        .map_err(|e| e.to_string())?;
        let record = pipeline
            .run(&self.incident)
            .await
            .map_err(|e| e.to_string())?;
        Ok(record.report.candidates)
    }
}

#[async_trait]
impl TypedTool for RankComponents {
    type Args = RankComponentsArgs;

    fn name(&self) -> &str {
        "rank_components"
    }

    fn description(&self) -> &str {
        "Ranks the components the incident's telemetry points at (logs, metrics and traces, \
         each compared with its baseline), most likely root cause first, with the kind of \
         fault each looks like."
    }

    async fn run(
        &self,
        args: RankComponentsArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let top = args.top.unwrap_or(DEFAULT_TOP).clamp(1, MAX_TOP);
        let ranked = self
            .ranked
            .get_or_init(|| self.rank())
            .await
            .clone()
            .map_err(|e| ToolError::failed(format!("the diagnosis failed: {e}")))?;
        if ranked.is_empty() {
            return Ok(ToolOutput::text(
                "no component stands out: the telemetry shows no anomaly against its baseline",
            ));
        }
        let mut text = format!(
            "Components the telemetry points at, most likely first ({} of {}):\n",
            top.min(ranked.len()),
            ranked.len()
        );
        for (i, c) in ranked.iter().take(top).enumerate() {
            text.push_str(&format!(
                "{}. {} (score {:.2}; looks like: {})\n",
                i + 1,
                c.component,
                c.score,
                c.fault_type.as_deref().unwrap_or("unknown")
            ));
        }
        Ok(ToolOutput::text(text))
    }
}
