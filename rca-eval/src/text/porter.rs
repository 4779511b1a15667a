//! The Porter stemmer, in the variant of NLTK's `PorterStemmer` default mode
//! (`NLTK_EXTENSIONS`): Porter's algorithm with Martin Porter's later changes and NLTK's
//! additions (irregular forms, `ies`/`ied` on four-letter words, `y -> i` only after a
//! consonant, extra step-2 rules, words of two letters or fewer left alone).

/// Stems one word (lowercased first).
pub fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    if let Some(s) = irregular(&lower) {
        return s.to_string();
    }
    if word.chars().count() <= 2 {
        return lower;
    }
    let mut w: Vec<char> = lower.chars().collect();
    w = step1a(w);
    w = step1b(w);
    w = step1c(w);
    w = step2(w);
    w = step3(w);
    w = step4(w);
    w = step5a(w);
    w = step5b(w);
    w.into_iter().collect()
}

fn irregular(w: &str) -> Option<&'static str> {
    Some(match w {
        "sky" | "skies" => "sky",
        "dying" => "die",
        "lying" => "lie",
        "tying" => "tie",
        "news" => "news",
        "innings" | "inning" => "inning",
        "outings" | "outing" => "outing",
        "cannings" | "canning" => "canning",
        "howe" => "howe",
        "proceed" => "proceed",
        "exceed" => "exceed",
        "succeed" => "succeed",
        _ => return None,
    })
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// Consonant flags: a `y` is a consonant at the start or after a vowel.
fn consonants(w: &[char]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(w.len());
    for (i, &c) in w.iter().enumerate() {
        let f = if is_vowel(c) {
            false
        } else if c == 'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(f);
    }
    flags
}

fn is_consonant(w: &[char], i: usize) -> bool {
    consonants(&w[..=i]).last().copied().unwrap_or(false)
}

/// Porter's measure m: the number of vowel-consonant sequences.
fn measure(w: &[char]) -> usize {
    let f = consonants(w);
    f.windows(2).filter(|p| !p[0] && p[1]).count()
}

fn contains_vowel(w: &[char]) -> bool {
    consonants(w).iter().any(|c| !c)
}

fn ends_double_consonant(w: &[char]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

fn ends_cvc(w: &[char]) -> bool {
    let n = w.len();
    (n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], 'w' | 'x' | 'y'))
        || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

fn ends_with(w: &[char], suffix: &str) -> bool {
    let s: Vec<char> = suffix.chars().collect();
    w.len() >= s.len() && w[w.len() - s.len()..] == s[..]
}

fn strip(w: &[char], suffix: &str) -> Vec<char> {
    w[..w.len() - suffix.chars().count()].to_vec()
}

fn with(mut stem: Vec<char>, replacement: &str) -> Vec<char> {
    stem.extend(replacement.chars());
    stem
}

type Cond = fn(&[char]) -> bool;

/// The first rule whose suffix matches decides: replaced when its condition holds on the
/// stem, otherwise the word is kept.
fn apply(w: Vec<char>, rules: &[(&str, &str, Option<Cond>)]) -> Vec<char> {
    for (suffix, replacement, cond) in rules {
        if ends_with(&w, suffix) {
            let stem = strip(&w, suffix);
            return if cond.is_none_or(|c| c(&stem)) {
                with(stem, replacement)
            } else {
                w
            };
        }
    }
    w
}

fn positive(w: &[char]) -> bool {
    measure(w) > 0
}

fn step1a(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "ies") && w.len() == 4 {
        return with(strip(&w, "ies"), "ie");
    }
    apply(
        w,
        &[
            ("sses", "ss", None),
            ("ies", "i", None),
            ("ss", "ss", None),
            ("s", "", None),
        ],
    )
}

