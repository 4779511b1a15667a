//! Markdown rendering of a diagnosis.

use std::fmt::Write;

use super::ReportBundle;

/// Text from telemetry or a model, made inert: HTML is shown, never rendered (`&`, `<`, `>`
/// as entities), and a line break cannot start a Markdown block.
fn text(raw: &str) -> String {
    raw.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace(['\r', '\n'], " ")
}

/// [`text`] for a table cell (a `|` cannot end the cell).
fn cell(raw: &str) -> String {
    text(raw).replace('|', "\\|")
}

/// Text for a code span: a backtick cannot close it early.
fn code(raw: &str) -> String {
    raw.replace('`', "'").replace(['\r', '\n'], " ")
}

/// Renders the bundle as Markdown: summary, ranked candidates, evidence chain, and the steps.
pub fn render_markdown(bundle: &ReportBundle) -> String {
    let r = &bundle.report;
    let mut out = String::new();
    let _ = writeln!(out, "# Diagnosis: {}", text(&bundle.incident.title));
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Incident `{}`, detected at {}, window {}.",
        code(&bundle.incident.id),
        bundle.incident.detected_at,
        bundle.incident.window
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "**Root cause.** {}", text(&r.root_cause));
    let _ = writeln!(out);
    let _ = writeln!(out, "**Solution.** {}", text(&r.solution));
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "**Responsibility:** {}. **Confidence:** {:.2}.",
        text(&r.responsibility.to_string()),
        r.confidence
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
            let _ = write!(out, "{}. **{}**", s.index + 1, text(action));
            if !s.thought.is_empty() {
                let _ = write!(out, " — {}", text(&s.thought));
            }
            if let Some(o) = &s.observation {
                let _ = write!(out, " → {}", text(&o.text));
            }
            if let Some(e) = &s.error {
                let _ = write!(out, " (error: {})", text(e));
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
        assert!(md.starts_with("# Diagnosis: checkout latency &amp; errors"));
        for needle in [
            "checkout latency &amp; errors",
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

    #[test]
    fn html_from_telemetry_is_shown_never_rendered() {
        let mut b = bundle();
        b.report.root_cause = "<script>alert(1)</script>\n# not a heading".into();
        b.report.evidence[0].finding = "<img src=x onerror=alert(2)> | cell".into();
        b.incident.id = "a`b".into();
        let md = render_markdown(&b);
        assert!(!md.contains("<script>") && !md.contains("<img"), "{md}");
        assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt; # not a heading"));
        assert!(md.contains("\\| cell"));
        assert!(md.contains("Incident `a'b`"));
    }
}
