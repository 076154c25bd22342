"""Probes: what each stage asks of the submission, run inside the sandbox after the import.

A probe only calls the student's code on the judge's inputs and hands back the raw tensors. It
decides nothing: every verdict is computed by the judge, outside this process.
"""
import contextlib
import functools
import random

import numpy.random  # torch imports NumPy but not its generator; imported here once, not in each stage's child
import torch
import torch.nn.functional as F
from safetensors.torch import load as _st_load

try:  # in the sandbox the harness's files are top-level modules; in the judge's tests and benchmarks, a package
    from .optimizer import AdamW, clip_norm, weights_digest
    from .tensorbytes import encode_tensors
except ImportError:
    from optimizer import AdamW, clip_norm, weights_digest
    from tensorbytes import encode_tensors

# Bound now, before any submission can monkeypatch torch.
_Tensor = torch.Tensor
_Module = torch.nn.Module
_torch_seed = torch.manual_seed
_random_seed = random.seed
_numpy_seed = numpy.random.seed
_get_default_dtype = torch.get_default_dtype
_set_default_dtype = torch.set_default_dtype

TRIPWIRE_CALLS: list[str] = []


def seed_generators(seed: int) -> None:
    """Put Python's and NumPy's generators at one state: os.fork reseeds Python's from the OS in every child, and
    NumPy's holds whatever the last stage left, so a submission drawing from either would get another score in
    each grading."""
    _random_seed(seed)
    _numpy_seed(seed % 2 ** 32)


def _manual_seed(seed: int) -> None:
    """The judge's seed for each generator a model may draw from as it is built: torch's, Python's and NumPy's."""
    _torch_seed(seed)
    seed_generators(seed)


class Violation(Exception):
    """The submission broke the contract in a way that is a failure, not a crash (wrong type, missing name)."""


def load_inputs(blob: bytes, prev_blob: bytes | None) -> dict:
    """The judge's inputs, plus the previous stage's outputs under `prev/`."""
    inputs = dict(_st_load(blob)) if blob else {}
    if prev_blob:
        inputs.update({"prev/" + k: v for k, v in _st_load(prev_blob).items()})
    return inputs


def dump_outputs(tensors: dict) -> bytes:
    """Serialise outputs as safetensors (each from its own values, so tied weights do not trip the format)."""
    return encode_tensors(tensors)


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


# Below torch.nn.functional: torch.ops.aten.*, torch._C bindings and the private fused kernels' Python entry points
# reach a function mode (by op name), so a call that bypasses the wrapped Python functions is recorded all the same.
# (A dispatch mode would also see kernels called from C++, but its first use imports some 800 modules, 3 s a
# sandbox; the static rule in grader/shortcuts.py is the first layer.)
SHORTCUT_OPS = ("scaled_dot_product", "multi_head_attention")


