"""The fork server's sandbox (grader/sandbox/zygote.py), each layer tried for real from inside a forked child.

The process backend's default as root (docs/sandbox.md, "The fork server"): these tests show each layer it takes.
Each child is forked from a fresh `python -I` that loaded zygote.py by path, as the runner's interpreter does
(the fork server's adds one hash seed: grader/sandbox/forkserver.py).
"""
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from grader.sandbox import seccomp, zygote
from grader.sandbox.bwrap import python_roots
from grader.sandbox.process import uid_processes
from grader.sandbox.runner import runner_python
from grader.sandbox.uids import lease_uid
from tests.sandbox.support import layer_missing

SCRATCH_MB = 8

# Run in the child, as the sandbox: what it can see and do, as JSON on the descriptor it keeps (OUT).
PROBE = """
import ctypes, errno, resource, signal, socket
libc = ctypes.CDLL(None, use_errno=True)

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

def fill():
    with open("big", "wb") as fh:
        for _ in range(SCRATCH_MB + 1):
            fh.write(bytes(1 << 20))

def mount_tmpfs():
    os.mkdir("/tmp/m")
    if libc.mount(b"tmpfs", b"/tmp/m", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")

def target():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over RLIMIT_FSIZE: EFBIG rather than a signal
    seen = {
        "ids": [os.getuid(), os.geteuid(), os.getgid()], "groups": os.getgroups(), "pid": os.getpid(),
        "hostname": os.uname().nodename, "root": sorted(os.listdir("/")), "cwd": os.getcwd(),
        "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "tmp": os.listdir("/tmp"), "dumpable": libc.prctl(3, 0, 0, 0, 0), "no_new_privs": libc.prctl(39, 0, 0, 0, 0),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0], "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
        "read_job": open(spec["job"] + "/submission.py").read(),
        "write_job": attempt(lambda: open(spec["job"] + "/new.py", "w").close()),
        "write_usr": attempt(lambda: open("/usr/new", "w").close()),
        "scratch": attempt(lambda: open("small", "w").write("x")), "fill_scratch": attempt(fill),
        "write_tmp": attempt(lambda: open("/tmp/x", "w").write("x")),
        "socket": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
        "mount": attempt(mount_tmpfs),
        "net": sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]),
        "out": OUT, "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "host": [p for p in ("/etc/passwd", "/etc/shadow", "/root", "/home", CODE) if os.path.exists(p)],
    }
    os.write(OUT, json.dumps(seen).encode())
"""

# The zygote: loads zygote.py by path, forks one sandbox for the spec on argv, prints what its child reported.
ZYGOTE = """
import importlib.util, json, os, sys
spec = json.loads(sys.argv[2])
found = importlib.util.spec_from_file_location("zygote", sys.argv[1])
zygote = importlib.util.module_from_spec(found)
found.loader.exec_module(zygote)
{preamble}
read_fd, OUT = os.pipe()
spec["keep"] = [2, OUT]  # stderr kept: a target that raises leaves its traceback in the test's failure
{target}
try:
    pid = zygote.spawn(spec, target)
except OSError as exc:
    pid, failed = None, type(exc).__name__
# what the cgroups' files held the moment spawn returned (stand-ins for cgroup.procs in a test)
placed = [open(path).read() for path in spec.get("cgroup_procs", ())] if pid else None
os.close(OUT)
report = b""
while chunk := os.read(read_fd, 1 << 16):
    report += chunk
result = {{"pid": pid, "placed": placed, "report": json.loads(report) if report else None}}
if pid is None:
    result["failed"] = failed
else:
    result["status"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def root_only():
    if os.geteuid() != 0:
        layer_missing("the fork server's sandbox needs root (namespaces, pivot_root, setuid)")


def new_job(tmp_path_factory):
    """A job directory laid out as the process backend does (root:uid 0750, scratch/ the uid's), its uid and the
    seccomp filter (hex); the uid is leased for as long as the context lasts."""
    with lease_uid() as uid:
        job_dir = tmp_path_factory.mktemp("zygote-job")
        (job_dir / "scratch").mkdir()
        (job_dir / "submission.py").write_text("TRACK = 'lm'\n")
        os.chmod(job_dir / "submission.py", 0o644)  # as new_job_dir() does: the service's umask is 077
        os.chown(job_dir, 0, uid)
        os.chmod(job_dir, 0o750)
        yield uid, job_dir, seccomp.deny_list_bpf().hex()


@pytest.fixture
def job(tmp_path_factory, root_only):
    yield from new_job(tmp_path_factory)


def sandboxed(job, target: str, preamble: str = "", python: str | None = None, **more) -> dict:
    """Fork one sandbox from a fresh interpreter; its exit status, what it reported, the zygote's stderr."""
    uid, job_dir, bpf = job
    python = python or runner_python()
    spec = {"uid": uid, "job": str(job_dir), "scratch_mb": SCRATCH_MB, "roots": python_roots(python), "files": 64,
            "pids": 32, "seccomp": bpf, **more}
    code = ZYGOTE.format(preamble=textwrap.dedent(preamble), target=textwrap.dedent(target))
    proc = subprocess.run([python, "-I", "-c", code, zygote.__file__, json.dumps(spec)], capture_output=True,
                          text=True, timeout=120, env={}, cwd="/",
                          umask=0o077)  # the service's umask, whatever the test's
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {**json.loads(proc.stdout), "stderr": proc.stderr, "spec": spec}


@pytest.fixture(scope="module")
def seen(tmp_path_factory, root_only):
    """What one sandbox saw of itself (one fork serves every layer's test), with its uid, job and roots."""
    for uid, job_dir, bpf in new_job(tmp_path_factory):
        code = str(Path(__file__).resolve().parents[2] / "grader")  # the grader's own code: never visible
        result = sandboxed((uid, job_dir, bpf), "",
                           preamble=f"CODE = {code!r}\nSCRATCH_MB = {SCRATCH_MB}\n" + PROBE)
        assert result["status"] == 0, result["stderr"]
        assert uid_processes(uid) == [], "a process of the sandbox outlived it"
        return {"uid": uid, "job": str(job_dir), "roots": result["spec"]["roots"], **result["report"]}


def test_runs_as_its_own_uid_without_groups(seen):
    assert seen["ids"] == [seen["uid"]] * 3 and seen["groups"] == []


def test_own_pid_namespace_shows_only_itself_and_its_init(seen):
    assert seen["pid"] == 2 and seen["processes"] == [1, 2]


def test_filesystem_holds_only_what_the_harness_needs(seen):
    tops = {p.split("/")[1] for p in (*seen["roots"], seen["job"])}
    assert set(seen["root"]) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "sys", "dev", "proc",
                                 "tmp", *tops}, seen["root"]
    assert seen["host"] == [], f"host paths visible: {seen['host']}"
    assert seen["cwd"] == seen["job"] + "/scratch"


