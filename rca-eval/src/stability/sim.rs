//! Simulated incidents with a known root cause, and the tools that investigate them.
//!
//! Each incident is a call graph: an alerting entry component, a chain of callees down to the
//! faulty root (every hop shows slow calls to the next), healthy side branches, and one fault
//! whose signature appears only in the root's logs. The tools are stateless; the metrics of the
//! root and the log expert's analysis of its logs are the two pieces of evidence.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use rca_core::ToolError;
use rca_core::incident::{Evidence, Incident, Modality};
use rca_core::seeded::SeededRng;
use rca_core::time::{TimeRange, Timestamp};
use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
use rca_core::trajectory::DiagnosisReport;
use schemars::JsonSchema;
use serde::Deserialize;

/// The kinds of fault the simulation injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The data volume is full.
    DiskFull,
    /// Memory grows until the process is killed.
    MemoryLeak,
    /// The database connection pool is exhausted.
    ConnectionPoolExhausted,
    /// A bad configuration was deployed.
    ConfigError,
    /// A certificate expired.
    CertificateExpired,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::DiskFull,
        Fault::MemoryLeak,
        Fault::ConnectionPoolExhausted,
        Fault::ConfigError,
        Fault::CertificateExpired,
    ];

    /// The label a correct diagnosis must name.
    pub fn label(self) -> &'static str {
        match self {
            Fault::DiskFull => "disk_full",
            Fault::MemoryLeak => "memory_leak",
            Fault::ConnectionPoolExhausted => "connection_pool_exhausted",
            Fault::ConfigError => "config_error",
            Fault::CertificateExpired => "certificate_expired",
        }
    }

    /// The error line the fault leaves in the root's logs.
    pub fn log_message(self) -> &'static str {
        match self {
            Fault::DiskFull => "write failed: no space left on device",
            Fault::MemoryLeak => "heap usage 98 percent, allocation failed: out of memory",
            Fault::ConnectionPoolExhausted => "timeout acquiring connection: pool exhausted",
            Fault::ConfigError => "invalid configuration value for key request.limit",
            Fault::CertificateExpired => "TLS handshake failed: certificate has expired",
        }
    }

    /// Reads the fault back from a log message (the log expert's knowledge).
    fn classify(line: &str) -> Option<Fault> {
        Fault::ALL
            .into_iter()
            .find(|f| line.contains(f.log_message()))
    }
}

/// A simulated incident.
#[derive(Debug, Clone)]
pub struct SimIncident {
    /// Its id.
    pub id: String,
    /// Callees of each component.
    pub callees: BTreeMap<String, Vec<String>>,
    /// The alerting entry down to the root, in order.
    pub path: Vec<String>,
    /// The injected fault.
    pub fault: Fault,
}

