//! Log-parsing accuracy on folders in the Loghub layout: `<DIR>/<S>/<S>_2k.log` with the
//! ground truth `<S>_2k.log_structured.csv` (columns `EventId`, `EventTemplate`; row *i* is
//! line *i*). The log format of each system comes from a small table file (one
//! `SYSTEM<TAB>PATTERN` per line, `#` comments); nothing here names a system.
//!
//! Grouping accuracy (GA, Zhu et al. ICSE'19): a line is correct iff the set of lines in its
//! predicted group equals the set of lines in its true group. Parsing accuracy (PA): a line
//! is correct iff its predicted template equals the true one after both are normalised (runs
//! of whitespace and of adjacent parameters collapse).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rca_core::logs::{TemplateId, TemplateMiner};
use rca_tools::logs::{DEFAULT_MAX_LINE_BYTES, LogFormat, MinerConfig, mine_parallel, read_lines};
use serde::Serialize;

/// What went wrong evaluating a Loghub folder, sorted by what the caller should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoghubError {
    /// The formats table is malformed: fix the file.
    #[error("formats table line {line}: {message}")]
    Formats {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A system's files are missing or malformed.
    #[error("{path}: {message}")]
    Data {
        /// The offending file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Mining failed.
    #[error("mining failed: {0}")]
    Mining(#[from] rca_tools::logs::LogsError),
}

/// One row of the formats table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemFormat {
    /// The system (the folder name).
    pub system: String,
    /// Its log-format pattern.
    pub pattern: String,
}

/// Reads a formats table: `SYSTEM<TAB>PATTERN` per line; blank lines and `#` comments skipped.
pub fn parse_formats(text: &str) -> Result<Vec<SystemFormat>, LoghubError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((system, pattern)) = line.split_once('\t') else {
            return Err(LoghubError::Formats {
                line: i + 1,
                message: "expected SYSTEM<TAB>PATTERN".into(),
            });
        };
        if system.trim().is_empty() || pattern.is_empty() {
            return Err(LoghubError::Formats {
                line: i + 1,
                message: "empty system name or pattern".into(),
            });
        }
        out.push(SystemFormat {
            system: system.trim().to_string(),
            pattern: pattern.to_string(),
        });
    }
    Ok(out)
}

/// The scores of one system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemScore {
    /// The system.
    pub system: String,
    /// Lines scored.
    pub lines: usize,
    /// Grouping accuracy.
    pub ga: f64,
    /// Parsing accuracy.
    pub pa: f64,
    /// Templates found.
    pub templates: usize,
    /// True templates.
    pub true_templates: usize,
    /// Lines that did not match the log format (kept whole as content).
    pub unmatched: usize,
}

/// The scores of a folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoghubReport {
    /// Per system, in table order.
    pub systems: Vec<SystemScore>,
    /// Systems of the table without data in the folder.
    pub missing: Vec<String>,
}

impl LoghubReport {
    /// Mean GA over the scored systems (0 when none).
    pub fn mean_ga(&self) -> f64 {
        mean(self.systems.iter().map(|s| s.ga))
    }

    /// Mean PA over the scored systems (0 when none).
    pub fn mean_pa(&self) -> f64 {
        mean(self.systems.iter().map(|s| s.pa))
    }

    /// The lowest GA and its system.
    pub fn min_ga(&self) -> Option<(&str, f64)> {
        self.systems
            .iter()
            .map(|s| (s.system.as_str(), s.ga))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// A Markdown table of the scores.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| System | Lines | GA | PA | Templates (found / true) | Unmatched header |\n|---|---|---|---|---|---|\n",
        );
        for s in &self.systems {
            let _ = writeln!(
                out,
                "| {} | {} | {:.3} | {:.3} | {} / {} | {} |",
                s.system, s.lines, s.ga, s.pa, s.templates, s.true_templates, s.unmatched
            );
        }
        let _ = writeln!(
            out,
            "| **mean** | | **{:.3}** | **{:.3}** | | |",
            self.mean_ga(),
            self.mean_pa()
        );
        if !self.missing.is_empty() {
            let _ = writeln!(out, "\nNot scored (no data): {}", self.missing.join(", "));
        }
        out
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Scores every system of `formats` found under `dir` with one miner configuration and
/// `threads` mining threads.
pub fn evaluate(
    dir: &Path,
    formats: &[SystemFormat],
    config: &MinerConfig,
    threads: usize,
) -> Result<LoghubReport, LoghubError> {
    let mut report = LoghubReport {
        systems: Vec::new(),
        missing: Vec::new(),
    };
    for f in formats {
        let log = dir.join(&f.system).join(format!("{}_2k.log", f.system));
        if !log.exists() {
            report.missing.push(f.system.clone());
            continue;
        }
        report.systems.push(evaluate_system(
            &f.system, &log, &f.pattern, config, threads,
        )?);
    }
    Ok(report)
}

/// Scores one log file against the `_structured.csv` next to it.
pub fn evaluate_system(
    system: &str,
    log: &Path,
    pattern: &str,
    config: &MinerConfig,
    threads: usize,
) -> Result<SystemScore, LoghubError> {
    let data_err = |p: &Path, m: String| LoghubError::Data {
        path: p.display().to_string(),
        message: m,
    };
    let bytes = std::fs::read(log).map_err(|e| data_err(log, e.to_string()))?;
    let (lines, _) = read_lines(&bytes, DEFAULT_MAX_LINE_BYTES);
    let format = LogFormat::parse(pattern)?;
    let mut unmatched = 0;
    let contents: Vec<&str> = lines
        .iter()
        .map(|l| match format.parse_line(l) {
            Some(p) => p.content,
            None => {
                unmatched += 1;
                l.trim()
            }
        })
        .collect();
    let truth_path = PathBuf::from(format!("{}_structured.csv", log.display()));
    let truth = read_truth(&truth_path)?;
    if truth.len() != contents.len() {
        return Err(data_err(
            &truth_path,
            format!(
                "{} label rows for {} log lines",
                truth.len(),
                contents.len()
            ),
        ));
    }
    let (miner, ids) = mine_parallel(&contents, config, threads)?;
    let predicted_templates: Vec<String> = ids
        .iter()
        .map(|&id| miner.template(id).map(|t| t.text).unwrap_or_default())
        .collect();
    let true_ids: Vec<&str> = truth.iter().map(|(id, _)| id.as_str()).collect();
    let ga = grouping_accuracy(&ids, &true_ids);
    let pa = parsing_accuracy(
        &predicted_templates,
        &truth.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>(),
    );
    let mut distinct: Vec<&str> = true_ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    Ok(SystemScore {
        system: system.to_string(),
        lines: contents.len(),
        ga,
        pa,
        templates: miner.template_count(),
        true_templates: distinct.len(),
        unmatched,
    })
}

/// `(EventId, EventTemplate)` per row of a structured CSV.
fn read_truth(path: &Path) -> Result<Vec<(String, String)>, LoghubError> {
    let data_err = |m: String| LoghubError::Data {
        path: path.display().to_string(),
        message: m,
    };
    let mut reader = csv::Reader::from_path(path).map_err(|e| data_err(e.to_string()))?;
    let headers = reader
        .headers()
        .map_err(|e| data_err(e.to_string()))?
        .clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| data_err(format!("no `{name}` column")))
    };
    let (id_col, tpl_col) = (col("EventId")?, col("EventTemplate")?);
    let mut out = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| data_err(e.to_string()))?;
        out.push((
            rec.get(id_col).unwrap_or_default().to_string(),
            rec.get(tpl_col).unwrap_or_default().to_string(),
        ));
    }
    Ok(out)
}

