"""The process backend, for hosts without a Docker engine: a child python, hardened in layers.

Always: an environment built from nothing, `python -s -P` with one hash seed, rlimits (CORE=0, NOFILE,
FSIZE) and a new session.
As root, also: a uid of its own from a pool (so NPROC binds and cleanup may kill all of that uid's
processes), a cgroup per run (memory = memory + swap, pids; killed as a whole), a seccomp
deny-list (no sockets, no ptrace or process_vm_*, no bpf, keyctl, mount, unshare, io_uring), and
bubblewrap namespaces where bwrap works here (nothing of the host's filesystem but /usr, the
interpreter and the job; size-capped tmpfs for scratch, /tmp and /dev/shm; no network at all).
A layer that cannot be had refuses the grading (IsolationMissing, naming the layer and how to install it)
unless the operator allows weak sandboxes (GRADER_SANDBOX_ALLOW_WEAK=true, or allow_weak=True for tests
and benchmarks); such a run is recorded as weak, with the missing layers, on every result.
"""
import logging
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from . import bwrap, forkserver, seccomp
from ..harness import runclock, wire
from .base import (HASH_SEED, PYTHON_FLAGS, FrameCollector, Limits, Prepared, Sandbox, SandboxRun, low_priority,
                   new_job_dir, wait_for_hello)
from .cgroup import CgroupUnavailable, RunCgroup
from .cleanup import remove_tree, sweep_sysv
from .isolation import IsolationMissing, allow_weak_from_env, refusal
from .runner import check_reachable, runner_python
from .uids import lease_uid, quarantine

logger = logging.getLogger(__name__)

LOG_TAIL = 20000
EXIT_GRACE_S = 5.0  # a harness that sent done exits within tens of ms; after this it is killed
INIT = Path(__file__).with_name("sandbox_init.py")
# World-writable places a sandbox uid without bwrap could leave files in; swept after each run (bwrap binds none
# of them: its /tmp and /dev/shm are tmpfs of its own, /run is not there). Found with
# `find / -xdev -type d -perm -0002`; world-writable directories below these are walked too.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/lock", "/var/crash")
# The layers of a full process sandbox, as the report lists them.
FULL = ("uid", "rlimits", "seccomp", "cgroup", bwrap.LAYER)


def drop_privileges(uid: int | None, gid: int | None):
    """preexec_fn part: no supplementary groups, then the run's gid and uid (no-op when not root)."""
    def apply():
        if uid is not None:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
    return apply


# A sandbox of low priority (base.low_priority(): a worker's) yields the CPU to interactive work (issue 19): nice 19
# and, as root, a cgroup of low CPU weight (cgroup.py), which also holds where the kernel groups a session's tasks
# (autogroup: bwrap's new session is one) and nice alone would not.
NICE = 19


def _preexec(uid, limits: Limits, cgroup, install_seccomp, nice: int = 0):
    """Runs in the child between fork and exec: cgroup (as root), nice, rlimits, uid, NPROC, then seccomp."""
    drop = drop_privileges(uid, uid)

    def apply():
        if cgroup is not None:
            cgroup.join()
        if nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)  # raising one's own nice needs no privilege; lowering it does
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.files, limits.files))
        fsize = limits.scratch_mb << 20
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        drop()
        if uid is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))  # binds only non-root
        if install_seccomp is not None:
            install_seccomp()  # last: after it, setuid and friends are still allowed but socket() is not
    return apply


KILL = next((p for p in ("/usr/bin/kill", "/bin/kill") if os.access(p, os.X_OK)), None)
SETPRIV = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)


