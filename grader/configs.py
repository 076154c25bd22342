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
