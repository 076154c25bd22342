"""Judge reports for the "What to fix" tests, with the messages the real judge gives (graded from submissions/template.py
and the known-bad no_sqrt_scale and split_no_transpose, trimmed to the checks that matter)."""
from tests.service.svc_helpers import fake_report

ALL = ("split_heads", "attention_sdpa", "rope", "gradient_path", "causality", "padding", "kv_cache",
       "checkpoint_reload", "no_shortcuts", "training", "evaluation")
SKIPPED_EVALUATION = "not run: it needs what training produces (training.run), which raised an error; see training"
SCALE = ("attention weights with mask 'none' against softmax(q·kᵀ/√Dh): 210 of 210 values differ; the largest "
         "difference is 0.471 at batch 1, head 2, query 0, key 4 (got 0.8749, expected 0.40417). The weights equal "
         "softmax(q·kᵀ) without the 1/√Dh scale: divide the scores by √Dh.")
SPLIT = ("split_heads(x, 4)[0, 2, 3] should be x[0, 3, 12:18] (head 2 holds channels 12..17 of position 3); compared "
         "with the correct split: 216 of 240 values differ; the largest difference is 3.91 at batch 0, head 2, "
         "position 3, channel 5 (got -2.13078, expected 1.78003). It equals x.reshape(B, H, T, Dh): reshape to "
         "(B, T, H, Dh) first, then transpose(1, 2), so each head keeps its own channels of every position.")
TRAINING_LEAK = ("the training loss 0.0018 is suspiciously low for what the model can do without seeing the answer: "
                 "teacher-forced, 100% of training rows are exactly right, but decoding greedily from BOS only 0%; the "
                 "decoder reads the token it must predict (check the causal mask and the BOS/EOS shift; see causality)")


def report(statuses: dict, **changes) -> dict:
    """fake_report with every check of ALL (pass unless given), then per-check changes {id: {field: value}}."""
    report = fake_report({cid: statuses.get(cid, "pass") for cid in ALL})
    for c in report["checks"]:
        c.update(changes.get(c["id"], {}))
    return report


def not_written(function: str, line: int) -> dict:
    return {"status": "error", "message": f"your code raised NotImplementedError: write {function}",
            "details": [f'line {line}, in {function}: raise NotImplementedError("write {function}")']}


def template() -> dict:
    """The unedited template: every function raises NotImplementedError; evaluation skipped (training raised)."""
    model = not_written("build_model", 158)
    return report({}, split_heads=not_written("split_heads", 40), attention_sdpa=not_written("attention", 64),
                  rope=not_written("apply_rope", 78),
                  **{cid: model for cid in ("gradient_path", "causality", "padding", "kv_cache", "checkpoint_reload",
                                            "training")},
                  evaluation={"status": "skipped", "message": SKIPPED_EVALUATION})


def scale_bug() -> dict:
    """No 1/sqrt(Dh): attention_sdpa fails with the diagnosis in its message; everything else passes."""
    return report({}, attention_sdpa={"status": "fail", "message": SCALE + " (and 7 more problems)",
                                      "details": [SCALE, "attention output with mask 'none' against SDPA: ..."]})


def split_root_cause() -> dict:
    """split_heads without the transpose: causality, padding and kv_cache fail with split_heads as their root cause."""
    def caused(message: str, cid: str) -> dict:
        return {"status": "fail", "message": message, "details": [message],
                "root_cause": {"check": "split_heads",
                               "evidence": f"with a correct split_heads in place of yours, {cid} passes"}}
    return report({}, split_heads={"status": "fail", "message": SPLIT, "details": [SPLIT]},
                  causality=caused("without padding: changing the token at position 2 changed the logits at earlier "
                                   "batch 0, position 0, vocab 12 by 0.479: position 0 can see position 2; the causal "
                                   "mask must allow key j only when j <= i (and 5 more problems)", "causality"),
                  padding=caused("changing only the IDs at padded positions changed the logits at real batch 1, "
                                 "position 6, vocab 0 by 0.298: padded source tokens are being attended to", "padding"),
                  kv_cache=caused("decoding one token at a time with the cache: cached logits against full-prefix "
                                  "logits: 2048 of 2048 values differ; the largest difference is 0.598 at batch 0, "
                                  "position 3, vocab 7 (got -0.406573, expected -1.00412); first wrong position 0: the "
                                  "first call, without a cache, already differs", "kv_cache"),
                  training={"status": "fail", "message": TRAINING_LEAK, "details": [TRAINING_LEAK]})