class _ShortcutFunctions(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = str(getattr(func, "__name__", "") or func)
        if any(s in name for s in SHORTCUT_OPS):
            TRIPWIRE_CALLS.append("op:" + "".join(c for c in name if c.isalnum() or c in "._")[:100])
        return func(*args, **(kwargs or {}))


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


def swapped(inputs, suffix):
    """The inputs with every tensor `name` replaced by `name + suffix` where the judge sent one (a second batch)."""
    return {k: inputs.get(k + suffix, v) for k, v in inputs.items()}


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
        outputs, missing, trainable = {"logits": logits}, [], []
        with torch.no_grad():  # the second batch: the judge checks the logits depend on the input
            outputs["logits_other"] = forward(model, params["track"], swapped(inputs, "_other"))
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
    """Per case (inputs `case/name`): logits for the base batch (the first case twice) and for each changed batch."""
    key = "ids" if params["track"] == "lm" else "tgt"
    outputs = {}
    with float64(), torch.no_grad():
        model = build(module, params)
        for n, case in enumerate(params["cases"]):
            batch = {k[len(case) + 1:]: v for k, v in inputs.items() if k.startswith(case + "/")}
            outputs[f"{case}/base"] = forward(model, params["track"], batch)
            if n == 0:
                outputs[f"{case}/base_again"] = forward(model, params["track"], batch)
            for p in params["positions"]:
                outputs[f"{case}/changed_{p}"] = forward(model, params["track"], {**batch, key: batch[f"{key}_{p}"]})
    return outputs, {}


def probe_padding(module, inputs, params):
    """Logits for a padded batch, with other IDs at the padded positions, and with other real tokens."""
    with float64(), torch.no_grad():
        model = build(module, params)
        base = forward(model, params["track"], inputs)
        if params["track"] == "lm":
            other = forward(model, "lm", inputs, ids_key="ids_alt")
        else:
            other = forward(model, "reverse", inputs, src_key="src_alt")
        real = forward(model, params["track"], swapped(inputs, "_real"))
    return {"base": base, "other": other, "real": real}, {}


def probe_kv_cache(module, inputs, params):
    """Full-prefix logits (and of a second sequence), one-token cached logits, and chunked cached logits."""
    outputs = {}
    with float64(), torch.no_grad():
        model = build(module, params)
        if params["track"] == "lm":
            ids = inputs["ids"]
            outputs["full"] = lm_logits(model, ids)[0]
            outputs["full_other"] = lm_logits(model, inputs["ids_other"])[0]
            step = lambda chunk, cache: lm_logits(model, chunk, cache=cache)  # noqa: E731
            seq = ids
        else:
            src, src_mask, seq = inputs["src"], inputs["src_mask"], inputs["tgt"]
            memory = method(model, "encode")(src, src_mask)
            outputs["full"] = decode(model, seq, memory, src_mask)[0]
            memory_other = method(model, "encode")(inputs["src_other"], src_mask)
            outputs["full_other"] = decode(model, inputs["tgt_other"], memory_other, src_mask)[0]
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
        outputs = {"logits": forward(model, params["track"], inputs),
                   "logits_other": forward(model, params["track"], swapped(inputs, "_other"))}
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
        return {"logits": forward(model, params["track"], inputs),
                "logits_other": forward(model, params["track"], swapped(inputs, "_other"))}, {}


def probe_shortcuts(module, inputs, params):
    """Exercise every function and a model forward; the tripwires and the op-level modes record forbidden calls."""
    with float64(), torch.no_grad(), _ShortcutFunctions():
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


# ---- training and evaluation (checks `training` and `evaluation`) ----------------------------------------------
# The judge trains: it keeps the weights and runs the optimizer. A training stage here only answers its questions
# (the initial weights under the judge's seed, then, step by step, logits and gradients at the judge's weights,
# which it takes ahead of the judge with the same optimizer and names by digest); a later stage in a fresh sandbox
# answers at weights the judge picked, so the judge can check the answers.
# Bound at import, before any submission runs.
_cross_entropy = F.cross_entropy
_no_grad = torch.no_grad

_CHANNEL: dict = {}


def open_channel(send, receive) -> None:
    """The interactive stage's way to the judge: send(header, blob) and receive() -> (header, blob)."""
    _CHANNEL.update(send=send, receive=receive)


def ask(kind: str, step: int, tensors: dict) -> tuple[dict, dict]:
    """Send the judge tensors and wait for its reply: (header, tensors)."""
    tell(kind, step, tensors)
    return hear()


def tell(kind: str, step: int, tensors: dict, **extra) -> None:
    """Send the judge tensors without waiting for its reply."""
    _CHANNEL["send"]({"type": "ask", "kind": kind, "step": step, **extra}, dump_outputs(tensors))


def hear() -> tuple[dict, dict]:
    """The judge's next reply: (header, tensors)."""
    header, blob = _CHANNEL["receive"]()
    return header, (dict(_st_load(blob)) if blob else {})


def fed(inputs: dict, params: dict, step: int) -> None:
    """A fresh stage's tensors of the judge's training run, asked for when the stage gets to them (params "fed");
    the judge sends them once its run has taken that step (-1: every step), and stop if the run did not finish."""
    if not params.get("fed"):
        return  # called with every input already in place (in one process, by the benchmarks and tests)
    header, tensors = ask("need", step, {})
    if header.get("kind") != "tensors":
        raise Violation("the judge's training run did not get this far, so there is nothing to check")
    inputs.update(tensors)


def warm_up_training() -> None:
    """One tiny forward and backward pass here in the harness, before any fork: a process's first backward imports
    modules that every training stage's child would otherwise pay again."""
    weight = torch.nn.Parameter(torch.zeros(2, 3))
    _cross_entropy(weight, torch.tensor([0, 2]), ignore_index=1).backward()
    # the first read and write of safetensors in a process cost about a millisecond each: here, not in each child
    load_inputs(dump_outputs({"weight": weight}), dump_outputs({"grad": weight.grad}))


def warm_up_checks() -> None:
    """What a check's child does first, on a tiny float64 model of the judge's parts: built, run, saved and reloaded.
    Run by a spare while it waits (main.Spare), so the child's first calls and first writes to the pages it shares
    with the harness come before its stage, not in it."""
    import reference_parts as parts
    with float64(), _no_grad():
        _manual_seed(0)
        model = torch.nn.ModuleDict({"embed": torch.nn.Embedding(11, 8), "proj": torch.nn.Linear(8, 24),
                                     "norm": torch.nn.LayerNorm(8), "head": torch.nn.Linear(8, 11)}).double().eval()
        x = model["norm"](model["embed"](torch.arange(6).view(1, 6)))
        q, k, v = (parts.apply_rope(parts.split_heads(t, 2), torch.arange(6)) for t in model["proj"](x).chunk(3, -1))
        mask = torch.ones(6, 6, dtype=torch.bool).tril()
        logits = model["head"](torch.nn.functional.gelu(parts.merge_heads(parts.attention(q, k, v, mask)[0])))
        model.load_state_dict(model.state_dict(), strict=True)
        load_inputs(dump_outputs({"logits": logits}), dump_outputs(dict(model.state_dict())))


def build_float32(module, params):
    """Build the training model from its config under the judge's seed, in float32 with the default dtype."""
    _set_default_dtype(torch.float32)
    _manual_seed(int(params["seed"]))
    model = function(module, "build_model")(dict(params["config"]))
    if not isinstance(model, _Module):
        raise Violation(f"build_model returned {type(model).__name__}, expected a torch.nn.Module")
    return model


def load_weights(named: dict, inputs: dict, prefix: str, dtype=None, direction: str | None = None, eps: float = 0.0):
    """Copy the judge's weights (inputs[prefix + name]) into the parameters, optionally moved eps along a direction."""
    with _no_grad():
        for name, p in named.items():
            if prefix + name not in inputs:
                raise Violation(f"the judge has no weights for parameter `{name}`: the model built here has other "
                                "parameters than the one that was trained (is build_model deterministic?)")
            value = inputs[prefix + name].to(dtype or p.dtype)
            if direction is not None:
                value = value + eps * inputs[direction + name].to(value.dtype)
            if value.shape != p.shape:
                raise Violation(f"parameter `{name}` has shape {tuple(p.shape)} here but {tuple(value.shape)} in "
                                "the trained model")
            p.copy_(value)


def train_logits(model, track, data, idx):
    """Teacher-forced logits and targets for the training rows idx: Track A (src, tgt_in) -> tgt_out, Track B
    rows[:, :-1] -> targets."""
    if track == "lm":
        rows = data["rows"][idx]  # (B, T+1)
        inputs, targets = rows[:, :-1], data["targets"][idx]  # (B, T), (B, T)
        logits = lm_logits(model, inputs)[0]
    else:
        inputs, targets = data["tgt_in"][idx], data["tgt_out"][idx]  # (B, T), (B, T)
        logits = seq2seq_logits(model, data["src"][idx], data["src_mask"][idx], inputs)
    if logits.dim() != 3 or tuple(logits.shape[:2]) != tuple(targets.shape):
        raise Violation(f"the training forward returned logits of shape {tuple(logits.shape)}, expected (B, T, V) "
                        f"with (B, T) = {tuple(targets.shape)}")
    return logits, targets


def probe_train(module, inputs, params):
    """Build under the judge's seed and send the initial weights; then, for each step, send the train-mode logits of
    the step's batch and the gradient of the mean cross-entropy at the judge's weights. The judge sends the first
    weights; the later ones this stage computes itself while the judge checks the answer ("go"), unless the judge
    sends them (its weights differ from this stage's own step)."""
    track, pad, vocab = params["track"], int(params["config"]["pad_id"]), int(params["vocab_size"])
    model = build_float32(module, params)
    named = dict(sorted(model.named_parameters()))  # the judge's order: weights and gradients travel flat
    header, weights = ask("init", -1, {name: p.detach() for name, p in named.items()})
    model.train()
    flat, optimizer, clip = None, None, 0.0
    while header.get("kind") in ("step", "go"):
        step = int(header["step"])
        if header["kind"] == "step":
            flat = weights["weights"].clone()
            if "speculate" in header:  # the first weights, or the judge's after this stage's own step differed
                hp = header["speculate"]
                optimizer = AdamW([p.numel() for p in named.values()], hp["lr"], hp["betas"],
                                  hp["weight_decay"]) if hp else None
                clip = float(hp["clip"]) if hp else 0.0
        unflatten(named, flat)
        model.zero_grad(set_to_none=True)
        logits, targets = train_logits(model, track, inputs, inputs["batches"][step])
        if logits.shape[-1] != vocab:
            raise Violation(f"the model returned {logits.shape[-1]} logits per position; the config says "
                            f"vocab_size={vocab}")
        _cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1), ignore_index=pad).backward()
        present = [p.grad is not None for p in named.values()]
        grads = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                           for p in named.values()]).float()
        tell("grad", step, {"logits": logits.detach(), "has_grad": torch.tensor(present, dtype=torch.uint8),
                            "grads": grads}, weights=weights_digest(flat))
        if optimizer is not None:  # the judge's next weights, computed while it reads this answer
            clip_norm(grads, clip)
            optimizer.step(flat, grads, present)
        header, weights = hear()
    return {}, {}


