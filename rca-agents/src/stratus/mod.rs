//! STRATUS: detection, diagnosis and safe mitigation with Transactional No-Regression (TNR).
//!
//! - [`Environment`]: what a mitigated system offers (observe, read, write, snapshot, restore);
//!   [`sim`] is a simulated Kubernetes-like cluster implementing it.
//! - [`severity`]: mu(s) = w1 |alerts| + w2 |SLA violations| + w3 |capacity loss|, crash = inf.
//! - [`command`] and [`confinement`]: a kubectl-like language; every command is read-only,
//!   a write or refused, and read-only agents hold a handle that cannot write.
//! - [`transaction`]: TNR — one writer at a time, checkpoint, at most K commands, undo stack,
//!   commit only if mu does not rise and nothing crashed.
//! - [`agents`] and [`machine`]: detection, diagnosis, mitigation and undo agents driven by a
//!   state machine; each role is a `ChatModel` or a deterministic policy.
//! - [`bench`](mod@bench): the ablation of STRATUS Table 3 (tnr / retry without undo / no retry).

pub mod agents;
pub mod bench;
pub mod command;
pub mod confinement;
pub mod environment;
pub mod error;
pub mod machine;
pub mod oracle;
pub mod scenario_bench;
pub mod severity;
pub mod sim;
pub mod transaction;

pub use command::{Command, ResourceKind, ResourceRef};
pub use confinement::{Confined, ReadCommand, WriteCommand, confine};
pub use environment::{Environment, ReadAccess, ReadHandle, ResourceSnapshot, ServiceGraph};
pub use error::{EnvError, StratusError};
pub use machine::{Phase, RunReport, Stratus};
pub use oracle::{OracleVerdict, oracle};
pub use severity::{HealthReport, SeverityWeights};
pub use sim::SimEnvironment;
pub use sim::scenarios::{Scenario, builtin as builtin_scenarios, scenario};
pub use transaction::{Approver, Outcome, Proposal, Tnr, TnrConfig, TransactionRecord};

#[cfg(test)]
mod tests;
