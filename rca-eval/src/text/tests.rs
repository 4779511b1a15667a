//! Text-metric tests. The NLTK reference values below were computed once by
//! `rca-eval/tests/data/meteor_reference.py` (command in its docstring:
//! `/tmp/nltkvenv/bin/python rca-eval/tests/data/meteor_reference.py` after
//! `pip install nltk` in that virtualenv) and pasted here; they are not recomputed at test time.

use async_trait::async_trait;
use rca_llm::ScriptedModel;

use super::*;

// Produced by rca-eval/tests/data/meteor_reference.py with nltk 3.10.4.
const NLTK_STEMS: &[(&str, &str)] = &[
    ("caresses", "caress"),
    ("ponies", "poni"),
    ("ties", "tie"),
    ("caress", "caress"),
    ("cats", "cat"),
    ("feed", "feed"),
    ("agreed", "agre"),
    ("plastered", "plaster"),
    ("bled", "bled"),
    ("motoring", "motor"),
    ("sing", "sing"),
    ("conflated", "conflat"),
    ("troubled", "troubl"),
    ("sized", "size"),
    ("hopping", "hop"),
    ("tanned", "tan"),
    ("falling", "fall"),
    ("hissing", "hiss"),
    ("fizzed", "fizz"),
    ("failing", "fail"),
    ("filing", "file"),
    ("happy", "happi"),
    ("sky", "sky"),
    ("relational", "relat"),
    ("conditional", "condit"),
    ("rational", "ration"),
    ("valenci", "valenc"),
    ("hesitanci", "hesit"),
    ("digitizer", "digit"),
    ("conformabli", "conform"),
    ("radicalli", "radic"),
    ("differentli", "differ"),
    ("vileli", "vile"),
    ("analogousli", "analog"),
    ("vietnamization", "vietnam"),
    ("predication", "predic"),
    ("operator", "oper"),
    ("feudalism", "feudal"),
    ("decisiveness", "decis"),
    ("hopefulness", "hope"),
    ("callousness", "callous"),
    ("formaliti", "formal"),
    ("sensitiviti", "sensit"),
    ("sensibiliti", "sensibl"),
    ("triplicate", "triplic"),
    ("formative", "form"),
    ("formalize", "formal"),
    ("electriciti", "electr"),
    ("electrical", "electr"),
    ("hopeful", "hope"),
    ("goodness", "good"),
    ("revival", "reviv"),
    ("allowance", "allow"),
    ("inference", "infer"),
    ("airliner", "airlin"),
    ("gyroscopic", "gyroscop"),
    ("adjustable", "adjust"),
    ("defensible", "defens"),
    ("irritant", "irrit"),
    ("replacement", "replac"),
    ("adjustment", "adjust"),
    ("dependent", "depend"),
    ("adoption", "adopt"),
    ("homologou", "homolog"),
    ("communism", "commun"),
    ("activate", "activ"),
    ("angulariti", "angular"),
    ("homologous", "homolog"),
    ("effective", "effect"),
    ("bowdlerize", "bowdler"),
    ("probate", "probat"),
    ("rate", "rate"),
    ("cease", "ceas"),
    ("controll", "control"),
    ("roll", "roll"),
    ("dying", "die"),
    ("lying", "lie"),
    ("tying", "tie"),
    ("news", "news"),
    ("innings", "inning"),
    ("outings", "outing"),
    ("cannings", "canning"),
    ("howe", "howe"),
    ("proceed", "proceed"),
    ("exceed", "exceed"),
    ("succeed", "succeed"),
    ("skies", "sky"),
    ("spied", "spi"),
    ("tried", "tri"),
    ("flies", "fli"),
    ("enjoy", "enjoy"),
    ("enjoyment", "enjoy"),
    ("generously", "gener"),
    ("fulli", "fulli"),
    ("logi", "logi"),
    ("analogies", "analog"),
    ("archaeology", "archaeolog"),
    ("restarted", "restart"),
    ("restarting", "restart"),
    ("restarts", "restart"),
    ("misconfigured", "misconfigur"),
    ("misconfiguration", "misconfigur"),
    ("exhausted", "exhaust"),
    ("exhaustion", "exhaust"),
    ("failures", "failur"),
    ("failed", "fail"),
    ("certificates", "certif"),
    ("expired", "expir"),
    ("leaking", "leak"),
    ("memory", "memori"),
    ("repeatedly", "repeatedli"),
    ("deployment", "deploy"),
    ("configuration", "configur"),
    ("databases", "databas"),
    ("by", "by"),
    ("yyy", "yyy"),
    ("a", "a"),
    ("is", "is"),
    ("ab", "ab"),
    ("abe", "abe"),
    ("eyed", "eye"),
    ("ies", "i"),
];
const NLTK_METEOR: &[(&str, &str, f64)] = &[
    (
        "the database ran out of disk space",
        "the database ran out of disk space",
        0.9985422740524781,
    ),
    (
        "the database ran out of disk space",
        "disk space on the database was exhausted",
        0.5357142857142857,
    ),
    (
        "payment service failed because the connection pool was exhausted",
        "connection pool exhaustion in the payment service caused failures",
        0.5679012345679012,
    ),
    (
        "a memory leak in the cart service caused repeated restarts",
        "the cart service restarted repeatedly due to leaking memory",
        0.5162738496071829,
    ),
    (
        "expired tls certificate on the gateway",
        "the gateway certificate has expired",
        0.534957627118644,
    ),
    (
        "increase the volume size and clean old logs",
        "clean up old logs and grow the volume",
        0.6388888888888888,
    ),
    (
        "restart the scheduler",
        "the scheduler needs restarting",
        0.8243727598566307,
    ),
    (
        "network partition between zones",
        "cpu saturation on the database host",
        0.0,
    ),
    (
        "the jobs were misconfigured by the user",
        "user misconfiguration of the jobs",
        0.2941176470588235,
    ),
    (
        "roll back the faulty deployment of the config",
        "rolling back the deployment fixed the faulty configuration",
        0.6388888888888888,
    ),
    ("the the the cat", "the cat the", 0.38461538461538464),
    (
        "generalizations of conditional probabilities",
        "generalization conditionally probable",
        0.6552706552706553,
    ),
];