impl SimIncident {
    /// Generates an incident whose root lies `depth` hops below the alerting entry.
    pub fn generate(seed: u64, depth: usize) -> Self {
        let mut rng = SeededRng::new(seed ^ 0x5eed_1c1d_e47a_0001);
        let mut names: Vec<String> = Vec::new();
        let mut fresh = |rng: &mut SeededRng| loop {
            let name: String = (0..3)
                .map(|_| char::from(b'a' + rng.below(26) as u8))
                .collect();
            let name = format!("svc-{name}");
            if !names.contains(&name) {
                names.push(name.clone());
                return name;
            }
        };
        let path: Vec<String> = (0..=depth).map(|_| fresh(&mut rng)).collect();
        let mut callees: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, node) in path.iter().enumerate() {
            let mut list = Vec::new();
            let healthy = if i + 1 < path.len() {
                1 + rng.below(2)
            } else {
                rng.below(2)
            };
            for _ in 0..healthy {
                let leaf = fresh(&mut rng);
                callees.insert(leaf.clone(), Vec::new());
                list.push(leaf);
            }
            if let Some(next) = path.get(i + 1) {
                list.insert(rng.below(list.len() + 1), next.clone());
            }
            callees.insert(node.clone(), list);
        }
        let fault = Fault::ALL[rng.below(Fault::ALL.len())];
        SimIncident {
            id: format!("sim-{seed}"),
            callees,
            path,
            fault,
        }
    }

    /// The alerting entry.
    pub fn entry(&self) -> &str {
        self.path.first().map(String::as_str).unwrap_or("")
    }

    /// The faulty component.
    pub fn root(&self) -> &str {
        self.path.last().map(String::as_str).unwrap_or("")
    }

    /// The incident as the controller sees it.
    pub fn incident(&self) -> Incident {
        Incident {
            id: self.id.clone(),
            title: format!("{} is failing requests", self.entry()),
            description: "Users report errors and slow responses.".into(),
            detected_at: Timestamp(3_600_000),
            window: TimeRange::new(Timestamp(0), Timestamp(3_600_000)),
            system: format!("{} components in a call graph.", self.callees.len()),
            topology: Vec::new(),
            onset: None,
        }
    }

    /// Whether a report names the true root component and fault.
    pub fn is_correct(&self, report: &DiagnosisReport) -> bool {
        let text = report.root_cause.to_ascii_lowercase();
        let fault_words = self.fault.label().replace('_', " ");
        text.contains(self.root())
            && (text.contains(self.fault.label()) || text.contains(&fault_words))
    }

    /// The tools investigating this incident.
    pub fn tools(self: &Arc<Self>) -> Result<ToolRegistry, ToolError> {
        let mut r = ToolRegistry::new();
        r.register_typed(ListAlerts(Arc::clone(self)))?;
        r.register_typed(GetMetrics(Arc::clone(self)))?;
        r.register_typed(GetLogs(Arc::clone(self)))?;
        r.register_typed(AnalyzeLogs)?;
        Ok(r)
    }

    fn check(&self, component: &str) -> Result<(), ToolError> {
        if self.callees.contains_key(component) {
            Ok(())
        } else {
            Err(ToolError::failed(format!(
                "unknown component {component}; known: {}",
                self.callees.keys().cloned().collect::<Vec<_>>().join(", ")
            )))
        }
    }

    /// The alerts that fired (what `list_alerts` returns).
    pub fn alerts_text(&self) -> String {
        let e = self.entry();
        format!(
            "ALERT {e}: error rate 14% over the last 10 minutes\nALERT {e}: p99 latency 2300 ms"
        )
    }

    /// A component's resources, error rate and the latency of each call it makes (what
    /// `get_metrics` returns; the component must exist).
    pub fn metrics_text(&self, component: &str) -> String {
        let on_path = self.path.iter().position(|p| p == component);
        let error_rate = if on_path.is_some() { 14 } else { 0 };
        let mut text =
            format!("metrics of {component}: cpu 41%, memory 52%, error rate {error_rate}%");
        let next = on_path.and_then(|i| self.path.get(i + 1));
        for callee in self.callees.get(component).into_iter().flatten() {
            let (p99, errors) = if Some(callee) == next {
                (1900, 12)
            } else {
                (20, 0)
            };
            text.push_str(&format!(
                "\ncalls to {callee}: p99 {p99} ms, errors {errors}%"
            ));
        }
        text
    }

    /// A component's recent log lines (what `get_logs` returns).
    pub fn logs(&self, component: &str) -> String {
        let mut rng = SeededRng::new(self.id.len() as u64 ^ component.len() as u64);
        let mut lines: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "00:{:02}:{:02} {component} INFO handled request id={} in {} ms",
                    i / 2,
                    (i * 7) % 60,
                    10_000 + rng.below(90_000),
                    5 + rng.below(40)
                )
            })
            .collect();
        if component == self.root() {
            for k in 0..3 {
                lines.insert(
                    30 + k * 3,
                    format!(
                        "00:{:02}:00 {component} ERROR {}",
                        16 + k,
                        self.fault.log_message()
                    ),
                );
            }
        } else if let Some(callee) = self
            .path
            .iter()
            .position(|p| p == component)
            .and_then(|i| self.path.get(i + 1))
        {
            lines.insert(
                32,
                format!("00:17:00 {component} WARN slow response from {callee}"),
            );
        }
        lines.join("\n")
    }
}

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A component name.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentArgs {
    /// The component.
    pub component: String,
}

/// Text to analyse.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextArgs {
    /// The log text (or a snapshot key of an observation holding it).
    pub text: String,
}

/// `list_alerts`: the alerts that fired.
pub struct ListAlerts(Arc<SimIncident>);

#[async_trait]
impl TypedTool for ListAlerts {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "list_alerts"
    }
    fn description(&self) -> &str {
        "Lists the alerts that fired for this incident."
    }
    async fn run(&self, _a: NoArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.0.alerts_text()))
    }
}

