//! Markdown rendering of a diagnosis.

use std::fmt::Write;

use super::ReportBundle;

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Renders the bundle as Markdown: summary, ranked candidates, evidence chain, and the steps.
pub fn render_markdown(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let mut out = String::new();
    let _ = writeln!(out, "# Diagnosis: {}", bundle.incident.title);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Incident `{}`, detected at {}, window {}.",
        bundle.incident.id, bundle.incident.detected_at, bundle.incident.window
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "**Root cause.** {}", r.root_cause);
    let _ = writeln!(out);
    let _ = writeln!(out, "**Solution.** {}", r.solution);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "**Responsibility:** {}. **Confidence:** {:.2}.",
        r.responsibility, r.confidence
    );
    if !r.candidates.is_empty() {
        let _ = writeln!(out, "\n## Ranked candidates\n");
        let _ = writeln!(out, "| rank | component | fault type | onset | score |");
        let _ = writeln!(out, "|---:|---|---|---|---:|");
        for (i, c) in r.candidates.iter().enumerate() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.2} |",
                i + 1,
                cell(&c.component),
                cell(c.fault_type.as_deref().unwrap_or("-")),
                c.time.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                c.score
            );
        }
    }
    if !r.evidence.is_empty() {
        let _ = writeln!(out, "\n## Evidence chain\n");
        let _ = writeln!(
            out,
            "| observed at | modality | component | finding | score |"
        );
        let _ = writeln!(out, "|---|---|---|---|---:|");
        for e in &r.evidence {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.2} |",
                e.observed_at,
                e.modality,
                cell(&e.component),
                cell(&e.finding),
                e.score
            );
        }
    }
    if !bundle.trajectory.steps.is_empty() {
        let _ = writeln!(out, "\n## Steps\n");
        for s in &bundle.trajectory.steps {
            let action = s.action.as_ref().map(|a| a.name.as_str()).unwrap_or("-");
            let _ = write!(out, "{}. **{}**", s.index + 1, action);
            if !s.thought.is_empty() {
                let _ = write!(out, " — {}", s.thought.replace('\n', " "));
            }
            if let Some(o) = &s.observation {
                let _ = write!(out, " → {}", o.text.replace('\n', " "));
            }
            if let Some(e) = &s.error {
                let _ = write!(out, " (error: {})", e.replace('\n', " "));
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(out, "\n_{} tokens, {} ms._", r.usage.total(), r.elapsed_ms);
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::bundle;
    use super::*;

    #[test]
    fn markdown_has_every_section() {
        let md = render_markdown(&bundle());
        assert!(md.starts_with("# Diagnosis: checkout latency & errors"));
        for needle in [
            "## Ranked candidates",
            "| 1 | orders | cpu |",
            "## Evidence chain",
            "p90 latency of /pay",
            "## Steps",
            "metrics-explorer",
        ] {
            assert!(md.contains(needle), "missing {needle}\n{md}");
        }
    }
}
