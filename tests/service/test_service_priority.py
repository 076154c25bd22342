"""A worker grades at a low CPU priority (issue 19): its judge (the pool process) below the web and the database, its
sandboxes below its judge. A real `grader worker` with its sandbox ready ahead, PostgreSQL, a Redis of our own."""
import os
from pathlib import Path

import pytest

from grader.sandbox.base import JUDGE_NICE
from grader.sandbox.bwrap import PROBE_PROGRAM
from grader.sandbox.cgroup import JUDGE, JUDGE_SHARES, ROOT
from grader.sandbox.process import NICE
from tests.ci import missing
from .svc_cluster import Worker, children, cluster_app, wait_for

pytestmark = pytest.mark.slow
PROBE = PROBE_PROGRAM.encode()  # in the isolation probe's command line, bwrap's and its own


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        out.append(todo.pop())
        todo += children(out[-1])
    return out


def sandboxed(pids: list[int]) -> list[int]:
    """Those of pids running as a uid other than root's: a sandbox's own processes. The isolation probe's throwaway
    sandbox (grader/sandbox/bwrap.py, a uid's first lease) is left out: it is no grading's, and CI once caught it."""
    out = []
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != 0 and PROBE not in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except FileNotFoundError:
            pass
    return out


def who(groups: dict) -> list:
    """Each pid with its cpu group, uid and command line, as far as they can still be read (a failure's detail)."""
    out = []
    for pid, group in groups.items():
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")
        except FileNotFoundError:
            uid, command = None, "(exited)"
        out.append((pid, group, uid, command))
    return out


def cpu_group(pid: int) -> str:
    """pid's group in the cgroup v1 cpu hierarchy, '' without one."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return ""


@pytest.mark.parametrize("low", [True, False], ids=["default", "SANDBOX_LOW_PRIORITY=false"])
def test_a_workers_judge_yields_to_the_web_and_its_sandboxes_to_the_judge(pg_url, tmp_path, low):
    if os.geteuid() != 0:
        missing("the sandboxes run as other uids, and the judge's cpu group is made, only as root")
    app, redis, env = cluster_app(pg_url, tmp_path, {"SANDBOX_LOW_PRIORITY": low})
    worker = Worker("priority", env, tmp_path)
    try:
        worker.start()
        pool = wait_for(lambda: children(worker.proc.pid), 30, what="the worker's pool process")[0]
        # the sandbox started ahead: its own processes, under the pool process (or its zygote)
        ahead = wait_for(lambda: sandboxed(descendants(pool)), 60, 0.2, "the sandbox started ahead")
        judge_nice = os.getpriority(os.PRIO_PROCESS, pool)
        main_nice = os.getpriority(os.PRIO_PROCESS, worker.proc.pid)
        sandbox_nices = {os.getpriority(os.PRIO_PROCESS, pid) for pid in ahead}
        assert "the judge's torch threads: 1" in worker.text(), "torch's own count, read in the pool process"
        if not low:
            assert judge_nice == main_nice == 0 and sandbox_nices == {0}, (judge_nice, sandbox_nices)
            assert cpu_group(pool) != f"/{JUDGE}"
            return
        assert main_nice == 0, "the worker's main process (the broker's heartbeats) keeps its priority"
        assert judge_nice == JUDGE_NICE and sandbox_nices == {NICE}, (judge_nice, sandbox_nices)
        assert "the judge's CPU priority: nice 5" in worker.text()
        if (ROOT / "cpu" / "cgroup.procs").exists():  # cgroup v1's cpu controller: where sessions are weighed
            assert cpu_group(pool) == f"/{JUDGE}", "the judge is in its cpu group: nice counts only in a session"
            assert int((ROOT / "cpu" / JUDGE / "cpu.shares").read_text()) == JUDGE_SHARES
            groups = {pid: cpu_group(pid) for pid in ahead}
            assert all(group.startswith("/grader-sandbox/") for group in groups.values()), \
                f"each sandbox leaves the judge's group for the sandboxes' lower one: {who(groups)}"
    finally:
        worker.kill()
        redis.stop()
