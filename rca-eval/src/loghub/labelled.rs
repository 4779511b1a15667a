//! Grouping accuracy of any miner's groups on a labelled stream of lines: three files of the
//! same length, the lines, their true groups and a miner's group per line (one value a line).
//! This scores a miner that is not ours (e.g. Drain3's cluster ids) with the same
//! [`grouping_accuracy`](super::grouping_accuracy) as ours, beside the trivial grouper
//! ([`trivial_keys`]), on inputs far larger than one Loghub system.

use std::path::Path;

use serde::Serialize;

use super::{LoghubError, data_err, grouping_accuracy};

/// The trivial grouper's key for each line: its number of whitespace-separated tokens and its
/// first token (the first two levels of a Drain tree, with no similarity test).
pub fn trivial_keys<'a, I>(lines: I) -> Vec<(usize, &'a str)>
where
    I: IntoIterator<Item = &'a str>,
{
    lines
        .into_iter()
        .map(|c| {
            let mut tokens = c.split_whitespace();
            let first = tokens.next().unwrap_or("");
            (1 + tokens.count(), first)
        })
        .collect()
}

/// One value per line of `path` (a trailing newline ends the last line; `\r\n` is accepted).
pub fn read_values(path: &Path) -> Result<Vec<String>, LoghubError> {
    let text = std::fs::read_to_string(path).map_err(|e| data_err(path, e.to_string()))?;
    Ok(text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect())
}

/// One grouping scored against each truth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupingScore {
    /// Who grouped (e.g. `rca, 1 thread`, `drain3 0.9.11`, `trivial`).
    pub name: String,
    /// Distinct groups it formed.
    pub groups: usize,
    /// Grouping accuracy against each truth, in the table's order of truths.
    pub ga: Vec<f64>,
}

/// One set of true labels of the input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Truth {
    /// Its name (e.g. `original`, `corrected`).
    pub name: String,
    /// Distinct true groups.
    pub groups: usize,
}

/// Scores of several groupings of one labelled input, the trivial grouper last.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupingTable {
    /// Lines scored.
    pub lines: usize,
    /// The truths, in column order.
    pub truths: Vec<Truth>,
    /// One row per grouping, in the order given, then the trivial grouper.
    pub rows: Vec<GroupingScore>,
}

impl GroupingTable {
    /// Scores each `(name, groups)` and the trivial grouper of `lines` against each
    /// `(name, labels)` truth. Every vector must have one value per line: a length that
    /// differs is an error, not a score; at least one truth is required.
    pub fn score(
        lines: &[String],
        truths: &[(String, Vec<String>)],
        groupings: &[(String, Vec<String>)],
    ) -> Result<GroupingTable, LoghubError> {
        let n = lines.len();
        let check = |what: &str, len: usize| {
            if len == n {
                Ok(())
            } else {
                Err(LoghubError::Data {
                    path: what.to_string(),
                    message: format!("{len} values for {n} lines: one value a line is required"),
                })
            }
        };
        if truths.is_empty() {
            return Err(LoghubError::Data {
                path: "the truth".to_string(),
                message: "no true labels given: nothing to score against".to_string(),
            });
        }
        for (name, labels) in truths {
            check(name, labels.len())?;
        }
        let score_all =
            |name: String, groups: usize, ga: &dyn Fn(&[String]) -> f64| GroupingScore {
                name,
                groups,
                ga: truths.iter().map(|(_, t)| ga(t)).collect(),
            };
        let mut rows = Vec::with_capacity(groupings.len() + 1);
        for (name, groups) in groupings {
            check(name, groups.len())?;
            rows.push(score_all(name.clone(), distinct(groups), &|t| {
                grouping_accuracy(groups, t)
            }));
        }
        let keys = trivial_keys(lines.iter().map(String::as_str));
        rows.push(score_all(
            "trivial (token count and first token)".to_string(),
            distinct(&keys),
            &|t| grouping_accuracy(&keys, t),
        ));
        Ok(GroupingTable {
            lines: n,
            truths: truths
                .iter()
                .map(|(name, t)| Truth {
                    name: name.clone(),
                    groups: distinct(t),
                })
                .collect(),
            rows,
        })
    }

    /// A Markdown table: who grouped, groups formed, GA against each truth.
    pub fn markdown(&self) -> String {
        let mut s = format!("| grouping ({} lines) | groups |", self.lines);
        for t in &self.truths {
            s.push_str(&format!(" GA, {} labels ({} groups) |", t.name, t.groups));
        }
        s.push_str("\n|---|---:|");
        s.push_str(&"---:|".repeat(self.truths.len()));
        s.push('\n');
        for r in &self.rows {
            s.push_str(&format!("| {} | {} |", r.name, r.groups));
            for ga in &r.ga {
                s.push_str(&format!(" {ga:.3} |"));
            }
            s.push('\n');
        }
        s
    }
}

fn distinct<T: std::hash::Hash + Eq>(values: &[T]) -> usize {
    values
        .iter()
        .collect::<std::collections::HashSet<_>>()
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_grouping_is_scored_beside_the_trivial_one() {
        let lines = v(&["open a 1", "open b 2", "close a", "open a 3 4"]);
        let truth = v(&["E1", "E1", "E2", "E3"]);
        let perfect = v(&["7", "7", "8", "9"]);
        let merged = v(&["1", "1", "1", "2"]);
        // A coarser truth: open lines are one event whatever their length.
        let coarse = v(&["O", "O", "C", "O"]);
        let t = GroupingTable::score(
            &lines,
            &[("fine".into(), truth), ("coarse".into(), coarse)],
            &[("perfect".into(), perfect), ("merged".into(), merged)],
        )
        .unwrap();
        assert_eq!(t.truths[0].groups, 3);
        assert_eq!(t.truths[1].groups, 2);
        assert_eq!(t.rows[0].ga, vec![1.0, 0.25]);
        assert_eq!(t.rows[1].ga, vec![0.25, 0.0]);
        // Trivial: (3, open) holds E1's two lines only, (2, close) and (4, open) are right.
        assert_eq!(t.rows[2].groups, 3);
        assert_eq!(t.rows[2].ga, vec![1.0, 0.25]);
        let md = t.markdown();
        assert!(md.contains("| merged | 2 | 0.250 | 0.000 |"), "{md}");
        assert!(md.contains("GA, coarse labels (2 groups)"), "{md}");
    }

    #[test]
    fn a_length_that_differs_is_an_error_not_a_score() {
        let lines = v(&["a", "b"]);
        let truth = [("t".to_string(), v(&["x", "y"]))];
        let err = GroupingTable::score(&lines, &truth, &[("short".into(), v(&["1"]))]).unwrap_err();
        assert!(err.to_string().contains("1 values for 2 lines"), "{err}");
        assert!(GroupingTable::score(&lines, &[("t".into(), v(&["x"]))], &[]).is_err());
        assert!(GroupingTable::score(&lines, &[], &[]).is_err());
    }

    #[test]
    fn values_are_read_one_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ids");
        std::fs::write(&p, "1\r\n2\n\n3\n").unwrap();
        assert_eq!(read_values(&p).unwrap(), v(&["1", "2", "", "3"]));
        assert!(read_values(&dir.path().join("missing")).is_err());
    }
}
