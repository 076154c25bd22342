"""The grader's own training data: Track A reversal rows, the Track B corpus and its splits, the cyclic task."""
import hashlib
import json

import pytest
import torch

from grader.configs import SPECIAL
from grader.data import textgen
from grader.data.cyclic import cyclic_rows
from grader.data.reverse import duplicated_rows, exact_matches, reverse_rows
from grader.data.text import (CORPUS, CORPUS_META, UNK_ID, Vocab, bigram_ce, build_corpus, normalize, random_windows,
                              shipped_corpus, split_bounds, tiled_windows, unigram_logprobs)

PAD, BOS, EOS = SPECIAL["pad_id"], SPECIAL["bos_id"], SPECIAL["eos_id"]


def test_reverse_rows_follow_the_capstone_layout():
    rows = reverse_rows(torch.Generator().manual_seed(0), 64, 16, 3, 8)
    for src, mask, tin, tout in zip(rows["src"].tolist(), rows["src_mask"].tolist(), rows["tgt_in"].tolist(),
                                    rows["tgt_out"].tolist()):
        n = sum(mask)
        assert 3 <= n <= 8 and mask == [True] * n + [False] * (8 - n), "the source is right-padded"
        real = src[:n]
        assert all(t >= 3 for t in real) and src[n:] == [PAD] * (8 - n), "ordinary tokens, then PAD"
        assert tin == [BOS] + real[::-1] + [PAD] * (8 - n), "decoder input is [BOS, reversed source]"
        assert tout == real[::-1] + [EOS] + [PAD] * (8 - n), "target is [reversed source, EOS]"


def test_duplicates_are_found_and_exact_match_cuts_at_eos():
    train = reverse_rows(torch.Generator().manual_seed(1), 50, 16, 3, 8)
    held = reverse_rows(torch.Generator().manual_seed(2), 10, 16, 3, 8)
    held["src"][3] = train["src"][7]
    dup = duplicated_rows(train["src"], held["src"])
    assert dup[3] and int(dup.sum()) >= 1
    generated = held["tgt_out"].clone()
    generated[held["tgt_out"] == PAD] = 5  # anything after the first EOS is ignored
    generated[0, 0] = EOS  # stops at once: wrong
    assert exact_matches(generated, held["tgt_out"]).tolist() == [False] + [True] * 9


def test_cyclic_rows_repeat_and_ignore_the_first_period():
    out = cyclic_rows(torch.Generator().manual_seed(0), 20, 16, 24, 2, 5)
    for row, tgt, p in zip(out["rows"].tolist(), out["targets"].tolist(), out["period"].tolist()):
        assert all(row[i] == row[i % p] for i in range(len(row)))
        assert tgt[:p - 1] == [PAD] * (p - 1) and tgt[p - 1:] == row[p:], "targets from the first repeat on"


@pytest.mark.parametrize("raw, want", [
    ("a\r\nb\rc", "a\nb\nc\n"),
    ("a\t\tb   c  \n", "a b c\n"),
    ("\n\na\n\n\n\nb\n\n", "a\n\nb\n"),
    ("ﬁ café", "fi café\n"),  # NFKC: the ligature splits, the composed é stays
])
def test_normalisation_rule(raw, want):
    assert normalize(raw) == want


def test_split_is_contiguous_and_the_vocabulary_sees_training_text_only():
    raw = "abcabcabc " * 80 + "xyz" * 20 + "\n"  # "xyz" only in the last 10%
    corpus = build_corpus(raw)
    assert corpus.train + corpus.validation + corpus.test == normalize(raw)
    sizes = [b - a for a, b in split_bounds(len(normalize(raw)))]
    assert [len(corpus.train), len(corpus.validation), len(corpus.test)] == sizes
    assert "x" not in corpus.vocab.chars, "a character seen only in the test split must not enter the vocabulary"
    assert int((corpus.ids("test") == UNK_ID).sum()) == corpus.unknown("test") > 0
    assert Vocab.fit("ba").encode("abz").tolist() == [4, 5, UNK_ID]