def test_job_is_read_only_and_scratch_is_capped(seen):
    assert seen["read_job"] == "TRACK = 'lm'\n"
    assert seen["write_job"] == "EROFS" and seen["write_usr"] == "EROFS"
    assert seen["scratch"] == "ok"
    assert seen["fill_scratch"] in ("ENOSPC", "EFBIG")


def test_tmp_is_fresh_and_private(seen):
    # only the way to the job directory, when it lies under /tmp (as bwrap lays it out too)
    assert seen["tmp"] == ([seen["job"].split("/")[2]] if seen["job"].startswith("/tmp/") else [])
    assert seen["write_tmp"] == "ok"


def test_no_network_and_no_socket(seen):
    assert seen["socket"] == "EPERM"
    assert seen["net"] == ["lo"]


def test_cannot_mount_or_regain_privilege(seen):
    assert seen["mount"] == "EPERM"
    assert seen["no_new_privs"] == 1 and seen["dumpable"] == 0


def test_limits_and_descriptors(seen):
    assert seen["nofile"] == 64 and seen["core"] == 0
    # the kept ones (stderr, the report's), and the one listdir opened to list them (the lowest free number)
    assert {2, seen["out"]} <= set(seen["fds"]) and len(set(seen["fds"]) - {2, seen["out"]}) <= 1, seen["fds"]
    assert seen["hostname"] == "sandbox"


def test_exit_status_is_the_sandboxes(job):
    assert sandboxed(job, "def target():\n    raise SystemExit(3)\n")["status"] == 3
    killed = sandboxed(job, "import signal\ndef target():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    assert killed["status"] == 128 + 9


def test_a_refused_layer_runs_nothing(job):
    uid, job_dir, bpf = job
    missing = (uid, job_dir / "not-there", bpf)  # the job directory to bind does not exist
    result = sandboxed(missing, "def target():\n    os.write(OUT, b'ran')\n")
    assert result["status"] == 125 and result["report"] is None
    assert "could not isolate itself" in result["stderr"]


def test_torch_works_in_a_fork_of_a_torch_zygote(job):
    result = sandboxed(job, """
        def target():
            loss = torch.nn.Linear(8, 8)(torch.randn(4, 8)).pow(2).sum()
            loss.backward()
            os.write(OUT, json.dumps({"finite": bool(torch.isfinite(loss))}).encode())
        """, preamble="import torch\ntorch.set_num_threads(1)\n")
    assert result["status"] == 0, result["stderr"]
    assert result["report"] == {"finite": True}


def test_the_sandbox_is_in_its_cgroups_before_it_is_reported_started(job, tmp_path):
    # Stand-ins for the cgroups' cgroup.procs: the zygote writes the pid before spawn returns (and the worker hears
    # "started"), so a kill of the cgroup reaches a sandbox killed the moment it started (test_prestart.py).
    procs = [tmp_path / "cpu.procs", tmp_path / "memory.procs"]
    for path in procs:
        path.write_text("")
    result = sandboxed(job, "def target():\n    os.write(OUT, b'1')\n", cgroup_procs=[str(p) for p in procs])
    assert result["status"] == 0, result["stderr"]
    assert result["placed"] == [str(result["pid"])] * 2 and result["report"] == 1


def test_a_sandbox_that_cannot_join_its_cgroup_runs_nothing(job):
    result = sandboxed(job, "def target():\n    os.write(OUT, b'1')\n", cgroup_procs=["/nonexistent/cgroup.procs"])
    assert result["failed"] == "FileNotFoundError" and result["report"] is None, result