#[test]
fn porter_matches_nltk() {
    let mismatches: Vec<String> = NLTK_STEMS
        .iter()
        .filter(|(w, s)| stem(w) != *s)
        .map(|(w, s)| format!("{w}: nltk {s}, ours {}", stem(w)))
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[test]
fn meteor_matches_nltk() {
    for (reference, hypothesis, expected) in NLTK_METEOR {
        let ours = meteor_tokens(
            &reference.split_whitespace().collect::<Vec<_>>(),
            &hypothesis.split_whitespace().collect::<Vec<_>>(),
            MeteorParams::default(),
        );
        assert!(
            (ours - expected).abs() < 1e-9,
            "{reference:?} / {hypothesis:?}: nltk {expected}, ours {ours}"
        );
        // The string form tokenizes these (punctuation-free) sentences the same way.
        assert!((meteor(reference, hypothesis) - expected).abs() < 1e-9);
    }
    assert_eq!(meteor("", "anything"), 0.0);
    assert!(meteor_multi(&["unrelated words", NLTK_METEOR[0].0], NLTK_METEOR[0].1) > 0.99);
}

struct Letters;

#[async_trait]
impl Embedder for Letters {
    fn dimension(&self) -> usize {
        26
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 26];
                for b in t.bytes().filter(u8::is_ascii_lowercase) {
                    v[usize::from(b - b'a')] += 1.0;
                }
                v
            })
            .collect())
    }
}

#[tokio::test]
async fn embedding_score_is_cosine() {
    let same = embedding_score(&Letters, "disk full", "full disk")
        .await
        .unwrap();
    assert!((same - 1.0).abs() < 1e-6);
    let diff = embedding_score(&Letters, "aaaa", "zzzz").await.unwrap();
    assert_eq!(diff, 0.0);
}

#[tokio::test]
async fn judge_reads_scores_robustly() {
    let model = ScriptedModel::from_texts(
        "scripted-judge",
        ["```json\n{'correctness': 8, 'helpfulness': '6', 'reason': 'same cause',}\n```"],
    );
    let s = judge(&model, "root cause", "db disk full", "disk full on db")
        .await
        .unwrap();
    assert_eq!((s.correctness, s.helpfulness), (8.0, 6.0));
    assert_eq!(s.reason, "same cause");
    let req = &model.requests()[0];
    assert!(
        req.messages[1]
            .content
            .contains("Reference answer:\ndb disk full")
    );
    assert_eq!(req.temperature, Some(0.0));

    let s = parse_scores("Correctness: 7\n**Helpfulness**: 12").unwrap();
    assert_eq!((s.correctness, s.helpfulness), (7.0, 10.0));
    assert!(matches!(
        parse_scores("looks fine"),
        Err(JudgeError::Unparseable { .. })
    ));
    assert!(parse_scores("{\"correctness\": 3}").is_err());
}

proptest::proptest! {
    #[test]
    fn metrics_never_panic_and_stay_in_range(a in "\\PC{0,80}", b in "[a-zA-Z ]{0,80}") {
        let _ = stem(&a);
        let s = meteor(&a, &b);
        proptest::prop_assert!((0.0..=1.0).contains(&s));
        let _ = parse_scores(&a);
    }
}
