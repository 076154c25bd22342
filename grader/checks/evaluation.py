"""evaluation: the judge's trained weights on held-out inputs, in a fresh sandbox; every metric computed by the judge.

The sandbox gets inputs only (the targets stay with the judge) and returns logits and generated tokens.
Track A: teacher-forced token accuracy and greedy exact match with cached decoding, reported
separately, on rows drawn from another seed (rows that duplicate a training row are counted).
Track B: held-out (test) mean cross-entropy and perplexity against a unigram baseline fitted on the
training text, fixed-prompt samples with their settings, and the cyclic-pattern mechanics task (trained
by the judge too, and checked like training). In both tracks the untrained model (same seed) is
evaluated too: it must not already solve the task. Causality is checked again on the evaluation inputs
themselves: changing a later real token, with and without padding, must leave earlier logits unchanged.
"""

import torch
import torch.nn.functional as F

from ..compare import nonfinite, shape_problem
from ..configs import EVALUATION, EVALUATION_LIMITS, FIRST_ORDINARY, SPECIAL, TRAIN_MODEL, TRAINING
from ..data.cyclic import cyclic_rows
from ..data.reverse import duplicated_rows, exact_matches, reverse_rows
from ..data.text import bigram_ce, perplexity, shipped_corpus, tiled_windows, unigram_logprobs
from ..feed import final_weights
from . import training
from .base import Stage, Verdict

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "evaluation"
TITLE = "Held-out metrics beat the baseline"
HINT = "eval mode, cached greedy decoding, and that the model you trained is the one evaluated"
ORDER = 110
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("token_accuracy", "exact_match", "exact_match_unseen", "heldout_rows", "heldout_duplicates",
           "untrained_token_accuracy", "untrained_exact_match", "teacher_forced_exact",
           "heldout_loss", "perplexity", "unigram_perplexity", "ppl_ratio", "validation_loss", "untrained_loss",
           "unigram_loss", "bigram_loss", "oracle_loss", "floor_ratio", "heldout_unknown", "cyclic_accuracy",
           "cyclic_accuracy_full_prefix", "cyclic_untrained_accuracy", "samples")
HELDOUT, CYCLIC = ID + ".heldout", ID + ".cyclic"
CYCLIC_RUN, CYCLIC_VERIFY = ID + ".cyclic_run", ID + ".cyclic_verify"
PAD, BOS = SPECIAL["pad_id"], SPECIAL["bos_id"]
AXES = ("row", "position", "vocab")
CAUSE_ROWS = 16  # evaluation rows the causality cases use
CAUSE_ATOL = 1e-4  # float32 eval logits of earlier positions must not move when a later token changes


def heldout_data(ctx) -> tuple[dict, dict, dict]:
    """(inputs for the sandbox, targets the judge keeps, probe parameters beyond the training ones)."""
    ev = EVALUATION[ctx.track]
    if ctx.track == "lm":
        corpus, context = shipped_corpus(), TRAINING["lm"]["context"]
        rows = {s: tiled_windows(corpus.ids(s), context, ev["heldout_windows"]) for s in ("test", "validation")}
        inputs = {f"{s}_inputs": r[:, :-1].contiguous() for s, r in rows.items()}
        for i, prompt in enumerate(ev["prompts"]):
            inputs[f"prompt_{i}"] = corpus.vocab.encode(prompt)
        params = {k: ev[k] for k in ("new_tokens", "temperature", "top_k", "sample_seed")} | {"prompts": len(ev["prompts"])}
        return inputs, {f"{s}_rows": r for s, r in rows.items()}, params
    hp = TRAINING["reverse"]
    # another seed than the training rows: drawn independently, so duplicates are possible and counted
    rows = reverse_rows(ctx.generator(HELDOUT), ev["heldout_rows"], TRAIN_MODEL["reverse"]["vocab_size"],
                        hp["min_len"], hp["max_len"])
    return {k: rows[k] for k in ("src", "src_mask", "tgt_in")}, {"tgt_out": rows["tgt_out"]}, {}


