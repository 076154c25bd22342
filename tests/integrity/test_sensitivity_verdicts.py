"""The sensitivity helpers and the probes' shapes, without a sandbox (fast)."""
import torch

from grader.checks import causality, kv_cache
from grader.checks.sensitivity import INDEPENDENT, independent, other_tokens, unmoved
from grader.configs import FIRST_ORDINARY, check_config


class _Ctx:
    """The part of checks.base.Context the helpers read."""
    track = "lm"

    def generator(self, label):
        return torch.Generator().manual_seed(len(label))


def test_equal_logits_are_reported_as_input_independent():
    base = torch.randn(2, 5, 16, dtype=torch.float64)
    message = independent(base, base + 1e-9, "two batches")
    assert message and message.startswith(INDEPENDENT) and "two batches" in message


def test_logits_that_move_are_not_reported():
    base = torch.randn(2, 5, 16, dtype=torch.float64)
    other = base.clone()
    other[1, 4, 3] += 1e-6  # one value moving is enough to depend on the input
    assert independent(base, other, "two batches") is None


def test_unmoved_names_the_first_real_position_that_did_not_move():
    base = torch.zeros(2, 4, 3, dtype=torch.float64)
    other = torch.ones(2, 4, 3, dtype=torch.float64)
    other[1, 2] = 0.0
    message = unmoved(base, other, torch.ones(2, 4, dtype=torch.bool), "changing the real tokens")
    assert "batch 1, position 2" in message and "1 of 8" in message
    real = torch.ones(2, 4, dtype=torch.bool)
    real[1, 2] = False  # a padded position need not move
    assert unmoved(base, other, real, "changing the real tokens") is None


def test_other_tokens_change_every_ordinary_token_and_keep_the_rest():
    ids = torch.randint(FIRST_ORDINARY, check_config("lm")["vocab_size"], (3, 10))
    ids[0, :2] = 0  # padding stays padding
    keep = torch.zeros(3, 10, dtype=torch.bool)
    keep[2, 5] = True
    other = other_tokens(_Ctx(), ids, keep)
    changed = other != ids
    assert not changed[0, :2].any() and not changed[2, 5]
    assert changed.sum() == 3 * 10 - 3
    assert (other[changed] >= FIRST_ORDINARY).all() and (other < check_config("lm")["vocab_size"]).all()


def test_kv_cache_chunks_cover_max_len_with_sizes_in_range():
    for seed in range(20):
        chunks = kv_cache.draw_chunks(torch.Generator().manual_seed(seed))
        assert sum(chunks) == kv_cache.T == check_config("lm")["max_len"]
        assert all(1 <= c <= kv_cache.CHUNK_SIZES[1] for c in chunks)
        assert all(c >= kv_cache.CHUNK_SIZES[0] for c in chunks[:-1])


def test_causality_changes_only_real_tokens_and_pads_right_left_and_middle():
    mask = causality.padding_mask(causality.T)
    assert mask[0].all() and not mask[1, -1] and not mask[2, 0] and not mask[3, 4] and mask[3, -1]
    seq = torch.full((causality.B, causality.T), FIRST_ORDINARY)
    for p in causality.POSITIONS:
        changed = causality.change_at(seq, p, mask, check_config("lm")["vocab_size"] - FIRST_ORDINARY)
        assert torch.equal(changed[:, p] != seq[:, p], mask[:, p]), p
        others = torch.arange(causality.T) != p
        assert torch.equal(changed[:, others], seq[:, others]), p
