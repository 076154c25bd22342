"""What an instructor writes by hand: one pytest test per property, each importing the submission anew.

The calls are the grader's own probes on the grader's inputs (so both sides compute the same thing); the
assertions are the quick ones a hand-written suite makes. Run by bench/naive_baseline.py, never by `make test`.
"""
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

import probes
from conftest import JOB, STAGES

torch.set_num_threads(1)  # as the grader's sandbox: one thread against one thread


def run(stage, module, outputs):
    inputs = load_file(JOB / "inputs" / f"{stage['key']}.safetensors")
    if stage.get("input_from"):
        if stage["input_from"] not in outputs:  # this test alone in a fresh interpreter: redo the earlier stage
            run(next(s for s in STAGES if s["key"] == stage["input_from"]), module, outputs)
        inputs.update({"prev/" + k: v for k, v in outputs[stage["input_from"]].items()})
    if stage["probe"] == "train":
        tensors, facts = plain_training(module, inputs, stage["params"], stage["hp"]), {}
    else:
        tensors, facts = probes.PROBES[stage["probe"]](module, inputs, stage["params"])
    outputs[stage["key"]] = tensors
    return inputs, tensors, facts


def plain_training(module, data, params, hp):
    """Training as a hand-written suite runs it, in the student's process: torch's AdamW, clip, the same batches."""
    torch.manual_seed(int(params["seed"]))
    model = module.build_model(dict(params["config"]))
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], betas=tuple(hp["betas"]), weight_decay=hp["weight_decay"])
    vocab, losses = int(params["vocab_size"]), []
    model.train()
    for idx in data["batches"][:int(params["steps"])]:
        logits, targets = probes.train_logits(model, params["track"], data, idx)
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
        opt.step()
        losses.append(loss.detach())
    return {"losses": torch.stack(losses)}


@pytest.mark.parametrize("stage", STAGES, ids=[s["key"] for s in STAGES])
def test_property(stage, submission, outputs):
    inputs, out, facts = run(stage, submission, outputs)
    for name, value in out.items():
        assert torch.isfinite(value.double()).all(), f"{stage['key']}: {name} is not finite"
    probe = stage["probe"]
    if probe == "split_heads":
        assert torch.equal(out["roundtrip"], inputs["x"]), "merge(split(x)) != x"
    elif probe == "attention":
        q, k, v = (inputs[n].double() for n in "qkv")
        for case in stage["params"]["cases"]:
            mask = inputs.get("mask_" + case)
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.bool())
            torch.testing.assert_close(out["out_" + case].double(), ref, rtol=1e-6, atol=1e-6)
    elif probe == "rope":
        x = inputs["x"].double()
        torch.testing.assert_close(out["y_t"].double().norm(dim=-1), x.norm(dim=-1), rtol=1e-6, atol=1e-6)
    elif probe == "gradient":
        assert not facts["no_grad"], f"parameters without gradient: {facts['no_grad']}"
    elif probe == "causality":
        torch.testing.assert_close(out["base"], out["base_again"])
    elif probe == "padding":
        assert out["base"].shape == out["other"].shape
    elif probe == "kv_cache":
        torch.testing.assert_close(out["step"], out["full"], rtol=1e-5, atol=1e-5)
    elif probe == "checkpoint_load":
        torch.testing.assert_close(out["logits"], outputs[stage["input_from"]]["logits"])
    elif probe == "train":
        losses = out["losses"]
        assert losses[-10:].mean() < losses[:10].mean(), "the loss did not go down"
