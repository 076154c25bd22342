"""apply_rope: norms kept, same-position dot products kept, scores depend only on m - n, the contract's angles."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from .base import Stage, Verdict, raised_problem

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "rope"
TITLE = "Rotary position embedding"
HINT = "signs in the 2×2 rotation, the frequency formula, positions not converted to float"
ORDER = 30
FUNCTIONS = ("apply_rope",)  # the contract functions it tests on their own
NEEDS_TRACK = False
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("pairing",)
B, H, T, DH, P = 2, 2, 6, 8, 12
AXES = ("batch", "head", "position", "channel")


def plan(ctx):
    """Random x with shared and per-row positions, one q and one k repeated over P positions, an odd width."""
    gen = ctx.generator(ID)
    x = torch.randn(B, H, T, DH, generator=gen, dtype=torch.float64)
    pos_t = torch.arange(T)
    pos_bt = torch.stack([torch.arange(T), torch.arange(T) + 7])  # (B, T): row 1 starts at position 7
    q = torch.randn(DH, generator=gen, dtype=torch.float64)
    k = torch.randn(DH, generator=gen, dtype=torch.float64)
    inputs = {"x": x, "pos_t": pos_t, "pos_bt": pos_bt, "pos_rel": torch.arange(P),
              "q_rep": q.expand(1, 1, P, DH).contiguous(), "k_rep": k.expand(1, 1, P, DH).contiguous(),
              "x_odd": torch.randn(1, 1, T, DH - 1, generator=gen, dtype=torch.float64)}
    return [Stage(ID, "rope", inputs)]


def rotate(x, positions, pairing):
    """The judge's RoPE: channel pairs (2i, 2i+1) or (i, i+Dh/2) turned by pos * 10000^(-2i/Dh)."""
    dh = x.shape[-1]
    angle = positions.to(torch.float64)[..., None] * 10000 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    if positions.dim() == 2:
        angle = angle[:, None]  # (B, 1, T, Dh/2)
    cos, sin = angle.cos(), angle.sin()
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., : dh // 2], x[..., dh // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def verdict(ctx, stages, outcomes):
    """The three invariants first (they name the bug best), then the angles themselves."""
    inputs, out = stages[ID].inputs, outcomes[ID]
    x = inputs["x"]
    v = Verdict(ID)
    y_t, y_bt = out.tensors.get("y_t"), out.tensors.get("y_bt")
    rq, rk = out.tensors.get("rq"), out.tensors.get("rk")
    shapes = [shape_problem(y_t, x.shape, "apply_rope(x, positions of shape (T,))", "x.shape"),
              shape_problem(y_bt, x.shape, "apply_rope(x, positions of shape (B, T))", "x.shape"),
              shape_problem(rq, inputs["q_rep"].shape, "apply_rope(q)", "q.shape"),
              shape_problem(rk, inputs["k_rep"].shape, "apply_rope(k)", "k.shape")]
    if any(v.problem(s) for s in shapes) or v.problem(nonfinite(y_t, "apply_rope output", AXES)):
        return v.result("")
    miss = mismatch(y_t.norm(dim=-1), x.norm(dim=-1), axes=AXES[:3], **tol.ROPE)
    v.problem(miss and miss.describe("vector norms after apply_rope against before")
              + ": a rotation keeps norms; check the signs of the 2x2 rotation (x1·cos − x2·sin, x1·sin + x2·cos)")
    q, k = inputs["q_rep"][0, 0, 0], inputs["k_rep"][0, 0, 0]
    same = (rq[0, 0] * rk[0, 0]).sum(-1)  # (P,) q_p · k_p
    miss = mismatch(same, (q @ k).expand(P), axes=("position",), **tol.ROPE)
    v.problem(miss and miss.describe("q·k after rotating both to the same position, against q·k") +
              ": q and k at the same position must be turned by the same angles")
    scores = rq[0, 0] @ rk[0, 0].T  # (P, P): query at m, key at n
    miss = mismatch(scores[1:, 1:], scores[:-1, :-1], axes=("query position m", "key position n"), **tol.ROPE)
    v.problem(miss and miss.describe("score(m+1, n+1) against score(m, n)") +
              ": the score must depend only on m − n; are angles proportional to the position?")
    if torch.equal(y_t, x):
        v.problem("apply_rope returned its input unchanged: positions must rotate the channel pairs")
    elif not v.problems:
        best = None
        for pairing in ("interleaved", "half-split"):
            miss_t = mismatch(y_t, rotate(x, inputs["pos_t"], pairing), axes=AXES, **tol.ROPE)
            miss_bt = mismatch(y_bt, rotate(x, inputs["pos_bt"], pairing), axes=AXES, **tol.ROPE)
            if not miss_t and not miss_bt:
                v.metrics["pairing"] = pairing
                break
            worst = miss_t or miss_bt
            if best is None or worst.max_abs < best[1].max_abs:
                best = (pairing, worst, "(B, T)" if miss_t is None else "(T,)")
        else:
            pairing, miss, which = best
            v.problem(miss.describe(f"apply_rope with positions {which} against the {pairing} pairing (the closer one)")
                      + ": the angle for pair i must be pos · 10000^(−2i/Dh)")
    v.problem(raised_problem(out, "odd_width", f"apply_rope on an odd head width ({DH - 1})"))
    return v.result(f"apply_rope keeps norms and same-position dot products, scores depend only on m − n, and it "
                    f"matches the {v.metrics.get('pairing', '')} rotation for positions (T,) and (B, T)")
