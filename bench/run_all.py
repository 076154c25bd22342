"""Run every benchmark in sequence, print the tables and write them to BENCHMARKS.md with the commands.

    .venv/bin/python bench/run_all.py [--quick]
        [--only overhead,naive,idle,throughput,started_burst,turns,sandbox,training,rescore,fork] [--out BENCHMARKS.md]

`make bench` runs it; `make bench QUICK=1` passes --quick (one submission, best of two rounds, fewer uploads). A
benchmark that cannot run here (no PostgreSQL, no redis-server, no docker) is reported as skipped with the reason;
the others still run. The Targets table is issue 19's eight targets, each measured, not met (with why) or not
measured in this run; the first paragraph names the commit measured (`commit <hash>`, "+ local changes" when the
working tree differs from it).
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
from common import RESULTS_DIR, ROOT, cpu_split, emit, pct  # noqa: E402


def commit() -> str:
    """`commit <hash>` of the measured code, "+ local changes" when the tree differs from it (BENCHMARKS.md aside)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", ".", ":!BENCHMARKS.md", ":!build"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "commit unknown (not a git checkout)"
    return f"commit {head}" + (" + local changes" if dirty else "")

STEPS = ("overhead", "naive", "idle", "throughput", "started_burst", "turns", "sandbox", "training", "rescore", "fork")
BURST = 40  # `make bench`'s burst with training (target 7): 200 would take most of its ~30 min budget alone
# The scripts that print their own text: run as a subprocess, their output kept verbatim under this title.
PRINTED = {"sandbox": "Sandbox backends against a bare process (bench/sandbox_overhead.py)",
           "training": "Training under the grader against the same loop in one process (bench/training_overhead.py)",
           "rescore": "Rescoring 1000 stored results under a changed rubric (bench/rescore.py)",
           "fork": "What the fork server saves: a sandbox forked from torch, against a cold one (bench/fork_probe.py)"}


def commands(quick: bool) -> dict:
    q = ["--quick"] if quick else []
    return {"overhead": ["bench/overhead.py", *q], "naive": ["bench/naive_baseline.py", *q],
            "idle": ["bench/idle_service.py", *q],
            "throughput": ["bench/throughput.py", *q, "--web", *([] if quick else ["--burst", str(BURST)])],
            # target 7's burst again with the fork server off (its one- and two-worker runs kept to one upload)
            "started_burst": ["bench/throughput.py", *q, "--n", "1", *([] if quick else ["--burst", str(BURST)]),
                              "--save-as", "throughput_started"],
            # target 6 with and without the web's pools and turns (GRADER_WEB_TURNS), alternating, fresh services
            "turns": ["bench/web_load.py", *q, "--turns-ab", "1" if quick else "2"],
            "sandbox": ["bench/sandbox_overhead.py", "--runs", "1" if quick else "3"],
            "training": ["bench/training_overhead.py", "--repeat", "1" if quick else "2"],
            "rescore": ["bench/rescore.py", "--repeat", "3"],
            "fork": ["bench/fork_probe.py", "--rounds", "3" if quick else "5"]}


def run_step(name: str, argv: list[str]) -> str:
    """One benchmark: imported and called (so its tables come back), or, for the scripts that print, a subprocess."""
    if name in PRINTED:
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-1500:])
        return emit(PRINTED[name], "```\n" + proc.stdout.strip() + "\n```")
    if name == "started_burst":
        return started_burst(argv)
    module = {"overhead": "overhead", "naive": "naive_baseline", "idle": "idle_service",
              "throughput": "throughput", "turns": "web_load"}[name]
    return __import__(module).main(argv[1:])


def started_burst(argv: list[str]) -> str:
    """Target 7's burst with GRADER_SANDBOX_FORK=false (the workers inherit it): its table alone."""
    os.environ["GRADER_SANDBOX_FORK"] = "false"
    try:
        text = __import__("throughput").main(argv[1:])
    finally:
        del os.environ["GRADER_SANDBOX_FORK"]
    burst = text.split("### Burst with training", 1)[1].split("\n### ", 1)[0]
    return emit("The same burst with the fork server off (GRADER_SANDBOX_FORK=false)",
                "Each sandbox started with bubblewrap and importing torch afresh, as before the fork server was the "
                "default; otherwise as the burst above.\n\n" + burst.split("\n\n", 2)[2].strip())


def load(name: str) -> dict | None:
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def fig(value, fmt: str = "{:.2f}") -> str:
    return "not measured" if value is None else fmt.format(value)


