"""Every numerical tolerance the judge uses, stated once (float64 throughout)."""

# attention against torch's SDPA (math backend), as docs/contract.md (section 4) states it
ATTENTION = {"atol": 1e-10, "rtol": 1e-8}
# a row of attention weights must sum to one within this
ROW_SUM = 1e-10
# rotation properties and the reference rotation
ROPE = {"atol": 1e-10, "rtol": 1e-8}
# outputs that must not move at all when something they must not see changes (causality, padding)
UNCHANGED = {"atol": 1e-10, "rtol": 0.0}
# an output that must react to a change has to move by more than this
CHANGED_MIN = 1e-8
# cached against full-prefix logits: different matmul shapes round differently
CACHE = {"atol": 1e-9, "rtol": 1e-7}
# the same weights and batch in a fresh process
RELOAD = {"atol": 1e-10, "rtol": 0.0}
# split and merge move numbers without arithmetic
EXACT = {"atol": 0.0, "rtol": 0.0}
