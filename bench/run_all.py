"""Run every benchmark in sequence, print the tables and write them to BENCHMARKS.md with the commands.

    .venv/bin/python bench/run_all.py [--quick] [--only overhead,naive,throughput,sandbox,training,rescore]
                                      [--out BENCHMARKS.md]

`make bench` runs it; `make bench QUICK=1` passes --quick (about 8 minutes on a busy 2-core machine: one
submission, best of two rounds, correctness checks for the service). A benchmark that cannot run here (no
PostgreSQL, no redis-server, no docker) is reported as skipped with the reason; the others still run.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, ROOT, emit, pct  # noqa: E402

STEPS = ("overhead", "naive", "throughput", "sandbox", "training", "rescore")
# The scripts that print their own text: run as a subprocess, their output kept verbatim under this title.
PRINTED = {"sandbox": "Sandbox backends against a bare process (bench/sandbox_overhead.py)",
           "training": "Training under the grader against the same loop in one process (bench/training_overhead.py)",
           "rescore": "Rescoring 1000 stored results under a changed rubric (bench/rescore.py)"}


def commands(quick: bool) -> dict:
    q = ["--quick"] if quick else []
    return {"overhead": ["bench/overhead.py", *q], "naive": ["bench/naive_baseline.py", *q],
            "throughput": ["bench/throughput.py", *q, "--web"],
            "sandbox": ["bench/sandbox_overhead.py", "--runs", "1" if quick else "3"],
            "training": ["bench/training_overhead.py", "--repeat", "1" if quick else "2"],
            "rescore": ["bench/rescore.py", "--repeat", "3"]}


def run_step(name: str, argv: list[str]) -> str:
    """One benchmark: imported and called (so its tables come back), or, for the scripts that print, a subprocess."""
    if name in PRINTED:
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-1500:])
        return emit(PRINTED[name], "```\n" + proc.stdout.strip() + "\n```")
    module = {"overhead": "overhead", "naive": "naive_baseline", "throughput": "throughput"}[name]
    return __import__(module).main(argv[1:])


def load(name: str) -> dict | None:
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def targets(ran: set) -> str:
    """The issue's three targets, from this run's saved figures."""
    rows = []
    o = load("overhead") if "overhead" in ran else None
    if o:
        for sub, label, d, w, over, ratio, cold, cold_ratio, _ in o["rows"]:
            rows.append([f"overhead / checks' compute <= 0.25 ({sub}, {label}; a worker, sandbox started ahead)",
                         f"{ratio:.2f}", "met" if ratio <= 0.25 else "not met"])
            rows.append(["the same, cold start (`grader check`)", f"{cold_ratio:.2f}",
                         "met" if cold_ratio <= 0.25 else "not met"])
    n = load("naive_baseline") if "naive" in ran else None
    if n:
        by = {}
        for key, values in n["times"].items():
            sub, checks, variant = key.split("|")
            by.setdefault((sub, checks), {})[variant] = min(values)
        for (sub, checks), v in by.items():
            base = v[n["grader_ref"]]
            for variant, t in v.items():
                if variant.startswith("naive"):
                    rows.append([f"naive / grader >= 3 ({sub}, {checks}: {variant} vs {n['grader_ref']})",
                                 f"{t / base:.2f}", "met" if t / base >= 3 else "not met"])
    w = load("web_load") if "throughput" in ran else None
    if w and w["times"]["status"]:
        p99 = 1e3 * pct(w["times"]["status"], 99)
        rows.append(["status p99 < 100 ms, 50 Python client threads during the uploads", f"{p99:.0f} ms",
                     "met" if p99 < 100 else "not met"])
        for label, figures in (w.get("wrk") or {}).items():
            if label == "floor":
                continue  # not a status: what the same server answers with a constant, for reading the others
            p99 = figures["p"]["99"]
            rows.append([f"status p99 < 100 ms, {'50 clients polling every 2 s, 2 workers grading' if label == 'paced' else 'wrk 50 connections back to back, ' + label}", f"{p99:.0f} ms",
                         "met" if p99 < 100 else "not met"])
    if not rows:
        return ""
    from common import table
    return emit("Targets", table(["target", "measured", ""], rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(STEPS))
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = parser.parse_args()
    os.chdir(ROOT)
    cmds = commands(args.quick)
    started, blocks, ran, skipped = time.time(), [], set(), []
    for name in [s for s in args.only.split(",") if s]:
        print(f"\n== {name}: .venv/bin/python {' '.join(cmds[name])}", flush=True)
        try:
            blocks.append(run_step(name, cmds[name]))
            ran.add(name)
        except (Exception, SystemExit) as exc:
            traceback.print_exc()
            skipped.append(f"- `{name}` did not run: {type(exc).__name__}: {str(exc).strip()[:400]}")
    summary = targets(ran)
    head = ["# Benchmarks\n",
            f"Produced by `make bench{' QUICK=1' if args.quick else ''}` (`.venv/bin/python bench/run_all.py"
            f"{' --quick' if args.quick else ''}`) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
            f"in {(time.time() - started) / 60:.1f} min: {os.cpu_count()} CPUs, {platform.platform()}, "
            f"load average {os.getloadavg()[0]:.1f} at the end (a shared machine: read the ratios, measured in "
            f"the same run, rather than the seconds). Raw figures: `build/bench/*.json`.\n",
            "Each section below was produced by:\n",
            *[f"- {name}: `.venv/bin/python {' '.join(cmds[name])}`" for name in cmds if name in ran], "",
            *(["Not measured in this run:", *skipped, ""] if skipped else [])]
    notes = (ROOT / "bench" / "NOTES.md")
    text = "\n".join(head) + "\n" + summary + "\n" + "\n".join(blocks)
    if notes.exists():
        text += "\n" + notes.read_text()
    Path(args.out).write_text(text)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
