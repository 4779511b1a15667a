//! The constant skeleton of a template, and the text of templates joined across token counts.
//!
//! One event can be written with different numbers of tokens when a parameter's value spans
//! a varying number of them: a host with or without a port, a chain of hops joined by `->`,
//! a list of items, a size with an optional converted unit, a flag written next to a name in
//! some lines only. The tokens that stay the same are the event's constant words, in order;
//! everything else is what its parameters absorbed. The *skeleton* of a template is that
//! sequence of constant words:
//!
//! - parameters (`<*>`) are left out, however many tokens they span;
//! - list separators (`->`, `|`, `,`, `+`, ...) are left out: they join the items of a list,
//!   and a longer list has more of them;
//! - a constant equal to the previous skeleton word with a parameter between them is left
//!   out: it is an item marker of a list (`<*> ok <*> ok <*> ok`), and a longer list repeats
//!   it more often.
//!
//! Punctuation tokens (`-`, `->`, `****`) stay in the skeleton: a marker written in some
//! lines of a list and not in others is a constant of its own event.
//!
//! Two templates with the same skeleton have the same constant words in the same order: they
//! differ only in how many tokens their parameters took. The miner joins them (see
//! `miner.rs`); a template that differs in one constant word has another skeleton and stays
//! apart unless the family rule finds that word varying.

use std::hash::Hasher;

use rustc_hash::FxHasher;

use super::mask::{WILDCARD, WILDCARD_HASH, is_separator_hash};

/// A template's constant words in order, and where each sits in the template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Skeleton {
    /// The hashes of the constant words.
    pub words: Vec<u64>,
    /// The token position of each word.
    pub at: Vec<u32>,
}

/// The skeleton of a template given its token hashes.
pub(crate) fn skeleton(hashes: &[u64]) -> Skeleton {
    let mut out = Skeleton::default();
    let mut param_since_last = false;
    for (j, &h) in hashes.iter().enumerate() {
        if h == WILDCARD_HASH {
            param_since_last = true;
            continue;
        }
        if is_separator_hash(h) {
            continue;
        }
        if param_since_last && out.words.last() == Some(&h) {
            param_since_last = false;
            continue;
        }
        out.words.push(h);
        out.at.push(j as u32);
        param_since_last = false;
    }
    out
}

/// The hash of a whole skeleton.
pub(crate) fn skeleton_key(words: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    h.write_u8(0x5c);
    h.write_usize(words.len());
    for &w in words {
        h.write_u64(w);
    }
    h.finish()
}

/// The hash of a skeleton with the run of words `i..j` (possibly empty) left open: the key
/// of its run family. Skeletons with one key differ only in that run, whatever its length.
pub(crate) fn run_key(words: &[u64], i: usize, j: usize) -> u64 {
    let mut h = FxHasher::default();
    h.write_u8(0x5f);
    h.write_usize(i);
    h.write_usize(words.len() - (j - i));
    for (k, &w) in words.iter().enumerate() {
        if k < i || k >= j {
            h.write_u64(w);
        }
    }
    h.finish()
}

/// The hash of the words of a run (the empty run has its own).
pub(crate) fn run_content(words: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    h.write_u8(0x7c);
    h.write_usize(words.len());
    for &w in words {
        h.write_u64(w);
    }
    h.finish()
}

