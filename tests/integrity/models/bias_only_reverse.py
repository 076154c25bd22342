"""A Track A model whose only parameter is one bias vector: encode and decode ignore the source and the target."""
BASE = "reverse"
EXPECT = "independent"


class BiasOnly(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(vocab_size))

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tgt, memory, src_mask, cache=None):
        return self.bias.expand(tgt.size(0), tgt.size(1), -1), cache

    def forward(self, src, tgt, src_mask):
        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]


def build_model(config):
    return BiasOnly(int(config["vocab_size"]))