def verdict(ok) -> str:
    return "" if ok is None else ("met" if ok else "not met")


# Why a target is not met, when it is not: what the figures below show (bench/NOTES.md has the detail).
WHY = {
    1: "see the overhead section (bench/overhead.py) and bench/NOTES.md",
    2: "see the cold `grader check` section (bench/overhead.py) and bench/NOTES.md",
    3: "see the overhead section and the latency split (bench/overhead.py)",
    4: "see the naive baseline section (bench/naive_baseline.py)",
    5: "the first verdicts wait for the sandbox's checks; on a machine busy with other work the sandbox, at a low "
       "CPU weight, waits for the CPU (the figure moves with the load)",
    6: "the 50 uploads at once saturate the 2 cores (the server's 2 processes, PostgreSQL, the 50 client threads "
       "themselves); polls have threads of their own, uploads run one at a time per process "
       "(grader/app/pools.py), and an upload drops no other poller's kept status answer (grader/app/status_cache.py)",
    7: "",
    8: "an idle worker holds two torch interpreters where the bare process has one: the judge's (the worker main "
       "process and its pool process, forked from it) and the fork server's zygote (a separate interpreter, the "
       "runner's, started with an empty environment); the sandbox forked ahead from the zygote adds a few MB; one "
       "torch image for all (a zygote forked by the worker's main before it reads any secret) would still leave "
       "celery's, the app's and the judge's own modules and pages above the bare process: the worker-born figure",
}


def core_split(b: dict) -> str:
    """Where the burst's core-seconds went per grading (bench/throughput.py's cpu_parts), when it measured them."""
    cpu = b.get("cpu_s")
    if not cpu:
        return ""
    from throughput import cpu_split_parts
    n, whole = b["n"], (os.cpu_count() or 1) * cpu["window"]
    parts = ", ".join(f"{what.split(' (')[0]} {seconds / n:.2f}" for what, seconds in cpu_split_parts(cpu))
    return (f"the cores' {whole / n:.1f} core-seconds per grading went to: {parts} (the sandboxes' CPU is "
            f"{cpu['sandboxes'] / (b['bare_s'] * n):.2f} x the bare compute: the checks, the training and the "
            "verification)")


def started_measured(ran: set) -> str:
    """Target 7 as this run measured it with the fork server off, when it did."""
    f = load("throughput_started") if "started_burst" in ran else None
    fb = (f or {}).get("burst")
    if not fb:
        return ""
    from common import med
    st = fb["once"]
    once = not (st["lost"] or st["not_done"] or st["twice"] or st["no_result"])
    starts = [(t.get("sandbox_start_s") or 0) + (t.get("torch_import_s") or 0) for t in fb.get("timings") or []]
    return (f"the same burst with the fork server off (GRADER_SANDBOX_FORK=false: each sandbox started, importing "
            f"torch), measured in this run: {fb['ratio']:.2f} x ({fb['per_min']:.2f} of {fb['limit_per_min']:.2f}"
            f"/min), {'each graded exactly once' if once else 'NOT each exactly once'}"
            + (f", a sandbox ready in {med(starts):.2f} s p50" if starts else ""))


def turns_measured(ran: set) -> str:
    """Target 6 as this run measured it with and without the web's pools and turns, side by side, when it did."""
    t = load("web_turns") if "turns" in ran else None
    if not t:
        return ""
    from common import med
    from web_load import values_of

    def m(turns, name):
        values = values_of(t["runs"][turns], name)
        return f"{med(values):.0f}" if values else "?"
    names = ("thread-phase status p99", "wrk p99, idle workers", "wrk p99, 2 workers grading",
             "thread-phase upload p50")
    return (f"measured side by side in this run ({t['rounds']} fresh services each way, medians, ms, gthread "
            "(GRADER_WEB_TURNS=false) / the pools and turns): "
            + ", ".join(f"{n} {m('false', n)} / {m('true', n)}" for n in names))


