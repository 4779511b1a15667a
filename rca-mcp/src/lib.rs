//! An MCP server for any agent host: the condensed information-gathering tools, the whole
//! diagnosis, the components and log templates of an incident, stored reports and trajectories
//! as resources, and a prompt for a guided investigation, over stdio or Streamable HTTP.
//! Built on the official Rust MCP SDK (`rmcp`).
//!
//! ```rust,no_run
//! # async fn run() -> Result<(), rca_mcp::McpError> {
//! use rca_mcp::{McpServerConfig, RcaMcp, serve_stdio};
//!
//! let server = RcaMcp::new(McpServerConfig::new("examples/incidents"))?;
//! serve_stdio(server).await
//! # }
//! ```
//!
//! Every answer is bounded (a long observation or report is cut to a head plus a snapshot key
//! the client reads with `read_snapshot`, as in the ReAct loop), every call has a deadline,
//! loaded incidents and snapshots are capped in memory, and everything is redacted before it
//! leaves. Incidents are named by their folder under the root (paths are refused) and loaded
//! as `rca diagnose` loads them. The HTTP transport requires a bearer token unless bound to
//! loopback with an explicit flag.
//!
//! Module map: `server` ([`RcaMcp`], the handler, stdio), `http` (Streamable HTTP behind
//! rca-listen), `catalogue` (tools, schemas, structured results), `incidents` (the confined
//! root and the cache of loaded incidents), `live` (sources queried live, as the incident
//! `live`), `runs` (stored runs as resources), `snapshots`
//! (the bounded snapshot store), `limits`, `error`.

#![deny(missing_docs)]

mod catalogue;
mod error;
mod http;
mod incidents;
mod limits;
mod live;
mod runs;
mod server;
mod snapshots;

pub use catalogue::{
    Component, ComponentsOutput, DiagnoseArgs, DiagnoseOutput, Edge, INCIDENT_ARG,
    ListComponentsArgs, LogTemplatesArgs, ObservationOutput, ReadSnapshotArgs, SnapshotPage,
    TemplateInfo, TemplatesOutput,
};
pub use error::McpError;
pub use http::{
    HttpOptions, MCP_PATH, ROUTE_GROUP, TELEMETRY_GROUP, check_auth, serve_http, token_client,
};
pub use incidents::{IncidentRoot, LoadedIncident};
pub use limits::McpLimits;
pub use live::{LIVE_INCIDENT, LiveSources};
pub use runs::{LATEST_RUN, REPORT_FILE, RUNS_URI, StoredFile, TRAJECTORY_FILE, run_folder};
pub use server::{INVESTIGATE_PROMPT, McpServerConfig, RcaMcp, serve_stdio};
pub use snapshots::BoundedSnapshotStore;

/// The names of the tools the server lists.
pub fn tool_names() -> Vec<String> {
    catalogue::tools()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}
