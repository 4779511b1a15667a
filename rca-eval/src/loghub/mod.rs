//! Log-parsing accuracy on folders in the Loghub layout: `<DIR>/<S>/<S>_2k.log` with the
//! ground truth `<S>_2k.log_structured.csv` (columns `EventId`, `EventTemplate`; row *i* is
//! line *i*). The log format of each system comes from a small table file (one
//! `SYSTEM<TAB>PATTERN` per line, `#` comments); nothing here names a system.
//!
//! Each system is scored against its original labels (grouped by `EventId`) and, when the
//! folder ships them, the corrected labels of Khan et al. (`<S>_2k.log_structured_corrected.csv`,
//! grouped by `EventTemplate`), with GA, PA, FGA and FTA ([`metrics`]). [`crossval`] chooses
//! the miner's data-driven parameters on all systems but one and scores the one left out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rca_core::logs::{TemplateId, TemplateMiner};

pub mod crossval;
pub mod grammar;
pub mod labelled;
pub mod metrics;

pub use metrics::{LabelScores, Labels, grouping_accuracy, normalize_template, parsing_accuracy};
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

/// One system's lines and labels, loaded once and scored under any configuration.
#[derive(Debug, Clone)]
pub struct SystemData {
    /// The system (the folder name).
    pub system: String,
    /// The message body of every line (the whole trimmed line when the format does not match).
    pub contents: Vec<String>,
    /// Lines that did not match the log format.
    pub unmatched: usize,
    /// The original labels (`EventId` groups).
    pub original: Labels,
    /// The corrected labels (`EventTemplate` groups), when the folder has them.
    pub corrected: Option<Labels>,
}

impl SystemData {
    /// Reads `log`, splits each line with `pattern`, and reads the labels next to it
    /// (`<log>_structured.csv`, and `<log>_structured_corrected.csv` when present).
    pub fn load(system: &str, log: &Path, pattern: &str) -> Result<SystemData, LoghubError> {
        let bytes = std::fs::read(log).map_err(|e| data_err(log, e.to_string()))?;
        let (lines, _) = read_lines(&bytes, DEFAULT_MAX_LINE_BYTES);
        let format = LogFormat::parse(pattern)?;
        let mut unmatched = 0;
        let contents: Vec<String> = lines
            .iter()
            .map(|l| match format.parse_line(l) {
                Some(p) => p.content.to_string(),
                None => {
                    unmatched += 1;
                    l.trim().to_string()
                }
            })
            .collect();
        let truth_path = PathBuf::from(format!("{}_structured.csv", log.display()));
        let original = read_labels(&truth_path, "EventId", contents.len())?;
        let corrected_path = PathBuf::from(format!("{}_structured_corrected.csv", log.display()));
        let corrected = if corrected_path.exists() {
            Some(read_labels(
                &corrected_path,
                "EventTemplate",
                contents.len(),
            )?)
        } else {
            None
        };
        Ok(SystemData {
            system: system.to_string(),
            contents,
            unmatched,
            original,
            corrected,
        })
    }

    /// Mines the lines with `config` on `threads` threads and scores them.
    pub fn score(&self, config: &MinerConfig, threads: usize) -> Result<SystemScore, LoghubError> {
        let lines: Vec<&str> = self.contents.iter().map(String::as_str).collect();
        let (miner, ids) = mine_parallel(&lines, config, threads)?;
        let mut texts: HashMap<TemplateId, String> = HashMap::new();
        let predicted_templates: Vec<String> = ids
            .iter()
            .map(|&id| {
                texts
                    .entry(id)
                    .or_insert_with(|| miner.template(id).map(|t| t.text).unwrap_or_default())
                    .clone()
            })
            .collect();
        Ok(SystemScore {
            system: self.system.clone(),
            lines: lines.len(),
            templates: miner.template_count(),
            unmatched: self.unmatched,
            original: metrics::score(&ids, &predicted_templates, &self.original),
            corrected: self
                .corrected
                .as_ref()
                .map(|c| metrics::score(&ids, &predicted_templates, c)),
        })
    }
}

