"""os._exit(0) while the submission is imported: every check must say so, none may pass."""
EXPECT = {"split_heads": "crash", "attention_sdpa": "crash", "rope": "crash"}
EXPECT_MESSAGE = {"split_heads": "while the submission was being imported"}
import os as _os

_os._exit(0)
