"""An idle service: how soon the first verdicts show through the API after an upload, and an idle worker's memory.

    .venv/bin/python bench/idle_service.py [--quick] [--n N]

The service of bench/throughput.py (PostgreSQL, Redis, `grader serve`) with one `grader worker -c 1`, idle: its
sandbox ready ahead (forked by the fork server, as root) before each upload. N uploads of reference_lm (quick 8,
else 20), one at a time; after each, GET /api/v1/submissions/ID/result every 50 ms until it lists a verdict
(partial: true while the grading runs, or the final result): that moment minus the upload's start is "first
verdicts". The assignment has the correctness checks only: they are what a grading decides first (training comes
after them), and each upload then takes seconds, not a training run. Target 5 of issue 19: p50 and p95 <= 5 s.

Memory (target 8): with the worker idle and its sandbox ready ahead (torch imported in it), RSS and PSS of the
worker's processes (main, pool process, the fork server's zygote, the sandbox's processes), next to a bare
`python -c "import torch"` process measured at the same moment; PSS divides each shared page among the processes
mapping it (a pool process shares most of its pages with the main process it was forked from). Target: PSS <= 1.25
x the bare process's.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CORRECTNESS, SUBMISSIONS, emit, med, memory_mb, pct, save, table  # noqa: E402

POLL_S = 0.05
SETTLE_S = 4.0  # after a grading, before the next upload: at least this, and until the next sandbox is ready


def is_zygote(pid: int) -> bool:
    """The fork server's zygote (grader/sandbox/zygote_main.py), by its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"zygote_main.py" in fh.read()
    except OSError:
        return False


def worker_parts(worker) -> dict[str, list[int]]:
    """The pids of an idle worker: main, its pool process(es), the fork server's zygote (none with the fork server
    off), and every other process under them (the sandbox ready ahead, forked from the zygote or started)."""
    from throughput import descendants, proc_tree
    tree = proc_tree()
    main = worker.proc.pid
    pools = tree.get(main, [])
    under = [p for pool in pools for p in descendants(pool, tree)]
    # the zygote is a pool process's own child; its forked sandboxes keep its command line, one level further down
    zygotes = [p for pool in pools for p in tree.get(pool, []) if is_zygote(p)]
    return {"worker main": [main], "worker pool process": pools, "fork server's zygote": zygotes,
            "sandbox ready ahead (all its processes)": [p for p in under if p not in zygotes]}


def cpu_state(pids: list[int]) -> tuple[float, bool]:
    """CPU ticks used by these processes so far, and whether every one of them is asleep (not runnable)."""
    ticks, asleep = 0.0, True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        asleep = asleep and fields[0] in "SDI"
        ticks += int(fields[11]) + int(fields[12])
    return ticks, asleep


def settled(worker, at_least: float) -> None:
    """Wait at least `at_least` s, then until the sandbox under the worker has imported torch and waits for its go:
    resident beyond 100 MB and under 20 ms of CPU in the last second (a forked sandbox's PID 1 and the zygote wake
    now and then to reap, so "every process asleep" is too strict; one importing torch uses a whole core)."""
    time.sleep(at_least)
    deadline, last = time.time() + 120, None
    while time.time() < deadline:
        pids = worker_parts(worker)["sandbox ready ahead (all its processes)"]
        rss = sum(memory_mb(p)["rss"] for p in pids)
        ticks, _ = cpu_state(pids)
        if rss > 100 and last is not None and ticks - last <= 2:
            return
        last = ticks
        time.sleep(1.0)
    print("  the sandbox ready ahead was not ready in 120 s", flush=True)


def first_verdicts(ctx, worker, n: int) -> list[dict]:
    """n uploads on an idle service, one at a time: seconds to the first verdict through the API, and to done."""
    http, data, out = ctx["http"], SUBMISSIONS["reference_lm"].read_bytes(), []
    for k in range(n):
        settled(worker, SETTLE_S)
        token = ctx["tokens"][k]
        t0 = time.perf_counter()
        status, sub = http.upload("bench", token, data + f"\n# first verdicts {k}\n".encode(), "sub.py")
        assert status == 202, (status, sub)
        first = done = None
        deadline = t0 + 300
        while done is None and time.perf_counter() < deadline:
            code, body = http.get(f"/api/v1/submissions/{sub['id']}/result", token)
            now = time.perf_counter() - t0
            if code == 200 and first is None and (body.get("report") or {}).get("checks"):
                first = now
            if code == 200 and not body.get("partial"):
                done = now
            time.sleep(POLL_S)
        out.append({"id": sub["id"], "first_s": first, "done_s": done})
        print(f"  upload {k + 1}/{n}: first verdicts {first if first is None else round(first, 2)} s, "
              f"result {done if done is None else round(done, 2)} s", flush=True)
    return out


