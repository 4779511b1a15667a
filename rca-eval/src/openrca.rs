//! The OpenRCA scorer, implemented from the benchmark's rules: which points a task scores,
//! how predictions are read from the answer text, and how they are matched to the faults.

use std::collections::BTreeSet;

use rca_core::Timestamp;
use serde::{Deserialize, Serialize};

/// What went wrong scoring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenRcaError {
    /// The task id is not `task_1` .. `task_7`.
    #[error("unknown task `{0}` (expected task_1 .. task_7)")]
    UnknownTask(String),
    /// The ground truth names no component, reason or datetime needed by the task.
    #[error("ground truth lacks `{0}`")]
    MissingTruth(&'static str),
}

/// Which scoring points a task has per fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The occurrence time is scored.
    pub time: bool,
    /// The component is scored.
    pub component: bool,
    /// The reason is scored.
    pub reason: bool,
}

impl Task {
    /// The task of an id `task_1` .. `task_7`: 1 time; 2 reason; 3 component; 4 time and
    /// reason; 5 time and component; 6 component and reason; 7 all three.
    pub fn from_id(id: &str) -> Result<Task, OpenRcaError> {
        let (time, component, reason) = match id.trim() {
            "task_1" => (true, false, false),
            "task_2" => (false, false, true),
            "task_3" => (false, true, false),
            "task_4" => (true, false, true),
            "task_5" => (true, true, false),
            "task_6" => (false, true, true),
            "task_7" => (true, true, true),
            other => return Err(OpenRcaError::UnknownTask(other.to_string())),
        };
        Ok(Task {
            time,
            component,
            reason,
        })
    }

    /// Points per fault.
    pub fn points(&self) -> usize {
        usize::from(self.time) + usize::from(self.component) + usize::from(self.reason)
    }
}

/// One predicted root cause (fields absent from the answer are empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Predicted {
    /// `root cause occurrence datetime`.
    pub datetime: String,
    /// `root cause component`.
    pub component: String,
    /// `root cause reason`.
    pub reason: String,
}

/// One true root cause.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truth {
    /// `datetime` (`%Y-%m-%d %H:%M:%S`).
    pub datetime: String,
    /// `component`.
    pub component: String,
    /// `reason`.
    pub reason: String,
}

impl Truth {
    /// Reads `key: value` lines (keys in any order; unknown keys ignored).
    pub fn parse(text: &str) -> Truth {
        let mut t = Truth::default();
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                let v = v.trim().to_string();
                match k.trim() {
                    "datetime" => t.datetime = v,
                    "component" => t.component = v,
                    "reason" => t.reason = v,
                    _ => {}
                }
            }
        }
        t
    }
}

const KEYS: [&str; 3] = [
    "\"root cause occurrence datetime\":",
    "\"root cause component\":",
    "\"root cause reason\":",
];

fn skip_ws(s: &[u8], mut p: usize) -> usize {
    while p < s.len() && matches!(s[p], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        p += 1;
    }
    p
}

/// Matches the rest of the pattern from group `g` at `p`: each group is optional
/// (`"key":\s*"(value)"`, the value lazy and without line breaks), groups 0 and 1 are followed
/// by `,?\s*`, the last by `\s*}`. Returns the captured values and the end.
fn match_groups(s: &[u8], p: usize, g: usize, caps: &mut [String; 3]) -> Option<usize> {
    if g == 3 {
        return (s.get(p) == Some(&b'}')).then_some(p + 1);
    }
    let after_group = |q: usize, caps: &mut [String; 3]| -> Option<usize> {
        if g == 2 {
            let r = skip_ws(s, q);
            return match_groups(s, r, 3, caps);
        }
        // `,?` greedy, then `\s*`.
        if s.get(q) == Some(&b',')
            && let Some(end) = match_groups(s, skip_ws(s, q + 1), g + 1, caps)
        {
            return Some(end);
        }
        match_groups(s, skip_ws(s, q), g + 1, caps)
    };
    // Try the group present first (regex `?` is greedy).
    let key = KEYS[g].as_bytes();
    if s.len() >= p + key.len() && &s[p..p + key.len()] == key {
        let q = skip_ws(s, p + key.len());
        if s.get(q) == Some(&b'"') {
            let start = q + 1;
            let mut e = start;
            while e < s.len() && s[e] != b'\n' {
                if s[e] == b'"' {
                    let saved = caps[g].clone();
                    caps[g] = String::from_utf8_lossy(&s[start..e]).into_owned();
                    if let Some(end) = after_group(e + 1, caps) {
                        return Some(end);
                    }
                    caps[g] = saved;
                }
                e += 1;
            }
        }
    }
    caps[g].clear();
    after_group(p, caps)
}

