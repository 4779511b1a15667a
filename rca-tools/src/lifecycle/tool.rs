//! A stored tool as an [`rca_core::Tool`], so explorers call generated tools like any other.

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::tool::{Tool, ToolContext, ToolOutput};
use rca_core::{TimeRange, ToolError};

use super::error::LifecycleError;
use super::inventory::StoredTool;
use super::manager::ToolLifecycle;
use crate::tables::TableEngine;

/// Rows shown to the model; the full result goes into [`ToolOutput::data`].
const SHOWN_ROWS: usize = 20;

/// A generated tool bound to an engine and an incident window.
pub struct LifecycleTool {
    lifecycle: Arc<ToolLifecycle>,
    name: String,
    description: String,
    schema: serde_json::Value,
    engine: Arc<dyn TableEngine>,
    window: Option<TimeRange>,
}

impl LifecycleTool {
    pub(crate) fn new(
        lifecycle: Arc<ToolLifecycle>,
        stored: &StoredTool,
        engine: Arc<dyn TableEngine>,
        window: Option<TimeRange>,
    ) -> Self {
        LifecycleTool {
            lifecycle,
            name: stored.contract.name.clone(),
            description: stored.contract.purpose.clone(),
            schema: stored.contract.args_schema(),
            engine,
            window,
        }
    }
}

#[async_trait]
impl Tool for LifecycleTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> serde_json::Value {
        self.schema.clone()
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let window = match (self.window, ctx.cutoff) {
            (Some(w), Some(cutoff)) => Some(w.clamp_end(cutoff)),
            (w, _) => w,
        };
        let result = self
            .lifecycle
            .run(&self.name, &args, window, self.engine.as_ref())
            .await
            .map_err(|e| match e {
                LifecycleError::InvalidArgs { tool, message } => ToolError::InvalidArgs {
                    tool,
                    message,
                    schema: self.schema.to_string(),
                },
                other => ToolError::failed(other.to_string()),
            })?;
        let text = if result.is_empty() {
            "no rows".to_string()
        } else {
            result.render(SHOWN_ROWS)
        };
        Ok(ToolOutput {
            text,
            data: serde_json::to_value(&result).ok(),
            evidence: Vec::new(),
        })
    }
}