/// The grouping accuracy of a trivial grouper on one system: lines go together when they
/// have the same number of whitespace-separated tokens and the same first token (the first
/// two levels of a Drain tree, with no similarity test). The floor a miner must beat.
pub fn trivial_grouping_ga(system: &SystemData) -> f64 {
    let keys = labelled::trivial_keys(system.contents.iter().map(String::as_str));
    metrics::grouping_accuracy(&keys, &system.original.groups)
}

/// `config` with the join across token counts and the anchor groups of issue 48 turned off:
/// what the miner does without them, scored beside the full configuration.
pub fn without_join(config: &MinerConfig) -> MinerConfig {
    MinerConfig {
        join_anchors: 0,
        anchor_groups: false,
        ..config.clone()
    }
}

fn data_err(p: &Path, m: String) -> LoghubError {
    LoghubError::Data {
        path: p.display().to_string(),
        message: m,
    }
}

/// Loads every system of `formats` found under `dir`; returns the loaded systems and the
/// names of those without data.
pub fn load_folder(
    dir: &Path,
    formats: &[SystemFormat],
) -> Result<(Vec<SystemData>, Vec<String>), LoghubError> {
    let mut systems = Vec::new();
    let mut missing = Vec::new();
    for f in formats {
        let log = dir.join(&f.system).join(format!("{}_2k.log", f.system));
        if !log.exists() {
            missing.push(f.system.clone());
            continue;
        }
        systems.push(SystemData::load(&f.system, &log, &f.pattern)?);
    }
    Ok((systems, missing))
}

/// The scores of one system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemScore {
    /// The system.
    pub system: String,
    /// Lines scored.
    pub lines: usize,
    /// Templates found.
    pub templates: usize,
    /// Lines that did not match the log format (kept whole as content).
    pub unmatched: usize,
    /// Against the original labels.
    pub original: LabelScores,
    /// Against the corrected labels, when the folder has them.
    pub corrected: Option<LabelScores>,
}

/// The scores of a folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoghubReport {
    /// Per system, in table order.
    pub systems: Vec<SystemScore>,
    /// Systems of the table without data in the folder.
    pub missing: Vec<String>,
    /// Means over the systems, original labels.
    pub mean_original: LabelScores,
    /// Means over the systems that have corrected labels.
    pub mean_corrected: Option<LabelScores>,
}

impl LoghubReport {
    /// A report over `systems`, with the means filled in.
    pub fn new(systems: Vec<SystemScore>, missing: Vec<String>) -> LoghubReport {
        let mean_original = mean_scores(systems.iter().map(|s| &s.original));
        let corrected: Vec<&LabelScores> = systems
            .iter()
            .filter_map(|s| s.corrected.as_ref())
            .collect();
        let mean_corrected = (!corrected.is_empty()).then(|| mean_scores(corrected.into_iter()));
        LoghubReport {
            systems,
            missing,
            mean_original,
            mean_corrected,
        }
    }

    /// The report over the systems named in `names` only (in this report's order).
    pub fn subset(&self, names: &[String]) -> LoghubReport {
        LoghubReport::new(
            self.systems
                .iter()
                .filter(|s| names.contains(&s.system))
                .cloned()
                .collect(),
            Vec::new(),
        )
    }

    /// Mean GA over the scored systems, original labels (0 when none).
    pub fn mean_ga(&self) -> f64 {
        self.mean_original.ga
    }

    /// Mean PA over the scored systems, original labels (0 when none).
    pub fn mean_pa(&self) -> f64 {
        self.mean_original.pa
    }

    /// The lowest GA (original labels) and its system.
    pub fn min_ga(&self) -> Option<(&str, f64)> {
        self.systems
            .iter()
            .map(|s| (s.system.as_str(), s.original.ga))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// A Markdown table of the scores: GA, PA, FGA, FTA against the original labels, then
    /// against the corrected ones.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| System | Lines | Templates (found / true) | GA | PA | FGA | FTA | GA (corr.) | PA (corr.) | FGA (corr.) | FTA (corr.) | Unmatched header |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for s in &self.systems {
            let _ = writeln!(
                out,
                "| {} | {} | {} / {} | {} | {} |",
                s.system,
                s.lines,
                s.templates,
                s.original.true_templates,
                score_cells(&s.original, s.corrected.as_ref()),
                s.unmatched
            );
        }
        let _ = writeln!(
            out,
            "| **mean** | | | {} | |",
            score_cells(&self.mean_original, self.mean_corrected.as_ref())
        );
        if !self.missing.is_empty() {
            let _ = writeln!(out, "\nNot scored (no data): {}", self.missing.join(", "));
        }
        out
    }
}

