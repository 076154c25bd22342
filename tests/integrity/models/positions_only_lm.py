"""A Track B model that computes its logits from the positions alone (a learned table per position, cache-aware)."""
BASE = "lm"
EXPECT = "independent"


class PositionsOnly(nn.Module):
    def __init__(self, max_len, d_model, vocab_size):
        super().__init__()
        self.pos = nn.Embedding(max_len, d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids, mask=None, cache=None):
        start = 0 if cache is None else cache["next"]
        positions = torch.arange(start, start + ids.size(1))  # (T,)
        logits = self.head(torch.tanh(self.pos(positions)))[None].expand(ids.size(0), -1, -1)  # (B, T, V)
        return logits, {"next": start + ids.size(1)}


def build_model(config):
    return PositionsOnly(int(config["max_len"]), int(config["d_model"]), int(config["vocab_size"]))