def change_one(ids: torch.Tensor, real: torch.Tensor, gen: torch.Generator, vocab: int, lowest: int = 1):
    """A copy of ids (N, T) with one real token per row, at a position >= lowest, replaced by another ordinary
    token; and the positions (N,)."""
    changed, where = ids.clone(), []
    for i in range(ids.shape[0]):
        allowed = real[i].nonzero().flatten()
        allowed = allowed[allowed >= lowest]
        p = int(allowed[torch.randint(0, allowed.numel(), (1,), generator=gen)])
        other = FIRST_ORDINARY + (int(ids[i, p]) - FIRST_ORDINARY + 1 + int(torch.randint(0, vocab - FIRST_ORDINARY - 1,
                                                                                         (1,), generator=gen))) % (vocab - FIRST_ORDINARY)
        changed[i, p] = other
        where.append(p)
    return changed, torch.tensor(where)


def causality_cases(ctx, inputs: dict, vocab: int) -> tuple[dict, dict]:
    """Base and changed inputs on real evaluation rows: Track B without a mask and with left, right and middle
    padding; Track A on the held-out batch (whose sources are padded). (sandbox inputs, case -> positions)."""
    gen = ctx.generator(ID + ".causality")
    cases, where = {}, {}
    if ctx.track == "lm":
        ids = inputs["test_inputs"][:CAUSE_ROWS]  # (N, T)
        n, t = ids.shape
        col = torch.arange(t)[None]  # (1, T)
        masks = {"plain": None, "left": col >= 4, "right": col < t - 5, "middle": (col < 10) | (col >= 14)}
        for name, mask in masks.items():
            mask = None if mask is None else mask.expand(n, t).clone()
            base = ids if mask is None else ids.masked_fill(~mask, PAD)
            real = torch.ones_like(base, dtype=torch.bool) if mask is None else mask
            changed, pos = change_one(base, real, gen, vocab, lowest=int(real.int().argmax(1).max()) + 1)
            for case, batch in ((name, base), (name + "_changed", changed)):
                cases[f"cause/{case}/ids"] = batch
                if mask is not None:
                    cases[f"cause/{case}/mask"] = mask
            where[name] = (pos, real)
        return cases, where
    src, src_mask, tgt = (inputs[k][:CAUSE_ROWS] for k in ("src", "src_mask", "tgt_in"))
    real = tgt != PAD
    changed, pos = change_one(tgt, real, gen, vocab)
    for case, batch in (("padded", tgt), ("padded_changed", changed)):
        cases.update({f"cause/{case}/src": src, f"cause/{case}/src_mask": src_mask, f"cause/{case}/tgt": batch})
    where["padded"] = (pos, real)
    return cases, where


def heldout_stage(ctx) -> Stage:
    """The judge's final weights on held-out inputs, in a fresh sandbox once training is over."""
    inputs, kept, extra = heldout_data(ctx)
    vocab = training.train_config(ctx.track)["vocab_size"]
    cases, where = causality_cases(ctx, inputs, vocab)
    run = training.run_stage(ctx)
    params = training.train_params(ctx, **extra, cases=sorted({k.split("/")[1] for k in cases}))
    return Stage(HELDOUT, "evaluate", {**inputs, **cases}, dict(params, fed=True),
                 budget_s=EVALUATION[ctx.track]["budget_s"], fresh=True, needs=(training.RUN,),
                 feed=final_weights(run), kept=kept, where=where, sent=inputs)


