"""The process backend's layers, each on its own: seccomp, cgroup, the uid pool, and the fallback without bwrap;
and the limits student code runs under, on both backends."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from grader.sandbox import bwrap, seccomp
from grader.sandbox.cgroup import CgroupUnavailable, RunCgroup
from grader.sandbox.process import FULL
from grader.sandbox.uids import lease_uid
from tests.sandbox.support import backend_params, layer_missing, require_backend



@pytest.fixture
def as_root():
    """The hardened layers (uid pool, cgroup) need root: a skip locally, a failure in CI (which runs as root)."""
    if os.geteuid() != 0:
        layer_missing("the uid pool and the cgroup need root")


def in_seccomp_child(code: str) -> subprocess.CompletedProcess:
    """Run code in a child python with the deny-list installed (no bwrap, no uid change)."""
    why = seccomp.probe()
    if why:
        layer_missing(f"seccomp unavailable here: {why}")
    return subprocess.run([sys.executable, "-I", "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, preexec_fn=seccomp.loader(seccomp.deny_list_bpf()))


SOCKET_FAMILIES = {"inet": 2, "inet6": 10, "unix": 1, "netlink": 16, "packet": 17, "vsock": 40}


@pytest.mark.parametrize("family", sorted(SOCKET_FAMILIES))
def test_seccomp_refuses_socket_family(family):
    proc = in_seccomp_child(f"""
        import socket
        try:
            socket.socket({SOCKET_FAMILIES[family]}, socket.SOCK_DGRAM if {SOCKET_FAMILIES[family]} == 16 else socket.SOCK_STREAM)
            print("ALLOWED")
        except OSError as exc:
            print("errno", exc.errno)
    """)
    assert proc.stdout.strip() == "errno 1", f"socket({family}) under the filter: {proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("name,call", [
    ("ptrace", "libc.ptrace(16, os.getppid(), 0, 0)"),
    ("unshare", "libc.unshare(0x10000000)"),
    ("mount", "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)"),
    ("keyctl", "libc.syscall(250, 0, -3, 0)"),
    ("bpf", "libc.syscall(321, 0, 0, 0)"),
    ("process_vm_readv", "libc.syscall(310, os.getppid(), 0, 0, 0, 0, 0)"),
])
def test_seccomp_refuses_syscall(name, call):
    proc = in_seccomp_child(f"""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        rc = {call}
        print(rc, ctypes.get_errno())
    """)
    assert proc.stdout.split() == ["-1", "1"], f"{name} under the filter: {proc.stdout}{proc.stderr}"


@pytest.mark.slow
def test_seccomp_leaves_what_torch_needs():
    proc = in_seccomp_child("""
        import os, socket, threading
        import torch
        a, b = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        print("ok", float((torch.ones(3, 3) @ torch.ones(3, 3)).sum()))
    """)
    assert proc.stdout.strip() == "ok 27.0", proc.stderr[-2000:]


def cgroup_or_skip(memory_mb=128, pids=32, low_cpu=False) -> RunCgroup:
    try:
        return RunCgroup(memory_mb, pids, low_cpu=low_cpu)
    except CgroupUnavailable as exc:
        layer_missing(f"no writable cgroup here: {exc}")


def test_cgroup_caps_memory_across_processes():
    cg = cgroup_or_skip(memory_mb=128)
    try:
        code = "import os\nfor _ in range(2):\n    os.fork()\nx = bytearray(100 << 20)\nimport time; time.sleep(10)"
        proc = subprocess.Popen([sys.executable, "-c", code], preexec_fn=cg.join)
        time.sleep(3)
        assert cg.stats()["oom_kills"] >= 1, "4 processes of 100 MiB each in a 128 MiB cgroup: the OOM killer must act"
    finally:
        cg.kill()
        proc.wait()
        cg.remove()


def test_a_sandbox_yields_the_cpu_to_interactive_work():
    """A worker's sandbox (low priority): nice 19 and, where the v1 cpu controller is, a cgroup of low weight that the
    sandbox cannot leave (issue 19)."""
    from grader.sandbox import cgroup as cgroups
    from grader.sandbox.base import Limits
    from grader.sandbox.process import NICE, _preexec
    cg = cgroup_or_skip(low_cpu=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            preexec_fn=_preexec(None, Limits(), cg, None, NICE), start_new_session=True)
    try:
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == NICE
        if "cpu" in cg.dirs:  # cgroup v1 here: the parent of every run's group has the low shares
            assert str(proc.pid) in (cg.dirs["cpu"] / "cgroup.procs").read_text().split()
            assert int((cg.dirs["cpu"].parent / "cpu.shares").read_text()) == cgroups.CPU_SHARES
    finally:
        cg.kill()
        proc.wait()
        cg.remove()


def test_a_sandbox_of_normal_priority_stays_out_of_the_cpu_group():
    """`grader check`'s sandbox is what a person waits for: the nice level of its parent, no cpu cgroup."""
    from grader.sandbox.base import low_priority
    from grader.sandbox.process import _preexec
    from grader.sandbox.base import Limits
    assert not low_priority(), "only a worker turns low priority on"
    cg = cgroup_or_skip()
    assert "cpu" not in cg.dirs
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            preexec_fn=_preexec(None, Limits(), cg, None), start_new_session=True)
    try:
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        cg.kill()
        proc.wait()
        cg.remove()


