//! METEOR with exact and stem matches (Lavie and Agarwal 2007), following NLTK's
//! `meteor_score`: words are lowercased, matched exactly, then by Porter stem; the score is
//! `(1 - gamma * (chunks / matches)^beta) * P * R / (alpha * P + (1 - alpha) * R)`. There is
//! no WordNet synonym stage.

use std::collections::HashMap;

use super::porter::stem;

/// METEOR's parameters (NLTK's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeteorParams {
    /// Weight of precision against recall.
    pub alpha: f64,
    /// Shape of the fragmentation penalty.
    pub beta: f64,
    /// Weight of the fragmentation penalty.
    pub gamma: f64,
}

impl Default for MeteorParams {
    fn default() -> Self {
        MeteorParams {
            alpha: 0.9,
            beta: 3.0,
            gamma: 0.5,
        }
    }
}

/// Lowercased runs of letters and digits.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// METEOR of `hypothesis` against `reference` (both tokenized with [`tokenize`]).
pub fn meteor(reference: &str, hypothesis: &str) -> f64 {
    meteor_tokens(
        &tokenize(reference),
        &tokenize(hypothesis),
        MeteorParams::default(),
    )
}

/// METEOR against several references: the best score.
pub fn meteor_multi(references: &[&str], hypothesis: &str) -> f64 {
    references
        .iter()
        .map(|r| meteor(r, hypothesis))
        .fold(0.0, f64::max)
}

/// METEOR on pre-tokenized text (tokens are lowercased here, as NLTK does).
pub fn meteor_tokens<S: AsRef<str>>(reference: &[S], hypothesis: &[S], p: MeteorParams) -> f64 {
    let hyp: Vec<(usize, String)> = hypothesis
        .iter()
        .map(|t| t.as_ref().to_lowercase())
        .enumerate()
        .collect();
    let reference: Vec<(usize, String)> = reference
        .iter()
        .map(|t| t.as_ref().to_lowercase())
        .enumerate()
        .collect();
    let (hyp_len, ref_len) = (hyp.len(), reference.len());
    let (mut matches, hyp_left, ref_left) = match_enums(hyp, reference);
    let stem_all = |v: Vec<(usize, String)>| -> Vec<(usize, String)> {
        v.into_iter().map(|(i, w)| (i, stem(&w))).collect()
    };
    let (stem_matches, _, _) = match_enums(stem_all(hyp_left), stem_all(ref_left));
    matches.extend(stem_matches);
    matches.sort_by_key(|m| m.0);
    let m = matches.len() as f64;
    if m == 0.0 || hyp_len == 0 || ref_len == 0 {
        return 0.0;
    }
    let precision = m / hyp_len as f64;
    let recall = m / ref_len as f64;
    let fmean = precision * recall / (p.alpha * precision + (1.0 - p.alpha) * recall);
    let frag = chunks(&matches) as f64 / m;
    (1.0 - p.gamma * frag.powf(p.beta)) * fmean
}

type Enum = Vec<(usize, String)>;

/// Matches identical words: each hypothesis word, from the last, takes the latest unused
/// reference position with the same word (NLTK's order). Returns the (hypothesis, reference)
/// index pairs and the unmatched words of each side.
fn match_enums(hyp: Enum, reference: Enum) -> (Vec<(usize, usize)>, Enum, Enum) {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, (_, w)) in reference.iter().enumerate() {
        positions.entry(w.as_str()).or_default().push(j);
    }
    let mut pairs = Vec::new();
    let mut hyp_used = vec![false; hyp.len()];
    let mut ref_used = vec![false; reference.len()];
    for i in (0..hyp.len()).rev() {
        if let Some(j) = positions.get_mut(hyp[i].1.as_str()).and_then(Vec::pop) {
            hyp_used[i] = true;
            ref_used[j] = true;
            pairs.push((hyp[i].0, reference[j].0));
        }
    }
    let hyp_left = hyp
        .into_iter()
        .zip(hyp_used)
        .filter(|(_, u)| !u)
        .map(|(e, _)| e)
        .collect();
    let ref_left = reference
        .into_iter()
        .zip(ref_used)
        .filter(|(_, u)| !u)
        .map(|(e, _)| e)
        .collect();
    (pairs, hyp_left, ref_left)
}

/// The fewest chunks of matches adjacent in both sentences (matches sorted by hypothesis).
fn chunks(matches: &[(usize, usize)]) -> usize {
    1 + matches
        .windows(2)
        .filter(|w| !(w[1].0 == w[0].0 + 1 && w[1].1 == w[0].1 + 1))
        .count()
}