def cyclic_run(ctx) -> Stage:
    """The cyclic task's training run, trained by the judge in the first sandbox like training's."""
    def make():
        hp, config = TRAINING["cyclic"], {"arch": "decoder", **TRAIN_MODEL["cyclic"]}
        args = (config["vocab_size"], hp["context"], hp["min_period"], hp["max_period"])
        train = cyclic_rows(ctx.generator(CYCLIC + ".train"), hp["train_rows"], *args)
        batches = torch.randint(0, hp["train_rows"], (hp["steps"], hp["batch_size"]), generator=ctx.generator(CYCLIC))
        inputs = {"rows": train["rows"], "targets": train["targets"], "batches": batches}
        held = cyclic_rows(ctx.generator(CYCLIC + ".heldout"), EVALUATION["cyclic"]["heldout_rows"], *args)
        check = held["rows"][:32]
        inputs.update(check_inputs=check[:, :-1].contiguous())
        trainer = training.make_trainer(CYCLIC_RUN, "lm", hp, inputs, config["vocab_size"],
                                        training.secret_of(ctx))
        params = {"track": "lm", "config": config, "seed": ctx.public_seed(CYCLIC), "vocab_size": config["vocab_size"],
                  "steps": hp["steps"]}
        return Stage(CYCLIC_RUN, "train", inputs, params, budget_s=hp["budget_s"], trainer=trainer,
                     data=dict(inputs, check_targets=held["targets"][:32]), held=held)
    return ctx.stage_once(CYCLIC_RUN, make)


def cyclic_stages(ctx) -> list:
    """Track B's mechanics task: the judge's run, its checks in a fresh sandbox, and greedy continuations there."""
    run = cyclic_run(ctx)
    hp, ev = TRAINING["cyclic"], EVALUATION["cyclic"]
    prompt_len = ev["prompt_periods"] * hp["max_period"]
    held = run.held
    params = dict(run.params, continue_steps=hp["context"] + 1 - prompt_len)
    prompt = held["rows"][:, :prompt_len].clone()
    cont = Stage(CYCLIC, "cyclic", {"prompt": prompt}, dict(params, fed=True), fresh=True, needs=(CYCLIC_RUN,),
                 feed=final_weights(run))
    cont.expected = held["rows"][:, prompt_len:].clone()  # kept by the judge
    verify = training.verify_stage(run, CYCLIC_VERIFY, training.secret_of(ctx))
    return [run, verify, cont]


def plan(ctx):
    """The training run (shared with `training`: it runs once), the held-out stage on the judge's final weights, and
    for Track B the cyclic task."""
    stages = [training.run_stage(ctx), ctx.stage_once(HELDOUT, lambda: heldout_stage(ctx))]
    if ctx.track == "lm":
        stages += [ctx.stage_once(s.key, lambda s=s: s) for s in cyclic_stages(ctx)]
    return stages


def logits_ok(v, t, rows, length, vocab, what) -> bool:
    """Record a problem unless t is finite logits of shape (rows, length, vocab)."""
    return not v.problem(shape_problem(t, (rows, length, vocab), what, "(N, T, V)") or nonfinite(t, what, AXES))


def verdict(ctx, stages, outcomes):
    """Track-specific held-out metrics, the untrained model's, and the leak and hard-coding signals."""
    v = Verdict(ID)
    held = stages[HELDOUT]
    if ctx.track == "lm":
        cyclic = cyclic_problem(stages, outcomes)
        message = lm_verdict(ctx, v, held, outcomes[HELDOUT], stages[CYCLIC], outcomes[CYCLIC])
        v.problem(cyclic)
    else:
        message = reverse_verdict(ctx, v, held, outcomes[HELDOUT])
    if message:
        causality_problems(ctx, v, held, outcomes[HELDOUT])
    result = v.result(message)
    result.details = result.details + [f"sample {s['prompt']!r} -> {s['text']!r} (temperature {s['temperature']}, "
                                       f"top-k {s['top_k']}, seed {s['seed']})" for s in v.metrics.get("samples", [])]
    return result


def cyclic_problem(stages, outcomes) -> str | None:
    """The cyclic task's run, checked like training's (same initial weights, logits and gradients)."""
    run = stages[CYCLIC_RUN]
    problem = training.run_problem(run, outcomes[CYCLIC_RUN], outcomes.get(CYCLIC_VERIFY))
    if problem:
        return "the cyclic-pattern task's training run: " + problem
    check = Verdict(ID)
    training.verification_problems(check, run, outcomes[CYCLIC_VERIFY])
    return "the cyclic-pattern task's training run: " + check.problems[0] if check.problems else None


