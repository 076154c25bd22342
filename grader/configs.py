"""The model configurations and seeds the judge uses for its checks."""

ARCH = {"reverse": "seq2seq", "lm": "decoder"}
SPECIAL = {"pad_id": 0, "bos_id": 1, "eos_id": 2}
FIRST_ORDINARY = 3
# Small enough to check in seconds on one CPU thread; dropout on so eval() must really disable it.
CHECK_MODEL = {"vocab_size": 16, "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64, "max_len": 64,
               "dropout": 0.1, **SPECIAL}
DEFAULT_SEED = 20261129


def check_config(track: str) -> dict:
    """The config passed to build_model during the correctness checks."""
    return {"arch": ARCH[track], **CHECK_MODEL}


# ---- training and evaluation (checks `training` and `evaluation`) ---------------------------------------------
# The model trained by the grader: a valid contract config, no larger than the capstone's own. Track A is
# the capstone's "quick model" (V 16, D 32, 4 heads, one layer, d_ff 64, dropout 0); Track B its minimal text spec
# (context 32, width 64, four heads, two causal blocks). Dropout 0: a short run learns faster without it, and the
# train-mode loss the sandbox reports is then the same function the judge recomputes in eval mode.
TRAIN_MODEL = {
    "reverse": {"vocab_size": 16, "d_model": 32, "n_heads": 4, "n_layers": 1, "d_ff": 64, "max_len": 64,
                "dropout": 0.0, **SPECIAL},
    "lm": {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 128, "max_len": 64, "dropout": 0.0, **SPECIAL},
    "cyclic": {"vocab_size": 16, "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64, "max_len": 64,
               "dropout": 0.0, **SPECIAL},
}
# The loop: AdamW, gradient clipping at 1.0, seeded batches, one CPU thread; `steps` is the step budget and
# `budget_s` the wall clock of the training stage (several times the reference's time on a busy 2-core machine).
TRAINING = {
    "reverse": {"steps": 600, "batch_size": 64, "lr": 3e-3, "weight_decay": 0.01, "betas": [0.9, 0.999], "clip": 1.0,
                "train_rows": 16384, "min_len": 3, "max_len": 8, "check_rows": 256,
                "budget_s": 90.0},
    "lm": {"steps": 300, "batch_size": 32, "context": 32, "lr": 3e-3, "weight_decay": 0.01, "betas": [0.9, 0.999],
           "clip": 1.0, "check_rows": 128, "budget_s": 90.0},
    "cyclic": {"steps": 300, "batch_size": 32, "context": 24, "min_period": 2, "max_period": 5, "lr": 3e-3,
               "weight_decay": 0.01, "betas": [0.9, 0.999], "clip": 1.0, "train_rows": 9600, "budget_s": 60.0},
}

def check_steps(steps) -> dict:
    """A step budget setting (track -> positive number of steps), checked; ValueError names what is wrong."""
    if not isinstance(steps, dict):
        raise ValueError(f"training steps must map a track to a number of steps, like {{\"lm\": 200}}; got {steps!r}")
    for track, n in steps.items():
        if track not in ("reverse", "lm"):
            raise ValueError(f"training steps: unknown track {track!r} (reverse or lm)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"training steps for {track} must be a positive whole number; got {n!r}")
    return dict(steps)


def training_hp(track: str, steps: dict | None = None) -> dict:
    """A track's training hyperparameters with the step budget from configuration (steps: track -> steps, or {})."""
    hp = dict(TRAINING[track])
    wanted = (steps or {}).get(track)
    if wanted:
        default = hp["steps"]
        hp["steps"] = int(wanted)
        # The stage's wall clock was set for the default budget: a longer run gets proportionally more.
        hp["budget_s"] = hp["budget_s"] * max(1.0, hp["steps"] / default)
    return hp


EVALUATION = {
    "reverse": {"heldout_rows": 512, "budget_s": 30.0},
    "lm": {"heldout_windows": 256, "budget_s": 30.0,
           # fixed prompts; sampling settings are recorded with every sample. Prompt plus new tokens stay within the
           # trained context (32): the model never saw later positions, so text beyond them says nothing.
           "prompts": ["The old ", "Anna ", "Every dog", "My cat "],
           "new_tokens": 24, "temperature": 0.8, "top_k": 8, "sample_seed": 1234},
    "cyclic": {"heldout_rows": 256, "prompt_periods": 2},
}
# Pass thresholds; docs/training.md gives the measurements behind each number and why it is fair.
TRAINING_LIMITS = {
    # loss_ratio = judge's final loss on training rows / unigram baseline; a model that ignores the source (Track A)
    # or all context (Track B, bigram) stays above 0.7 (measured: 0.94 and 0.70); the reference reaches about 0.05 (A)
    # and 0.29 (B).
    # The reported curve may differ from the judge's recomputation by curve_gap_abs + curve_gap_rel * final loss.
    "reverse": {"max_loss_ratio": 0.5, "curve_gap_abs": 0.1, "curve_gap_rel": 0.5, "max_exact_gap": 0.2},
    "lm": {"max_loss_ratio": 0.5, "curve_gap_abs": 0.1, "curve_gap_rel": 0.5, "min_floor_ratio": 0.8},
}
EVALUATION_LIMITS = {
    # a causal model with a correct cache has teacher-forced exact == greedy exact, row for row: the gap is 0
    "reverse": {"min_token_accuracy": 0.5, "min_exact_match": 0.2, "max_exact_gap": 0.2,
                "max_untrained_exact": 0.05, "max_untrained_token_accuracy": 0.3},
    # held-out loss must beat the bigram model and stay above 0.8 x the generator's entropy (no causal model can
    # go below it)
    "lm": {"min_floor_ratio": 0.8},
    "cyclic": {"min_accuracy": 0.5, "max_untrained_accuracy": 0.3, "max_cache_gap": 0.1},
}
