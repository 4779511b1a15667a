//! Candidate causes derived from the cluster's state, each with its evidence and a
//! reversible fix (STRATUS section 4, diagnosis as hypotheses that mitigation tests).
//!
//! Every family reads a relation of the manifest model, or a measured quantity, never a
//! phrase of a log:
//!
//! - **changed**: an object changed before the incident by someone other than the agents
//!   (the history); the fix puts back the manifest it had;
//! - **reference**: a relation that does not resolve: a service that selects no pods or
//!   sends to a port its pods do not listen on, a mounted config map or secret that does not
//!   exist, an address in the environment that names no service port, an image that cannot
//!   be pulled, a deployment with no replica behind a service under load;
//! - **placement**: pods that no node takes (cordoned nodes, a node selector);
//! - **node**: a NotReady node that still hosts pods;
//! - **resources**: containers killed at their memory limit, CPU throttled;
//! - **liveness**: a pod that takes requests and answers none;
//! - **credential**: a service whose upstream rejects its credential (401), and secrets
//!   that hold the same keys;
//! - **config**: config keys of mounted maps that the process's logs mention, with values
//!   seen elsewhere;
//! - **capacity**: demand above what a service serves (429, latency over its objective).
//!
//! Hypotheses are ranked by how close their object is to the symptoms (the localised root
//! service and its relations first), then by family, then by recency.

mod changed;
mod config;
mod references;
mod relevance;
mod shapes;
mod state;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::diagnosis::FaultKind;
use super::observed::Observed;
use relevance::relevance_map;
pub use shapes::edit_distance;

/// Most hypotheses one diagnosis returns.
pub const MAX_HYPOTHESES: usize = 24;

/// Most earlier revisions of one object that the changed family proposes to go back to.
const MAX_REVERTS_PER_OBJECT: usize = 2;

/// A family of hypotheses: which relation or quantity it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// A NotReady node that hosts pods.
    Node,
    /// Pods that no node takes.
    Placement,
    /// A reference that does not resolve.
    Reference,
    /// Container limits below what the process uses.
    Resources,
    /// A pod that answers nothing.
    Liveness,
    /// A rejected credential.
    Credential,
    /// A config value the logs point at.
    Config,
    /// A change made before the incident.
    Changed,
    /// Demand above capacity.
    Capacity,
}

impl Family {
    fn priority(self) -> u8 {
        match self {
            Family::Node | Family::Placement => 0,
            Family::Reference | Family::Resources | Family::Liveness | Family::Credential => 1,
            Family::Changed => 2,
            Family::Config => 3,
            Family::Capacity => 4,
        }
    }
}

/// A candidate cause with its evidence and a fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    /// Which relation or quantity it reads.
    pub family: Family,
    /// The fault, in the diagnosis vocabulary.
    pub fault: FaultKind,
    /// The component to act on (`deployment/x`, `service/y`, ...).
    pub component: String,
    /// What in the state supports it.
    pub evidence: String,
    /// The write commands that would remove the cause (one transaction).
    pub fix: Vec<String>,
    /// Closeness to the symptoms (0: the localised root and what it holds).
    pub relevance: u8,
    /// For changes: seconds between this change and the newest recorded one (smaller is
    /// newer); 0 otherwise.
    #[serde(default)]
    pub age_s: u64,
}

struct Builder<'a> {
    o: &'a Observed,
    rank: BTreeMap<String, u8>,
    now: u64,
    out: Vec<Hypothesis>,
}

impl Builder<'_> {
    fn relevance(&self, object: &str) -> u8 {
        self.rank.get(object).copied().unwrap_or(3)
    }

    /// Adds a hypothesis (none when `fix` is empty) and returns it, so a family can set
    /// what the defaults do not know (a relevance other than its component's, an age).
    fn push(
        &mut self,
        family: Family,
        fault: FaultKind,
        component: String,
        evidence: String,
        fix: Vec<String>,
    ) -> Option<&mut Hypothesis> {
        if fix.is_empty() {
            return None;
        }
        let relevance = self.relevance(&component);
        self.out.push(Hypothesis {
            family,
            fault,
            component,
            evidence,
            fix,
            relevance,
            age_s: 0,
        });
        self.out.last_mut()
    }
}

/// Deployments whose logs are worth reading, closest to the symptoms first (relevance 2 at
/// most).
pub fn worth_reading(o: &Observed) -> Vec<String> {
    let rank = relevance_map(o);
    let mut deps: Vec<(u8, String)> = rank
        .iter()
        .filter(|(k, r)| **r <= 2 && k.starts_with("deployment/"))
        .map(|(k, r)| (*r, k["deployment/".len()..].to_string()))
        .collect();
    deps.sort();
    deps.into_iter().map(|(_, d)| d).collect()
}

/// Every hypothesis the state supports, ranked: closest to the symptoms first, then by
/// family, then newest first; one per fix (the best-ranked), at most [`MAX_HYPOTHESES`].
pub fn hypotheses(o: &Observed, max_commands: usize) -> Vec<Hypothesis> {
    let mut out = candidates(o, max_commands);
    let mut seen: Vec<Vec<String>> = Vec::new();
    out.retain(|h| {
        let new = !seen.contains(&h.fix);
        if new {
            seen.push(h.fix.clone());
        }
        new
    });
    out.truncate(MAX_HYPOTHESES);
    out
}

/// Every hypothesis of every family, ranked as [`hypotheses`] ranks them, with the same fix
/// kept once per family that proposes it.
pub fn candidates(o: &Observed, max_commands: usize) -> Vec<Hypothesis> {
    let now = o
        .history
        .iter()
        .filter_map(|c| c.get("at").and_then(Value::as_u64))
        .max()
        .unwrap_or(0);
    let mut b = Builder {
        o,
        rank: relevance_map(o),
        now,
        out: Vec::new(),
    };
    b.nodes(max_commands);
    b.placement();
    b.references();
    b.resources();
    b.liveness();
    b.credentials();
    b.config();
    b.changed();
    b.rollbacks();
    b.capacity(max_commands);
    let mut out = b.out;
    out.sort_by_key(|h| (h.relevance, h.family.priority(), h.age_s));
    out
}