def causality_problems(ctx, v, stage, out) -> None:
    """Earlier logits on real evaluation inputs must not move when a later real token changes."""
    for name, (pos, real) in stage.where.items():
        base, changed = out.tensors.get(f"cause/{name}"), out.tensors.get(f"cause/{name}_changed")
        if base is None or changed is None or base.shape != changed.shape or base.shape[:2] != real.shape:
            v.problem(f"the causality case {name!r} on the evaluation inputs was not returned with shape (N, T, V)")
            return
        diff = (base.double() - changed.double()).abs().amax(-1)  # (N, T)
        before = (torch.arange(real.shape[1])[None] < pos[:, None]) & real  # real positions before the change
        leak = torch.where(before, diff, torch.zeros_like(diff))
        if not torch.isfinite(leak).all() or float(leak.max()) > CAUSE_ATOL:
            row, col = divmod(int(torch.nan_to_num(leak, nan=float("inf")).argmax()), real.shape[1])
            padding = "" if name in ("plain", "padded") and ctx.track == "lm" else f" ({name} padding)"
            v.problem(f"on the held-out inputs{padding}, changing the token at position {int(pos[row])} of row {row} "
                      f"changed the trained model's logits at the earlier position {col} by {float(leak[row, col]):.3g}: "
                      "the model reads tokens after the one it predicts " + ctx.about(
                          lambda c: "(causality passed on the untrained model: the path appears only with the trained "
                                    "weights)" if c.failed("causality") is False else "(see causality)"))
            return


def reverse_verdict(ctx, v, stage, out) -> str:
    """Track A: token accuracy (teacher forced) and exact match (greedy, cached), trained and untrained."""
    lim = EVALUATION_LIMITS["reverse"]
    tgt = stage.kept["tgt_out"]  # (N, T), never sent to the sandbox
    n, length = tgt.shape
    vocab = TRAIN_MODEL["reverse"]["vocab_size"]
    real = tgt != PAD
    dup = duplicated_rows(training.run_stage(ctx).data["src"], stage.sent["src"])  # (N,)
    v.metrics.update(heldout_rows=n, heldout_duplicates=int(dup.sum()))
    found = {}
    for who in ("untrained", "trained"):
        tf, greedy, glogits = (out.tensors.get(f"{who}/{k}") for k in ("tf_logits", "greedy", "greedy_logits"))
        if not (logits_ok(v, tf, n, length, vocab, f"the {who} model's teacher-forced logits")
                and logits_ok(v, glogits, n, length, vocab, f"the {who} model's greedy-decoding logits")):
            return ""
        if v.problem(shape_problem(greedy, (n, length), f"the {who} model's greedy tokens", "(N, T)")):
            return ""
        # the judge takes the argmax itself; the fed-back tokens must be those argmaxes
        if not torch.equal(glogits.argmax(-1), greedy):
            v.problem(f"the {who} model's greedy decoding fed back tokens that are not the argmax of its own logits")
        pred = tf.argmax(-1)  # (N, T)
        found[who] = {"token": float(((pred == tgt) & real).sum() / real.sum()),
                      "tf_exact": float(((pred == tgt) | ~real).all(dim=1).double().mean()),
                      "match": exact_matches(glogits.argmax(-1), tgt)}
    tr, un = found["trained"], found["untrained"]
    exact, unseen = float(tr["match"].double().mean()), tr["match"][~dup]
    v.metrics.update(token_accuracy=round(tr["token"], 6), exact_match=round(exact, 6),
                     exact_match_unseen=round(float(unseen.double().mean()), 6) if unseen.numel() else None,
                     teacher_forced_exact=round(tr["tf_exact"], 6),
                     untrained_token_accuracy=round(un["token"], 6),
                     untrained_exact_match=round(float(un["match"].double().mean()), 6))
    untrained_exact = float(un["match"].double().mean())
    if untrained_exact > lim["max_untrained_exact"] or un["token"] > lim["max_untrained_token_accuracy"]:
        v.problem(f"the untrained model already solves the held-out rows (exact match {untrained_exact:.0%}, token "
                  f"accuracy {un['token']:.0%} before any training step): the answer is computed or hard-coded, not "
                  "learned from the training run")
    if tr["tf_exact"] - exact > lim["max_exact_gap"]:
        v.problem(f"teacher-forced, {tr['tf_exact']:.0%} of held-out rows are exactly right (token accuracy "
                  f"{tr['token']:.0%}), but greedy decoding from BOS gets {exact:.0%}: the model leans on the answer "
                  "tokens it is fed: " + ctx.about(leak_or_cache))
    if tr["token"] < lim["min_token_accuracy"] or exact < lim["min_exact_match"]:
        v.problem(f"held-out token accuracy {tr['token']:.1%} and exact match {exact:.1%}; passing needs at least "
                  f"{lim['min_token_accuracy']:.0%} and {lim['min_exact_match']:.0%}")
    dup_note = f"{int(dup.sum())} of {n} held-out rows also occur in training"
    return (f"held-out ({n} rows): teacher-forced token accuracy {tr['token']:.1%}, greedy exact match with the "
            f"cache {exact:.1%} ({float(unseen.double().mean()):.1%} on the {unseen.numel()} unseen rows; {dup_note}); "
            f"untrained: {un['token']:.1%} and {float(un['match'].double().mean()):.1%}")


