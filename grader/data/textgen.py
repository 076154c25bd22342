"""The project's own tiny corpus: English-like prose from a seeded stochastic grammar, with its exact entropy.

Why generated: the text is ours to ship (no rights question), small, and, because every random choice
has a known probability and the text determines its choices uniquely (the word lists are disjoint
and every slot is told apart by its words), -log p(text) is exact. Spread over the characters that
reveal each choice, it gives the loss an oracle that knows the grammar reaches on any section: no
causal model can go below it in expectation, so a held-out loss far below it means the model reads
the character it must predict.

Regenerate (byte-identical) with `python -m grader.data.textgen`.
"""
import json
import math
import random
from pathlib import Path

SEED = 1129
PARAGRAPHS = 560
HERE = Path(__file__).resolve().parent
TEXT_FILE = HERE / "tiny_corpus.txt"
META_FILE = HERE / "tiny_corpus.json"

# Disjoint word lists: a word tells which slot it fills, so the text parses one way only.
DETS = ["the", "a", "this", "that", "every", "one", "my", "her", "his", "our"]
NAMES = ["Anna", "Tom", "Mira", "Oskar", "Lena", "Paul", "Ida", "Ben", "Sara", "Hugo", "Nell", "Max"]
ADJS = ["old", "small", "quiet", "green", "tired", "bright", "little", "cold", "kind", "heavy", "young", "wet",
        "strange", "red", "happy", "dark", "tall", "gentle", "broken", "warm", "blue", "slow", "clever", "empty"]
NOUNS = ["dog", "cat", "farmer", "river", "house", "boat", "teacher", "garden", "door", "bird", "horse", "child",
         "window", "road", "baker", "lamp", "tree", "king", "letter", "fox", "mountain", "sailor", "table", "apple",
         "village", "wolf", "candle", "bridge", "doctor", "field", "stone", "clock"]
VERBS_T = ["saw", "found", "carried", "painted", "followed", "opened", "watched", "pushed", "helped", "loved",
           "built", "lost", "kept", "cleaned", "visited", "called", "closed", "fed", "heard", "remembered"]
VERBS_I = ["slept", "waited", "laughed", "sang", "fell", "walked", "rested", "cried", "danced", "stayed",
           "listened", "worked", "smiled", "shivered"]
ADVS = ["slowly", "quietly", "again", "today", "happily", "often", "suddenly", "there", "carefully", "later",
        "yesterday", "alone"]
PREPS = ["near", "under", "behind", "beside", "across", "into", "over", "past", "toward", "around"]
CONJS = [", and", ", but", " because", " while", " so", " until"]

P_NAME, P_ADJ, P_TRANSITIVE, P_ADV, P_PP, P_CONJ = 0.25, 0.4, 0.6, 0.3, 0.35, 0.3
SENTENCES = (2, 6)  # sentences per paragraph, uniform


def zipf(words, s=0.8):
    """Zipf-like probabilities over a word list, most frequent first."""
    w = [1.0 / (i + 1) ** s for i in range(len(words))]
    total = sum(w)
    return [x / total for x in w]


class Writer:
    """Emits text and charges each random choice's -log p to the next character written."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.chars: list[str] = []
        self.costs: list[float] = []
        self.pending = 0.0

    def emit(self, text: str) -> None:
        for i, ch in enumerate(text):
            self.chars.append(ch)
            self.costs.append(self.pending if i == 0 else 0.0)
            self.pending = 0.0 if i == 0 else self.pending

    def coin(self, p: float) -> bool:
        yes = self.rng.random() < p
        self.pending += -math.log(p if yes else 1 - p)
        return yes

    def pick(self, words, probs=None) -> str:
        probs = probs or [1.0 / len(words)] * len(words)
        i = self.rng.choices(range(len(words)), weights=probs)[0]
        self.pending += -math.log(probs[i])
        return words[i]


PROBS = {id(lst): zipf(lst) for lst in (NAMES, ADJS, NOUNS, VERBS_T, VERBS_I, ADVS, PREPS)}


def pick(w: Writer, words):
    """A Zipf-weighted pick (uniform for determiners and conjunctions)."""
    return w.pick(words, PROBS.get(id(words)))


def noun_phrase(w: Writer, capital: bool) -> None:
    """A name, or a determiner, an optional adjective and a noun."""
    if w.coin(P_NAME):
        w.emit(pick(w, NAMES))
        return
    det = pick(w, DETS)
    w.emit(det[0].upper() + det[1:] if capital else det)
    if w.coin(P_ADJ):
        w.emit(" " + pick(w, ADJS))
    w.emit(" " + pick(w, NOUNS))


def clause(w: Writer, capital: bool) -> None:
    """Subject, verb, object if transitive, optional adverb, optional prepositional phrase."""
    noun_phrase(w, capital)
    if w.coin(P_TRANSITIVE):
        w.emit(" " + pick(w, VERBS_T) + " ")
        noun_phrase(w, False)
    else:
        w.emit(" " + pick(w, VERBS_I))
    if w.coin(P_ADV):
        w.emit(" " + pick(w, ADVS))
    if w.coin(P_PP):
        w.emit(" " + pick(w, PREPS) + " ")
        noun_phrase(w, False)


def sentence(w: Writer) -> None:
    """One or two clauses and a full stop."""
    clause(w, True)
    if w.coin(P_CONJ):
        w.emit(pick(w, CONJS) + " ")
        clause(w, False)
    w.emit(".")


def generate(seed: int = SEED, paragraphs: int = PARAGRAPHS) -> tuple[str, list[float]]:
    """The corpus text and, per character, the nats of the choices it reveals."""
    w = Writer(seed)
    lo, hi = SENTENCES
    counts = list(range(lo, hi + 1))
    for p in range(paragraphs):
        n = w.pick(counts)
        for s in range(n):
            if s:
                w.emit(" ")
            sentence(w)
        w.emit("\n\n" if p < paragraphs - 1 else "\n")
    return "".join(w.chars), w.costs


def section_entropy(costs: list[float], start: int, end: int) -> float:
    """Mean nats per character over characters start..end-1 (the oracle's loss there)."""
    return sum(costs[start:end]) / max(1, end - start)


def write(path: Path = TEXT_FILE, meta_path: Path = META_FILE) -> dict:
    """Write the corpus and its metadata (seed, size, sha256, oracle entropy per split)."""
    import hashlib

    from .text import SPLITS, split_bounds  # the same split rule the grader uses

    text, costs = generate()
    path.write_text(text, encoding="utf-8")
    bounds = split_bounds(len(text))
    meta = {"generator": "grader.data.textgen", "seed": SEED, "paragraphs": PARAGRAPHS, "chars": len(text),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "licence": "generated by this project; no third-party text",
            "entropy_nats_per_char": round(section_entropy(costs, 0, len(text)), 6),
            "split_entropy_nats_per_char": {name: round(section_entropy(costs, a, b), 6)
                                            for name, (a, b) in zip(SPLITS, bounds)}}
    meta_path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


if __name__ == "__main__":
    print(json.dumps(write(), indent=1))
