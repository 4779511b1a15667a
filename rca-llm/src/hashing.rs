//! [`HashingEmbedder`]: a pure-Rust text embedder by feature hashing. Needs no files, no
//! model and no native code; deterministic across runs and platforms.

use async_trait::async_trait;
use rca_core::EmbedError;
use rca_core::embed::{Embedder, normalize};
use serde::{Deserialize, Serialize};

/// Settings of a [`HashingEmbedder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HashingConfig {
    /// Vector length.
    pub dimension: usize,
    /// Word n-grams from 1 up to this length (2: words and word pairs).
    pub max_word_ngram: usize,
    /// Shortest character n-gram taken inside each word (with boundary marks).
    pub min_char_ngram: usize,
    /// Longest character n-gram.
    pub max_char_ngram: usize,
    /// Total weight of a word's character n-grams relative to the word itself (spread over
    /// its n-grams).
    pub char_weight: f32,
    /// Replace every run of digits by one placeholder, so `took 35 ms` and `took 2048 ms`
    /// embed alike.
    pub mask_digits: bool,
}

impl Default for HashingConfig {
    fn default() -> Self {
        HashingConfig {
            dimension: 512,
            max_word_ngram: 2,
            min_char_ngram: 3,
            max_char_ngram: 5,
            char_weight: 1.0,
            mask_digits: true,
        }
    }
}

/// Embeds text by signed feature hashing of lower-cased word n-grams and character n-grams,
/// with digit runs masked, then L2-normalises the vector.
///
/// Properties (checked by property tests): every text with at least one letter or digit maps
/// to a unit vector; the same text always maps to the same vector; a log line is closer to
/// the same line with its numbers changed and one word replaced than to a line of another
/// system.
///
/// Empty or whitespace-only text maps to the zero vector.
#[derive(Debug, Clone, Default)]
pub struct HashingEmbedder {
    config: HashingConfig,
}

/// FNV-1a 64 over a feature kind tag and the feature's bytes.
fn feature_hash(kind: u8, parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    eat(kind);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            eat(0x1f);
        }
        p.bytes().for_each(&mut eat);
    }
    // A final avalanche so nearby inputs spread over all buckets and both signs.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

const DIGITS: &str = "0";

impl HashingEmbedder {
    /// An embedder with these settings (a dimension of 0 is raised to 1).
    pub fn new(mut config: HashingConfig) -> Self {
        config.dimension = config.dimension.max(1);
        config.max_word_ngram = config.max_word_ngram.max(1);
        config.min_char_ngram = config.min_char_ngram.max(1);
        HashingEmbedder { config }
    }

    /// An embedder of the given dimension with the other settings at their defaults.
    pub fn with_dimension(dimension: usize) -> Self {
        Self::new(HashingConfig {
            dimension,
            ..HashingConfig::default()
        })
    }

    /// The settings.
    pub fn config(&self) -> &HashingConfig {
        &self.config
    }

    /// The words of `text`: lower-cased runs of letters and digits, digit runs masked.
    pub fn words(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut cur = String::new();
        let mut in_digits = false;
        let flush = |cur: &mut String, words: &mut Vec<String>| {
            if !cur.is_empty() {
                words.push(std::mem::take(cur));
            }
        };
        for c in text.chars() {
            if c.is_alphanumeric() {
                if self.config.mask_digits && c.is_ascii_digit() {
                    if !in_digits {
                        cur.push_str(DIGITS);
                    }
                    in_digits = true;
                } else {
                    cur.extend(c.to_lowercase());
                    in_digits = false;
                }
            } else {
                in_digits = false;
                flush(&mut cur, &mut words);
            }
        }
        flush(&mut cur, &mut words);
        words
    }

    fn add(&self, v: &mut [f32], h: u64, weight: f32) {
        let dim = v.len() as u64;
        let idx = (h % dim) as usize;
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        if let Some(slot) = v.get_mut(idx) {
            *slot += sign * weight;
        }
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let c = &self.config;
        let mut v = vec![0f32; c.dimension];
        let words = self.words(text);
        let is_number = |w: &str| w == DIGITS;
        for (i, w) in words.iter().enumerate() {
            // A bare number carries little meaning: it shapes n-grams, not a feature of its own.
            if !is_number(w) {
                self.add(&mut v, feature_hash(1, &[w]), 1.0);
                let grams = char_ngrams(w, c.min_char_ngram, c.max_char_ngram);
                if !grams.is_empty() {
                    let weight = c.char_weight / (grams.len() as f32).sqrt();
                    for g in grams {
                        self.add(&mut v, feature_hash(3, &[&g]), weight);
                    }
                }
            }
            for n in 2..=c.max_word_ngram {
                if i + n <= words.len() {
                    let gram: Vec<&str> = words[i..i + n].iter().map(String::as_str).collect();
                    self.add(&mut v, feature_hash(2, &gram), 1.0);
                }
            }
        }
        if words.len() == 1 && is_number(&words[0]) {
            self.add(&mut v, feature_hash(1, &[DIGITS]), 1.0);
        }
        let trimmed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if words.is_empty() && !trimmed.is_empty() {
            // Punctuation only: hash its characters so the text still has a direction.
            for g in char_ngrams(&trimmed, 1, c.max_char_ngram) {
                self.add(&mut v, feature_hash(4, &[&g]), 1.0);
            }
        }
        normalize(&mut v);
        v
    }
}

