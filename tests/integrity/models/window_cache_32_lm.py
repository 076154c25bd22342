"""The Track B reference whose cache keeps only the last 32 positions (positions still counted correctly)."""
BASE = "lm"
EXPECT = {"kv_cache": "fail"}
WINDOW = 32


class WindowCache(DecoderLM):
    def forward(self, ids, mask=None, cache=None):
        batch, length = ids.shape
        mask = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.to(torch.bool)
        if cache is None:
            start, past_mask, past_layers = 0, mask.new_zeros((batch, 0)), [None] * len(self.blocks)
        else:
            start, past_mask, past_layers = cache["start"], cache["key_mask"], cache["layers"]
        key_mask = torch.cat((past_mask, mask), dim=1)  # (B, P+T)
        attn_mask = causal_padding_mask(key_mask, length)  # (B, 1, T, P+T)
        positions = torch.arange(start, start + length)  # (T,): the true absolute positions
        x = self.drop(self.embed(ids))
        layers = []
        for block, layer_past in zip(self.blocks, past_layers):
            x, present = block(x, positions, attn_mask, layer_past)
            layers.append({"k": present["k"][:, :, -WINDOW:], "v": present["v"][:, :, -WINDOW:]})
        logits = self.head(self.norm(x))
        return logits, {"layers": layers, "key_mask": key_mask[:, -WINDOW:], "start": start + length}


_build = build_model


def build_model(config):
    model = _build(config)
    model.__class__ = WindowCache
    return model