/// Grouping accuracy of predicted group ids against true labels (equal lengths; 0 when empty).
pub fn grouping_accuracy<P, T>(predicted: &[P], truth: &[T]) -> f64
where
    P: std::hash::Hash + Eq,
    T: std::hash::Hash + Eq,
{
    if predicted.is_empty() || predicted.len() != truth.len() {
        return 0.0;
    }
    let mut true_size: HashMap<&T, usize> = HashMap::new();
    for t in truth {
        *true_size.entry(t).or_default() += 1;
    }
    // For each predicted group: its size and whether all its lines share one true label.
    let mut groups: HashMap<&P, (usize, Option<&T>, bool)> = HashMap::new();
    for (p, t) in predicted.iter().zip(truth) {
        let g = groups.entry(p).or_insert((0, Some(t), true));
        g.0 += 1;
        if g.1 != Some(t) {
            g.2 = false;
        }
    }
    let correct: usize = groups
        .values()
        .filter(|(size, label, pure)| {
            *pure && label.is_some_and(|l| true_size.get(l) == Some(size))
        })
        .map(|(size, _, _)| size)
        .sum();
    correct as f64 / predicted.len() as f64
}

/// Parsing accuracy: share of lines whose normalised predicted template equals the truth.
pub fn parsing_accuracy(predicted: &[String], truth: &[String]) -> f64 {
    if predicted.is_empty() || predicted.len() != truth.len() {
        return 0.0;
    }
    let ok = predicted
        .iter()
        .zip(truth)
        .filter(|(p, t)| normalize_template(p) == normalize_template(t))
        .count();
    ok as f64 / predicted.len() as f64
}

fn normalize_template(t: &str) -> String {
    let mut s = t.split_whitespace().collect::<Vec<_>>().join(" ");
    while s.contains("<*><*>") {
        s = s.replace("<*><*>", "<*>");
    }
    while s.contains("<*> <*>") {
        s = s.replace("<*> <*>", "<*>");
    }
    s
}

/// The one configuration used for every system.
pub fn default_config() -> MinerConfig {
    MinerConfig::default()
}

/// Convenience for tests and the CLI: the ids of `lines` under a fresh miner, single-threaded.
pub fn mine_ids(lines: &[&str], config: &MinerConfig) -> Vec<TemplateId> {
    let mut m = rca_tools::logs::OnlineMiner::new(config.clone());
    lines.iter().map(|l| m.ingest(l).template_id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ga_definition() {
        // Truth: {0,1} {2} ; predicted {0,1,2} -> all wrong.
        assert_eq!(grouping_accuracy(&[1, 1, 1], &["a", "a", "b"]), 0.0);
        // Predicted {0,1} {2} -> all right.
        assert_eq!(grouping_accuracy(&[1, 1, 2], &["a", "a", "b"]), 1.0);
        // Predicted {0} {1} {2} -> only line 2 right.
        assert!((grouping_accuracy(&[1, 2, 3], &["a", "a", "b"]) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(grouping_accuracy::<u8, u8>(&[], &[]), 0.0);
    }

    #[test]
    fn pa_normalises() {
        let p = vec!["a <*> <*> b".to_string(), "x".to_string()];
        let t = vec!["a  <*> b".to_string(), "y".to_string()];
        assert_eq!(parsing_accuracy(&p, &t), 0.5);
    }

    #[test]
    fn formats_table() {
        let f = parse_formats("# c\n\nA\t<T> <Content>\r\n").unwrap();
        assert_eq!(
            f,
            vec![SystemFormat {
                system: "A".into(),
                pattern: "<T> <Content>".into()
            }]
        );
        assert!(matches!(
            parse_formats("A <Content>"),
            Err(LoghubError::Formats { line: 1, .. })
        ));
    }
}
