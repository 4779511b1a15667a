//! The bounds every request is held to: output, time and memory.

use std::time::Duration;

/// Limits of the server. Every tool's output is bounded (long observations are cut to a head
/// plus a snapshot key, as in the ReAct loop), every call has a deadline, and what the server
/// keeps in memory (loaded incidents, snapshots) is capped.
#[derive(Debug, Clone, PartialEq)]
pub struct McpLimits {
    /// Characters of an observation (or a Markdown report) shown in a result; the rest is kept
    /// under a snapshot key the client reads with `read_snapshot`.
    pub head_chars: usize,
    /// Characters `read_snapshot` returns at most per call.
    pub page_chars: usize,
    /// Deadline of an information-gathering tool call (loading the incident included).
    pub tool_timeout: Duration,
    /// Deadline of a `diagnose` call (loading the incident included); also the pipeline's
    /// wall time.
    pub diagnose_timeout: Duration,
    /// Bytes an incident's telemetry files may hold together once decompressed (as
    /// `rca diagnose --max-telemetry-bytes`).
    pub max_telemetry_bytes: u64,
    /// Loaded incidents kept in memory at once (least recently used dropped first).
    pub max_loaded_incidents: usize,
    /// Characters the snapshot store holds in all (oldest snapshots dropped first).
    pub max_snapshot_chars: usize,
    /// Bytes of a stored report or trajectory returned as a resource.
    pub max_resource_bytes: usize,
    /// Names listed at most per list (components, templates, incidents, resources).
    pub max_list_items: usize,
    /// Tool calls running at once; more wait for a slot (within their deadline).
    pub max_concurrent_calls: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            head_chars: 6_000,
            page_chars: 20_000,
            tool_timeout: Duration::from_secs(60),
            diagnose_timeout: Duration::from_secs(300),
            max_telemetry_bytes: rca_tools::sources::DEFAULT_MAX_TELEMETRY_BYTES,
            max_loaded_incidents: 4,
            max_snapshot_chars: 32 << 20,
            max_resource_bytes: 4 << 20,
            max_list_items: 500,
            max_concurrent_calls: 4,
        }
    }
}
