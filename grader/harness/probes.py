"""Probes: what each stage asks of the submission, run inside the sandbox after the import.

A probe only calls the student's code on the judge's inputs and hands back the raw tensors. It
decides nothing: every verdict is computed by the judge, outside this process.
"""
import contextlib
import functools

import torch
import torch.nn.functional as F
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

# Bound now, before any submission can monkeypatch torch.
_Tensor = torch.Tensor
_Module = torch.nn.Module
_manual_seed = torch.manual_seed
_get_default_dtype = torch.get_default_dtype
_set_default_dtype = torch.set_default_dtype

TRIPWIRE_CALLS: list[str] = []


class Violation(Exception):
    """The submission broke the contract in a way that is a failure, not a crash (wrong type, missing name)."""


def load_inputs(blob: bytes, prev_blob: bytes | None) -> dict:
    """The judge's inputs, plus the previous stage's outputs under `prev/`."""
    inputs = dict(_st_load(blob)) if blob else {}
    if prev_blob:
        inputs.update({"prev/" + k: v for k, v in _st_load(prev_blob).items()})
    return inputs


def dump_outputs(tensors: dict) -> bytes:
    """Serialise outputs as safetensors (own storage each, so tied weights do not trip the format)."""
    return _st_save({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()})


def install_tripwires() -> None:
    """Wrap the forbidden shortcuts so a call from the submission is recorded (and still works)."""
    def wrap(owner, name, label):
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def tripwire(*args, **kwargs):
            TRIPWIRE_CALLS.append(label)
            return original(*args, **kwargs)
        setattr(owner, name, tripwire)

    wrap(F, "scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention")
    wrap(F, "multi_head_attention_forward", "torch.nn.functional.multi_head_attention_forward")
    for cls in ("MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
                "TransformerEncoderLayer", "TransformerDecoderLayer"):
        wrap(getattr(torch.nn, cls), "__init__", f"torch.nn.{cls}")


def function(module, name):
    """The submission's function `name`, or a Violation naming what is missing."""
    fn = getattr(module, name, None)
    if fn is None:
        raise Violation(f"the submission has no function `{name}` (see the contract)")
    if not callable(fn):
        raise Violation(f"`{name}` is not a function")
    return fn


def tensor(value, what: str):
    """Check a returned value is a tensor."""
    if not isinstance(value, _Tensor):
        raise Violation(f"{what} returned {type(value).__name__}, expected a torch.Tensor")
    return value


def pair(value, what: str):
    """Check a returned value is a 2-tuple whose first item is a tensor."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Violation(f"{what} must return a pair (tensor, second item); it returned {type(value).__name__}")
    return tensor(value[0], f"{what}[0]"), value[1]


def raised(call) -> dict:
    """Run call and report which exception it raised, if any."""
    try:
        call()
    except Exception as exc:  # the probe only records; the judge decides
        return {"raised": type(exc).__name__, "message": str(exc)[:300]}
    return {"raised": None, "message": ""}


@contextlib.contextmanager
def float64():
    """Default dtype float64 for the numerical checks, restored afterwards."""
    before = _get_default_dtype()
    _set_default_dtype(torch.float64)
    try:
        yield
    finally:
        _set_default_dtype(before)


def build(module, params, seed_key="seed"):
    """Build the model from the config under the judge's seed, in float64 eval mode."""
    _manual_seed(int(params[seed_key]))
    model = function(module, "build_model")(dict(params["config"]))
    if not isinstance(model, _Module):
        raise Violation(f"build_model returned {type(model).__name__}, expected a torch.nn.Module")
    return model.double().eval()


def method(model, name):
    """A required model method, or a Violation naming it."""
    fn = getattr(model, name, None)
    if not callable(fn):
        raise Violation(f"the model has no method `{name}` (Track A needs encode and decode)")
    return fn


def lm_logits(model, ids, mask=None, cache=None):
    """Track B forward: (logits, cache)."""
    return pair(model(ids, mask=mask, cache=cache), "model(ids, mask, cache)")


