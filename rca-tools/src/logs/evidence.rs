//! The evidence filter of RCAgent Algorithm 1 (line 17): a quote `e` offered as evidence for
//! a block `p` is accepted when `Levenshtein(e, p) < len(p) - 0.9 * len(e)`, i.e. when `e`
//! is (nearly) contained in `p`. Lengths and distances count Unicode scalar values (strsim),
//! and quotes shorter than a minimum are rejected, so an empty or trivial quote never passes.

/// Default minimum evidence length, in characters.
pub const DEFAULT_MIN_EVIDENCE_CHARS: usize = 12;

/// Whether `evidence` is supported by `block` (see the module docs).
///
/// ```
/// use rca_tools::logs::{evidence_supported, DEFAULT_MIN_EVIDENCE_CHARS};
/// let block = "10:01 disk sda failed: I/O error on sector 7\n10:02 retrying";
/// assert!(evidence_supported("disk sda failed: I/O error", block, DEFAULT_MIN_EVIDENCE_CHARS));
/// assert!(!evidence_supported("network partition between zones", block, DEFAULT_MIN_EVIDENCE_CHARS));
/// assert!(!evidence_supported("", block, DEFAULT_MIN_EVIDENCE_CHARS));
/// ```
pub fn evidence_supported(evidence: &str, block: &str, min_chars: usize) -> bool {
    let le = evidence.chars().count();
    if le < min_chars.max(1) {
        return false;
    }
    let lp = block.chars().count() as f64;
    let d = strsim::levenshtein(evidence, block) as f64;
    d < lp - 0.9 * le as f64
}

/// The quotes of `evidence` that `block` supports, in order.
pub fn filter_evidence<'a>(evidence: &[&'a str], block: &str, min_chars: usize) -> Vec<&'a str> {
    evidence
        .iter()
        .copied()
        .filter(|e| evidence_supported(e, block, min_chars))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_counts_characters() {
        let block = "Fehler: Datenträger voll — Schreibvorgang abgebrochen";
        assert!(evidence_supported("Datenträger voll", block, 12));
        assert!(!evidence_supported("Kühlung QQ ausgefallen", block, 12));
        assert!(!evidence_supported("voll", block, 12));
        assert_eq!(
            filter_evidence(&["Datenträger voll", "Kühlung QQ ausgefallen"], block, 12),
            vec!["Datenträger voll"]
        );
    }

    #[test]
    fn exact_threshold() {
        // e == p: d = 0 < len - 0.9 len holds for any non-empty text.
        assert!(evidence_supported("abcdefghijkl", "abcdefghijkl", 12));
        // Evidence longer than the block can never pass.
        assert!(!evidence_supported("abcdefghijklmnop", "abcdefghijkl", 12));
    }
}
