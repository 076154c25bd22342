"""Throughput of the real service with one and two workers, queue wait, and memory per worker.

    .venv/bin/python bench/throughput.py [--quick] [--n N] [--web]

The service as the end-to-end tests start it (tests/service/svc_cluster.py): a PostgreSQL database made
for this run (dropped at the end), a redis-server of our own on a spare port, `grader serve` in its own
process on 127.0.0.1, and `grader worker -c 1` processes. N uploads of the reference (distinct students)
are sent at once; throughput = N / (last finished - first uploaded). Queue wait = started - uploaded.
RSS is sampled every 0.5 s from /proc: each worker's main process, its pool process, and the sandbox
processes under it. --web also runs bench/web_load.py against the same service while two workers grade.

The burst (target 7 of issue 19): B uploads at once (default 200, quick 6) of reference_lm graded WITH training by
two workers; gradings per minute against the compute limit, cores / one grading's bare compute (the same checks
and training called in one process, bench/overhead.py's direct(), measured in this run before the burst), target
>= 0.9 x; and the store checked: every upload graded exactly once (status done, one result, no attempt over one).
"""
import argparse
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, SUBMISSIONS, check_set, cpu_s, emit, med, pct, save, table  # noqa: E402

sys.path.insert(0, str(ROOT))
from grader.app import store  # noqa: E402
from grader.app.db import get_db  # noqa: E402
SETTINGS = {"HEARTBEAT_S": 2, "LEASE_S": 60, "ENFORCE_ATTEMPTS": False, "PUBLISH_RETRIES": 1}


def proc_tree() -> dict[int, list[int]]:
    """Children of every process, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int, tree: dict) -> list[int]:
    out, todo = [], list(tree.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


class MemorySampler:
    """Peak RSS of each worker's main process, pool process(es) and sandbox tree (summed per sample).

    RSS from /proc/PID/statm, not smaps_rollup: a torch process's smaps_rollup costs about 5 ms of CPU to read,
    and read every 0.5 s for each process (with a wait that loaded every report) the benchmark took about a tenth
    of the two cores from the gradings it measures (bench/NOTES.md, 7 Dec)."""

    def __init__(self, workers):
        self.workers, self.peaks, self.stop = workers, {"worker main": 0.0, "worker pool process": 0.0,
                                                        "sandbox (all its processes)": 0.0}, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(0.5):
            tree = proc_tree()
            for w in self.workers:
                if not w.proc or w.proc.poll() is not None:
                    continue
                main = w.proc.pid
                self.peaks["worker main"] = max(self.peaks["worker main"], rss_mb(main))
                for pool in tree.get(main, []):  # prefork pool children (and beat, when on)
                    self.peaks["worker pool process"] = max(self.peaks["worker pool process"], rss_mb(pool))
                    sandbox = sum(rss_mb(p) for p in descendants(pool, tree))
                    self.peaks["sandbox (all its processes)"] = max(self.peaks["sandbox (all its processes)"], sandbox)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(2)


def rss_mb(pid: int) -> float:
    """Resident memory of one process in MB (/proc/PID/statm), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_parts(ctx) -> dict:
    """CPU seconds so far of each part of the service, this benchmark and the whole machine: a process counts with
    the children it reaped (cutime), so a sandbox that ended still counts, in the zygote or pool process that reaped
    it."""
    from web_load import machine_busy_s
    tree, parts = proc_tree(), {"sandboxes": 0.0, "judges": 0.0, "worker mains": 0.0}
    for w in ctx["workers"]:
        if not w.proc or w.proc.poll() is not None:
            continue
        parts["worker mains"] += cpu_s([w.proc.pid])
        for pool in tree.get(w.proc.pid, []):
            whole = cpu_s([pool, *descendants(pool, tree)])
            judge = cpu_s([pool], children=False)
            parts["judges"] += judge
            parts["sandboxes"] += whole - judge  # the zygote, its forks, any started sandbox and what they reaped
    parts["web server"] = cpu_s([ctx["web_pid"], *descendants(ctx["web_pid"], tree)])
    parts["PostgreSQL and Redis"] = cpu_s(p for p in (int(e) for e in os.listdir("/proc") if e.isdigit())
                                          if command(p) in ("postgres", "redis-server"))
    parts["this benchmark"] = cpu_s([os.getpid()], children=False)
    parts["machine"] = machine_busy_s()
    return parts


