"""Reference values for rca-eval's METEOR and Porter stemmer, computed once with NLTK.

Run (outside the workspace build; needs only `pip install nltk`, no NLTK data):
    python3 -m venv /tmp/nltkvenv && /tmp/nltkvenv/bin/pip install nltk
    /tmp/nltkvenv/bin/python rca-eval/tests/data/meteor_reference.py

NLTK's meteor_score needs WordNet for its synonym stage; WordNet data cannot be downloaded
here, so a stand-in whose synsets() returns [] is passed. With it NLTK scores exact and stem
matches only, which is what rca-eval's `text::meteor` implements. The printed Rust constants
are pasted into rca-eval/src/text/tests.rs.
"""
import nltk
from nltk.stem.porter import PorterStemmer
from nltk.translate.meteor_score import meteor_score


class NoSynonyms:
    """A WordNet stand-in without synonyms."""

    def synsets(self, word):
        return []


PAIRS = [
    ("the database ran out of disk space", "the database ran out of disk space"),
    ("the database ran out of disk space", "disk space on the database was exhausted"),
    ("payment service failed because the connection pool was exhausted",
     "connection pool exhaustion in the payment service caused failures"),
    ("a memory leak in the cart service caused repeated restarts",
     "the cart service restarted repeatedly due to leaking memory"),
    ("expired tls certificate on the gateway", "the gateway certificate has expired"),
    ("increase the volume size and clean old logs", "clean up old logs and grow the volume"),
    ("restart the scheduler", "the scheduler needs restarting"),
    ("network partition between zones", "cpu saturation on the database host"),
    ("the jobs were misconfigured by the user", "user misconfiguration of the jobs"),
    ("roll back the faulty deployment of the config", "rolling back the deployment fixed the faulty configuration"),
    ("the the the cat", "the cat the"),
    ("generalizations of conditional probabilities", "generalization conditionally probable"),
]

WORDS = """caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated
troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational
conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli
analogousli vietnamization predication operator feudalism decisiveness hopefulness callousness
formaliti sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful
goodness revival allowance inference airliner gyroscopic adjustable defensible irritant
replacement adjustment dependent adoption homologou communism activate angulariti homologous
effective bowdlerize probate rate cease controll roll dying lying tying news innings outings
cannings howe proceed exceed succeed skies spied tried flies enjoy enjoyment generously
fulli logi analogies archaeology restarted restarting restarts misconfigured misconfiguration
exhausted exhaustion failures failed certificates expired leaking memory repeatedly deployment
configuration databases by yyy a is ab abe eyed ies""".split()


def main():
    stemmer = PorterStemmer()
    print(f"// Produced by rca-eval/tests/data/meteor_reference.py with nltk {nltk.__version__}.")
    print("const NLTK_STEMS: &[(&str, &str)] = &[")
    for w in WORDS:
        print(f'    ("{w}", "{stemmer.stem(w)}"),')
    print("];")
    print("const NLTK_METEOR: &[(&str, &str, f64)] = &[")
    for ref, hyp in PAIRS:
        score = meteor_score([ref.split()], hyp.split(), wordnet=NoSynonyms())
        print(f'    ("{ref}", "{hyp}", {score!r}),')
    print("];")


if __name__ == "__main__":
    main()