def targets(ran: set, quick: bool) -> str:
    """The issue's eight targets (issue 19), from this run's saved figures; a target not measured says so."""
    rows = []

    def row(n, text, measured, ok, note=""):
        # not met: the benchmark's own why (targets 1-4 save one) or the general one, and the run's note
        general = "" if (n <= 4 and note) else WHY.get(n, "")
        why = note if ok is not False else "; ".join(x for x in (general, note) if x)
        rows.append([str(n), text, measured, verdict(ok), why])
    o = load("overhead") if "overhead" in ran else None
    t = (o or {}).get("targets") or {}
    r1, r2, r3 = t.get("t1_overhead_ratio"), t.get("t2_cold_ratio"), t.get("t3_training_ratio")
    row(1, "a worker's correctness-only grading (reference_lm, sandbox started ahead): overhead / the checks' "
           "compute <= 1.0", fig(r1), None if r1 is None else r1 <= 1.0, t.get("t1_why", ""))
    row(2, "cold `grader check`, correctness only: total <= 1.5 x (bare `python -c \"import torch\"` + the checks' "
           "compute), side by side", fig(r2, "{:.2f} x"), None if r2 is None else r2 <= 1.5, t.get("t2_why", ""))
    row(3, "a worker's grading with training, the integrity verification included: overhead / compute <= 0.10",
        fig(r3, "{:.3f}"), None if r3 is None else r3 <= 0.10, t.get("t3_why", ""))
    n = load("naive_baseline") if "naive" in ran else None
    naive = {}
    if n:
        by = {}
        for key, values in n["times"].items():
            sub, checks, variant = key.split("|")
            by.setdefault((sub, checks), {})[variant] = min(values)
        for (sub, checks), v in by.items():
            one = [variant for variant in v if variant.startswith("naive") and "pytest" in variant]
            if one and n["grader_ref"] in v:
                naive[checks] = v[one[0]] / v[n["grader_ref"]]
    nt = (n or {}).get("targets") or {}
    r4 = nt.get("t4_correctness_ratio", naive.get("correctness checks"))
    r4t = nt.get("t4_training_ratio", naive.get("correctness + training"))
    row(4, "correctness feedback >= 3x faster than the naive baseline (one container + pytest), reference_lm",
        fig(r4, "{:.1f}x"), None if r4 is None else r4 >= 3, nt.get("t4_why", ""))
    row(4, "the same with training: reported, no target (the issue drops it: both sides train the same steps, "
           "so 3x cannot be met)", fig(r4t, "{:.2f}x"), None, "")
    i = load("idle_service") if "idle" in ran else None
    if i:
        ok5 = not i["lost"] and i["first_p50_s"] <= 5 and i["first_p95_s"] <= 5
        m5 = f"p50 {i['first_p50_s']:.2f} s, p95 {i['first_p95_s']:.2f} s ({i['n']} uploads)"
        note5 = f"{i['lost']} of {i['n']} uploads showed no verdict" if i["lost"] else ""
    else:
        ok5, m5, note5 = None, "not measured", ""
    row(5, "first verdicts visible through the API <= 5 s after an upload on an idle service, p50 and p95 over 20 "
           "uploads", m5, ok5, note5 + ("" if not i or i["n"] >= 20 else f"{'; ' if note5 else ''}a quick run: "
                                        f"{i['n']} uploads, not 20"))
    w = load("web_load") if "throughput" in ran else None
    wrk = (w or {}).get("wrk") or {}
    floor = wrk.get("floor", {}).get("p", {}).get("99")
    for label, text in (("idle workers", "wrk, 50 connections back to back, idle workers"),
                        ("2 workers grading the uploads", "wrk, 50 connections back to back, while 2 workers grade")):
        p99 = wrk.get(label, {}).get("p", {}).get("99")
        if w is not None and p99 is None:
            note = "wrk is not installed (make bench-deps)"
        elif p99 is not None and p99 >= 100:
            note = (f"the same gunicorn answering a constant had p99 {floor:.0f} ms in this run: what is left is the "
                    "server and the machine's other work, not the status" if floor is not None else "")
        else:
            note = f"a constant answer from the same gunicorn: p99 {floor:.0f} ms" if floor is not None else ""
        rows.append(["6", f"status p99 < 100 ms, {text}", fig(p99, "{:.0f} ms"),
                     verdict(None if p99 is None else p99 < 100), note])
    p99 = 1e3 * pct(w["times"]["status"], 99) if w and w["times"]["status"] else None
    served = (w or {}).get("server_status_ms")
    row(6, "status p99 < 100 ms, 50 Python client threads during the uploads", fig(p99, "{:.0f} ms"),
        None if p99 is None else p99 < 100,
        "; ".join(x for x in (
            f"the server's own time on the same polls (its access log): p99 {pct(served, 99):.0f} ms; the rest of "
            "what the clients measured comes before and after the handling: being accepted and given a thread, and "
            "the client's own 50 threads, on 2 saturated cores" if served else "",
            cpu_split(w["cpu_s"], w["wall_s"]) if w and w.get("cpu_s") else "", turns_measured(ran)) if x))
    th = load("throughput") if "throughput" in ran else None
    b = (th or {}).get("burst")
    if b:
        st = b["once"]
        once = not (st["lost"] or st["not_done"] or st["twice"] or st["no_result"])
        ok7 = once and b["ratio"] >= 0.9
        m7 = (f"{b['ratio']:.2f} x ({b['per_min']:.2f} of {b['limit_per_min']:.2f}/min); "
              f"{'each graded exactly once' if once else 'NOT each exactly once'}")
        note7 = "" if once else (f"store: {st['lost']} lost, {len(st['not_done'])} not done, {len(st['twice'])} "
                                 f"graded twice, {len(st['no_result'])} without a result")
        starts = [(t.get("sandbox_start_s") or 0) + (t.get("torch_import_s") or 0) for t in b.get("timings") or []]
        if starts and not ok7:
            from common import med
            note7 = "; ".join(x for x in (
                f"each sandbox forked by the fork server, ready in {med(starts):.2f} s p50, next to "
                f"{b['bare_s']:.1f} s of a grading's bare compute (the faster of {b.get('bare_before_s', b['bare_s']):.1f} s "
                f"before the burst and {b.get('bare_after_s', b['bare_s']):.1f} s after); what the limit does not count and remains is the "
                "verification's own compute and the judge's replay of each training step (bench/NOTES.md)",
                core_split(b), note7) if x)
        started = started_measured(ran)
        if started:
            note7 = "; ".join(x for x in (note7, started) if x)
        if b["n"] < 200:
            note7 = "; ".join(x for x in (note7, f"{b['n']} uploads, not 200: " + (
                "a quick run" if quick else f"200 would take about {200 / b['per_min']:.0f} min at this rate, beyond "
                "`make bench`'s budget of about 30 min in all; `.venv/bin/python bench/throughput.py --burst 200` "
                "runs them")) if x)
    else:
        ok7, m7, note7 = None, "not measured", ""
    row(7, "a 200-upload burst with training, 2 workers: gradings/min >= 0.9 x the compute limit (cores / a "
           "grading's bare compute), none lost or graded twice", m7, ok7, note7)
    if i:
        ok8 = i["ratio_pss"] <= 1.25
        m8 = (f"{i['ratio_pss']:.2f} x PSS ({i['worker_mb']['pss']:.0f} MB against "
              f"{i['memory_mb']['bare `import torch` process']['pss']:.0f} MB); RSS {i['ratio_rss']:.2f} x")
    else:
        ok8, m8 = None, "not measured"
    f = load("fork_probe") if "fork" in ran else None
    note8 = (f"a torch process, a zygote it forked and the zygote's forked child hold {f['judge_born_mb']:.0f} MB "
             f"against a bare `import torch` process's {f['bare_mb']:.0f} MB, {f['judge_born_mb'] / f['bare_mb']:.2f} x "
             "(bench/fork_probe.py): the shape a fork server born of the judge's process would give" if f else "")
    if f and f.get("worker_born_mb"):
        note8 += (f"; with what a worker's main then imports (celery, the app, the judge) and its pool process forked "
                  f"after, as celery does, the same shape holds {f['worker_born_mb']:.0f} MB, "
                  f"{f['worker_born_mb'] / f['bare_mb']:.2f} x, before it has run anything")
    row(8, "memory per idle worker (sandbox ready ahead) <= 1.25 x a bare `import torch` process (PSS, both "
           "measured at the same moment)", m8, ok8, note8)
    from common import table
    return emit("Targets (issue 19)", table(["#", "target", "measured", "", "why not met / note"], rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(STEPS))
    parser.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = parser.parse_args()
    os.chdir(ROOT)
    cmds = commands(args.quick)
    started, blocks, ran, skipped, measured = time.time(), [], set(), [], commit()
    for name in [s for s in args.only.split(",") if s]:
        print(f"\n== {name}: .venv/bin/python {' '.join(cmds[name])}", flush=True)
        try:
            blocks.append(run_step(name, cmds[name]))
            ran.add(name)
        except (Exception, SystemExit) as exc:
            traceback.print_exc()
            skipped.append(f"- `{name}` did not run: {type(exc).__name__}: {str(exc).strip()[:400]}")
    summary = targets(ran, args.quick)
    head = ["# Benchmarks\n",
            f"Produced by `make bench{' QUICK=1' if args.quick else ''}` (`.venv/bin/python bench/run_all.py"
            f"{' --quick' if args.quick else ''}`) on {measured}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
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
