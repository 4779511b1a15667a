//! Log anomalies per component: error-level bursts, new templates and template frequency
//! shifts against a baseline window.

use std::collections::{BTreeMap, HashMap};

use rca_core::logs::{TemplateId, TemplateMiner};
use rca_core::source::{Level, LogRecord};
use rca_core::{Modality, Timestamp};

use super::effect::ShareChange;
use super::{Finding, Signal, Window, fmt_num};

/// Turns a log message into its template: ids and numbers masked, so lines written by the same
/// statement fall together. A simple default; a template miner can be plugged in instead.
pub fn simple_template(message: &str) -> String {
    let mut out = String::new();
    for token in message.split_whitespace().take(14) {
        if !out.is_empty() {
            out.push(' ');
        }
        if looks_like_id(token) {
            out.push_str("<*>");
            continue;
        }
        // Every run of letters and digits that holds a digit is a value (a number, a hex id
        // fragment, a train or order number): it becomes `#`.
        let mut run = String::new();
        for c in token.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_alphanumeric() {
                run.push(c);
                continue;
            }
            if run.bytes().any(|b| b.is_ascii_digit()) {
                out.push('#');
            } else {
                out.push_str(&run);
            }
            run.clear();
            if c != ' ' {
                out.push(c);
            }
        }
    }
    out
}

/// A log line's statement: its template, followed by where the line was written when the
/// record says so ([`LogRecord::code_location`], OpenTelemetry's `code.*` attributes). Two
/// statements that write the same text (a branch's two sides logging one message) are two
/// events: a change in which of them runs is a change in what the code does.
pub fn statement(record: &LogRecord, template: String) -> String {
    match record.code_location() {
        Some(at) => format!("{template} @{at}"),
        None => template,
    }
}

/// Whether a token is an identifier (a long run of hex digits, dashes and few letters).
fn looks_like_id(token: &str) -> bool {
    let t = token.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if t.len() < 8 {
        return false;
    }
    let hexish = t
        .chars()
        .all(|c| c.is_ascii_hexdigit() || c == '-' || c == '_');
    let digits = t.chars().filter(char::is_ascii_digit).count();
    hexish && digits * 4 >= t.len()
}

/// Compares each component's log lines in the current window with the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct LogAnalyzer {
    /// Report a template shift or burst whose score (the share's effect size, see
    /// [`super::effect::ShareChange::score`]) reaches this.
    pub min_z: f64,
    /// ... and whose change is at least this significant (a one-sided normal quantile).
    pub min_significance: f64,
    /// Least current lines for a new template to count.
    pub min_new: usize,
    /// Lines at or above this level count as errors.
    pub error_level: Level,
}

impl Default for LogAnalyzer {
    fn default() -> Self {
        LogAnalyzer {
            min_z: 2.5,
            min_significance: 2.33,
            min_new: 3,
            error_level: Level::Error,
        }
    }
}

#[derive(Default)]
struct Counts {
    baseline: usize,
    current: usize,
    first_current: Option<Timestamp>,
    error: bool,
}

impl LogAnalyzer {
    /// Findings with the built-in [`simple_template`].
    pub fn analyze(&self, records: &[LogRecord], window: &Window) -> Vec<Finding> {
        self.analyze_with(records, window, &simple_template)
    }

    /// Findings with a caller-supplied templater, strongest first.
    pub fn analyze_with(
        &self,
        records: &[LogRecord],
        window: &Window,
        template: &dyn Fn(&str) -> String,
    ) -> Vec<Finding> {
        let templates: Vec<String> = records
            .iter()
            .map(|r| {
                if window.baseline.contains(r.timestamp) || window.current.contains(r.timestamp) {
                    statement(r, template(&r.message))
                } else {
                    String::new()
                }
            })
            .collect();
        self.analyze_templates(records, window, &templates)
    }