def seq2seq_logits(model, src, src_mask, tgt):
    """Track A teacher-forced forward: logits."""
    out = model(src, tgt, src_mask)
    return tensor(out, "model(src, tgt, src_mask)")


def decode(model, tgt, memory, src_mask, cache=None):
    """Track A decoder call: (logits, cache)."""
    return pair(method(model, "decode")(tgt, memory, src_mask, cache=cache), "model.decode(tgt, memory, src_mask, cache)")


def forward(model, track, inputs, ids_key="ids", src_key="src"):
    """Logits for the batch in inputs, whichever track."""
    if track == "lm":
        return lm_logits(model, inputs[ids_key], inputs.get("mask"))[0]
    return seq2seq_logits(model, inputs[src_key], inputs["src_mask"], inputs["tgt"])


# ---- one probe per check -------------------------------------------------------------------------

def probe_split_heads(module, inputs, params):
    """split, merge of the split, merge of the judge's split, and the error on a bad width."""
    split, merge = function(module, "split_heads"), function(module, "merge_heads")
    heads = int(params["heads"])
    out = tensor(split(inputs["x"], heads), "split_heads(x, H)")
    back = tensor(merge(out), "merge_heads(split_heads(x, H))")
    merged = tensor(merge(inputs["x_split"]), "merge_heads(x_split)")
    facts = {"bad_width": raised(lambda: split(inputs["x_bad"], heads))}
    return {"split": out, "roundtrip": back, "merged": merged}, facts


def probe_attention(module, inputs, params):
    """attention on each mask case, and the error on a query row with no allowed key."""
    attn = function(module, "attention")
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    outputs = {}
    with float64():
        for case in params["cases"]:
            mask = inputs.get("mask_" + case)
            out, weights = pair(attn(q, k, v, mask=mask), f"attention(q, k, v, mask={case})")
            outputs["out_" + case] = out
            outputs["weights_" + case] = tensor(weights, f"attention(..., mask={case})[1]")
        facts = {"empty_row": raised(lambda: attn(q, k, v, mask=inputs["mask_empty"]))}
    return outputs, facts


def probe_rope(module, inputs, params):
    """apply_rope on shared and per-row positions, on repeated q/k vectors, and on an odd width."""
    rope = function(module, "apply_rope")
    with float64():
        outputs = {
            "y_t": tensor(rope(inputs["x"], inputs["pos_t"]), "apply_rope(x, positions (T,))"),
            "y_bt": tensor(rope(inputs["x"], inputs["pos_bt"]), "apply_rope(x, positions (B, T))"),
            "rq": tensor(rope(inputs["q_rep"], inputs["pos_rel"]), "apply_rope(q, positions)"),
            "rk": tensor(rope(inputs["k_rep"], inputs["pos_rel"]), "apply_rope(k, positions)"),
        }
        facts = {"odd_width": raised(lambda: rope(inputs["x_odd"], inputs["pos_t"]))}
    return outputs, facts


def probe_gradient(module, inputs, params):
    """One backward pass of sum(logits * R); every trainable parameter's gradient."""
    with float64():
        model = build(module, params)
        logits = forward(model, params["track"], inputs)
        if tuple(logits.shape) != tuple(inputs["weight"].shape):
            raise Violation(f"logits have shape {tuple(logits.shape)}, expected {tuple(inputs['weight'].shape)} (B, T, V)")
        (logits * inputs["weight"]).sum().backward()
        outputs, missing, trainable = {}, [], []
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            trainable.append(name)
            if p.grad is None:
                missing.append(name)
            else:
                outputs["grad/" + name] = p.grad
    return outputs, {"trainable": trainable, "no_grad": missing}


def probe_causality(module, inputs, params):
    """Logits for the base batch (twice) and for each batch with one changed token."""
    key = "ids" if params["track"] == "lm" else "tgt"
    outputs = {}
    with float64(), torch.no_grad():
        model = build(module, params)
        outputs["base"] = forward(model, params["track"], inputs)
        outputs["base_again"] = forward(model, params["track"], inputs)
        for p in params["positions"]:
            changed = dict(inputs)
            changed[key] = inputs[f"{key}_{p}"]
            outputs[f"changed_{p}"] = forward(model, params["track"], changed)
    return outputs, {}


