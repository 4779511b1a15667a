//! The controller's prompt: framework rules, the host's task requirements and tool
//! documentation generated from the tools' schemas. Zero-shot: no examples.

use rca_core::incident::Incident;
use rca_core::tool::ToolSpec;

use super::turn::TURN_SHAPE;

/// The framework rules: the thought-action-observation cycle and the turn format.
pub const FRAMEWORK_RULES: &str = "\
You are an autonomous agent that finds the root cause of a cloud incident by using tools.
You work in cycles. In each cycle you think about what you know and what you still need, call \
exactly one tool, and then receive its result as an Observation.
Answer every turn with exactly one JSON object and nothing else, of the form:
TURN_SHAPE
Rules:
- Use only the tools listed below, with arguments that follow their JSON schemas.
- Do not call a tool again with the same arguments: its earlier observation still holds.
- Long observations show only their head and a snapshot key (obs- followed by 16 hex digits). \
To give a tool the full text, pass the key as an argument value; it is replaced by the full text \
before the tool runs.
- When the evidence from the tools supports a root cause, call `finalize` with the root cause, \
the solution, who must act (responsibility), your confidence and the evidence.";

/// The framework rules when the model calls tools natively.
pub const NATIVE_RULES: &str = "\
You are an autonomous agent that finds the root cause of a cloud incident by using tools.
You work in cycles. In each cycle you think about what you know and what you still need, call \
exactly one tool, and then receive its result.
Rules:
- Use only the tools listed below.
- Do not call a tool again with the same arguments: its earlier result still holds.
- Long results show only their head and a snapshot key (obs- followed by 16 hex digits). To \
give a tool the full text, pass the key as an argument value; it is replaced by the full text \
before the tool runs.
- When the evidence from the tools supports a root cause, call `finalize` with the root cause, \
the solution, who must act (responsibility), your confidence and the evidence.";

/// The system prompt for a run whose tools go to the model natively: the rules, the task and
/// one line per tool (their schemas travel with the request).
pub fn native_system_prompt(task_requirements: &str, tools: &[ToolSpec]) -> String {
    let mut out = NATIVE_RULES.to_string();
    if !task_requirements.trim().is_empty() {
        out.push_str("\n\n## Task requirements\n");
        out.push_str(task_requirements.trim());
    }
    out.push_str("\n\n## Tools\n");
    for t in tools {
        out.push_str(&format!("- {}: {}\n", t.name, t.description.trim()));
    }
    out
}

/// The system prompt for a run.
pub fn system_prompt(task_requirements: &str, tools: &[ToolSpec]) -> String {
    let mut out = FRAMEWORK_RULES.replace("TURN_SHAPE", TURN_SHAPE);
    if !task_requirements.trim().is_empty() {
        out.push_str("\n\n## Task requirements\n");
        out.push_str(task_requirements.trim());
    }
    out.push_str("\n\n## Tools\n");
    for t in tools {
        out.push_str(&format!(
            "\n### {}\n{}\nArguments (JSON schema): {}\n",
            t.name,
            t.description.trim(),
            compact_schema(&t.parameters)
        ));
    }
    out
}

/// The schema without the noise models do not need (`$schema`, `title`).
fn compact_schema(schema: &serde_json::Value) -> String {
    let mut s = schema.clone();
    if let Some(obj) = s.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    s.to_string()
}

/// The first user message: the incident.
pub fn incident_message(incident: &Incident) -> String {
    let mut out = format!(
        "Incident {}: {}\nDetected at: {}\nTelemetry window: {} to {}\n",
        incident.id,
        incident.title,
        incident.detected_at,
        incident.window.start,
        incident.window.end
    );
    if !incident.description.trim().is_empty() {
        out.push_str(&format!("Description: {}\n", incident.description.trim()));
    }
    if !incident.system.trim().is_empty() {
        out.push_str(&format!("System: {}\n", incident.system.trim()));
    }
    if !incident.topology.is_empty() {
        let edges: Vec<String> = incident
            .topology
            .iter()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect();
        out.push_str(&format!("Known calls: {}\n", edges.join(", ")));
    }
    out.push_str("Find the root cause. Begin.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_has_rules_task_and_tool_docs() {
        let tools = vec![ToolSpec {
            name: "logs".into(),
            description: "Reads logs.".into(),
            parameters: serde_json::json!({"$schema": "x", "title": "A", "type": "object",
                "properties": {"component": {"type": "string"}}}),
        }];
        let p = system_prompt("Blame the platform only with evidence.", &tools);
        assert!(p.contains("\"thought\"") && p.contains("### logs"));
        assert!(p.contains("Blame the platform") && p.contains("\"component\""));
        assert!(!p.contains("$schema") && !p.contains("TURN_SHAPE"));
    }
}
