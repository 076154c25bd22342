"""Track B data: the corpus, its normalisation rule, the contiguous split, the character vocabulary, windows.

The order is the capstone's: normalise the raw text, split it by position (train, then validation,
then test), fit the vocabulary on the training text only, and only then cut windows, so no window
straddles two splits and no held-out character shapes the vocabulary.
"""
import hashlib
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from ..configs import SPECIAL

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "tiny_corpus.txt"
CORPUS_META = HERE / "tiny_corpus.json"
SPLITS = ("train", "validation", "test")
FRACTIONS = (0.8, 0.1, 0.1)
UNK_ID = 3  # the first ordinary id: characters never seen in the training text
FIRST_CHAR_ID = 4


def normalize(text: str) -> str:
    """The documented rule: NFKC; CRLF and CR to LF; tabs to spaces; runs of spaces to one; no trailing
    spaces on a line; at most one blank line in a row; no leading or trailing blank lines; one final LF."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    text = re.sub(r" {2,}", " ", text)
    text = re.sub(r" +\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n ") + "\n"


def split_bounds(n: int, fractions=FRACTIONS) -> list[tuple[int, int]]:
    """Contiguous [start, end) character ranges for train, validation and test, in that order."""
    cut1 = int(n * fractions[0])
    cut2 = cut1 + int(n * fractions[1])
    return [(0, cut1), (cut1, cut2), (cut2, n)]


@dataclass(frozen=True)
class Vocab:
    """Character vocabulary fitted on training text: specials 0-2, unknown 3, characters from 4 in sorted order."""
    chars: str

    @classmethod
    def fit(cls, text: str) -> "Vocab":
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        return FIRST_CHAR_ID + len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """(N,) int64 ids; characters outside the vocabulary become UNK_ID."""
        index = {c: i + FIRST_CHAR_ID for i, c in enumerate(self.chars)}
        return torch.tensor([index.get(c, UNK_ID) for c in text], dtype=torch.int64)

    def decode(self, ids) -> str:
        """Text for ids; specials and unknowns as visible markers."""
        names = {SPECIAL["pad_id"]: "", SPECIAL["bos_id"]: "", SPECIAL["eos_id"]: "",
                 UNK_ID: "\N{REPLACEMENT CHARACTER}"}
        return "".join(names.get(int(i), self.chars[int(i) - FIRST_CHAR_ID] if FIRST_CHAR_ID <= int(i) < self.size
                                 else "\N{REPLACEMENT CHARACTER}") for i in ids)


@dataclass(frozen=True)
class Corpus:
    """A normalised corpus split three ways, with its vocabulary and (for the shipped corpus) oracle entropies."""
    name: str
    sha256: str
    train: str
    validation: str
    test: str
    vocab: Vocab
    oracle: dict  # split name -> nats per character an oracle of the generator reaches; {} if unknown

    def ids(self, split: str) -> torch.Tensor:
        return self.vocab.encode(getattr(self, split))

    def unknown(self, split: str) -> int:
        """How many characters of a split are outside the training vocabulary."""
        return sum(c not in self.vocab.chars for c in getattr(self, split))


def build_corpus(raw: str, name: str = "corpus", oracle: dict | None = None) -> Corpus:
    """Normalise, split by position, fit the vocabulary on the training split only."""
    text = normalize(raw)
    parts = [text[a:b] for a, b in split_bounds(len(text))]
    return Corpus(name, hashlib.sha256(text.encode()).hexdigest(), *parts, Vocab.fit(parts[0]), oracle or {})


@lru_cache(maxsize=1)
def shipped_corpus() -> Corpus:
    """The corpus that ships with the grader, checked against its recorded sha256."""
    raw = CORPUS.read_text(encoding="utf-8")
    meta = json.loads(CORPUS_META.read_text(encoding="utf-8"))
    corpus = build_corpus(raw, CORPUS.name, meta.get("split_entropy_nats_per_char"))
    if corpus.sha256 != meta["sha256"]:
        raise RuntimeError(f"{CORPUS} does not match its recorded sha256: regenerate it with "
                           "python -m grader.data.textgen")
    return corpus


def random_windows(ids: torch.Tensor, gen: torch.Generator, count: int, length: int) -> torch.Tensor:
    """(count, length + 1) windows at seeded random starts inside one split: inputs [:, :-1], targets [:, 1:]."""
    starts = torch.randint(0, ids.numel() - length, (count,), generator=gen)
    return ids[starts[:, None] + torch.arange(length + 1)]


def tiled_windows(ids: torch.Tensor, length: int, limit: int | None = None) -> torch.Tensor:
    """(N, length + 1) windows with stride `length`: every character after the first is a target exactly once."""
    n = (ids.numel() - 1) // length
    if limit is not None:
        n = min(n, limit)
    starts = torch.arange(n) * length
    return ids[starts[:, None] + torch.arange(length + 1)]


def unigram_logprobs(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(V,) log-probabilities of a unigram model fitted on ids, add-one smoothed so no id has zero mass."""
    counts = torch.bincount(ids, minlength=vocab_size).double() + 1.0
    return (counts / counts.sum()).log()


def bigram_ce(train_ids: torch.Tensor, windows: torch.Tensor, vocab_size: int) -> float:
    """Mean cross-entropy on the window targets of a bigram model fitted on the training ids (add-one smoothed):
    the loss of a model that reads only the current character, no further context."""
    counts = torch.ones(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(train_ids.numel() - 1, dtype=torch.float64),
                      accumulate=True)
    logp = (counts / counts.sum(dim=1, keepdim=True)).log()  # (V, V): previous -> next
    return float(-logp[windows[:, :-1], windows[:, 1:]].mean())


def perplexity(loss: float) -> float:
    """exp(mean token loss), capped so a huge loss stays a finite number."""
    return math.exp(min(loss, 50.0))
