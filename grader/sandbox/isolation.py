"""Isolation is never weaker than configured: a missing layer refuses to grade unless the operator allows it.

Each backend records, per run, `active` (the layers that were on for that grading) and `weak` (true when
the operator's GRADER_SANDBOX_ALLOW_WEAK let a run go with fewer than its backend's full set); the judge
copies both into the report's `sandbox` part. Probes of the host are re-run: a success is trusted for
PROBE_TTL_S, a failure never (installing bubblewrap fixes the next grading, not the next restart).
"""
import functools
import os
import threading
import time

ALLOW_WEAK_ENV = "GRADER_SANDBOX_ALLOW_WEAK"
PROBE_TTL_S = 60.0

# How an operator gets each layer of the process backend back.
HOW_TO = {
    "uid": "run the grader (worker or `grader check`) as root: it runs each sandbox as a uid of its own from a pool",
    "rlimits": "(always available)",
    "seccomp": "install libseccomp (apt-get install libseccomp2) and pyseccomp (make setup)",
    "cgroup": "run as root on a host with a writable cgroup memory controller (v2, or the v1 memory hierarchy)",
    "namespaces": "apt-get install bubblewrap (it needs user namespaces: sysctl kernel.unprivileged_userns_clone=1; "
                  "inside a default Docker container bwrap cannot work, use GRADER_SANDBOX=docker there)",
}


class IsolationMissing(RuntimeError):
    """A layer of the sandbox is missing on this host: an installation problem, never the student's; nothing ran."""


def allow_weak_from_env() -> bool:
    """The operator's escape hatch: GRADER_SANDBOX_ALLOW_WEAK=true grades with fewer layers, marked weak."""
    return os.environ.get(ALLOW_WEAK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def refusal(missing: dict) -> str:
    """The message for layer -> why it is missing: each layer, why, and how to get it back."""
    parts = [f"{layer} is missing ({why}); to fix: {HOW_TO.get(layer.split(':')[0], 'see docs/sandbox.md')}"
             for layer, why in missing.items()]
    return ("the process sandbox refuses to grade with fewer layers than its full set: " + "; ".join(parts) +
            f". Set {ALLOW_WEAK_ENV}=true to grade anyway, every result then marked weak.")


def cache_success(ttl_s: float = PROBE_TTL_S, ok=lambda result: not isinstance(result, str)):
    """Memoise a probe's successful results for ttl_s seconds; a failure (a str reason) is re-probed every call."""
    def decorate(fn):
        cache: dict = {}
        lock = threading.Lock()

        @functools.wraps(fn)
        def wrapper(*args):
            with lock:
                hit = cache.get(args)
            if hit is not None and time.monotonic() - hit[0] < ttl_s:
                return hit[1]
            result = fn(*args)
            with lock:
                if ok(result):
                    cache[args] = (time.monotonic(), result)
                else:
                    cache.pop(args, None)
            return result

        wrapper.cache_clear = cache.clear
        return wrapper
    return decorate
