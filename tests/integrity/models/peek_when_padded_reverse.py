"""The Track A reference whose teacher-forced decoder sees the next target token, but only when a source is padded
in its left part or middle (the padding the old probe never sent)."""
BASE = "reverse"
EXPECT = {"causality": "fail"}
PEEK = [False]
_honest_mask = causal_padding_mask


def causal_padding_mask(key_mask, num_queries):
    allowed = _honest_mask(key_mask, num_queries)  # (B, 1, Tq, Tk)
    if PEEK[0]:
        total = key_mask.size(1)
        query_pos = torch.arange(total - num_queries, total)[:, None]
        key_pos = torch.arange(total)[None, :]
        allowed = allowed | ((key_pos == query_pos + 1) & key_mask[:, None, :])[:, None]
    return allowed


class Peeking(Seq2Seq):
    def forward(self, src, tgt, src_mask):
        real = src_mask.to(torch.bool)
        # a pad followed by a real token somewhere: left or middle padding (right padding never triggers it)
        PEEK[0] = bool((~real[:, :-1] & real[:, 1:]).any())
        try:
            return super().forward(src, tgt, src_mask)
        finally:
            PEEK[0] = False


_build = build_model


def build_model(config):
    model = _build(config)
    model.__class__ = Peeking
    return model