def leak_or_cache(ctx) -> str:
    """Why the model leans on the answer tokens, naming only the checks of this grading that did not pass."""
    causal, cache = ctx.failed("causality"), ctx.failed("kv_cache")
    if causal is None and cache is None:
        return ("the decoder sees the token it must predict (a causal leak), or cached decoding differs from the full "
                "prefix (see causality and kv_cache)")
    return training.gap_cause(ctx)


def lm_verdict(ctx, v, stage, out, cyc_stage, cyc) -> str:
    """Track B: held-out loss and perplexity against the unigram baseline; the untrained model; samples; cyclic."""
    lim, corpus = EVALUATION_LIMITS["lm"], shipped_corpus()
    vocab = corpus.vocab.size
    test, val = stage.kept["test_rows"], stage.kept["validation_rows"]  # the judge's: the sandbox got inputs only
    uni = unigram_logprobs(corpus.ids("train"), vocab)
    unigram_loss = float(-uni[test[:, 1:]].mean())
    bigram_loss = bigram_ce(corpus.ids("train"), test, vocab)
    losses = {}
    for who, split, rows in (("untrained", "test", test), ("trained", "test", test), ("trained", "validation", val)):
        t = out.tensors.get(f"{who}/{split}_logits")
        if not logits_ok(v, t, rows.shape[0], rows.shape[1] - 1, vocab, f"the {who} model's {split} logits"):
            return ""
        losses[who, split] = float(F.cross_entropy(t.double().reshape(-1, vocab), rows[:, 1:].reshape(-1)))
    loss = losses["trained", "test"]
    ppl, uppl = perplexity(loss), perplexity(unigram_loss)
    oracle = corpus.oracle.get("test")
    v.metrics.update(heldout_loss=round(loss, 6), perplexity=round(ppl, 6), unigram_loss=round(unigram_loss, 6),
                     unigram_perplexity=round(uppl, 6), ppl_ratio=round(ppl / uppl, 6),
                     bigram_loss=round(bigram_loss, 6),
                     validation_loss=round(losses["trained", "validation"], 6),
                     untrained_loss=round(losses["untrained", "test"], 6), heldout_unknown=corpus.unknown("test"),
                     heldout_rows=test.shape[0])
    if losses["untrained", "test"] < unigram_loss:
        v.problem(f"the untrained model already predicts the held-out text better than a unigram model (loss "
                  f"{losses['untrained', 'test']:.4f} < {unigram_loss:.4f} before any training step): it must learn "
                  "the text from the training run, not arrive knowing it")
    if oracle:
        v.metrics.update(oracle_loss=oracle, floor_ratio=round(loss / oracle, 6))
        if loss < lim["min_floor_ratio"] * oracle:
            v.problem(f"the held-out loss {loss:.4f} nats/char is below what any causal model can reach: the text's "
                      f"generator has {oracle:.4f} nats/char of entropy on this split, so the model must read the "
                      "character it predicts (a causal leak)")
    if loss >= bigram_loss:
        v.problem(f"held-out loss {loss:.4f} nats/char (perplexity {ppl:.2f}, {ppl / uppl:.3f} of the unigram "
                  f"baseline's {uppl:.2f}) does not beat a bigram model fitted on the training text "
                  f"({bigram_loss:.4f}): the model does not use more context than the current character")
    samples(v, stage, out, corpus)
    cyclic_note = cyclic_metrics(ctx, v, cyc_stage, cyc)
    return (f"held-out test loss {loss:.4f} nats/char, perplexity {ppl:.2f} against the unigram baseline's {uppl:.2f} "
            f"(ratio {ppl / uppl:.3f}; bigram {bigram_loss:.3f}, untrained {losses['untrained', 'test']:.3f}, the "
            f"generator's own entropy {oracle or float('nan'):.3f}); {cyclic_note}")