/// Reads the predictions from an answer: every `{...}` holding the keys `root cause
/// occurrence datetime`, `root cause component`, `root cause reason` in that order, each
/// optional (scanning left to right without overlaps, as a regular-expression search would).
pub fn parse_prediction(text: &str) -> Vec<Predicted> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'{' {
            let mut caps: [String; 3] = Default::default();
            if let Some(end) = match_groups(s, skip_ws(s, i + 1), 0, &mut caps) {
                let [datetime, component, reason] = caps;
                out.push(Predicted {
                    datetime,
                    component,
                    reason,
                });
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Parses `%Y-%m-%d %H:%M:%S` (fields of one or two digits, as `strptime` accepts).
fn parse_datetime(text: &str) -> Option<Timestamp> {
    let (date, time) = text.split_once(' ')?;
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.split(':').collect();
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    let ok = |x: &str, max: usize| {
        !x.is_empty() && x.len() <= max && x.bytes().all(|b| b.is_ascii_digit())
    };
    if !ok(d[0], 4) || !ok(d[1], 2) || !ok(d[2], 2) || !ok(t[0], 2) || !ok(t[1], 2) || !ok(t[2], 2)
    {
        return None;
    }
    Timestamp::from_civil(
        d[0].parse().ok()?,
        d[1].parse().ok()?,
        d[2].parse().ok()?,
        t[0].parse().ok()?,
        t[1].parse().ok()?,
        t[2].parse().ok()?,
        0,
    )
    .filter(|_| t[2].parse::<u32>().is_ok_and(|s| s <= 59))
}

fn within_a_minute(truth: &str, predicted: &str) -> bool {
    match (parse_datetime(truth), parse_datetime(predicted)) {
        (Some(a), Some(b)) => (a.millis() - b.millis()).abs() <= 60_000,
        _ => false,
    }
}

/// A scored answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Scoring points met.
    pub passed: Vec<String>,
    /// Scoring points missed.
    pub failed: Vec<String>,
    /// Met points / all points.
    pub score: f64,
}

/// Scores an answer against the true faults of a task: 0 when the number of predictions
/// differs from the number of faults; otherwise the best assignment of predictions to faults
/// (every permutation) by count of met points. A time is met within 60 s; component and
/// reason must be equal strings.
pub fn score(prediction: &str, truths: &[Truth], task: Task) -> Score {
    let preds = parse_prediction(prediction);
    let mut points: Vec<String> = Vec::new();
    for t in truths {
        if task.component {
            points.push(t.component.clone());
        }
        if task.reason {
            points.push(t.reason.clone());
        }
        if task.time {
            points.push(t.datetime.clone());
        }
    }
    let all: BTreeSet<String> = points.iter().cloned().collect();
    let total = points.len();
    let mut best: Option<(usize, Vec<String>)> = None;
    if !truths.is_empty() && preds.len() == truths.len() {
        let mut order: Vec<usize> = (0..preds.len()).collect();
        loop {
            let mut met = 0;
            let mut passing = Vec::new();
            for (t, &pi) in truths.iter().zip(&order) {
                let p = &preds[pi];
                if task.component && p.component == t.component {
                    met += 1;
                    passing.push(t.component.clone());
                }
                if task.reason && p.reason == t.reason {
                    met += 1;
                    passing.push(t.reason.clone());
                }
                if task.time && within_a_minute(&t.datetime, &p.datetime) {
                    met += 1;
                    passing.push(t.datetime.clone());
                }
            }
            if best.as_ref().is_none_or(|(b, _)| met > *b) {
                best = Some((met, passing));
            }
            if !next_permutation(&mut order) {
                break;
            }
        }
    }
    let (met, passed) = best.unwrap_or((0, Vec::new()));
    let passed_set: BTreeSet<&String> = passed.iter().collect();
    let failed = all
        .iter()
        .filter(|p| !passed_set.contains(p))
        .cloned()
        .collect();
    Score {
        passed,
        failed,
        score: if total == 0 {
            0.0
        } else {
            met as f64 / total as f64
        },
    }
}

/// Advances to the next lexicographic permutation; false after the last.
fn next_permutation(v: &mut [usize]) -> bool {
    if v.len() < 2 {
        return false;
    }
    let mut i = v.len() - 1;
    while i > 0 && v[i - 1] >= v[i] {
        i -= 1;
    }
    if i == 0 {
        return false;
    }
    let mut j = v.len() - 1;
    while v[j] <= v[i - 1] {
        j -= 1;
    }
    v.swap(i - 1, j);
    v[i..].reverse();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_predictions_in_key_order() {
        let text = r#"{
            "1": {
                "root cause occurrence datetime": "2021-03-04 14:20:00",
                "root cause component": "db-1",
                "root cause reason": "high memory usage"
            },
            "2": {"root cause component": "web", "root cause reason": "cpu"}
        }"#;
        let p = parse_prediction(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].datetime, "2021-03-04 14:20:00");
        assert_eq!(p[1].component, "web");
        assert_eq!(p[1].datetime, "");
        // Keys out of order are not read as such: the lazy reason runs on to the last quote
        // before the closing brace, as the regular expression does.
        let odd = parse_prediction(r#"{"root cause reason": "a", "root cause component": "b"}"#);
        assert_eq!(odd.len(), 1);
        assert_eq!(odd[0].component, "");
        assert_eq!(odd[0].reason, r#"a", "root cause component": "b"#);
    }

    #[test]
    fn scores_points_and_permutations() {
        let t1 =
            Truth::parse("component: a\nreason: r1\ndatetime: 2021-03-04 14:57:00\nlevel: pod");
        let t2 = Truth::parse("datetime: 2021-03-04 15:00:00\ncomponent: b\nreason: r2");
        let task7 = Task::from_id("task_7").unwrap();
        let one = r#"{"root cause occurrence datetime": "2021-03-04 14:57:59", "root cause component": "a", "root cause reason": "x"}"#;
        let s = score(one, std::slice::from_ref(&t1), task7);
        assert!((s.score - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.failed, ["r1"]);
        let two = r#"{"root cause component": "b", "root cause reason": "r2"} {"root cause component": "a", "root cause reason": "r1"}"#;
        let s = score(
            two,
            &[t1.clone(), t2.clone()],
            Task::from_id("task_6").unwrap(),
        );
        assert_eq!(s.score, 1.0);
        let s = score(
            two,
            std::slice::from_ref(&t1),
            Task::from_id("task_6").unwrap(),
        );
        assert_eq!(s.score, 0.0);
        assert_eq!(s.failed.len(), 2);
        assert!(Task::from_id("task_9").is_err());
        assert!(!within_a_minute(
            "2021-03-04 14:57:00",
            "2021-03-04 14:58:01"
        ));
        assert!(!within_a_minute("2021-03-04 14:57:00", "soon"));
    }
}
