"""Secrets in the environment: attention gathers every environment it can read and raises with all of it.

The worker running the test holds a canary secret in __CANARY_ENV__; it must appear nowhere in the report.
"""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "gathered"}
import os as _os


def attention(q, k, v, mask=None):
    found = {"self": dict(_os.environ)}
    for pid in _os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    found[f"{pid}/{part}"] = fh.read().decode(errors="replace")
            except OSError:
                pass
    print(found)
    raise RuntimeError(f"gathered {len(found)} sources: {found}"[:900])
