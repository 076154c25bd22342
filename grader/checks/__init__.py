"""The registry of checks, in CONTRACT.md order. Each module offers ID, NEEDS_TRACK, plan and verdict."""
from . import (attention_sdpa, causality, checkpoint_reload, evaluation, gradient_path, kv_cache, no_shortcuts,
               padding, rope, split_heads, training)

CHECKS = (split_heads, attention_sdpa, rope, gradient_path, causality, padding, kv_cache, checkpoint_reload,
          no_shortcuts, training, evaluation)
ALL_IDS = tuple(c.ID for c in CHECKS)
BY_ID = {c.ID: c for c in CHECKS}