def samples(v, stage, out, corpus) -> None:
    """Decode the fixed-prompt samples; each sampled token must be among the top k of the logits it came from."""
    params, ev = stage.params, EVALUATION["lm"]
    found = []
    for i, prompt in enumerate(ev["prompts"]):
        ids, logits = out.tensors.get(f"sample_{i}"), out.tensors.get(f"sample_{i}_logits")
        if ids is None or logits is None or ids.shape != (params["new_tokens"],) or logits.shape[0] != ids.shape[0]:
            v.problem(f"the sample for prompt {prompt!r} was not returned with {params['new_tokens']} tokens")
            continue
        kth = logits.topk(params["top_k"], dim=-1).values[:, -1]  # (steps,)
        if not bool((logits.gather(1, ids[:, None])[:, 0] >= kth).all()):
            v.problem(f"the sample for prompt {prompt!r} holds tokens outside the top {params['top_k']}")
        found.append({"prompt": prompt, "text": corpus.vocab.decode(ids), "temperature": params["temperature"],
                      "top_k": params["top_k"], "seed": params["sample_seed"], "max_new_tokens": params["new_tokens"]})
    v.metrics["samples"] = found


def cyclic_metrics(ctx, v, stage, out) -> str:
    """Greedy cached continuation accuracy of the cyclic task, trained and untrained."""
    lim = EVALUATION_LIMITS["cyclic"]
    expected = stage.expected  # (N, G), kept by the judge
    acc = {}
    for who, key in (("untrained", "untrained_ids"), ("trained", "ids"), ("full prefix", "full_prefix_ids")):
        ids = out.tensors.get(key)
        if v.problem(shape_problem(ids, expected.shape, f"the {who} cyclic continuation", "(N, G)")):
            return "cyclic task not evaluated"
        acc[who] = float((ids == expected).double().mean())
    v.metrics.update(cyclic_accuracy=round(acc["trained"], 6), cyclic_untrained_accuracy=round(acc["untrained"], 6),
                     cyclic_accuracy_full_prefix=round(acc["full prefix"], 6))
    # a causal model with a correct cache continues identically with and without it
    if acc["full prefix"] - acc["trained"] > lim["max_cache_gap"]:
        v.problem(f"on the cyclic-pattern task the trained model continues {acc['full prefix']:.1%} of the tokens "
                  f"correctly when it re-reads the whole prefix but {acc['trained']:.1%} with the cache: cached "
                  "decoding changes the predictions " + ctx.about(
                      lambda c: "(RoPE offset or cache order" + ("; see kv_cache)" if c.failed("kv_cache") is not False
                                                                 else ")")))
    if acc["untrained"] > lim["max_untrained_accuracy"]:
        v.problem(f"the untrained model already continues {acc['untrained']:.0%} of the cyclic patterns: the "
                  "answer is hard-coded, not learned")
    if acc["trained"] < lim["min_accuracy"]:
        v.problem(f"after training on the cyclic-pattern task, greedy cached continuation gets {acc['trained']:.1%} "
                  f"of the tokens right; passing needs {lim['min_accuracy']:.0%} (a mechanics check of causal "
                  "attention and the cache, not of language)")
    return (f"cyclic-pattern mechanics task: greedy cached continuation {acc['trained']:.1%} (full prefix "
            f"{acc['full prefix']:.1%}, untrained {acc['untrained']:.1%})")