def probe_padding(module, inputs, params):
    """Logits for a padded batch and for the same batch with other IDs at the padded positions."""
    with float64(), torch.no_grad():
        model = build(module, params)
        base = forward(model, params["track"], inputs)
        if params["track"] == "lm":
            other = forward(model, "lm", inputs, ids_key="ids_alt")
        else:
            other = forward(model, "reverse", inputs, src_key="src_alt")
    return {"base": base, "other": other}, {}


def probe_kv_cache(module, inputs, params):
    """Full-prefix logits, one-token cached logits, and chunked cached logits."""
    outputs = {}
    with float64(), torch.no_grad():
        model = build(module, params)
        if params["track"] == "lm":
            ids = inputs["ids"]
            outputs["full"] = lm_logits(model, ids)[0]
            step = lambda chunk, cache: lm_logits(model, chunk, cache=cache)  # noqa: E731
            seq = ids
        else:
            src, src_mask, seq = inputs["src"], inputs["src_mask"], inputs["tgt"]
            memory = method(model, "encode")(src, src_mask)
            outputs["full"] = decode(model, seq, memory, src_mask)[0]
            step = lambda chunk, cache: decode(model, chunk, memory, src_mask, cache)  # noqa: E731
        for name, sizes in (("step", [1] * seq.shape[1]), ("chunked", params["chunks"])):
            cache, pieces, start = None, [], 0
            for size in sizes:
                logits, cache = step(seq[:, start:start + size], cache)
                pieces.append(logits)
                start += size
            outputs[name] = torch.cat(pieces, dim=1)
    return outputs, {}


def probe_checkpoint_save(module, inputs, params):
    """Logits on the fixed batch and the state dict, from a model built under the first seed."""
    with float64(), torch.no_grad():
        model = build(module, params)
        outputs = {"logits": forward(model, params["track"], inputs)}
        for name, value in model.state_dict().items():
            if not isinstance(value, _Tensor):
                raise Violation(f"state_dict entry `{name}` is {type(value).__name__}, not a tensor")
            outputs["state/" + name] = value
    return outputs, {}


def probe_checkpoint_load(module, inputs, params):
    """Rebuild under another seed in this fresh process, load the saved state strictly, give logits."""
    state = {k[len("prev/state/"):]: v for k, v in inputs.items() if k.startswith("prev/state/")}
    with float64(), torch.no_grad():
        model = build(module, params)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise Violation(f"load_state_dict(strict=True) refused the saved state: {str(exc)[:600]}") from None
        return {"logits": forward(model, params["track"], inputs)}, {}


def probe_shortcuts(module, inputs, params):
    """Exercise every function and a model forward; the tripwires record forbidden calls."""
    with float64(), torch.no_grad():
        for name, call in (
            ("split_heads", lambda: module.split_heads(inputs["x"], int(params["heads"]))),
            ("attention", lambda: module.attention(inputs["q"], inputs["q"], inputs["q"])),
            ("apply_rope", lambda: module.apply_rope(inputs["q"], inputs["pos"])),
        ):
            if callable(getattr(module, name, None)):
                raised(call)
        if callable(getattr(module, "build_model", None)):
            raised(lambda: forward(build(module, params), params["track"], inputs))
    return {}, {"calls": sorted(set(TRIPWIRE_CALLS))}


PROBES = {
    "split_heads": probe_split_heads,
    "attention": probe_attention,
    "rope": probe_rope,
    "gradient": probe_gradient,
    "causality": probe_causality,
    "padding": probe_padding,
    "kv_cache": probe_kv_cache,
    "checkpoint_save": probe_checkpoint_save,
    "checkpoint_load": probe_checkpoint_load,
    "shortcuts": probe_shortcuts,
}