/// Character n-grams of `<word>` (with boundary marks), lengths `min..=max`.
fn char_ngrams(word: &str, min: usize, max: usize) -> Vec<String> {
    let chars: Vec<char> = std::iter::once('<')
        .chain(word.chars())
        .chain(std::iter::once('>'))
        .collect();
    let mut out = Vec::new();
    for n in min..=max {
        if n > chars.len() {
            break;
        }
        for w in chars.windows(n) {
            out.push(w.iter().collect());
        }
    }
    out
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn dimension(&self) -> usize {
        self.config.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rca_core::embed::cosine;

    use super::*;

    fn norm(v: &[f32]) -> f32 {
        v.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    #[test]
    fn masks_digits_and_lowercases() {
        let e = HashingEmbedder::default();
        assert_eq!(
            e.words("Took 2048ms on node-17, code=0x1F"),
            ["took", "0ms", "on", "node", "0", "code", "0x0f"]
        );
        assert_eq!(e.embed_one("  "), vec![0.0; 512]);
        assert!((norm(&e.embed_one("---")) - 1.0).abs() < 1e-5);
        assert!((norm(&e.embed_one("42")) - 1.0).abs() < 1e-5);
        assert_eq!(e.dimension(), 512);
        assert_eq!(HashingEmbedder::with_dimension(0).dimension(), 1);
    }

    #[test]
    fn numbers_do_not_matter_words_do() {
        let e = HashingEmbedder::default();
        let a = e.embed_one("connection to 10.0.0.1 timed out after 30 s");
        let b = e.embed_one("connection to 192.168.7.9 timed out after 5 s");
        assert!((cosine(&a, &b) - 1.0).abs() < 1e-5);
        let c = e.embed_one("user admin logged in from console");
        assert!(cosine(&a, &c) < 0.3);
    }

    /// Log-line templates of different systems, written for this test; `{}` is a number.
    const SYSTEMS: &[&[&str]] = &[
        &[
            "Receiving block blk_{} src: /{}.{}.{}.{}:{} dest: /{}.{}.{}.{}:{}",
            "PacketResponder {} for block blk_{} terminating",
            "Verification succeeded for blk_{}",
        ],
        &[
            "instruction cache parity error corrected at address {}",
            "generating core.{} for rank {}",
            "ciod: failed to read message prefix on control stream (CioStream socket to {}.{}.{}.{}:{}",
        ],
        &[
            "pam_unix(sshd:auth): authentication failure; logname= uid={} euid={} tty=ssh ruser= rhost={}.{}.{}.{}",
            "Failed password for invalid user guest from {}.{}.{}.{} port {} ssh2",
            "Received disconnect from {}.{}.{}.{}: {}: Bye Bye [preauth]",
        ],
        &[
            "Starting Session {} of user root.",
            "Started Daily apt upgrade and clean activities after {} seconds.",
            "kernel: usb {}-{}: new high-speed USB device number {} using xhci_hcd",
        ],
    ];

    fn fill(template: &str, numbers: &[u32]) -> String {
        let mut out = String::new();
        let mut k = 0;
        let mut rest = template;
        while let Some(pos) = rest.find("{}") {
            out.push_str(&rest[..pos]);
            out.push_str(&numbers[k % numbers.len()].to_string());
            k += 1;
            rest = &rest[pos + 2..];
        }
        out.push_str(rest);
        out
    }

    fn replace_word(line: &str, which: usize, new_word: &str) -> String {
        let words: Vec<&str> = line.split(' ').collect();
        let candidates: Vec<usize> = (0..words.len())
            .filter(|&i| words[i].chars().all(|c| c.is_ascii_alphabetic()) && !words[i].is_empty())
            .collect();
        if candidates.is_empty() {
            return line.to_string();
        }
        let target = candidates[which % candidates.len()];
        words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == target { new_word } else { w })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The shared data folder: `RCA_SHARED_DIR`, else `<workspace>/../shared`.
    fn shared_dir() -> std::path::PathBuf {
        std::env::var_os("RCA_SHARED_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared")
            })
    }

    /// Changes every digit run (to a different number) and replaces the `which`-th alphabetic
    /// word of at least three letters.
    fn perturb(line: &str, which: usize) -> String {
        let mut out = String::new();
        let mut digits = String::new();
        for c in line.chars().chain(std::iter::once('\n')) {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            if !digits.is_empty() {
                let n: u128 = digits.parse().unwrap_or(0);
                out.push_str(&(n.wrapping_mul(7).wrapping_add(13) % 1_000_000).to_string());
                digits.clear();
            }
            if c != '\n' {
                out.push(c);
            }
        }
        let words: Vec<&str> = out.split(' ').collect();
        let candidates: Vec<usize> = (0..words.len())
            .filter(|&i| words[i].len() >= 3 && words[i].chars().all(|c| c.is_ascii_alphabetic()))
            .collect();
        if candidates.is_empty() {
            return out;
        }
        let target = candidates[which % candidates.len()];
        let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        words[target] = "quux".into();
        words.join(" ")
    }

    /// On the real Loghub-2k lines of every shared system: a line is closer to its perturbed
    /// copy than to a line of another system, for (almost) every line.
    #[test]
    fn loghub_lines_stay_closer_to_their_variants() {
        let root = shared_dir().join("data/loghub-2k");
        let systems: Vec<std::path::PathBuf> = match std::fs::read_dir(&root) {
            Ok(rd) => {
                let mut v: Vec<_> = rd
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect();
                v.sort();
                v
            }
            Err(e) => {
                let required = rca_core::testing::require_all();
                assert!(
                    !required,
                    "RCA_REQUIRE_ALL is set but {} is unreadable: {e}",
                    root.display()
                );
                eprintln!(
                    "skipping: {} is unreadable ({e}); set RCA_SHARED_DIR",
                    root.display()
                );
                return;
            }
        };
        let e = HashingEmbedder::default();
        let lines: Vec<Vec<String>> = systems
            .iter()
            .map(|dir| {
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(dir.join(format!("{name}_2k.log"))).unwrap();
                text.lines().step_by(40).map(str::to_string).collect()
            })
            .collect();
        assert!(
            lines.len() >= 2,
            "need at least two systems in {}",
            root.display()
        );
        let (mut total, mut closer_than_one, mut closer_than_all) = (0usize, 0usize, 0usize);
        let vecs: Vec<Vec<Vec<f32>>> = lines
            .iter()
            .map(|ls| ls.iter().map(|l| e.embed_one(l)).collect())
            .collect();
        for (s, system_lines) in lines.iter().enumerate() {
            for (i, line) in system_lines.iter().enumerate() {
                let a = &vecs[s][i];
                let near = cosine(a, &e.embed_one(&perturb(line, i)));
                let other = (s + 1 + i % (lines.len() - 1)) % lines.len();
                let o = &vecs[other][i % vecs[other].len()];
                total += 1;
                closer_than_one += usize::from(near > cosine(a, o));
                let far_max = vecs
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| *t != s)
                    // Unit vectors: the dot product is the cosine.
                    .flat_map(|(_, vs)| {
                        vs.iter()
                            .map(|v| a.iter().zip(v).map(|(x, y)| x * y).sum::<f32>())
                    })
                    .fold(f32::MIN, f32::max);
                closer_than_all += usize::from(near > far_max);
            }
        }
        let one = closer_than_one as f64 / total as f64;
        let all = closer_than_all as f64 / total as f64;
        eprintln!(
            "loghub-2k, {total} lines of {} systems: variant closer than a line of another \
             system {one:.4}; closer than every sampled line of every other system {all:.4}",
            lines.len()
        );
        assert!(one >= 0.99, "{one}");
        assert!(all >= 0.95, "{all}");
    }

    proptest! {
        #[test]
        fn unit_norm_and_deterministic(text in "\\PC{0,200}") {
            let e = HashingEmbedder::default();
            let v = e.embed_one(&text);
            prop_assert_eq!(v.len(), 512);
            if text.chars().any(|c| !c.is_whitespace()) {
                prop_assert!((norm(&v) - 1.0).abs() < 1e-4, "norm {}", norm(&v));
            } else {
                prop_assert_eq!(norm(&v), 0.0);
            }
            prop_assert_eq!(v, HashingEmbedder::default().embed_one(&text));
        }

        #[test]
        fn a_line_is_closer_to_its_variant_than_to_another_system(
            system in 0..SYSTEMS.len(),
            other_offset in 1..SYSTEMS.len(),
            template in 0usize..3,
            other_template in 0usize..3,
            numbers in proptest::collection::vec(0u32..100_000, 1..12),
            other_numbers in proptest::collection::vec(0u32..100_000, 1..12),
            which in 0usize..20,
            new_word in "[a-z]{3,10}",
        ) {
            let e = HashingEmbedder::default();
            let line = fill(SYSTEMS[system][template], &[7, 42, 1999]);
            let variant = replace_word(&fill(SYSTEMS[system][template], &numbers), which, &new_word);
            let other_system = (system + other_offset) % SYSTEMS.len();
            let other = fill(SYSTEMS[other_system][other_template], &other_numbers);
            let (a, b, c) = (e.embed_one(&line), e.embed_one(&variant), e.embed_one(&other));
            let near = cosine(&a, &b);
            let far = cosine(&a, &c);
            prop_assert!(near > far, "{line:?} ~ {variant:?}: {near} vs {other:?}: {far}");
        }
    }
}