def unflatten(named: dict, flat) -> None:
    """Copy one flat tensor of weights (the judge's, in the parameters' order) into the parameters."""
    start = 0
    with _no_grad():
        for name, p in named.items():
            p.copy_(flat[start:start + p.numel()].view(p.shape))
            start += p.numel()


def check_logits(model, track, data):
    """Eval-mode logits on the judge's fixed training rows (the judge computes the loss from them)."""
    model.eval()
    with _no_grad():
        if track == "lm":
            return lm_logits(model, data["check_inputs"])[0]
        return seq2seq_logits(model, data["check_src"], data["check_src_mask"], data["check_tgt_in"])


def probe_verify_training(module, inputs, params):
    """A fresh sandbox's answers at the judge's weights: the model built under the seed; at each step the judge
    picked, train-mode logits (float32) and float64 logits a small step either way along the judge's direction;
    eval-mode logits on fixed training rows at the first and last weights."""
    track = params["track"]
    model = build_float32(module, params)
    named = dict(model.named_parameters())
    outputs = {"built/" + name: p.detach().clone() for name, p in named.items()}
    for step in params["steps"]:
        fed(inputs, params, step)
        model.float().train()
        load_weights(named, inputs, f"w{step}/")
        with _no_grad():
            outputs[f"logits{step}"] = train_logits(model, track, inputs, inputs["batches"][step])[0]
            with float64():
                model.double()
                for sign, name in ((1.0, "plus"), (-1.0, "minus")):
                    load_weights(named, inputs, f"w{step}/", torch.float64, f"d{step}/", sign * float(params["eps"]))
                    outputs[f"{name}{step}"] = train_logits(model, track, inputs, inputs["batches"][step])[0]
        if "check_first" not in outputs:  # the first weights came with the first checked step: not left to the end
            model.float()
            load_weights(named, inputs, "first/")
            outputs["check_first"] = check_logits(model, track, inputs)
    model.float()
    fed(inputs, params, -1)
    load_weights(named, inputs, "last/")
    outputs["check_last"] = check_logits(model, track, inputs)
    if track == "reverse":
        outputs["check_greedy"], _ = greedy_seq2seq(model, inputs["check_src"], inputs["check_src_mask"],
                                                    inputs["check_tgt_in"].shape[1], int(params["config"]["bos_id"]))
    return outputs, {}


