//! What the serving commands (`rca otlp serve`, `rca mcp`) share: `--listener FILE` (a TOML
//! file with rca-listen's `[listener]` table) and the stop signal.

use std::time::Duration;

use anyhow::Context;

/// The `[listener]` table of `--listener FILE`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenerFile {
    #[serde(default)]
    listener: rca_listen::ListenerConfig,
}

/// Reads `--listener FILE`, its relative paths taken from the file's folder.
pub fn listener_config(path: &std::path::Path) -> anyhow::Result<rca_listen::ListenerConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the listener file {}", path.display()))?;
    let mut config = toml::from_str::<ListenerFile>(&text)
        .with_context(|| format!("{} is not a [listener] table", path.display()))?
        .listener;
    config.resolve_paths(path.parent().unwrap_or(std::path::Path::new(".")));
    Ok(config)
}

/// Resolves on Ctrl-C, SIGTERM, or after `for_seconds` when given.
pub async fn stop_signal(for_seconds: Option<u64>) {
    let deadline = async {
        match for_seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
        () = deadline => {}
    }
}