@pytest.mark.parametrize("low", [True, False], ids=["a worker's", "grader check's"])
def test_the_bwrap_probe_runs_at_its_sandboxes_priority(monkeypatch, low):
    """The isolation probe is sandbox work: a worker's yields the CPU as its sandboxes do (nice 19)."""
    from grader.sandbox import base
    from grader.sandbox.process import NICE
    expected = NICE if low else os.getpriority(os.PRIO_PROCESS, 0)
    monkeypatch.setattr(base, "_LOW_PRIORITY", [low])
    # the probe's sandbox command swapped for one that exits 0 only at the expected nice (the probe's own words
    # after it land in its argv)
    monkeypatch.setattr(bwrap, "command", lambda *args, **kwargs: [
        sys.executable, "-c", f"import os, sys; sys.exit(0 if os.nice(0) == {expected} else 'nice ' + str(os.nice(0)))"])
    bwrap._try.cache_clear()
    try:
        assert bwrap._try("bwrap", None, sys.executable) is None
    finally:
        bwrap._try.cache_clear()  # the stand-in's success is not bwrap's


def test_cgroup_kill_takes_processes_that_left_the_session():
    cg = cgroup_or_skip()
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], preexec_fn=cg.join, start_new_session=True)
    deadline = time.monotonic() + 20  # the cgroup's low CPU weight: on a busy machine the child starts late
    while len(cg.pids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(cg.pids()) == 2
    assert cg.kill(), f"still in the cgroup: {cg.pids()}"
    proc.wait()
    cg.remove()
    assert not any(d.exists() for d in cg.dirs.values()), "the run's cgroup is removed"


def test_uid_leases_are_exclusive(as_root):
    seen, barrier = [], threading.Barrier(3)

    def hold():
        with lease_uid() as uid:
            seen.append(uid)
            barrier.wait(timeout=10)
    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 3, f"concurrent runs got uids {seen}"


def test_the_bwrap_probe_leaves_nothing_of_its_uid(as_root):
    """The probe's throwaway sandbox ends whole. Its bwrap reaper, left a zombie to the host's init, counted against
    the uid's process limit and held the uid's next sweep until that init reaped it (0.5 s on this machine)."""
    from grader.sandbox.process import ProcessSandbox, uid_process_states
    if not bwrap.executable():
        layer_missing("bubblewrap is not installed")
    bwrap._try.cache_clear()  # probe for real, not the minute's remembered success
    with lease_uid() as uid:
        assert bwrap.probe(uid, ProcessSandbox().python) is None
        assert uid_process_states(uid) == ([], []), "the probe left processes or zombies of its uid"


def test_run_records_every_layer(tmp_path, as_root):
    from grader.judge import Options, grade_file
    from tests.sandbox.support import Recorder
    recorder = Recorder("process")
    report = grade_file("submissions/reference_lm.py", Options(only=("split_heads",)), sandbox=recorder)
    assert report["checks"][0]["status"] == "pass"
    layers = recorder.runs[0].layers
    assert set(layers) >= {"uid", "cgroup", "seccomp", "bwrap"}, layers
    # every key is written, "off: ..." included: the record must also say each layer was on
    assert layers["weak"] is False and layers["active"] == list(FULL), layers
    assert not [k for k in ("cgroup", "seccomp", "bwrap") if str(layers[k]).startswith("off")], layers
    assert "[sandbox] uid=" in recorder.runs[0].log


LIMITS_PROBE = '''TRACK = "lm"
import os as _os
import resource as _r
import sys as _sys


def split_heads(x, n_heads):
    got = {n: _r.getrlimit(getattr(_r, "RLIMIT_" + n)) for n in ("CPU", "NPROC", "FSIZE", "NOFILE", "CORE", "AS")}
    flags = (_sys.flags.no_user_site, int(_sys.flags.safe_path), _sys.flags.hash_randomization)
    raise RuntimeError(f"probe {got} flags={flags} uid={_os.getuid()} env={sorted(_os.environ)}")


def merge_heads(x):
    return x
'''


@pytest.mark.parametrize("only", [("split_heads",), ("split_heads", "rope")], ids=["own-child", "shared-child"])
@pytest.mark.parametrize("backend", backend_params())
def test_student_code_runs_under_the_rlimits_with_no_user_site_and_an_environment_of_its_own(backend, only):
    """One check runs in a child of its own; two or more share one child, which sets its limits itself."""
    import ast
    import re
    from grader.judge import Options, grade_bytes
    from grader.sandbox import Limits
    from grader.harness.main import LOG_LIMIT
    require_backend(backend)
    report = grade_bytes(LIMITS_PROBE.encode(), "probe.py", Options(only=only, backend=backend))
    message = report["checks"][0]["message"]
    found = re.search(r"probe (\{.*\}) flags=(\(.*?\)) uid=(\d+) env=(\[.*\])", message)
    assert found, message
    got, flags, uid, env = (ast.literal_eval(found[1]), ast.literal_eval(found[2]), int(found[3]),
                            ast.literal_eval(found[4]))
    limits, budget = Limits(), int(Limits().stage_s)
    if len(only) == 1:
        assert got["CPU"] == (budget + 2, budget + 3), "CPU seconds: the check's budget and a little"
    else:  # the shared child's CPU time adds up: each check's soft limit is what it has used plus its budget
        soft, hard = got["CPU"]
        assert budget + 2 <= soft <= budget + 4 and hard > budget + 3, ("the shared child's limits", got["CPU"])
    if backend == "process":  # docker caps processes with the container's pids limit (its cgroup) instead
        assert got["NPROC"] == (limits.pids, limits.pids)
    assert got["NOFILE"] == (limits.files, limits.files)
    assert got["FSIZE"] == (LOG_LIMIT, LOG_LIMIT) and got["CORE"] == (0, 0)
    assert 0 < got["AS"][0] < 1 << 40, "the address space is capped"
    assert flags == (1, 1, 0), "python -s -P: no user site, no script directory on sys.path; one hash seed"
    # docker adds HOSTNAME ("sandbox"); the init drops the runner image's own PYTHON* variables; nothing of the
    # grader's environment gets in
    assert set(env) <= {"HOME", "LANG", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "PATH", "PWD", "TMPDIR", "HOSTNAME",
                        "PYTHONHASHSEED"}, env
    if os.geteuid() == 0:
        assert uid != 0, "student code never runs as root"


FALLBACK_ATTACKS = ["connect_local", "daemon", "environment_canary", "fork_bomb", "ptrace"]


@pytest.mark.slow
@pytest.mark.parametrize("attack", FALLBACK_ATTACKS)
def test_without_bwrap_attack_is_still_contained(attack, attack_env, as_root):
    """Where bwrap does not work (a default Docker container), seccomp, the uid and the cgroup still hold."""
    from tests.test_attacks import ATTACKS_DIR, CHECKS, LIMITS, REFERENCE, metadata
    from grader.judge import Options, grade_bytes
    from grader.sandbox import Limits
    from tests.sandbox.support import Recorder, leftovers
    text = REFERENCE.read_text() + "\n\n" + attack_env.fill((ATTACKS_DIR / f"{attack}.py").read_text())
    recorder = Recorder("process", bwrap=False, allow_weak=True)  # deliberately weaker: must be said
    report = grade_bytes(text.encode(), f"{attack}.py", Options(only=CHECKS, limits=Limits(**LIMITS)), sandbox=recorder)
    expect = metadata(attack)["EXPECT"]
    got = {c["id"]: c["status"] for c in report["checks"]}
    assert all(got[c] in (s if isinstance(s, tuple) else (s,)) for c, s in expect.items()), (got, report["checks"])
    assert all(s == "pass" for c, s in got.items() if c not in expect), got
    assert leftovers("process", recorder.runs[0], recorder.job_dirs[0], recorder.ended[0]) == []
    assert attack_env.canary not in str(report) and attack_env.contacts == []
    assert recorder.runs[0].layers["bwrap"] == "off (configured)"
    assert report["sandbox"]["weak"] is True and bwrap.LAYER not in report["sandbox"]["layers"], report["sandbox"]


@pytest.fixture(scope="module")
def attack_env():
    from tests.test_attacks import AttackEnv
    env = AttackEnv()
    yield env
    env.close()