def greedy_seq2seq(model, src, src_mask, steps, bos):
    """Greedy decoding with the cache: BOS, then each argmax fed back alone. (ids (N, steps), logits (N, steps, V))."""
    model.eval()
    with _no_grad():
        memory = method(model, "encode")(src, src_mask)
        token = torch.full((src.shape[0], 1), bos, dtype=torch.int64)  # (N, 1)
        cache, ids, logits = None, [], []
        for _ in range(steps):
            step_logits, cache = decode(model, token, memory, src_mask, cache)  # (N, 1, V)
            logits.append(step_logits[:, -1])
            token = step_logits[:, -1].argmax(-1, keepdim=True)  # (N, 1)
            ids.append(token)
    return torch.cat(ids, dim=1), torch.stack(logits, dim=1)


def greedy_lm(model, prompt, steps):
    """Greedy continuation of prompt (N, P) with the cache: (ids (N, steps), logits (N, steps, V))."""
    model.eval()
    with _no_grad():
        step_logits, cache = lm_logits(model, prompt)
        ids, logits = [], []
        for i in range(steps):
            logits.append(step_logits[:, -1])
            token = step_logits[:, -1].argmax(-1, keepdim=True)  # (N, 1)
            ids.append(token)
            if i + 1 < steps:
                step_logits, cache = lm_logits(model, token, cache=cache)
    return torch.cat(ids, dim=1), torch.stack(logits, dim=1)