    /// Findings with templates from a template miner: every line of both windows is ingested
    /// in order, then each line takes its template's final text (templates generalise as
    /// lines arrive, so early lines are resolved against the final state).
    pub fn analyze_with_miner(
        &self,
        records: &[LogRecord],
        window: &Window,
        miner: &mut dyn TemplateMiner,
    ) -> Vec<Finding> {
        let ids: Vec<Option<TemplateId>> = records
            .iter()
            .map(|r| {
                (window.baseline.contains(r.timestamp) || window.current.contains(r.timestamp))
                    .then(|| miner.ingest(&r.message).template_id)
            })
            .collect();
        let mut text: HashMap<TemplateId, String> = HashMap::new();
        let templates: Vec<String> = ids
            .iter()
            .zip(records)
            .map(|(id, r)| match id {
                Some(id) => statement(
                    r,
                    text.entry(*id)
                        .or_insert_with(|| {
                            miner
                                .template(*id)
                                .map(|t| t.text)
                                .unwrap_or_else(|| format!("template {id:?}"))
                        })
                        .clone(),
                ),
                None => String::new(),
            })
            .collect();
        self.analyze_templates(records, window, &templates)
    }

    fn analyze_templates(
        &self,
        records: &[LogRecord],
        window: &Window,
        templates: &[String],
    ) -> Vec<Finding> {
        // component -> template -> counts
        let mut by_comp: BTreeMap<&str, HashMap<String, Counts>> = BTreeMap::new();
        let mut totals: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let mut errors: BTreeMap<&str, (usize, usize, Option<Timestamp>)> = BTreeMap::new();
        for (r, tpl) in records.iter().zip(templates) {
            let in_base = window.baseline.contains(r.timestamp);
            let in_cur = window.current.contains(r.timestamp);
            if !in_base && !in_cur {
                continue;
            }
            let is_error = r.level.is_some_and(|l| l >= self.error_level);
            let c = by_comp
                .entry(r.component.as_str())
                .or_default()
                .entry(tpl.clone())
                .or_default();
            c.error |= is_error;
            let t = totals.entry(r.component.as_str()).or_default();
            let e = errors.entry(r.component.as_str()).or_default();
            if in_cur {
                c.current += 1;
                t.1 += 1;
                c.first_current = Some(c.first_current.map_or(r.timestamp, |f| f.min(r.timestamp)));
                if is_error {
                    e.1 += 1;
                    e.2 = Some(e.2.map_or(r.timestamp, |f: Timestamp| f.min(r.timestamp)));
                }
            } else {
                c.baseline += 1;
                t.0 += 1;
                if is_error {
                    e.0 += 1;
                }
            }
        }
        let mut out = Vec::new();
        for (component, (eb, ec, first)) in &errors {
            // The share of error lines among the component's lines, so a change of load does
            // not look like a burst.
            let (na, nb) = totals.get(component).copied().unwrap_or_default();
            let change = ShareChange::new(*eb as f64, na as f64, *ec as f64, nb as f64);
            let z = change.score(self.min_significance);
            if *ec > 0 && z >= self.min_z {
                let expected = *eb as f64 * nb as f64 / (na as f64).max(1.0);
                out.push(Finding {
                    modality: Modality::Logs,
                    observed_at: first.unwrap_or(window.current.start),
                    component: component.to_string(),
                    signal: Signal::ErrorBurst,
                    summary: format!(
                        "{component} wrote {ec} error lines of {nb} in the current window where the \
                         baseline share predicts {} (effect {}, significance z {})",
                        fmt_num(expected),
                        fmt_num(z),
                        fmt_num(change.significance)
                    ),
                    score: z,
                });
            }
        }
        for (component, templates) in &by_comp {
            let (na, nb) = totals.get(component).copied().unwrap_or_default();
            if na == 0 || nb == 0 {
                continue;
            }
            for (tpl, c) in templates {
                let z = ShareChange::new(c.baseline as f64, na as f64, c.current as f64, nb as f64)
                    .score(self.min_significance);
                // Errors matter when they grow; ordinary lines when they vanish (a normal
                // path no longer taken).
                let directed = if c.error { z } else { -z };
                if directed < self.min_z {
                    continue;
                }
                let (signal, summary) = if c.baseline == 0 && c.current >= self.min_new {
                    (
                        Signal::NewTemplate {
                            template: tpl.clone(),
                            error: c.error,
                        },
                        format!(
                            "{component} logs a new {}template {} times: \"{tpl}\"",
                            if c.error { "error " } else { "" },
                            c.current
                        ),
                    )
                } else if c.baseline == 0 {
                    continue;
                } else {
                    (
                        Signal::TemplateShift {
                            template: tpl.clone(),
                            error: c.error,
                        },
                        format!(
                            "{component}: share of \"{tpl}\" went from {}/{na} to {}/{nb} lines \
                             (effect {})",
                            c.baseline,
                            c.current,
                            fmt_num(z)
                        ),
                    )
                };
                out.push(Finding {
                    modality: Modality::Logs,
                    observed_at: c.first_current.unwrap_or(window.current.start),
                    component: component.to_string(),
                    signal,
                    summary,
                    score: directed,
                });
            }
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rca_core::TimeRange;

    fn line(t: i64, c: &str, level: Level, msg: &str) -> LogRecord {
        LogRecord {
            timestamp: Timestamp::from_secs(t),
            component: c.into(),
            level: Some(level),
            message: msg.into(),
            attributes: Default::default(),
        }
    }

    #[test]
    fn templates_mask_ids_and_numbers() {
        assert_eq!(
            simple_template(
                "user 42 logged in from 10.0.0.1 trace 373de7115be9033c8e9c7db5a10e6b13"
            ),
            "user # logged in from #.#.#.# trace <*>"
        );
        assert_eq!(simple_template("Controller#54 ok"), "Controller## ok");
    }

    #[test]
    fn bursts_new_and_dropped_templates() {
        let mut r = Vec::new();
        for t in 0..60 {
            r.push(line(t, "a", Level::Info, &format!("served request {t}")));
            r.push(line(t, "a", Level::Info, "cache lookup done"));
            r.push(line(t, "b", Level::Info, &format!("served request {t}")));
        }
        for t in 60..120 {
            r.push(line(t, "a", Level::Info, &format!("served request {t}")));
            r.push(line(t, "a", Level::Error, "lookup failed: null"));
            r.push(line(t, "b", Level::Info, &format!("served request {t}")));
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(60)),
            TimeRange::new(Timestamp::from_secs(60), Timestamp::from_secs(120)),
        );
        let f = LogAnalyzer::default().analyze(&r, &w);
        assert!(f.iter().all(|x| x.component == "a"), "{f:?}");
        assert!(f.iter().any(|x| x.signal == Signal::ErrorBurst));
        assert!(
            f.iter()
                .any(|x| matches!(&x.signal, Signal::NewTemplate { error: true, .. }))
        );
        assert!(f.iter().any(|x| matches!(
            &x.signal,
            Signal::TemplateShift { template, error: false } if template == "cache lookup done"
        )));
    }

    #[test]
    fn a_template_miner_can_supply_templates() {
        let mut r = Vec::new();
        for t in 0..60 {
            r.push(line(
                t,
                "a",
                Level::Info,
                &format!("request {t} served in {} ms", t % 7),
            ));
            r.push(line(t, "a", Level::Info, "cache lookup done"));
        }
        for t in 60..120 {
            r.push(line(
                t,
                "a",
                Level::Info,
                &format!("request {t} served in {} ms", t % 7),
            ));
        }
        let w = Window::new(
            TimeRange::new(Timestamp(0), Timestamp::from_secs(60)),
            TimeRange::new(Timestamp::from_secs(60), Timestamp::from_secs(120)),
        );
        let mut miner = crate::logs::OnlineMiner::default();
        let f = LogAnalyzer::default().analyze_with_miner(&r, &w, &mut miner);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(matches!(
            &f[0].signal,
            Signal::TemplateShift { template, error: false } if template.contains("cache")
        ));
    }
}