def command(pid: int) -> str:
    """A process's command name (/proc/PID/comm), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def service(checks: tuple, students: int, web_workers: int = 2, access_log: bool = False):
    """PostgreSQL database, Redis, `grader serve` (gunicorn, web_workers processes, its access log in ctx["web_log"]
    when asked for); yields ctx, with start_workers."""
    import psycopg
    from tests.service.svc_cluster import Http, RedisServer, Worker, free_port, wait_for
    from tests.service.svc_helpers import PG_ADMIN
    from grader.app import accounts, create_app, store
    from grader.app.accounts import issue_token
    from grader.app.db import get_db
    workdir = Path(tempfile.mkdtemp(prefix="grader-bench-svc-"))
    admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    dbname = f"grader_bench_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{dbname}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + "/" + dbname
    redis = RedisServer(workdir).start()
    settings = {"DATABASE_URL": url, "BROKER_URL": redis.url, "SUBMISSIONS_DIR": str(workdir / "archive"),
                "SECRET_KEY": secrets.token_hex(16), **SETTINGS}
    env = {**os.environ, "GRADER_INSTANCE_PATH": str(workdir / "instance"),
           **{f"GRADER_{k}": json.dumps(v) if not isinstance(v, str) else v for k, v in settings.items()}}
    os.environ["GRADER_INSTANCE_PATH"] = str(workdir / "bench-instance")
    app = create_app(settings)
    with get_db(app).session() as s:
        store.create_assignment(s, "bench", title="Bench", checks=list(checks))
        store.create_assignment(s, "web", title="Web load", checks=["split_heads"])
        instructor = issue_token(s, "instructor")[1]
        tokens = [issue_token(s, "student", accounts.add_student(s, f"s{n:03d}"))[1] for n in range(students)]
    port = free_port()
    web_log = open(workdir / "web.log", "wb")
    web = subprocess.Popen([str(ROOT / ".venv" / "bin" / "grader"), "serve", "--port", str(port),
                            "--workers", str(web_workers), *(["--access-log"] if access_log else [])], env=env,
                           stdout=web_log, stderr=subprocess.STDOUT, start_new_session=True)
    http = Http(f"http://127.0.0.1:{port}")

    def up():
        try:
            return http.get("/api/v1/health", instructor)[0] == 200
        except OSError:
            return False
    workers = []

    def start_workers(n: int):
        for w in workers:
            w.stop()
        workers.clear()
        for k in range(n):
            workers.append(Worker(f"bench{k}-{secrets.token_hex(2)}", env, workdir).start())
        return workers
    try:
        wait_for(up, 60, what="grader serve to answer")
        yield {"app": app, "http": http, "tokens": tokens, "instructor": instructor, "workers": workers,
               "start_workers": start_workers, "workdir": workdir, "web_pid": web.pid, "web_workers": web_workers,
               "web_log": workdir / "web.log"}
    finally:
        for w in workers:
            w.kill()
        os.killpg(web.pid, 15)
        web.wait(10)
        redis.stop()
        get_db(app).engine.dispose()
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
        admin.execute(f'DROP DATABASE IF EXISTS "{dbname}"')
        admin.close()
        shutil.rmtree(workdir, ignore_errors=True)


def rows_for(app, ids):
    from sqlalchemy import select
    from grader.app.db import get_db
    from grader.app.models import Result, Submission
    with get_db(app).Session() as s:
        subs = {r.id: r for r in s.scalars(select(Submission).where(Submission.id.in_(ids)))}
        reports = {r.submission_id: r.report for r in s.scalars(select(Result).where(Result.submission_id.in_(ids)))}
        for r in subs.values():
            s.expunge(r)
    return subs, reports


def not_finished(app, ids) -> int:
    """How many of these submissions are neither done nor failed: one count, polled while the burst grades."""
    from sqlalchemy import func, select
    from grader.app.models import Submission
    with get_db(app).Session() as s:
        return s.scalar(select(func.count()).where(Submission.id.in_(ids),
                                                   Submission.status.not_in(("done", "failed"))))


def burst(ctx, n: int, tag: str, data: bytes, timeout: float, slug: str = "bench") -> dict:
    """Upload n files at once (one per student), wait until all are graded; the figures."""
    from tests.service.svc_cluster import wait_for
    ids, cpu_before, t0 = [], cpu_parts(ctx), time.monotonic()
    for k in range(n):
        status, sub = ctx["http"].upload(slug, ctx["tokens"][k], data + f"\n# {tag} {k}\n".encode(), "sub.py")
        assert status == 202, (status, sub)
        ids.append(sub["id"])

    def done():
        return not_finished(ctx["app"], ids) == 0
    with MemorySampler(ctx["workers"]) as mem:
        wait_for(done, timeout, 0.5, f"{n} gradings")
    cpu = {k: v - cpu_before[k] for k, v in cpu_parts(ctx).items()}
    cpu["window"] = time.monotonic() - t0  # from just before the uploads to the poll that saw the last one done
    subs, reports = rows_for(ctx["app"], ids)
    subs = {i: subs[i] for i in ids}  # in upload order
    created = min(r.created_at for r in subs.values())
    finished = max(r.finished_at for r in subs.values())
    makespan = (finished - created).total_seconds()
    waits = [(r.started_at - r.created_at).total_seconds() for r in subs.values()]
    latency = [(r.finished_at - r.created_at).total_seconds() for r in subs.values()]
    grading = [(r.finished_at - r.started_at).total_seconds() for r in subs.values()]
    judge = [reports[i]["timings"]["total_s"] for i in ids if i in reports]
    return {"n": n, "ids": ids, "failed": sum(r.status == "failed" for r in subs.values()), "makespan_s": makespan,
            "per_min": 60 * n / makespan, "queue_wait": waits, "latency": latency, "grading": grading,
            "judge": judge, "memory_mb": mem.peaks, "cpu_s": cpu,
            "store": [g - j for g, j in zip(grading, judge)], "timings": [reports[i]["timings"] for i in ids if i in reports]}


IDLE_S = 10  # how long the worker idles before the single upload: time to start its first sandbox
BURST = 200  # uploads in the burst with training (target 7); --burst changes it, --quick makes it QUICK_BURST
QUICK_BURST = 6
BARE = """import json, sys, time
sys.path.insert(0, "bench")
import torch
torch.set_num_threads(1)
from common import SUBMISSIONS, check_set
from overhead import direct
direct(SUBMISSIONS["reference_lm"], check_set(True))  # warm: imports, first calls
best = min(direct(SUBMISSIONS["reference_lm"], check_set(True, training=True))[0] for _ in range(int(sys.argv[1])))
print(json.dumps({"bare_s": best}))
"""


def bare_compute(repeat: int) -> float:
    """One grading's bare compute (reference_lm, correctness + training): best of `repeat`, in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", BARE, str(repeat)], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-1500:])
    return json.loads(proc.stdout.strip().splitlines()[-1])["bare_s"]