def greedy_full_prefix(model, prompt, steps):
    """Greedy continuation without the cache, re-reading the whole prefix every step: (N, steps)."""
    model.eval()
    seq = prompt
    with _no_grad():
        for _ in range(steps):
            token = lm_logits(model, seq)[0][:, -1].argmax(-1, keepdim=True)  # (N, 1)
            seq = torch.cat((seq, token), dim=1)
    return seq[:, prompt.shape[1]:]


def sample_lm(model, prompt, steps, temperature, top_k, gen):
    """Temperature and top-k sampling with the cache from one prompt (1, P): (ids (steps,), logits (steps, V))."""
    model.eval()
    with _no_grad():
        step_logits, cache = lm_logits(model, prompt)
        ids, logits = [], []
        for i in range(steps):
            last = step_logits[0, -1].double()  # (V,)
            logits.append(last)
            kth = last.topk(top_k).values[-1]
            probs = torch.softmax(last.masked_fill(last < kth, float("-inf")) / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=gen)  # (1,)
            ids.append(token)
            if i + 1 < steps:
                step_logits, cache = lm_logits(model, token[None], cache=cache)
    return torch.cat(ids), torch.stack(logits)


def heldout_outputs(model, track, inputs, params, prefix):
    """Track A: teacher-forced logits and cached greedy decoding; Track B: logits on held-out windows. Inputs
    only: the targets stay with the judge."""
    out = {}
    model.eval()
    with _no_grad():
        if track == "lm":
            for split in ("test", "validation"):
                out[f"{prefix}{split}_logits"] = lm_logits(model, inputs[f"{split}_inputs"])[0]
        else:
            out[prefix + "tf_logits"] = seq2seq_logits(model, inputs["src"], inputs["src_mask"], inputs["tgt_in"])
            out[prefix + "greedy"], out[prefix + "greedy_logits"] = greedy_seq2seq(
                model, inputs["src"], inputs["src_mask"], inputs["tgt_in"].shape[1], int(params["config"]["bos_id"]))
    return out


def intervention_logits(model, track, inputs, cases):
    """Eval-mode logits for each of the judge's causality cases on real evaluation inputs (base and changed)."""
    out = {}
    model.eval()
    with _no_grad():
        for case in cases:
            if track == "lm":
                out["cause/" + case] = lm_logits(model, inputs[f"cause/{case}/ids"], inputs.get(f"cause/{case}/mask"))[0]
            else:
                out["cause/" + case] = seq2seq_logits(model, inputs[f"cause/{case}/src"], inputs[f"cause/{case}/src_mask"],
                                                      inputs[f"cause/{case}/tgt"])
    return out


def probe_evaluate(module, inputs, params):
    """In a fresh sandbox: the untrained model (the judge's seed), then the judge's trained weights, on held-out
    inputs; the causality cases on those inputs; Track B's samples."""
    track = params["track"]
    model = build_float32(module, params)
    outputs = heldout_outputs(model, track, inputs, params, "untrained/")
    fed(inputs, params, -1)
    load_weights(dict(model.named_parameters()), inputs, "trained/")
    outputs.update(heldout_outputs(model, track, inputs, params, "trained/"))
    outputs.update(intervention_logits(model, track, inputs, params["cases"]))
    if track == "lm":
        gen = torch.Generator().manual_seed(int(params["sample_seed"]))
        for i in range(int(params["prompts"])):
            prompt = inputs[f"prompt_{i}"][None]  # (1, P)
            outputs[f"sample_{i}"], outputs[f"sample_{i}_logits"] = sample_lm(
                model, prompt, int(params["new_tokens"]), float(params["temperature"]), int(params["top_k"]), gen)
    return outputs, {}


def probe_cyclic(module, inputs, params):
    """In a fresh sandbox: greedy continuation of held-out cyclic prompts, untrained and with the judge's trained
    weights (with the cache, and re-reading the whole prefix)."""
    model = build_float32(module, params)
    steps = int(params["continue_steps"])
    outputs = {}
    outputs["untrained_ids"], _ = greedy_lm(model, inputs["prompt"], steps)
    fed(inputs, params, -1)
    load_weights(dict(model.named_parameters()), inputs, "trained/")
    outputs["ids"], outputs["logits"] = greedy_lm(model, inputs["prompt"], steps)
    outputs["full_prefix_ids"] = greedy_full_prefix(model, inputs["prompt"], steps)
    return outputs, {}


PROBES.update({"train": probe_train, "verify_training": probe_verify_training, "evaluate": probe_evaluate,
               "cyclic": probe_cyclic})