def bare_torch() -> subprocess.Popen:
    """A bare `import torch` process of the service's interpreter, kept alive until measured."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys, torch; print('ready', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def memory(worker, samples: int = 3) -> dict:
    """PSS, RSS and private memory of the idle worker's parts and of a bare torch process at the same moments;
    medians."""
    bare = bare_torch()
    keys = ("pss", "rss", "private")
    try:
        rows: dict[str, list[dict]] = {}
        for _ in range(samples):
            time.sleep(1.0)
            for name, pids in worker_parts(worker).items():
                vals = [memory_mb(p) for p in pids]
                rows.setdefault(name, []).append({k: sum(v[k] for v in vals) for k in keys})
            rows.setdefault("bare `import torch` process", []).append(memory_mb(bare.pid))
    finally:
        bare.kill()
        bare.wait()
    return {name: {k: med([v[k] for v in vals]) for k in keys} for name, vals in rows.items()}


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 uploads")
    parser.add_argument("--n", type=int, default=None, help="uploads (default 20, quick 8)")
    args = parser.parse_args(argv)
    n = args.n or (8 if args.quick else 20)
    from throughput import service
    with service(CORRECTNESS, n) as ctx:
        worker = ctx["start_workers"](1)[0]
        settled(worker, 8.0)
        mem = memory(worker)
        runs = first_verdicts(ctx, worker, n)
    firsts = [r["first_s"] for r in runs if r["first_s"] is not None]
    dones = [r["done_s"] for r in runs if r["done_s"] is not None]
    p50, p95 = pct(firsts, 50), pct(firsts, 95)
    lost = n - len(firsts)
    note = (f"{n} uploads of reference_lm, one at a time, each on an idle service (one `grader worker -c 1`, its "
            f"sandbox ready ahead); the result polled every {POLL_S * 1e3:.0f} ms through GET "
            f"/api/v1/submissions/ID/result; {len(CORRECTNESS)} correctness checks; {os.cpu_count()} CPUs, load "
            f"average {os.getloadavg()[0]:.1f}. Target: first verdicts p50 and p95 <= 5 s.")
    rows = [["first verdicts visible (upload start -> a verdict in the API)", len(firsts), p50, p95,
             max(firsts or [float("nan")]),
             "yes" if firsts and not lost and p95 <= 5 else "no"],
            ["whole result visible (partial: false)", len(dones), pct(dones, 50), pct(dones, 95),
             max(dones or [float("nan")]), ""]]
    block = emit("First verdicts through the API on an idle service (bench/idle_service.py)", note + "\n\n" + table(
        ["", "uploads", "p50 s", "p95 s", "max s", "<= 5 s"], rows))
    bare = mem["bare `import torch` process"]
    worker_total = {k: sum(v[k] for name, v in mem.items() if not name.startswith("bare")) for k in ("pss", "rss")}
    mrows = [[name, v["pss"], v["rss"], v["private"]] for name, v in mem.items() if not name.startswith("bare")]
    mrows += [["idle worker, all of it", worker_total["pss"], worker_total["rss"], None],
              ["bare `import torch` process (same moment)", bare["pss"], bare["rss"], bare["private"]],
              ["idle worker / bare torch process", worker_total["pss"] / bare["pss"],
               worker_total["rss"] / bare["rss"], None]]
    mnote = ("An idle worker (`grader worker -c 1`, its sandbox ready ahead), median of 3 samples 1 s "
             "apart, next to a bare `python -c \"import torch\"` of the same interpreter measured at the same moments. "
             "PSS: each shared page divided among the processes that map it (the target's measure); RSS: every "
             "resident page counted in full in each process; private: the pages no other process maps, what that "
             "part's end would free (the rest it shares: a pool process and the sandbox's processes are forks). "
             "Target: PSS ratio <= 1.25.")
    block += "\n" + emit("Memory of an idle worker against a bare `import torch` (bench/idle_service.py)",
                         mnote + "\n\n" + table(["process", "PSS MB", "RSS MB", "private MB"], mrows))
    save("idle_service", {"n": n, "runs": runs, "first_p50_s": p50, "first_p95_s": p95, "lost": lost,
                          "memory_mb": mem, "worker_mb": worker_total, "ratio_pss": worker_total["pss"] / bare["pss"],
                          "ratio_rss": worker_total["rss"] / bare["rss"]})
    return block


if __name__ == "__main__":
    main()