def core_seconds(b: dict, n: int) -> list:
    """Rows: where a burst's core-seconds went, per grading; their sum is what the rate is against the limit."""
    cpu, cores = b["cpu_s"], os.cpu_count() or 1
    whole = cores * cpu["window"]
    rows = [[f"core-seconds per grading over the burst ({cores} x {cpu['window']:.0f} s / {n}), of which:",
             whole / n]]
    rows += [[f"  {name}", seconds / n] for name, seconds in cpu_split_parts(cpu)]
    rows.append(["bare compute / the sandboxes' CPU per grading (what the sandboxes alone allow)",
                 b["bare_s"] * n / cpu["sandboxes"] if cpu["sandboxes"] else float("nan")])
    return rows


CPU_PARTS = {"sandboxes": "sandboxes (the checks, the training run, the verification; the zygote)",
             "judges": "judges (pool processes: the plan, each training step's replay, the verdicts)",
             "worker mains": "worker mains (celery)", "web server": "web server", "PostgreSQL and Redis": None,
             "this benchmark": "this benchmark (its polls of the store, its memory samples)"}


def cpu_split_parts(cpu: dict) -> list[tuple[str, float]]:
    """(what, core-seconds) for each part of cpu_parts' difference over a window, the rest and the idle cores."""
    parts = [(CPU_PARTS[k] or k, cpu[k]) for k in CPU_PARTS if k in cpu]
    rest = cpu["machine"] - sum(v for _, v in parts)
    whole = (os.cpu_count() or 1) * cpu["window"]
    return parts + [("the rest of the machine (the kernel, other processes)", max(0.0, rest)),
                    ("idle", max(0.0, whole - cpu["machine"]))]