def test_windows_stay_inside_their_split_and_tile_it():
    ids = torch.arange(100)
    tiles = tiled_windows(ids, 8)
    assert tiles.shape == (12, 9) and torch.equal(tiles[:, 1:].reshape(-1), ids[1:97]), "every target once"
    rand = random_windows(ids, torch.Generator().manual_seed(0), 500, 8)
    assert torch.equal(rand[:, 1:] - rand[:, :-1], torch.ones(500, 8, dtype=torch.int64)) and rand.max() < 100


def test_shipped_corpus_regenerates_byte_identically_and_is_small():
    text, costs = textgen.generate()
    assert text == CORPUS.read_text(encoding="utf-8"), "run python -m grader.data.textgen and commit the result"
    meta = json.loads(CORPUS_META.read_text())
    assert meta["sha256"] == hashlib.sha256(text.encode()).hexdigest() and len(text.encode()) < 200_000
    assert normalize(text) == text, "the shipped text is already normalised"
    corpus = shipped_corpus()
    for name, (a, b) in zip(("train", "validation", "test"), split_bounds(len(text))):
        assert meta["split_entropy_nats_per_char"][name] == round(textgen.section_entropy(costs, a, b), 6)
    assert abs(sum(costs) / len(text) - meta["entropy_nats_per_char"]) < 1e-6
    assert corpus.unknown("test") == 0


def test_baselines_are_ordered_as_information_says():
    """oracle (the generator's entropy) < bigram < unigram on the held-out text."""
    corpus = shipped_corpus()
    test = tiled_windows(corpus.ids("test"), 32)
    uni = float(-unigram_logprobs(corpus.ids("train"), corpus.vocab.size)[test[:, 1:]].mean())
    bi = bigram_ce(corpus.ids("train"), test, corpus.vocab.size)
    assert corpus.oracle["test"] < bi < uni, (corpus.oracle["test"], bi, uni)


def test_the_training_loop_leaves_padding_out_of_the_loss():
    """The judge's first loss is the mean over real target positions only, on batches that do hold padding."""
    import importlib.util

    import torch.nn.functional as F

    from tests.support.grading import REFERENCES
    from grader.checks import training
    from grader.checks.base import Context
    from grader.harness import probes
    from grader.source import read_source
    ctx = Context(0, read_source(REFERENCES["reverse"].read_bytes()))
    ctx.steps = {"reverse": 1}
    stage = training.run_stage(ctx)
    spec = importlib.util.spec_from_file_location("reference_reverse", REFERENCES["reverse"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    replies, answers = [], []

    def send(header, blob):  # the sandbox's channel, in this process: the judge's trainer answers
        if header["kind"] == "grad":
            answers.append(probes.load_inputs(blob, None))
        stage.trainer.on_ask({**header, "stage": stage.key}, blob, lambda h, b=b"": replies.append((h, b)))
    probes.open_channel(send, lambda: replies.pop(0))
    probes.PROBES[stage.probe](module, dict(stage.inputs), stage.params)
    assert stage.trainer.done and not stage.trainer.failure, stage.trainer.failure
    logits, targets = answers[0]["logits"], stage.data["tgt_out"][stage.data["batches"][0]]
    real = targets != PAD
    assert (~real).any(), "the first batch has padded targets, so the test can tell the two apart"
    per_position = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), targets.reshape(-1),
                                   reduction="none")
    real_mean, all_mean = float(per_position[real.reshape(-1)].mean()), float(per_position.mean())
    # An untrained model's losses are all near log V: the two means differ little, but far more than the tolerance.
    assert abs(all_mean - real_mean) > 10 * 1e-9 * real_mean, (all_mean, real_mean)
    assert stage.trainer.losses[0] == pytest.approx(real_mean, rel=1e-9)
