"""The Track B reference that lets each position see the next (real) token, but only when the batch holds padding."""
BASE = "lm"
EXPECT = {"causality": "fail"}
PEEK = [False]
_honest_mask = causal_padding_mask


def causal_padding_mask(key_mask, num_queries):
    allowed = _honest_mask(key_mask, num_queries)  # (B, 1, Tq, Tk)
    if PEEK[0]:
        total = key_mask.size(1)
        query_pos = torch.arange(total - num_queries, total)[:, None]
        key_pos = torch.arange(total)[None, :]
        following = (key_pos == query_pos + 1) & key_mask[:, None, :]  # (B, Tq, Tk): the next real token
        allowed = allowed | following[:, None]
    return allowed


class Peeking(DecoderLM):
    def forward(self, ids, mask=None, cache=None):
        PEEK[0] = mask is not None and not bool(mask.all())
        try:
            return super().forward(ids, mask, cache)
        finally:
            PEEK[0] = False


_build = build_model


def build_model(config):
    model = _build(config)
    model.__class__ = Peeking
    return model
