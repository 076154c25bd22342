"""The Track A reference whose decoder cache keeps only the last 8 positions (positions still counted correctly)."""
BASE = "reverse"
EXPECT = {"kv_cache": "fail"}
WINDOW = 8


class WindowCache(Seq2Seq):
    def decode(self, tgt, memory, src_mask, cache=None):
        batch, length = tgt.shape
        start = 0 if cache is None else cache[0]["start"]
        past_layers = [None] * len(self.decoder) if cache is None else cache
        kept = 0 if cache is None else cache[0]["k"].size(2)
        positions = torch.arange(start, start + length)  # (T,): the true absolute positions
        self_mask = causal_padding_mask(torch.ones(batch, kept + length, dtype=torch.bool), length)
        cross_mask = src_mask.to(torch.bool)[:, None, None, :]
        x = self.drop(self.embed(tgt))
        layers = []
        for block, layer_past in zip(self.decoder, past_layers):
            x, present = block(x, positions, self_mask, memory, cross_mask, layer_past)
            layers.append({"k": present["k"][:, :, -WINDOW:], "v": present["v"][:, :, -WINDOW:],
                           "start": start + length})
        return self.head(self.decoder_norm(x)), layers


_build = build_model


def build_model(config):
    model = _build(config)
    model.__class__ = WindowCache
    return model