def kill_uid(uid: int, settle_s: float = 0.5) -> list[int]:
    """Kill every process of the sandbox uid, daemons that left our process group included, and wait (at most
    settle_s) until none is left, zombies included; the pids still alive at the end."""
    _kill_all_as(uid)
    rounds, deadline, pause = 1, time.monotonic() + settle_s, 0.001
    while True:
        live, dead = uid_process_states(uid)
        if not (live or dead):
            return []
        if live and rounds < 5:  # a fork racing one kill is caught by the next
            _kill_all_as(uid)
            rounds += 1
            continue
        # A zombie or a dying process still counts against the uid's process limit: the next run of this uid could
        # not fork. Its parent (or the namespace's init) reaps it a moment later.
        if time.monotonic() > deadline:
            return live
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _kill_all_as(uid: int) -> None:
    """kill(2) of -1 with SIGKILL as the uid: every process it owns."""
    if KILL is not None:
        # by a small program spawned as the uid: forking the worker (torch loaded) to do it took 25-95 ms a fork,
        # six forks a grading (issue 19)
        # (setpriv changes the uid after the exec, so the spawn can use vfork; Popen(user=) cannot)
        as_uid = dict(user=uid, group=uid, extra_groups=[]) if SETPRIV is None else {}
        prefix = [] if SETPRIV is None else [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        try:
            # no timeout: Popen.wait with one polls in sleeps (ms each); kill(2) does not block
            subprocess.run([*prefix, KILL, "-KILL", "-1"], env={}, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **as_uid)
            return
        except (OSError, subprocess.SubprocessError):
            pass
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # as that uid, -1 means every process it owns
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def uid_processes(uid: int) -> list[int]:
    """Pids of live (non-zombie) processes owned by uid."""
    return uid_process_states(uid)[0]


def uid_process_states(uid: int) -> tuple[list[int], list[int]]:
    """(live pids, zombie pids) of the processes owned by uid."""
    pids, dead = [], []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                status = fh.read()
        except OSError:
            continue
        # the status file's Uid, not the /proc entry's owner: a non-dumpable process's entry belongs to root
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            (dead if fields.get("State", "").strip().startswith("Z") else pids).append(int(entry))
    return pids, dead


def sweep_files(uid: int) -> tuple[list[str], list[str]]:
    """Delete what the uid left in the host's world-writable directories: (removed, what would not go)."""
    removed, failed = [], []
    seen = set()
    todo = [top for top in SHARED_TMP if os.path.isdir(top)]
    while todo:  # the uid can write only in world-writable directories (its own ones go whole)
        top = todo.pop()
        try:
            st = os.stat(top)
            if (st.st_dev, st.st_ino) in seen:
                continue  # /var/lock -> /run/lock
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                est = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if est.st_uid == uid:
                left = remove_tree(entry.path)
                (failed.extend(left) if left else removed.append(entry.path))
            elif entry.is_dir(follow_symlinks=False) and est.st_mode & 0o002:
                todo.append(entry.path)
    return removed, failed


def sweep_uid(uid: int) -> tuple[list[str], list[str]]:
    """Kill the uid's processes, remove its files and SysV IPC objects: (removed, failures); no failure = clean."""
    survivors = kill_uid(uid)
    removed, failed = sweep_files(uid)
    ipc_removed, ipc_failed = sweep_sysv(uid)
    failed += ipc_failed
    if survivors:  # none left means none: only the uid could have started another, and it had no process
        time.sleep(0.1)  # a process in uninterruptible sleep dies a moment after SIGKILL
        survivors = uid_processes(uid)
    failed += [f"process {pid} survived SIGKILL" for pid in survivors]
    return removed + ipc_removed, failed


def reclaim(uid: int) -> list[str]:
    """For the uid pool, at each lease: sweep the uid and the job folders a dead run of it left; what would not go
    (empty: the slot is usable)."""
    return sweep_uid(uid)[1] + remove_stale_jobs(uid)


def remove_stale_jobs(uid: int) -> list[str]:
    """Job folders (ours, group = the uid) that a killed worker left: the uid could read them in a later run without
    namespaces. Only at lease time: holding the lease, no live run of this uid has a folder."""
    failed = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return failed
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.name.startswith("grader-job-") and entry.is_dir(follow_symlinks=False) \
                and st.st_uid == os.geteuid() and st.st_gid == uid:
            failed += remove_tree(entry.path)
    return failed


class ProcessSandbox(Sandbox):
    """Runs the harness as a child process with every layer, or refuses (unless weak sandboxes are allowed)."""
    name = "process"

    def __init__(self, python: str | None = None, bwrap: bool | None = None, seccomp: bool | None = None,
                 cgroup: bool | None = None, allow_weak: bool | None = None, fork: bool | None = None):
        # As root, each run gets a uid of its own from a pool: never the grader's, never another run's.
        self.privileged = os.geteuid() == 0
        self.python = python or runner_python()
        # The fork server (forkserver.py), as root: None reads GRADER_SANDBOX_FORK, on unless it says false
        if fork is None:
            fork = os.environ.get("GRADER_SANDBOX_FORK", "").strip().lower() not in ("0", "false", "no", "off")
        self.fork_server = forkserver.shared(self.python) if fork and self.privileged else None
        if self.privileged:
            check_reachable(self.python)
        # None: use the layer (refuse to grade without it); False: never (tests, benchmarks: needs allow_weak).
        self.want = {"bwrap": bwrap, "seccomp": seccomp, "cgroup": cgroup}
        # None: the operator's GRADER_SANDBOX_ALLOW_WEAK, read at each run; True/False: this sandbox's own choice.
        self.allow_weak = allow_weak
        off = [name for name, want in self.want.items() if want is False]
        if off and not self.weak_allowed():
            raise IsolationMissing(f"{', '.join(off)} turned off by configuration: that needs allow_weak=True "
                                   f"(or GRADER_SANDBOX_ALLOW_WEAK=true), and every result is then marked weak")

    def weak_allowed(self) -> bool:
        """May this sandbox grade with fewer than its full set of layers (the run then recorded as weak)."""
        return allow_weak_from_env() if self.allow_weak is None else self.allow_weak

    def run(self, job_dir: Path, limits: Limits, wall_s: float, on_frame=None) -> SandboxRun:
        """Run under a leased uid when root (so cleanup may kill all of that uid's processes)."""
        if not self.privileged:
            return self._finish(self._start(None, job_dir, limits), wall_s, on_frame)
        with lease_uid(reclaim) as uid:
            return self._finish(self._start(uid, job_dir, limits), wall_s, on_frame)

    def prepare(self, limits: Limits) -> Prepared:
        """A sandbox started now, ahead of its job: every layer up, torch imported, waiting for the go."""
        return StartedAhead(self, new_job_dir(), limits)

    def _layers(self, uid, limits: Limits):
        """Decide each layer for this run: (cgroup or None, seccomp bpf or None, use bwrap, record).

        Every layer is probed afresh (a success is trusted for a minute); one missing refuses the run
        with IsolationMissing unless weak sandboxes are allowed, and then the record says weak.
        """
        record = {"uid": uid if uid is not None else f"{os.geteuid()} (the grader's own: not running as root)"}
        cgroup = bpf = None
        use_bwrap = False
        missing = {} if uid is not None else {"uid": "not running as root: the sandbox runs as the grader's own uid"}
        if self.want["seccomp"] is False:
            record["seccomp"] = "off (configured)"
        else:
            why = seccomp.probe()
            if why is None:
                bpf = seccomp.deny_list_bpf()
                record["seccomp"] = "deny-list"
            else:
                record["seccomp"] = f"off: {why}"
        if self.want["bwrap"] is False:
            record["bwrap"] = "off (configured)"
        else:
            why = bwrap.probe(uid, self.python)
            use_bwrap = why is None
            record["bwrap"] = "namespaces" if use_bwrap else f"off: {why}"
        # the cgroup last: it is the one layer that must be removed again when the run is refused
        if self.want["cgroup"] is False:
            record["cgroup"] = "off (configured)"
        else:
            try:
                cgroup = RunCgroup(limits.memory_mb, limits.pids, low_cpu=low_priority())
                record["cgroup"] = cgroup.describe()
            except CgroupUnavailable as exc:
                record["cgroup"] = f"off: {exc}"
        for layer, key, on in (("seccomp", "seccomp", bpf is not None), ("cgroup", "cgroup", cgroup is not None),
                               (bwrap.LAYER, "bwrap", use_bwrap)):
            if not on:
                missing[layer] = record[key].removeprefix("off: ")
        if missing and not self.weak_allowed():
            if cgroup is not None:
                cgroup.remove()
            raise IsolationMissing(refusal(missing))
        record["active"] = [layer for layer in FULL if layer not in missing]
        record["weak"] = bool(missing)
        if missing:
            record["missing"] = [f"{layer}: {why}" for layer, why in missing.items()]
        return cgroup, bpf, use_bwrap, record

    def _start(self, uid, job_dir: Path, limits: Limits, fork: bool = True) -> "_Running":
        """Start the harness with every layer; it imports torch, says hello, then waits on its stdin for the go.
        Forked by the fork server when there is one (fork=False: started all the same)."""
        scratch = job_dir / "scratch"
        if uid is not None:
            # The lease swept the uid (reclaim): anything a worker that died mid-run left is gone, or it was skipped.
            os.chown(scratch, uid, uid)
            os.chmod(scratch, 0o700)
            # Only this run's uid (by group) may enter the job: another run's uid cannot read this submission.
            os.chown(job_dir, 0, uid)
            os.chmod(job_dir, 0o750)
        cgroup, bpf, use_bwrap, record = self._layers(uid, limits)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "TMPDIR": str(scratch), "PYTHONHASHSEED": HASH_SEED}
        harness = [self.python, *PYTHON_FLAGS, str(job_dir / "harness" / "main.py"), str(job_dir)]
        read_fd, write_fd = os.pipe()
        wire.widen(read_fd)  # the channel: a training step's answer in one write, not 64 KiB at a time
        if fork and self.fork_server is not None and use_bwrap and uid is not None:
            run = _Running(uid, cgroup, record, job_dir / "harness.log", limits.memory_mb)
            try:
                return self._fork(run, job_dir, limits, bpf, read_fd, write_fd)
            except forkserver.ForkServerDown as exc:
                # the worker's problem, never the student's: this grading starts its sandbox the usual way
                logger.warning("%s; this sandbox is started instead", exc)
                run = self._start(uid, job_dir, limits, fork=False)
                run.record["fork_server"] = f"down ({exc}): started instead"
                return run
        pass_fds = [write_fd]
        seccomp_fd = None
        if use_bwrap:
            if bpf is not None:
                seccomp_fd = seccomp.bpf_fd()
                pass_fds.append(seccomp_fd)
            # Our non-dumpable init as PID 1 of the namespace, in place of bwrap's dumpable reaper.
            shutil.copy(INIT, job_dir / "init.py")
            os.chmod(job_dir / "init.py", 0o644)
            cmd = bwrap.command(job_dir, self.python, limits.scratch_mb, seccomp_fd, as_pid_1=True) + \
                [self.python, *PYTHON_FLAGS, str(job_dir / "init.py"), str(job_dir / "harness" / "main.py"),
                 str(job_dir), str(write_fd)]
            install = None  # bwrap installs the filter itself, after building the namespaces
        else:
            cmd = harness + [str(write_fd)]
            install = seccomp.loader(bpf) if bpf is not None else None
        run = _Running(uid, cgroup, record, job_dir / "harness.log", limits.memory_mb)
        proc = None
        try:
            with open(run.log_path, "wb") as log:
                # stdin is the go channel: one byte once the job is in place (only the judge holds its write end)
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log, env=env, cwd=scratch,
                                        pass_fds=tuple(pass_fds), start_new_session=True,
                                        preexec_fn=_preexec(uid, limits, cgroup, install, NICE if low_priority() else 0))
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            if proc is None and cgroup is not None:
                cgroup.remove()
        run.proc = proc
        wire.widen(proc.stdin.fileno())  # the judge's replies (a training step's weights) in one write
        run.collector = FrameCollector(os.fdopen(read_fd, "rb", buffering=0), limits.output_mb << 20,
                                       run.forward, run.since_spawn).start()
        return run

    def _fork(self, run: "_Running", job_dir: Path, limits: Limits, bpf, read_fd: int, write_fd: int) -> "_Running":
        """The same sandbox, forked by the zygote (every layer taken in the fork: zygote.spawn) rather than started."""
        run.record["started"] = "forked by the fork server"  # the namespaces are its own, not bwrap's
        stdin_r, stdin_w = os.pipe()
        # The file owns stdin_w from here. Closing the bare fd on failure left the file to close the same number again
        # when collected, by then perhaps another descriptor of this process (another sandbox's pipe, a connection).
        stdin = os.fdopen(stdin_w, "wb")
        spec = {"uid": run.uid, "job": str(job_dir), "scratch_mb": limits.scratch_mb, "roots": bwrap.python_roots(
            self.python), "files": limits.files, "pids": limits.pids, "nice": NICE if low_priority() else 0,
            "cgroup_procs": run.cgroup.procs_files if run.cgroup is not None else [],
            "seccomp": bpf.hex() if bpf is not None else ""}
        try:
            with open(run.log_path, "wb") as log:
                run.proc = self.fork_server.spawn(spec, stdin_r, write_fd, log.fileno(), stdin)
        except BaseException:
            os.close(read_fd)
            stdin.close()
            if run.cgroup is not None:
                run.cgroup.remove()
            raise
        finally:
            os.close(stdin_r)
            os.close(write_fd)
        wire.widen(stdin_w)
        run.collector = FrameCollector(os.fdopen(read_fd, "rb", buffering=0), limits.output_mb << 20,
                                       run.forward, run.since_spawn).start()
        return run

    def _finish(self, run: "_Running", wall_s: float, on_frame, ahead: bool = False, early: bool = False) -> SandboxRun:
        """Give the go, collect frames, enforce the wall clock (from the go), then kill and remove whatever is left.
        early: return once the harness's done frame is in and leave the rest to _teardown (StartedAhead.close)."""
        proc, collector = run.proc, run.collector
        for header, blob in list(collector.frames):  # only hello can have come before the go
            if on_frame:
                on_frame(header, blob)
        run.on_frame = on_frame
        go_at = time.monotonic()
        try:
            proc.stdin.write(b"g")
            if run.talking:
                proc.stdin.flush()  # stdin stays open: the judge's replies to an interactive stage follow
            else:
                proc.stdin.close()
        except OSError:
            pass  # the harness is gone already: the frames say what happened
        killed = kind = None
        clock = backstop(run, wall_s, go_at)
        try:
            # After its done frame the harness only reaps its children and exits (20-50 ms of a torch process's
            # teardown): nothing the judge reads. A done frame forged early by the submission ends its own run.
            run.lingering = _await_end(run, clock, early)
        except subprocess.TimeoutExpired:
            more = f" (not counting {clock.waited_s():g} s of waiting for a CPU or the judge)" if clock.waited_s() else ""
            killed = f"the sandbox ran longer than its {wall_s:g} s budget and was killed{more}"
            kind = "timeout"
        finally:
            stats, leftovers = ({}, []) if run.lingering else self._teardown(run)
        if run.lingering:
            if run.cgroup is not None:
                run.record.update(run.cgroup.stats())  # what the limits saw (OOM kills, peak) is final at done
            frames = collector.frames[:collector.done_at + 1]  # the collector may still append: nothing after done
            return self._result(run, frames, None, None, None, go_at, ahead)
        if collector.error and not killed:
            killed = collector.error
            kind = "crash"
        finished = any(h.get("type") == "done" for h, _ in collector.frames)
        if not killed and not finished and stats.get("oom_kills"):
            killed = f"the sandbox ran out of memory (limit {run.memory_mb} MiB) and was killed"
            kind = "oom"
        run.record.update(stats)
        if leftovers:
            run.record["removed"] = leftovers[:20]
        return self._result(run, collector.frames, proc.returncode, killed, kind, go_at, ahead)

    def _result(self, run: "_Running", frames: list, exit_code, killed, kind, go_at: float, ahead: bool) -> SandboxRun:
        """The SandboxRun: the frames, how it ended, the harness's log with the layer record appended."""
        record = dict(run.record)
        log = run.log_path.read_bytes()[-LOG_TAIL:].decode("utf-8", "replace")
        log += "\n[sandbox] " + ", ".join(f"{k}={v}" for k, v in record.items()) + "\n"
        return SandboxRun(self.name, frames, exit_code, killed, time.monotonic() - go_at, run.collector.hello_at, log,
                          layers=record, ident=str(run.uid) if run.uid is not None else "", killed_kind=kind,
                          ahead_s=round(go_at - run.spawned_at, 3) if ahead else 0.0)

    def _teardown(self, run: "_Running", grace_s: float = 0.0) -> tuple[dict, list]:
        """The end of every run: the harness's own exit (up to grace_s), the kill and sweep of its uid, the cgroup's
        removal, the collector's last frames, its stdin closed. Returns the cgroup's stats and what the sweep removed."""
        run.lingering = False
        try:
            try:
                if grace_s:
                    wait_exit(run.proc, grace_s)
            except subprocess.TimeoutExpired:
                pass  # killed below, as any run
            return self._cleanup(run.proc, run.uid, run.cgroup)
        finally:
            run.collector.join(timeout=10)
            _close_quietly(run.proc.stdin)  # a no-op unless it stayed open: never given the go, or interactive

    def _cleanup(self, proc, uid, cgroup):
        """Kill the process group and the cgroup, then every process the uid still has; sweep its files; remove the
        cgroup."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if cgroup is not None:
            cgroup.kill()
        # proc leads its own session (start_new_session), and a session leader cannot leave its group (setpgid:
        # EPERM), so killpg reached it; what of the uid left the group, sweep_uid kills below. A fork server's
        # sandbox leads no group, but the zygote put it in its cgroup before answering "started" (zygote.spawn).
        proc.wait()
        stats = {}
        if cgroup is not None:
            stats = cgroup.stats()
            cgroup.remove()
        leftovers = []
        if uid is not None:
            leftovers, failed = sweep_uid(uid)
            if failed:  # never leased again until a later sweep finds it clean; this grading stands
                quarantine(uid, "; ".join(failed[:20]))
                stats["quarantined"] = failed[:20]
        return stats, leftovers


def _close_quietly(stream) -> None:
    try:
        stream.close()
    except OSError:
        pass


# The backstop leaves out at most this share of its own length: a grading's longest sandbox (Track B's fresh one, 670 s)
# must still end before Celery's soft limit (900 s), which would fail the grading instead of giving a verdict.
BACKSTOP_STRETCH = 0.25


def backstop(run: "_Running", wall_s: float, go_at: float) -> runclock.Deadline:
    """The sandbox's wall clock, a backstop behind each stage's own budget: like those (runclock.py), it leaves out the
    time the judge took to answer and the time the sandbox's processes waited for a CPU, up to a quarter of itself."""
    group = runclock.GroupWaits(run.cgroup.pids if run.cgroup is not None else list)
    starved = runclock.HeldBack(group.waits, group.cpu)
    return runclock.Deadline(wall_s, lambda: (starved() or 0.0) + run.answering(), BACKSTOP_STRETCH * wall_s, go_at)


