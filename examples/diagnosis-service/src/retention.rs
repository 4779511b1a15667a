//! Report retention: stored reports (with their resolutions and open-episode records) older
//! than `max_age_hours`, and the oldest beyond `max_bytes`, are deleted, by a task that runs
//! every `interval_seconds` while the service runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::ReportStore;

/// The `[retention]` table.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Reports stored longer ago than this are deleted, in hours (default 720: 30 days).
    #[serde(default = "default_max_age_hours")]
    pub max_age_hours: u64,
    /// The stored reports' bytes are kept under this, the oldest deleted first (default
    /// 1 GiB; a report of a busy incident is about 45 KB).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// How often the store is pruned, in seconds (default 300; the first pass runs at start).
    #[serde(default = "default_interval")]
    pub interval_seconds: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            max_age_hours: default_max_age_hours(),
            max_bytes: default_max_bytes(),
            interval_seconds: default_interval(),
        }
    }
}

fn default_max_age_hours() -> u64 {
    720
}
fn default_max_bytes() -> u64 {
    1 << 30
}
fn default_interval() -> u64 {
    300
}

impl RetentionConfig {
    /// Checks the values; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_age_hours == 0 || self.max_age_hours > 24 * 365 * 100 {
            return Err(
                "`retention.max_age_hours` must be between 1 and 876000 (a century)".into(),
            );
        }
        if self.max_bytes < 1 << 20 {
            return Err("`retention.max_bytes` must be at least 1048576 (1 MiB)".into());
        }
        if self.interval_seconds == 0 || self.interval_seconds > 86_400 {
            return Err("`retention.interval_seconds` must be between 1 and 86400".into());
        }
        Ok(())
    }

    /// The longest a report is kept.
    pub fn max_age(&self) -> Duration {
        Duration::from_secs(self.max_age_hours.saturating_mul(3600))
    }
}

/// What one pruning pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Reports deleted (with their resolutions and episode records).
    pub reports: u64,
    /// The bytes they held.
    pub bytes: u64,
    /// The stored reports' bytes left.
    pub kept_bytes: u64,
}

/// Prunes `store` under `config` now and then every `interval_seconds`, until `stop` turns
/// true. Failures are logged and tried again at the next pass.
pub async fn run(
    store: ReportStore,
    config: RetentionConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let interval = Duration::from_secs(config.interval_seconds);
    loop {
        match store.prune(config.max_age(), config.max_bytes).await {
            Ok(p) if p.reports > 0 => tracing::info!(
                reports = p.reports,
                bytes = p.bytes,
                kept_bytes = p.kept_bytes,
                "old reports deleted (retention)"
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the store could not be pruned; trying again later")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
