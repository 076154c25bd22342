"""Bubblewrap for the process backend: new namespaces (pid, net, ipc, uts, user, cgroup) and a filesystem of only what the harness needs.

Inside: /usr (and the /bin, /lib symlinks of a merged-/usr system), the Python installation, the
job directory read-only, size-capped tmpfs for scratch/, /tmp and /dev/shm, a fresh /proc and /dev.
Nothing else of the host's filesystem (the grader's code, its database, other jobs) exists there,
the network namespace has only a loopback of its own, and when PID 1 of the namespace exits every
process in it dies (the process backend puts its own non-dumpable init there: sandbox_init.py).
"""
import os
import shutil
import subprocess
from pathlib import Path

from .cleanup import remove_tree
from .isolation import cache_success
from .zygote import ETC_FILES, SHM_MB, TMP_MB  # what the fork server's sandbox binds too
# The namespaces every sandbox gets (mount comes with user); the report lists them as "namespaces:user,...".
NAMESPACES = ("user", "ipc", "pid", "net", "uts")
LAYER = "namespaces:user,mount,pid,ipc,net,uts"


def executable() -> str | None:
    """Path of bwrap, if installed."""
    return shutil.which("bwrap")


def python_roots(python: str) -> list[str]:
    """Directories the interpreter needs outside /usr: its own prefix (a venv) and the base it was made from."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    candidates = {prefix, os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    try:
        with open(os.path.join(prefix, "pyvenv.cfg")) as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    candidates.add(os.path.dirname(value.strip()))
    except OSError:
        pass
    roots = set()
    for p in candidates:
        p = os.path.realpath(p)
        if p not in ("/", "/usr") and not p.startswith("/usr/"):
            roots.add(p)
    return sorted(roots)


def command(job_dir: Path, python: str, scratch_mb: int, seccomp_fd: int | None, as_pid_1: bool = False) -> list[str]:
    """The bwrap argument list (up to and including '--'); the command follows (as PID 1 when as_pid_1: it must reap)."""
    job = str(job_dir)
    # Each namespace named (not --unshare-all, whose user and cgroup parts are "-try": silently skipped).
    args = [executable() or "bwrap", *(f"--unshare-{ns}" for ns in NAMESPACES), "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr"]
    if as_pid_1:
        args.append("--as-pid-1")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for f in ETC_FILES:
        args += ["--ro-bind-try", f, f]
    for root in python_roots(python):
        args += ["--ro-bind", root, root]
    # torch reads the CPU topology from sysfs.
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm",
             "--perms", "1777", "--size", str(TMP_MB << 20), "--tmpfs", "/tmp",
             "--ro-bind", job, job,
             "--perms", "0700", "--size", str(scratch_mb << 20), "--tmpfs", f"{job}/scratch",
             "--chdir", f"{job}/scratch", "--cap-drop", "ALL"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args + ["--"]


def probe(uid: int | None, python: str) -> str | None:
    """None when bwrap can build this sandbox here as that uid for that interpreter, else why not.

    Looked up on PATH at every call; a working sandbox is remembered for a minute per bwrap, uid and
    interpreter, a failure never (installing bubblewrap fixes the next grading).
    """
    exe = executable()
    if not exe:
        return "bubblewrap is not installed: no bwrap on PATH"
    return _try(exe, uid, python)


# the probe's program; tests tell the probe's processes from a sandbox's by it
PROBE_PROGRAM = "import os; open('x', 'w').write('1')"


@cache_success()
def _try(exe: str, uid: int | None, python: str) -> str | None:
    """Build a throwaway sandbox with this bwrap as that uid and write a file in its scratch."""
    import tempfile
    from .base import low_priority
    from .process import NICE, drop_privileges
    job = Path(tempfile.mkdtemp(prefix="grader-bwrap-probe-"))
    try:
        (job / "scratch").mkdir()
        os.chmod(job, 0o755)
        # the sandbox's own interpreter: the grader's may live where the sandbox uid cannot reach (a 0700 checkout)
        # as PID 1 (the command reaps nothing): with bwrap's own reaper as PID 1, that reaper outlived the command and
        # was left a zombie to the host's init, which the uid's next sweep waited on (0.5 s here, where it reaps late)
        cmd = command(job, python, 8, None, as_pid_1=True) + [python, "-I", "-c", PROBE_PROGRAM]
        drop = drop_privileges(uid, uid)
        nice = NICE if low_priority() else 0  # sandbox work, at the sandboxes' priority: a worker's yields the CPU

        def preexec():
            os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
            drop()
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=30, preexec_fn=preexec, cwd="/",
                                  env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap did not start: {exc}"
        if proc.returncode != 0:
            return f"bwrap does not work here: {proc.stderr.decode(errors='replace').strip()[:300]}"
        return None
    finally:
        remove_tree(job)