fn score_cells(o: &LabelScores, c: Option<&LabelScores>) -> String {
    let four = |s: &LabelScores| format!("{:.3} | {:.3} | {:.3} | {:.3}", s.ga, s.pa, s.fga, s.fta);
    format!(
        "{} | {}",
        four(o),
        c.map_or_else(|| "- | - | - | -".to_string(), four)
    )
}

fn mean_scores<'a>(xs: impl Iterator<Item = &'a LabelScores>) -> LabelScores {
    let mut m = LabelScores {
        ga: 0.0,
        pa: 0.0,
        fga: 0.0,
        fta: 0.0,
        true_templates: 0,
    };
    let mut n = 0usize;
    for s in xs {
        m.ga += s.ga;
        m.pa += s.pa;
        m.fga += s.fga;
        m.fta += s.fta;
        m.true_templates += s.true_templates;
        n += 1;
    }
    if n > 0 {
        let k = n as f64;
        m.ga /= k;
        m.pa /= k;
        m.fga /= k;
        m.fta /= k;
    }
    m
}

/// Scores every system of `formats` found under `dir` with one miner configuration and
/// `threads` mining threads.
pub fn evaluate(
    dir: &Path,
    formats: &[SystemFormat],
    config: &MinerConfig,
    threads: usize,
) -> Result<LoghubReport, LoghubError> {
    let (systems, missing) = load_folder(dir, formats)?;
    let scores = systems
        .iter()
        .map(|s| s.score(config, threads))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LoghubReport::new(scores, missing))
}

/// Per-row labels of a structured CSV: rows grouped by the `key` column, with their
/// `EventTemplate`; there must be `expected` rows.
fn read_labels(path: &Path, key: &str, expected: usize) -> Result<Labels, LoghubError> {
    let err = |m: String| data_err(path, m);
    let mut reader = csv::Reader::from_path(path).map_err(|e| err(e.to_string()))?;
    let headers = reader.headers().map_err(|e| err(e.to_string()))?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| err(format!("no `{name}` column")))
    };
    let (key_col, tpl_col) = (col(key)?, col("EventTemplate")?);
    let mut rows: Vec<(String, String)> = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| err(e.to_string()))?;
        rows.push((
            rec.get(key_col).unwrap_or_default().to_string(),
            rec.get(tpl_col).unwrap_or_default().to_string(),
        ));
    }
    if rows.len() != expected {
        return Err(err(format!(
            "{} label rows for {} log lines",
            rows.len(),
            expected
        )));
    }
    Ok(Labels::from_rows(
        rows.iter().map(|(k, t)| (k.as_str(), t.as_str())),
    ))
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

    #[test]
    fn the_trivial_grouper_keys_on_token_count_and_first_token() {
        let contents = ["open a", "open b", "open a b", "close a", "open c"];
        let system = |labels: &[&str]| SystemData {
            system: "S".into(),
            contents: contents.iter().map(|c| c.to_string()).collect(),
            unmatched: 0,
            original: Labels::from_rows(labels.iter().map(|l| (*l, *l))),
            corrected: None,
        };
        // Lines of one event with one token count and the same first word: all right.
        let same = system(&["E1", "E1", "E2", "E3", "E1"]);
        assert_eq!(trivial_grouping_ga(&same), 1.0);
        // One event written with two token counts: split, so those three lines are wrong.
        let across = system(&["E1", "E1", "E1", "E3", "E1"]);
        assert!((trivial_grouping_ga(&across) - 0.2).abs() < 1e-12);
        let config = without_join(&MinerConfig::default());
        assert_eq!((config.join_anchors, config.anchor_groups), (0, false));
        assert_eq!(
            config.variable_threshold,
            MinerConfig::default().variable_threshold
        );
    }
}