def _await_end(run: "_Running", clock, early: bool) -> bool:
    """Wait for the harness's done frame (early) or its exit until the clock runs out (TimeoutExpired); True when it
    returned at the done frame."""
    while True:
        left = clock.remaining()
        if left <= 0:
            raise subprocess.TimeoutExpired(run.proc.args, clock.budget)
        step = min(left, 1.0)  # a process's wait for a CPU is gone with it: read them about once a second
        if early and not run.collector.ended.is_set():
            if run.collector.wait_done(step):
                return True
        else:
            try:
                wait_exit(run.proc, step)
                return False
            except subprocess.TimeoutExpired:
                pass
        clock.waited()


def wait_exit(proc: subprocess.Popen, timeout_s: float) -> None:
    """proc.wait(timeout_s), woken the moment the process exits (Popen.wait polls, up to 50 ms late)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel) or already reaped
        proc.wait(timeout=timeout_s)
        return
    try:
        if not select.select([fd], [], [], max(0.0, timeout_s))[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    proc.wait()


class _Running:
    """One started harness: its process, frame collector, cgroup and layer record."""

    def __init__(self, uid, cgroup, record: dict, log_path: Path, memory_mb: int):
        self.uid, self.cgroup, self.record, self.log_path, self.memory_mb = uid, cgroup, record, log_path, memory_mb
        self.answering = runclock.Pauses()  # the judge's time answering its questions (talk)
        self.spawned_at = time.monotonic()
        self.proc = self.collector = self.on_frame = None
        self.talking = False  # an interactive job: stdin stays open after the go
        self.lingering = False  # the run returned at its done frame: the harness may still run until _teardown

    def forward(self, header: dict, blob: bytes = b"") -> None:
        """The collector's callback: frames go to whoever runs the job, once one does."""
        if self.on_frame is not None:
            self.on_frame(header, blob)

    def since_spawn(self) -> float:
        return time.monotonic() - self.spawned_at


