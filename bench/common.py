"""Shared by the benchmarks: the submissions, the check sets, the stages a grading plans, and table output."""
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The repository (grader, tests.service's cluster helpers) and tests/ itself, as pytest sees it (tests/ci.py).
# The repository first: tests/rubric must not hide the rubric package.
for path in (ROOT / "tests", ROOT):
    if str(path) in sys.path:
        sys.path.remove(str(path))
    sys.path.insert(0, str(path))

from grader.registry import check_ids  # noqa: E402

SUBMISSIONS = {"reference_lm": ROOT / "submissions" / "reference_lm.py",
               "reference_reverse": ROOT / "submissions" / "reference_reverse.py",
               "known_bad": ROOT / "submissions" / "known_bad.py"}
# The correctness checks (seconds each): every registered check but training and evaluation, the long ones.
CORRECTNESS = tuple(c for c in check_ids() if c not in ("training", "evaluation"))
RESULTS_DIR = ROOT / "build" / "bench"


def check_set(quick: bool, training: bool | None = None) -> tuple:
    """Quick: the correctness checks; full: those and training (evaluation is measured by latency.py only)."""
    with_training = (not quick) if training is None else training
    return CORRECTNESS + (("training",) if with_training else ())


def plan_stages(text: str, checks: tuple, seed: int | None = None):
    """The stages grade_bytes would run for these checks, deduplicated as the judge does."""
    from grader.checks.base import Context
    from grader.configs import DEFAULT_SEED
    from grader.judge import select_checks
    from grader.source import read_source
    ctx = Context(DEFAULT_SEED if seed is None else seed, read_source(text.encode()))
    plans = [s for c in select_checks(checks) for s in c.plan(ctx)]
    return list({s.key: s for s in plans}.values())


def call_probe(probes, module, stage, inputs: dict):
    """A stage's probe called in this process; an interactive stage (the judge's training, or a fresh stage fed from
    it) talks to its trainer or feed directly, as it would through the sandbox's channel."""
    talker = stage.trainer or stage.feed
    if talker is not None:
        replies = []

        def send(header, blob):
            talker.on_ask({**header, "stage": stage.key}, blob, lambda reply, data=b"": replies.append((reply, data)))
        probes.open_channel(send, lambda: replies.pop(0))
    return probes.PROBES[stage.probe](module, inputs, stage.params)


def import_file(path: Path, name: str = "submission"):
    """The file as a fresh module of this process."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def memory_mb(pid: int) -> dict:
    """PSS, RSS and private memory (pages no other process maps: what its end would free) of one process in MB,
    from /proc/PID/smaps_rollup; zeros once it is gone."""
    fields = {"Pss:": "pss", "Rss:": "rss", "Private_Clean:": "private", "Private_Dirty:": "private"}
    out = {"pss": 0.0, "rss": 0.0, "private": 0.0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                parts = line.split()
                if parts and parts[0] in fields:
                    out[fields[parts[0]]] += int(parts[1]) / 1024
    except OSError:
        pass  # a process that just ended
    return out


def cpu_s(pids, children: bool = True) -> float:
    """CPU these processes used (utime, stime of /proc/PID/stat), with their reaped children's (cutime, cstime)
    unless children is False; a process already gone counts nothing."""
    total, end = 0, 15 if children else 13
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:end])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def cpu_split(cpu: dict, wall: float, what: str = "uploads and polls") -> str:
    """Where the cores went over a phase of `wall` seconds, from bench/web_load.py's CPU seconds (client, web,
    machine): the rest is everything else on the machine."""
    rest = max(0.0, cpu["machine"] - cpu["client"] - cpu["web"])
    return (f"CPU in the {wall:.1f} s of {what} ({os.cpu_count() * wall:.1f} core-seconds): the 50 client threads' process "
            f"{cpu['client']:.2f} s, the web server {cpu['web']:.2f} s, the rest (PostgreSQL, the workers and their "
            f"sandboxes at nice 19) {rest:.2f} s")


def pct(values, p: float) -> float:
    """The p-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def med(values) -> float:
    return statistics.median(values) if values else float("nan")


def table(headers, rows) -> str:
    """A GitHub markdown table (also readable in a terminal)."""
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in cells[1:]])


def fmt(value) -> str:
    if isinstance(value, float):
        return "n/a" if value != value else (f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}")
    return "" if value is None else str(value)


def save(name: str, payload: dict) -> Path:
    """Write one benchmark's results (tables as markdown + raw numbers) under build/bench/."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payload = {"name": name, "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "cpus": os.cpu_count(), "load": os.getloadavg()[0], **payload}
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path


def emit(title: str, text: str) -> str:
    """Print a section and return it as markdown."""
    block = f"### {title}\n\n{text}\n"
    print("\n" + block, flush=True)
    return block


def docker_ready() -> str | None:
    """None when the docker backend can run (engine answers, runner image present), else why not."""
    try:
        from grader.sandbox import docker as docker_backend
        return docker_backend.engine_answers() or docker_backend.image_present()
    except Exception as exc:  # the SDK missing, a socket refusing
        return f"{type(exc).__name__}: {exc}"


def wait_started_ahead(sandbox) -> None:
    """Let a sandbox started ahead import torch before a timed grading, as an idle worker's has (None: cold)."""
    if sandbox is not None and not sandbox.wait_ready(120):
        print("  the sandbox started ahead was not ready: this run pays its start", flush=True)
