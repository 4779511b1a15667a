//! The detection agent (read-only): is there an incident?

use std::sync::Arc;

use async_trait::async_trait;
use rca_core::llm::{ChatModel, Message};
use serde::{Deserialize, Serialize};

use super::{ask, extract_json, health_brief};
use crate::stratus::environment::ReadAccess;
use crate::stratus::error::StratusError;

/// The detection agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Whether an incident is under way.
    pub incident: bool,
    /// A one-line summary.
    pub summary: String,
}

/// The detection role.
#[async_trait]
pub trait Detector: Send + Sync {
    /// Looks at the system and says whether something is wrong.
    async fn detect(&self, env: &dyn ReadAccess) -> Result<Detection, StratusError>;
}

/// Deterministic detection: an incident is any firing alert, SLA violation, capacity loss
/// or crash.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyDetector;

#[async_trait]
impl Detector for PolicyDetector {
    async fn detect(&self, env: &dyn ReadAccess) -> Result<Detection, StratusError> {
        let h = env.observe().await?;
        let incident = h.crashed
            || !h.alerts.is_empty()
            || !h.sla_violations.is_empty()
            || h.capacity_loss > 0;
        let summary = if incident {
            format!(
                "{} alert(s) ({}), {} SLA violation(s), capacity loss {}{}",
                h.alerts.len(),
                h.alerts
                    .iter()
                    .map(|a| format!("{} on {}", a.name, a.component))
                    .collect::<Vec<_>>()
                    .join(", "),
                h.sla_violations.len(),
                h.capacity_loss,
                if h.crashed { ", CRASHED" } else { "" }
            )
        } else {
            "no alerts, every route within its SLO".to_string()
        };
        Ok(Detection { incident, summary })
    }
}

/// Detection by a chat model: it reads the alerts and SLA report and answers
/// `{"incident": bool, "summary": "..."}`.
pub struct ModelDetector {
    model: Arc<dyn ChatModel>,
}

impl ModelDetector {
    /// A detector backed by `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelDetector { model }
    }
}

#[async_trait]
impl Detector for ModelDetector {
    async fn detect(&self, env: &dyn ReadAccess) -> Result<Detection, StratusError> {
        let brief = health_brief(env).await?;
        let raw = ask(
            &self.model,
            vec![
                Message::system(
                    "You are the detection agent of an SRE team. Decide whether the system has an \
                     incident. Answer only with JSON: {\"incident\": true|false, \"summary\": \"...\"}.",
                ),
                Message::user(format!("Current telemetry:\n{brief}")),
            ],
        )
        .await?;
        extract_json(&raw)
    }
}