def exactly_once(app, ids: list[int]) -> dict:
    """What the store says of a burst: uploads missing, not done, graded more than once (results or attempts)."""
    from sqlalchemy import func, select
    from grader.app.db import get_db
    from grader.app.models import Result, Submission
    with get_db(app).Session() as s:
        rows = {r.id: r for r in s.scalars(select(Submission).where(Submission.id.in_(ids)))}
        results = dict(s.execute(select(Result.submission_id, func.count()).where(Result.submission_id.in_(ids))
                                 .group_by(Result.submission_id)).all())
    return {"uploads": len(ids), "stored": len(rows), "lost": len(set(ids) - set(rows)),
            "not_done": sorted(i for i, r in rows.items() if r.status != "done"),
            "twice": sorted(i for i in ids if results.get(i, 0) > 1),
            "no_result": sorted(i for i in ids if results.get(i, 0) == 0),
            "retried": sorted(i for i, r in rows.items() if (r.attempts or 0) > 1)}


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 uploads, correctness checks only")
    parser.add_argument("--n", type=int, default=None, help="uploads per configuration")
    parser.add_argument("--web", action="store_true", help="also the web load (bench/web_load.py) with two workers")
    parser.add_argument("--burst", type=int, default=None,
                        help=f"uploads in the burst with training, 2 workers (default {BURST}, quick {QUICK_BURST}; "
                             "0: none)")
    parser.add_argument("--save-as", default="throughput",
                        help="the results' name under build/bench/ (run_all's fork-server burst saves its own)")
    args = parser.parse_args(argv)
    n = args.n or (4 if args.quick else 8)
    n_burst = args.burst if args.burst is not None else (QUICK_BURST if args.quick else BURST)
    checks = check_set(args.quick)
    data = SUBMISSIONS["reference_lm"].read_bytes()
    results, blocks = {}, []
    from web_load import CLIENTS
    with service(checks, max(n, CLIENTS, n_burst), access_log=args.web) as ctx:
        if n_burst:  # target 7 first: the bare compute, then the burst on a service nothing else loads
            training = check_set(True, training=True)
            with get_db(ctx["app"]).session() as s:
                store.create_assignment(s, "burst", title="Burst with training", checks=list(training))
            before = bare_compute(1 if args.quick else 2)
            ctx["start_workers"](2)
            time.sleep(IDLE_S)  # both workers' first sandboxes started ahead, as on a service already up
            b = burst(ctx, n_burst, "burst", data, 600 + 60 * n_burst, slug="burst")
            # Again once the burst is over (the workers idle): this machine's speed drifts over minutes (4.7 s
            # and 6.4 s in one run), and the limit is then taken from the faster of the two, the stricter.
            after = bare_compute(1 if args.quick else 2)
            bare_s = min(before, after)
            limit = 60 * (os.cpu_count() or 1) / bare_s
            b.update(bare_s=bare_s, bare_before_s=before, bare_after_s=after, limit_per_min=limit,
                     ratio=b["per_min"] / limit, once=exactly_once(ctx["app"], b["ids"]))
            print(f"  burst of {n_burst} with training, 2 workers: {b['per_min']:.2f}/min, limit {limit:.2f}/min "
                  f"(bare compute {before:.1f} s before, {after:.1f} s after), ratio {b['ratio']:.2f}; "
                  f"store {b['once']}", flush=True)
        for workers in (1, 2):
            ctx["start_workers"](workers)
            if workers == 1:  # one upload on an idle queue first: the latency a student sees most of the term
                time.sleep(IDLE_S)  # a worker that has been idle a while (its first sandbox started ahead)
                idle = burst(ctx, 1, "idle", data, 300)
            results[workers] = burst(ctx, n, f"w{workers}", data, 120 + 90 * n)
            r = results[workers]
            print(f"  {workers} worker(s): {n} graded in {r['makespan_s']:.1f} s, {r['per_min']:.1f}/min", flush=True)
        if args.web:
            import web_load
            blocks.append(web_load.run(ctx, quick=args.quick))
    one = results[1]
    rows = [[w, r["n"], r["failed"], r["makespan_s"], r["per_min"], r["per_min"] / one["per_min"],
             med(r["queue_wait"]), max(r["queue_wait"]), med(r["latency"]), pct(r["latency"], 95), med(r["grading"])]
            for w, r in results.items()]
    note = (f"{n} uploads of reference_lm at once per configuration, {len(checks)} checks ({', '.join(checks)}); "
            f"`grader worker -c 1` processes on {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), "
            f"PostgreSQL, Redis, process sandbox. scaling = throughput / throughput with 1 worker (ideal 2.0 with 2).")
    blocks.insert(0, emit("Throughput with one and two workers", note + "\n\n" + table(
        ["workers", "uploads", "failed", "makespan s", "gradings/min", "scaling", "queue wait p50 s",
         "queue wait max s", "upload->done p50 s", "upload->done p95 s", "grading p50 s"], rows)))
    def start_parts(timings: list) -> tuple[float, float]:
        """Median sandbox start + torch import, and the part of it the job waited for (not started ahead)."""
        whole = [(t["sandbox_start_s"] or 0) + (t["torch_import_s"] or 0) for t in timings]
        return med(whole), med([max(0.0, w - t.get("sandbox_ahead_s", 0)) for w, t in zip(whole, timings)])
    idle_whole, idle_waited = start_parts(idle["timings"])
    burst_whole, burst_waited = start_parts(one["timings"])
    lat = [["queue wait (upload -> claimed), 1 worker, idle queue", idle["queue_wait"][0]],
           ["judge (grade_bytes total), idle queue", med(idle["judge"])],
           ["  sandbox start + torch import, idle queue (all of it)", idle_whole],
           ["  of which waited for (not started ahead of the job)", idle_waited],
           ["upload -> done, one upload on an idle queue", idle["latency"][0]],
           [f"queue wait p50 in the burst of {n}, 1 worker", med(one["queue_wait"])],
           ["judge (grade_bytes total) p50 in the burst", med(one["judge"])],
           ["  sandbox start + torch import in the burst (all of it)", burst_whole],
           ["  of which waited for (the next job came before its sandbox was up)", burst_waited],
           ["claim, heartbeat, store result, score (grading - judge)", med(one["store"])]]
    blocks.insert(1, emit("Per-submission latency through the service (1 worker)", table(["part", "seconds"], lat)))
    mem_rows = [[name, results[2]["memory_mb"][name]] for name in results[2]["memory_mb"]]
    blocks.insert(2, emit("Memory per worker (peak RSS while grading, 2 workers)", table(["process", "peak RSS MB"], mem_rows)))
    if n_burst:
        st = b["once"]
        once = not (st["lost"] or st["not_done"] or st["twice"] or st["no_result"])
        brows = [["uploads at once (one per student)", n_burst],
                 ["bare compute of one grading (correctness + training, one process, best of "
                  f"{1 if args.quick else 2}; {b['bare_before_s']:.2f} s before the burst, {b['bare_after_s']:.2f} s "
                  "after: the faster) s", b["bare_s"]],
                 [f"compute limit: {os.cpu_count()} cores / bare compute, gradings/min", b["limit_per_min"]],
                 ["makespan (first upload -> last finished) s", b["makespan_s"]],
                 ["gradings/min", b["per_min"]],
                 ["gradings/min / compute limit (target >= 0.9)", b["ratio"]],
                 ["upload->done p50 / p95 s", f"{med(b['latency']):.1f} / {pct(b['latency'], 95):.1f}"],
                 ["grading p50 s (claimed -> stored)", med(b["grading"])],
                 ["  judge (grade_bytes total) p50 s", med(b["judge"])],
                 ["  sandbox start + torch import p50 s (all of it: CPU besides the compute)",
                  start_parts(b["timings"])[0]],
                 ["  of which the job waited for", start_parts(b["timings"])[1]],
                 ["  training's stages p50 s (" + ", ".join(sorted({k for t in b["timings"] for k in t["stages"]
                                                                 if k.startswith("training")})) + ")",
                  med([sum(v or 0 for k, v in t["stages"].items() if k.startswith("training")) for t in b["timings"]])],
                 *core_seconds(b, n_burst),
                 ["store: lost / not done / graded twice / without a result", f"{st['lost']} / {len(st['not_done'])} / "
                  f"{len(st['twice'])} / {len(st['no_result'])}" + (" (each exactly once)" if once else "")],
                 ["retried (attempts > 1: an infrastructure retry, still one result)", len(st["retried"])]]
        bnote = (f"{n_burst} uploads of reference_lm at once, graded with training ({len(training)} checks) by two "
                 f"`grader worker -c 1` on {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), PostgreSQL, "
                 "Redis, process sandbox; the bare compute measured in the same run, just before the burst and just after "
                 "it, the faster of the two taken (the stricter limit).")
        blocks.insert(3, emit("Burst with training, 2 workers, against the compute limit", bnote + "\n\n" +
                              table(["", "value"], brows)))
    save(args.save_as, {"checks": checks, "idle": idle, "results": {str(k): v for k, v in results.items()},
                        "burst": b if n_burst else None})
    return "\n".join(blocks)


if __name__ == "__main__":
    main()