class StartedAhead(Prepared):
    """A process sandbox started before its job: harness up, torch imported, waiting on its stdin for the go.

    One sandbox still serves exactly one submission; only its start moves off the latency path.
    """

    def __init__(self, sandbox: ProcessSandbox, job_dir: Path, limits: Limits):
        super().__init__(sandbox, job_dir, limits)
        self.lease = ExitStack()
        self.ran = False
        try:
            uid = self.lease.enter_context(lease_uid(reclaim)) if sandbox.privileged else None
            self.running = sandbox._start(uid, job_dir, limits)
        except BaseException:
            self.lease.close()
            remove_tree(job_dir)
            raise

    def alive(self) -> bool:
        """The harness is still waiting (not killed, not exited) and no job has run in it."""
        return not self.ran and self.running.proc.poll() is None

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Until the harness has said hello (torch imported); False if it died or the time ran out."""
        return wait_for_hello(self.running.collector, timeout_s, self.alive)

    def run(self, wall_s: float, on_frame=None) -> SandboxRun:
        """Give the go; the wall-clock budget counts from now."""
        if self.ran:
            raise RuntimeError("a sandbox serves one job only")
        self.ran = True
        return self.sandbox._finish(self.running, wall_s, on_frame, ahead=True, early=True)

    def lingering(self) -> bool:
        """The job is done (its run returned at the done frame) and the harness not yet torn down."""
        return self.ran and self.running.lingering

    def talk(self, on_ask) -> None:
        """Answer the job's interactive stages through the harness's stdin (see Prepared.talk)."""
        stdin = self.running.proc.stdin

        def reply(header: dict, blob: bytes = b"") -> None:
            try:
                stdin.write(wire.encode_frame(header, blob))
                stdin.flush()
            except (OSError, ValueError):
                pass  # the harness is gone (or being killed): its frames say what happened
        answering = self.running.answering

        def answered(header: dict, blob: bytes = b"") -> None:
            answering.end()  # writing it is not the judge's time: a harness that stops reading would stretch it
            reply(header, blob)

        def timed(header: dict, blob: bytes) -> None:
            answering.begin()  # the judge's own time (a training step's replay, a fed stage held until its step)
            try:
                on_ask(header, blob, answered)
            finally:
                answering.end()
        self.running.talking = True
        self.running.collector.on_ask = timed

    def _stop(self) -> None:
        """Kill what an unused sandbox still runs, then give its uid back."""
        try:
            if not self.ran:
                self.ran = True
                # EOF without a go: the harness returns by itself, and the kill below finds less to do
                _close_quietly(self.running.proc.stdin)
                self.sandbox._teardown(self.running)
            elif self.running.lingering:
                # The harness ends by itself after done (20-50 ms), as the judge used to wait for; then the kill
                # and sweep of whatever is left, as before.
                self.sandbox._teardown(self.running, grace_s=EXIT_GRACE_S)
        finally:
            self.lease.close()