/// The text of two templates joined: their longest common subsequence of constant tokens,
/// and between two matched constants the tokens both have there when they agree, else one
/// `<*>`. Deterministic (ties prefer skipping a token of `a`).
pub(crate) fn merge_text(a: &[String], b: &[String]) -> Vec<String> {
    let (n, m) = (a.len(), b.len());
    let same = |i: usize, j: usize| a[i] == b[j] && a[i] != WILDCARD;
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if same(i, j) {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut gap_a, mut gap_b) = (0..0, 0..0);
    let flush =
        |out: &mut Vec<String>, ga: &std::ops::Range<usize>, gb: &std::ops::Range<usize>| {
            if a[ga.clone()] == b[gb.clone()] {
                out.extend(a[ga.clone()].iter().cloned());
            } else {
                out.push(WILDCARD.to_string());
            }
        };
    while i < n || j < m {
        if i < n && j < m && same(i, j) && lcs[at(i, j)] == lcs[at(i + 1, j + 1)] + 1 {
            flush(&mut out, &gap_a, &gap_b);
            out.push(a[i].clone());
            i += 1;
            j += 1;
            gap_a = i..i;
            gap_b = j..j;
        } else if i < n && (j >= m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            i += 1;
            gap_a.end = i;
        } else {
            j += 1;
            gap_b.end = j;
        }
    }
    flush(&mut out, &gap_a, &gap_b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::mask::{MaskRules, masked_text_with, tokenize_with};

    fn shape(line: &str) -> (Vec<u64>, Vec<String>) {
        let rules = MaskRules {
            collapse_wildcards: true,
            ..MaskRules::default()
        };
        let mut toks = Vec::new();
        tokenize_with(line, 256, rules, &mut toks);
        (
            toks.iter().map(|t| t.hash).collect(),
            toks.iter()
                .map(|t| masked_text_with(line, t, rules))
                .collect(),
        )
    }

    fn words(line: &str) -> Vec<u64> {
        skeleton(&shape(line).0).words
    }

    #[test]
    fn parameters_and_repeated_list_markers_are_left_out() {
        // Chains of one, two and three hops, of addresses or of names.
        assert_eq!(
            words("route via 10.0.0.1 -> 10.0.0.2 -> 10.0.0.3 done"),
            words("route via 10.0.0.9 done")
        );
        assert_eq!(words("route via a -> b done"), words("route via a b done"));
        // A marker in some lists only is a constant.
        assert_ne!(words("speeds ( 1 2 **** 3 )"), words("speeds ( 1 2 3 )"));
        // A list whose items repeat a marker.
        assert_eq!(
            words("checked n-1 ok n-2 ok n-3 ok"),
            words("checked n-7 ok")
        );
        // A size with and without a converted unit.
        assert_eq!(
            words("sent 1,234 bytes (1.2 KB) in total"),
            words("sent 12 bytes in total")
        );
        // A flag written next to a name in some lines only.
        assert_eq!(
            words("a.b *64 - host 10.0.0.1 open"),
            words("a.b - host 10.0.0.1 open")
        );
        // A constant word more is another skeleton.
        assert_ne!(words("task 12 finished"), words("task 12 finished late"));
    }

    #[test]
    fn skeleton_positions_point_at_the_words() {
        let (h, t) = shape("a.b 64 - host 10.0.0.1 open");
        let s = skeleton(&h);
        let at: Vec<&str> = s.at.iter().map(|&j| t[j as usize].as_str()).collect();
        assert_eq!(at, ["a.b", "-", "host", "open"]);
    }

    #[test]
    fn run_keys_ignore_the_run_whatever_its_length() {
        let a = [1u64, 2, 3, 4];
        let b = [1u64, 9, 8, 7, 4];
        let c = [1u64, 4];
        assert_eq!(run_key(&a, 1, 3), run_key(&b, 1, 4));
        assert_eq!(run_key(&a, 1, 3), run_key(&c, 1, 1));
        assert_ne!(run_key(&a, 1, 3), run_key(&a, 2, 4));
        assert_ne!(run_content(&a[1..3]), run_content(&b[1..4]));
        assert_ne!(run_content(&[]), run_content(&[0]));
    }

    #[test]
    fn joined_text_keeps_common_constants() {
        let s = |x: &str| x.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            merge_text(
                &s("<*> <*> - <*> open via <*> now"),
                &s("<*> - <*> open via <*> now")
            )
            .join(" "),
            "<*> - <*> open via <*> now"
        );
        assert_eq!(
            merge_text(&s("sent <*> bytes <*> ok"), &s("sent <*> bytes ok")).join(" "),
            "sent <*> bytes <*> ok"
        );
        assert_eq!(merge_text(&s("a b"), &s("a b")).join(" "), "a b");
        assert_eq!(merge_text(&s("x"), &s("y")).join(" "), "<*>");
    }
}