fn step1b(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "ied") {
        let rep = if w.len() == 4 { "ie" } else { "i" };
        return with(strip(&w, "ied"), rep);
    }
    if ends_with(&w, "eed") {
        let stem = strip(&w, "eed");
        return if measure(&stem) > 0 {
            with(stem, "ee")
        } else {
            w
        };
    }
    let mut inter = None;
    for suffix in ["ed", "ing"] {
        if ends_with(&w, suffix) {
            let s = strip(&w, suffix);
            if contains_vowel(&s) {
                inter = Some(s);
                break;
            }
        }
    }
    let Some(s) = inter else {
        return w;
    };
    for (suffix, rep) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if ends_with(&s, suffix) {
            return with(strip(&s, suffix), rep);
        }
    }
    if ends_double_consonant(&s) {
        let last = s[s.len() - 1];
        return if matches!(last, 'l' | 's' | 'z') {
            s
        } else {
            s[..s.len() - 1].to_vec()
        };
    }
    if measure(&s) == 1 && ends_cvc(&s) {
        return with(s, "e");
    }
    s
}

fn step1c(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "y") {
        let stem = strip(&w, "y");
        if stem.len() > 1 && is_consonant(&stem, stem.len() - 1) {
            return with(stem, "i");
        }
    }
    w
}

fn step2(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "alli") && positive(&strip(&w, "alli")) {
        return step2(with(strip(&w, "alli"), "al"));
    }
    let p: Option<Cond> = Some(positive);
    let rules: [(&str, &str, Option<Cond>); 21] = [
        ("ational", "ate", p),
        ("tional", "tion", p),
        ("enci", "ence", p),
        ("anci", "ance", p),
        ("izer", "ize", p),
        ("bli", "ble", p),
        ("alli", "al", p),
        ("entli", "ent", p),
        ("eli", "e", p),
        ("ousli", "ous", p),
        ("ization", "ize", p),
        ("ation", "ate", p),
        ("ator", "ate", p),
        ("alism", "al", p),
        ("iveness", "ive", p),
        ("fulness", "ful", p),
        ("ousness", "ous", p),
        ("aliti", "al", p),
        ("iviti", "ive", p),
        ("biliti", "ble", p),
        ("fulli", "ful", p),
    ];
    if rules.iter().any(|(s, _, _)| ends_with(&w, s)) {
        return apply(w, &rules);
    }
    // NLTK: `logi -> log` when the word without `ogi` has a positive measure.
    if ends_with(&w, "logi") {
        return if positive(&w[..w.len() - 3]) {
            with(strip(&w, "logi"), "log")
        } else {
            w
        };
    }
    w
}

fn step3(w: Vec<char>) -> Vec<char> {
    let p: Option<Cond> = Some(positive);
    apply(
        w,
        &[
            ("icate", "ic", p),
            ("ative", "", p),
            ("alize", "al", p),
            ("iciti", "ic", p),
            ("ical", "ic", p),
            ("ful", "", p),
            ("ness", "", p),
        ],
    )
}

fn step4(w: Vec<char>) -> Vec<char> {
    fn gt1(s: &[char]) -> bool {
        measure(s) > 1
    }
    fn ion(s: &[char]) -> bool {
        measure(s) > 1 && matches!(s.last(), Some('s' | 't'))
    }
    let g: Option<Cond> = Some(gt1);
    apply(
        w,
        &[
            ("al", "", g),
            ("ance", "", g),
            ("ence", "", g),
            ("er", "", g),
            ("ic", "", g),
            ("able", "", g),
            ("ible", "", g),
            ("ant", "", g),
            ("ement", "", g),
            ("ment", "", g),
            ("ent", "", g),
            ("ion", "", Some(ion)),
            ("ou", "", g),
            ("ism", "", g),
            ("ate", "", g),
            ("iti", "", g),
            ("ous", "", g),
            ("ive", "", g),
            ("ize", "", g),
        ],
    )
}

fn step5a(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "e") {
        let stem = strip(&w, "e");
        let m = measure(&stem);
        if m > 1 || (m == 1 && !ends_cvc(&stem)) {
            return stem;
        }
    }
    w
}

fn step5b(w: Vec<char>) -> Vec<char> {
    if ends_with(&w, "ll") && measure(&w[..w.len() - 1]) > 1 {
        return w[..w.len() - 1].to_vec();
    }
    w
}
