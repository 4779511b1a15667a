//! Log-parsing metrics over one system's lines.
//!
//! - **GA** (grouping accuracy, Zhu et al. ICSE'19): a line is correct iff the set of lines in
//!   its predicted group equals the set of lines in its true group.
//! - **PA** (parsing accuracy): a line is correct iff its predicted template equals the true
//!   one after both are normalised ([`normalize_template`]).
//! - **FGA** (Loghub-2.0, Jiang et al. ISSTA'24): the F1 of grouping over templates. A
//!   predicted group is correct when its line set equals a true group's; precision is over the
//!   predicted groups, recall over the true ones.
//! - **FTA** (Loghub-2.0): the same F1, where a predicted group counts only when it is correct
//!   *and* its template text equals the true template after normalisation.

use std::collections::HashMap;

use serde::Serialize;

/// Per-line ground truth: each line's group and each group's template text.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    /// The group index of every line.
    pub groups: Vec<u32>,
    /// The template text of every group (indexed by group).
    pub templates: Vec<String>,
}

impl Labels {
    /// Builds labels from one `(group key, template)` pair per line: lines with the same key
    /// share a group, whose template is the first one seen for it.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str)>) -> Labels {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut labels = Labels {
            groups: Vec::new(),
            templates: Vec::new(),
        };
        for (key, template) in rows {
            let next = labels.templates.len() as u32;
            let g = *index.entry(key).or_insert_with(|| {
                labels.templates.push(template.to_string());
                next
            });
            labels.groups.push(g);
        }
        labels
    }

    /// Number of true groups.
    pub fn group_count(&self) -> usize {
        self.templates.len()
    }
}

/// The four figures of one system against one set of labels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LabelScores {
    /// Grouping accuracy.
    pub ga: f64,
    /// Parsing accuracy.
    pub pa: f64,
    /// Template-level F1 of grouping.
    pub fga: f64,
    /// Template-level F1 of template accuracy.
    pub fta: f64,
    /// True templates (groups).
    pub true_templates: usize,
}

/// Scores predicted groups (`predicted[i]` is line *i*'s group id) and their templates
/// (`predicted_template[i]` is line *i*'s template text) against `truth`. Every figure is 0
/// when the lengths differ or there are no lines.
pub fn score(predicted: &[u64], predicted_template: &[String], truth: &Labels) -> LabelScores {
    let n = predicted.len();
    let zero = LabelScores {
        ga: 0.0,
        pa: 0.0,
        fga: 0.0,
        fta: 0.0,
        true_templates: truth.group_count(),
    };
    if n == 0 || n != truth.groups.len() || n != predicted_template.len() {
        return zero;
    }
    let mut true_size = vec![0usize; truth.group_count()];
    for &t in &truth.groups {
        if let Some(s) = true_size.get_mut(t as usize) {
            *s += 1;
        }
    }
    // Per predicted group: size, its first line, and whether all its lines share one label.
    let mut groups: HashMap<u64, (usize, usize, bool)> = HashMap::new();
    for (i, (&p, &t)) in predicted.iter().zip(&truth.groups).enumerate() {
        let g = groups.entry(p).or_insert((0, i, true));
        g.0 += 1;
        if truth.groups.get(g.1) != Some(&t) {
            g.2 = false;
        }
    }
    let normalized_truth: Vec<String> = truth
        .templates
        .iter()
        .map(|t| normalize_template(t))
        .collect();
    let (mut correct_lines, mut correct_groups, mut correct_templates) = (0usize, 0usize, 0usize);
    for &(size, first, pure) in groups.values() {
        let label = truth.groups[first] as usize;
        if !(pure && true_size.get(label) == Some(&size)) {
            continue;
        }
        correct_lines += size;
        correct_groups += 1;
        if normalize_template(&predicted_template[first]) == normalized_truth[label] {
            correct_templates += 1;
        }
    }
    let pa_ok = predicted_template
        .iter()
        .zip(&truth.groups)
        .filter(|(p, t)| normalize_template(p) == normalized_truth[**t as usize])
        .count();
    LabelScores {
        ga: correct_lines as f64 / n as f64,
        pa: pa_ok as f64 / n as f64,
        fga: f1(correct_groups, groups.len(), truth.group_count()),
        fta: f1(correct_templates, groups.len(), truth.group_count()),
        true_templates: truth.group_count(),
    }
}

/// F1 of `correct` items among `predicted` predictions and `actual` true items.
fn f1(correct: usize, predicted: usize, actual: usize) -> f64 {
    if correct == 0 || predicted == 0 || actual == 0 {
        return 0.0;
    }
    let p = correct as f64 / predicted as f64;
    let r = correct as f64 / actual as f64;
    2.0 * p * r / (p + r)
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

/// A template in comparable form: runs of whitespace become one space, and adjacent
/// parameters (`<*><*>`, `<*> <*>`) collapse into one.
pub fn normalize_template(t: &str) -> String {
    let mut s = t.split_whitespace().collect::<Vec<_>>().join(" ");
    while s.contains("<*><*>") {
        s = s.replace("<*><*>", "<*>");
    }
    while s.contains("<*> <*>") {
        s = s.replace("<*> <*>", "<*>");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(keys: &[&str]) -> Labels {
        Labels::from_rows(keys.iter().map(|k| (*k, *k)))
    }

    #[test]
    fn ga_definition() {
        assert_eq!(grouping_accuracy(&[1, 1, 1], &["a", "a", "b"]), 0.0);
        assert_eq!(grouping_accuracy(&[1, 1, 2], &["a", "a", "b"]), 1.0);
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
    fn fga_and_fta_are_template_level() {
        // Truth: {0,1} {2} {3}. Predicted: {0,1} {2,3}: one of two predicted groups is right,
        // one of three true groups is found.
        let truth = labels(&["a", "a", "b", "c"]);
        let tpl = |s: &str| s.to_string();
        let pred_tpl = [tpl("a"), tpl("a"), tpl("b"), tpl("b")];
        let s = score(&[7, 7, 9, 9], &pred_tpl, &truth);
        assert!((s.ga - 0.5).abs() < 1e-12);
        let (p, r) = (0.5, 1.0 / 3.0);
        assert!((s.fga - 2.0 * p * r / (p + r)).abs() < 1e-12);
        // The right group also has the right text.
        assert!((s.fta - s.fga).abs() < 1e-12);
        // Same grouping with a wrong text: FTA drops to 0, FGA does not.
        let wrong = [tpl("x"), tpl("x"), tpl("b"), tpl("b")];
        let s = score(&[7, 7, 9, 9], &wrong, &truth);
        assert_eq!(s.fta, 0.0);
        assert!(s.fga > 0.0);
        // A perfect parse scores 1 everywhere.
        let exact = [tpl("a"), tpl("a"), tpl("b"), tpl("c")];
        let s = score(&[1, 1, 2, 3], &exact, &truth);
        assert_eq!((s.ga, s.pa, s.fga, s.fta), (1.0, 1.0, 1.0, 1.0));
        assert_eq!(s.true_templates, 3);
        // Mismatched lengths score 0 instead of panicking.
        assert_eq!(score(&[1], &exact, &truth).ga, 0.0);
    }

    #[test]
    fn labels_group_by_key_and_keep_the_first_template() {
        let l = Labels::from_rows([("E1", "x <*>"), ("E2", "y"), ("E1", "x <*> again")]);
        assert_eq!(l.groups, vec![0, 1, 0]);
        assert_eq!(l.templates, vec!["x <*>".to_string(), "y".to_string()]);
    }
}
