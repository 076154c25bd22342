"""The Track A reference that replaces the source and target IDs by a constant: only the source mask gets through."""
BASE = "reverse"
EXPECT = "independent"


class ConstantIds(Seq2Seq):
    def encode(self, src, src_mask):
        return super().encode(torch.full_like(src, 3), src_mask)

    def decode(self, tgt, memory, src_mask, cache=None):
        return super().decode(torch.full_like(tgt, 3), memory, src_mask, cache)


_build = build_model


def build_model(config):
    model = _build(config)
    model.__class__ = ConstantIds
    return model
