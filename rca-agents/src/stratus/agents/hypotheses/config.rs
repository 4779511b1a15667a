//! Config keys of mounted maps that the process's logs mention, with values seen elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::shapes::{is_number, patch, quoted_tokens, tokens};
use super::{Builder, Family};
use crate::stratus::agents::diagnosis::{FaultKind, str_of};

impl Builder<'_> {
    /// Keys of a deployment's config maps that its logs mention, with values seen for the
    /// same key in other config maps or stated as numbers on the same line; keys its crash
    /// logs name that no mounted map holds, with the same sources of values.
    pub(super) fn config(&mut self) {
        let o = self.o;
        for d in &o.deployments {
            let dep = str_of(d, "name");
            let component = format!("deployment/{dep}");
            if self.relevance(&component) > 2 {
                continue;
            }
            let Some(lines) = o.logs.get(dep) else {
                continue;
            };
            let maps = o.mounted_maps(d);
            let mut held: BTreeMap<String, (String, String)> = BTreeMap::new();
            for m in &maps {
                if let Some(data) = o
                    .config_map(m)
                    .and_then(|c| c.get("data"))
                    .and_then(Value::as_object)
                {
                    for (k, v) in data {
                        held.entry(k.clone())
                            .or_insert((m.clone(), v.as_str().unwrap_or("").to_string()));
                    }
                }
            }
            let elsewhere = |key: &str, not: &str| -> Vec<String> {
                o.config_maps
                    .iter()
                    .filter_map(|c| c.pointer(&format!("/data/{key}")).and_then(Value::as_str))
                    .filter(|v| *v != not)
                    .map(str::to_string)
                    .collect()
            };
            let crashing = o
                .pods_of(dep)
                .iter()
                .any(|p| str_of(p, "reason") == "CrashLoopBackOff");
            let mut proposed = BTreeSet::new();
            for line in lines {
                let toks = tokens(line);
                for t in &toks {
                    let (map, current, missing) = match held.get(*t) {
                        Some((m, v)) => (m.clone(), v.clone(), false),
                        None if crashing && key_shaped(line, t) => match maps.first() {
                            Some(m) => (m.clone(), String::new(), true),
                            None => continue,
                        },
                        None => continue,
                    };
                    let values = value_candidates(t, &current, &toks, elsewhere(t, &current));
                    for v in values {
                        if !proposed.insert((t.to_string(), v.clone())) {
                            continue;
                        }
                        let Some(fix) = patch("configmap", &map, &json!({"data": {*t: v}})) else {
                            continue;
                        };
                        let (fault, what) = if missing {
                            (FaultKind::MissingConfigKey, "names key")
                        } else {
                            (FaultKind::InvalidConfigValue, "mentions key")
                        };
                        self.push(
                            Family::Config,
                            fault,
                            component.clone(),
                            format!("the log of {dep} {what} `{t}` (config map {map}); candidate value {v}"),
                            vec![fix],
                        );
                    }
                }
            }
        }
    }
}

/// Whether a token of a crash line may name a config key: set apart in quotes, or shaped as
/// keys are written (`snake_case`, `dotted.name`), and not a number.
fn key_shaped(line: &str, t: &str) -> bool {
    !is_number(t)
        && (quoted_tokens(line).contains(&t)
            || (t.contains('_') || t.contains('.')) && t.chars().any(|c| c.is_ascii_alphabetic()))
}

/// Most values tried for one key.
const MAX_VALUES_PER_KEY: usize = 6;

/// Values to try for `key`, most likely first: the values the same key has elsewhere; the
/// current value with what cannot belong to a plain value taken out (symbols, case, a
/// percent as a fraction, a sign); the numbers its log line states; then the line's other
/// words, closest to the current value first.
fn value_candidates(
    key: &str,
    current: &str,
    line: &[&str],
    elsewhere: Vec<String>,
) -> Vec<String> {
    let mut out: Vec<String> = elsewhere;
    if !current.is_empty() {
        let plain: String = current
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        out.push(plain.clone());
        out.push(plain.to_ascii_lowercase());
        if let Some(pct) = current.strip_suffix('%')
            && let Ok(v) = pct.trim().parse::<f64>()
        {
            out.push(format!("{}", v / 100.0));
        }
        if let Some(abs) = current.strip_prefix('-')
            && is_number(abs)
        {
            out.push(abs.to_string());
        }
    }
    out.extend(line.iter().filter(|t| is_number(t)).map(|t| t.to_string()));
    let lower = current.to_ascii_lowercase();
    let mut words: Vec<&str> = line
        .iter()
        .copied()
        .filter(|t| t.len() >= 2 && *t != key && !is_number(t) && !key_shaped("", t))
        .collect();
    words.sort_by_key(|w| super::shapes::edit_distance(&w.to_ascii_lowercase(), &lower));
    out.extend(words.into_iter().map(str::to_string));
    let mut seen = BTreeSet::new();
    out.retain(|v| !v.is_empty() && v != current && seen.insert(v.clone()));
    out.truncate(MAX_VALUES_PER_KEY);
    out
}
