"""What the fork server saves: a sandbox forked from a process that already holds torch, against a cold one.

    sudo .venv/bin/python bench/fork_probe.py [--rounds 5]

Issue 19's targets 7 (throughput with training) and 8 (an idle worker's memory) are bound by each sandbox
importing torch afresh: about 1 s of CPU and a torch interpreter's memory per sandbox, two sandboxes per
grading with training. This measures the alternative before the grader uses it. Interleaved round by round:

- cold: the process backend's sandbox started ahead (every layer: uid, rlimits, seccomp, cgroup, bubblewrap),
  from its start until the harness has imported torch and said hello, then closed;
- forked: a zygote (the runner's interpreter, empty environment, torch imported, nothing run) forks a sandbox
  with grader/sandbox/zygote.py, which takes every layer itself (tests/sandbox/test_zygote.py checks each) but the
  cgroup; it reports ready and then runs a few steps of a transformer layer (the fork server's spawn, the default
  as root);
- judge-born: the same zygote forked from a process that imported torch first (as a worker's judge would, before
  it reads any secret), for target 8's shape: what the three hold together against a bare `import torch`;
- worker-born: the same, and then the torch process imports what a worker's main process imports (celery, the app,
  the judge) and forks its pool process, as celery's prefork pool does: target 8's shape for a whole worker, a lower
  bound (imported only: no broker, no database, nothing graded).

Prints, per variant, the time to ready, the CPU its process tree took until then, and the memory (PSS: shared
pages divided among the processes mapping them) at rest.
Needs root (namespaces, pivot_root, setuid) and the runner interpreter.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from grader.sandbox import Limits, zygote  # noqa: E402
from grader.sandbox.bwrap import python_roots  # noqa: E402
from grader.sandbox.process import ProcessSandbox  # noqa: E402
from grader.sandbox.runner import runner_python  # noqa: E402
from grader.sandbox.seccomp import deny_list_bpf  # noqa: E402
from common import cpu_s, memory_mb, save  # noqa: E402

UID = 64999  # the probe's children: outside the grader's uid pool, owning no file
# What a worker's main process imports besides torch (worker-born): Celery's worker and pool, the broker's client,
# the database's, the app and the grading task with the judge. Imported only: nothing connects or runs.
WORKER_MODULES = ["celery.apps.worker", "celery.worker.consumer", "billiard.pool", "kombu.transport.redis",
                  "psycopg", "grader.app", "grader.judge", "worker.tasks", "worker.grading"]

# The zygote: grader/sandbox/zygote.py loaded by path, and torch (it runs in the runner's interpreter). For each
# "fork" on stdin it spawns a sandbox, which says "ready <ms from spawn>" once isolated and waits for the go; the
# zygote prints "ready <ms> <pid>", then on "go" lets it run a few steps of a transformer layer and prints "done".
ZYGOTE = r'''
import importlib.util, json, os, sys, time
WORKER_MODULES = json.loads(sys.argv[4])
found = importlib.util.spec_from_file_location("zygote", sys.argv[1])
zygote = importlib.util.module_from_spec(found)
found.loader.exec_module(zygote)
spec = json.loads(sys.argv[2])
import torch
torch.set_num_threads(1)

def work():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    x = torch.randn(8, 32, 64)
    for _ in range(10):
        layer(x).sum().backward()

if sys.argv[3] in ("judge-born", "worker-born") and os.fork():
    # this process stands for the judge: it imported torch, forked the zygote before reading any secret, and idles
    sys.stdin.close()
    if sys.argv[3] == "worker-born":
        # a worker's main process: then what it imports (celery, the app, the judge) and its prefork pool process
        import importlib
        for name in WORKER_MODULES:
            importlib.import_module(name)
        os.fork()
    while True:
        time.sleep(3600)
print("zygote ready", flush=True)
for line in sys.stdin:
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    spec["keep"] = [out_w, go_r]
    t0 = time.perf_counter()

    def target():
        if os.getuid() != spec["uid"]:
            raise SystemExit(3)
        os.write(out_w, f"{1e3 * (time.perf_counter() - t0):.2f}".encode())
        os.read(go_r, 1)
        work()

    pid = zygote.spawn(spec, target)
    os.close(out_w)
    os.close(go_r)
    ready = os.read(out_r, 100).decode()
    os.close(out_r)
    print(f"ready {ready or 'failed'} {pid}", flush=True)
    sys.stdin.readline()
    os.write(go_w, b"g")
    os.close(go_w)
    print(f"done {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}", flush=True)
'''


def tree(pid: int) -> list[int]:
    """pid and every descendant, from /proc (children files)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def pss_mb(pids) -> float:
    """PSS of these processes together, MB."""
    return sum(memory_mb(pid)["pss"] for pid in pids)


def cold_round(sandbox) -> dict:
    """The process backend's sandbox started ahead, until ready; its CPU and memory then."""
    mine = set(tree(os.getpid()))
    t0 = time.perf_counter()
    prepared = sandbox.prepare(Limits())
    try:
        if not prepared.wait_ready(120):
            raise RuntimeError("the cold sandbox did not get ready")
        ready = time.perf_counter() - t0
        time.sleep(0.5)
        pids = [p for p in tree(os.getpid()) if p not in mine]
        return {"ready_s": ready, "cpu_s": cpu_s(pids), "pss_mb": pss_mb(pids)}
    finally:
        prepared.close()