/// `get_metrics`: a component's resources and the latency of its calls.
pub struct GetMetrics(Arc<SimIncident>);

#[async_trait]
impl TypedTool for GetMetrics {
    type Args = ComponentArgs;
    fn name(&self) -> &str {
        "get_metrics"
    }
    fn description(&self) -> &str {
        "Shows a component's CPU, memory and error rate, and the latency of each call it makes."
    }
    async fn run(&self, a: ComponentArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sim = &self.0;
        sim.check(&a.component)?;
        let mut out = ToolOutput::text(sim.metrics_text(&a.component));
        if a.component == sim.root() {
            out.evidence.push(
                Evidence::new(
                    Modality::Metrics,
                    Timestamp(3_000_000),
                    a.component.clone(),
                    "errors with healthy dependencies: the fault is inside this component",
                )
                .with_score(0.8),
            );
        }
        Ok(out)
    }
}

/// `get_logs`: a component's recent log lines (long).
pub struct GetLogs(Arc<SimIncident>);

#[async_trait]
impl TypedTool for GetLogs {
    type Args = ComponentArgs;
    fn name(&self) -> &str {
        "get_logs"
    }
    fn description(&self) -> &str {
        "Returns the recent log lines of a component."
    }
    async fn run(&self, a: ComponentArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.check(&a.component)?;
        Ok(ToolOutput::text(self.0.logs(&a.component)))
    }
}

/// `analyze_logs`: the log expert.
pub struct AnalyzeLogs;

#[async_trait]
impl TypedTool for AnalyzeLogs {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "analyze_logs"
    }
    fn description(&self) -> &str {
        "Log expert: reads log text, groups the errors and names the fault they show."
    }
    async fn run(&self, a: TextArgs, _c: &ToolContext) -> Result<ToolOutput, ToolError> {
        let errors: Vec<&str> = a.text.lines().filter(|l| l.contains(" ERROR ")).collect();
        let Some(first) = errors.first() else {
            return Ok(ToolOutput::text("log analysis: no error lines"));
        };
        let component = first.split_whitespace().nth(1).unwrap_or("").to_string();
        let fault = Fault::classify(first);
        let label = fault.map(Fault::label).unwrap_or("unknown");
        let mut out = ToolOutput::text(format!(
            "log analysis of {component}: {} error lines; fault: {label}",
            errors.len()
        ));
        if fault.is_some() {
            out.evidence.push(
                Evidence::new(
                    Modality::Logs,
                    Timestamp(3_000_000),
                    component,
                    format!("{} errors showing {label}", errors.len()),
                )
                .with_score(0.9),
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incidents_are_deterministic_and_well_formed() {
        let a = SimIncident::generate(7, 3);
        let b = SimIncident::generate(7, 3);
        assert_eq!(a.path, b.path);
        assert_eq!(a.path.len(), 4);
        for w in a.path.windows(2) {
            assert!(a.callees[&w[0]].contains(&w[1]));
        }
        assert_ne!(SimIncident::generate(8, 3).path, a.path);
        let logs = a.logs(a.root());
        assert!(logs.len() > 2000 && logs.contains(a.fault.log_message()));
        assert!(!a.logs(a.entry()).contains(" ERROR "));
    }

    #[tokio::test]
    async fn tools_lead_to_the_root_and_give_evidence() {
        let sim = Arc::new(SimIncident::generate(3, 2));
        let tools = sim.tools().unwrap();
        let ctx = ToolContext::default();
        let m = tools
            .dispatch(
                "get_metrics",
                serde_json::json!({"component": sim.root()}),
                &ctx,
            )
            .await
            .unwrap();
        assert_eq!(m.evidence.len(), 1);
        let logs = tools
            .dispatch(
                "get_logs",
                serde_json::json!({"component": sim.root()}),
                &ctx,
            )
            .await
            .unwrap();
        let a = tools
            .dispatch("analyze_logs", serde_json::json!({"text": logs.text}), &ctx)
            .await
            .unwrap();
        assert!(a.text.contains(sim.fault.label()) && a.text.contains(sim.root()));
        assert_eq!(a.evidence.len(), 1);
        assert!(
            tools
                .dispatch("get_logs", serde_json::json!({"component": "nope"}), &ctx)
                .await
                .is_err()
        );
    }
}