class Zygote:
    """The zygote's process (and, judge-born, the stand-in judge it was forked from)."""

    def __init__(self, python: str, spec: dict, mode: str):
        t0 = time.perf_counter()
        spec = dict(spec, roots=python_roots(python))
        self.proc = subprocess.Popen([python, "-I", "-c", ZYGOTE, zygote.__file__, json.dumps(spec), mode,
                                      json.dumps(WORKER_MODULES)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={}, cwd="/")
        if self.proc.stdout.readline().strip() != "zygote ready":
            raise RuntimeError("the zygote did not start")
        self.ready_s = time.perf_counter() - t0
        time.sleep(0.5)
        self.pss_mb = pss_mb(tree(self.proc.pid))

    def fork(self) -> dict:
        """One sandbox, until it reports ready (isolated); its CPU and memory then, the zygote's (and judge's) with it."""
        t0 = time.perf_counter()
        self.proc.stdin.write("fork\n")
        self.proc.stdin.flush()
        words = self.proc.stdout.readline().split()
        ready = time.perf_counter() - t0
        if len(words) != 3 or words[1] == "failed":
            raise RuntimeError(f"the forked sandbox did not get ready: {words}")
        time.sleep(0.5)
        sandbox = tree(int(words[2]))
        row = {"ready_s": ready, "in_child_ms": float(words[1]), "cpu_s": cpu_s(sandbox),
               "with_zygote_mb": pss_mb(tree(self.proc.pid))}
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "done 0":
            raise RuntimeError("the forked sandbox did not finish its work")
        return row

    def close(self) -> None:
        self.proc.stdin.close()
        for p in reversed(tree(self.proc.pid)):
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        self.proc.wait(30)


def bare_torch(python: str) -> subprocess.Popen:
    """A bare `import torch` process, idle: what target 8 compares an idle worker with."""
    proc = subprocess.Popen([python, "-I", "-c", "import torch, sys; print(1, flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("fork_probe needs root: namespaces, pivot_root and setuid")
    work = Path(tempfile.mkdtemp(prefix="fork-probe-"))  # the job directory's parent
    job = work / "job"
    (job / "scratch").mkdir(parents=True)
    os.chown(job, 0, UID)
    os.chmod(job, 0o750)
    os.chmod(work, 0o755)
    spec = {"uid": UID, "job": str(job), "scratch_mb": 64, "files": 256, "pids": 64,
            "seccomp": deny_list_bpf().hex()}
    zygotes = {}
    sandbox = ProcessSandbox()
    rows = {"cold": [], "runner": [], "judge-born": [], "worker-born": []}
    try:
        zygotes["runner"] = Zygote(runner_python(), spec, "runner")
        zygotes["judge-born"] = Zygote(sys.executable, spec, "judge-born")
        zygotes["worker-born"] = Zygote(sys.executable, spec, "worker-born")
        for _ in range(args.rounds):
            rows["cold"].append(cold_round(sandbox))
            for mode, z in zygotes.items():
                rows[mode].append(z.fork())
        bare = bare_torch(sys.executable)
        time.sleep(0.5)
        judge_born, bare_pss = zygotes["judge-born"].fork()["with_zygote_mb"], pss_mb([bare.pid])
        worker_born = zygotes["worker-born"].fork()["with_zygote_mb"]
        bare.stdin.close()
        bare.wait(30)
    finally:
        for z in zygotes.values():
            z.close()
        shutil.rmtree(work)
    med = lambda mode, key: statistics.median(r[key] for r in rows[mode])  # noqa: E731
    print(f"{args.rounds} rounds each, interleaved; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          "medians. CPU until ready: each sandbox's process tree's (/proc, in 10 ms ticks). PSS: shared pages divided "
          "among the processes that map them.\n")
    print(f"{'':62} {'to ready ms':>12} {'CPU s':>8} {'PSS MB':>8}")
    print(f"{'cold: process sandbox started ahead (all layers), at rest':62} {1e3 * med('cold', 'ready_s'):12.0f} "
          f"{med('cold', 'cpu_s'):8.2f} {med('cold', 'pss_mb'):8.1f}")
    print(f"{'forked: a child of the zygote, isolated (see above)':62} {1e3 * med('runner', 'ready_s'):12.1f} "
          f"{med('runner', 'cpu_s'):8.2f}")
    print(f"{'  of which in the zygote, from fork to isolated':62} {med('runner', 'in_child_ms'):12.1f}")
    z = zygotes["runner"]
    print(f"{'the zygote (runner interpreter, torch imported), once, at rest':62} {1e3 * z.ready_s:12.0f} "
          f"{'':>8} {z.pss_mb:8.1f}")
    print(f"{'zygote + one forked child, at rest':62} {'':>12} {'':>8} {med('runner', 'with_zygote_mb'):8.1f}")
    print(f"{'judge-born: a torch process + the zygote it forked + a child':62} {'':>12} {'':>8} "
          f"{med('judge-born', 'with_zygote_mb'):8.1f}")
    print(f"{'worker-born: and its main imports the worker, forks a pool process':62} {'':>12} {'':>8} "
          f"{med('worker-born', 'with_zygote_mb'):8.1f}")
    print(f"\nTarget 8's shape with a judge-born zygote: (a torch process + its zygote + a forked child) / a bare "
          f"`import torch` process, measured at the same moment: {judge_born:.1f} / {bare_pss:.1f} MB = "
          f"{judge_born / bare_pss:.2f} (celery's own processes not included); with what a worker's main then imports "
          f"and its pool process: {worker_born:.1f} / {bare_pss:.1f} MB = {worker_born / bare_pss:.2f}.")
    save("fork_probe", {"rows": rows, "zygote_ready_s": z.ready_s, "zygote_pss_mb": z.pss_mb,
                        "judge_born_mb": judge_born, "worker_born_mb": worker_born, "bare_mb": bare_pss})


if __name__ == "__main__":
    main()
