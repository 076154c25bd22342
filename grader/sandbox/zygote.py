"""A fork server's sandbox: a fork of a process that already holds torch takes every layer itself.

The fork server's (forkserver.py, docs/sandbox.md "The fork server"): bench/fork_probe.py measures it,
tests/sandbox/test_zygote.py tries each layer. The process backend's sandbox imports torch afresh
(about 0.9 s of CPU and a torch interpreter's memory each); a sandbox forked from a zygote, as root, isolates itself
in about 15-25 ms: its cgroup, new mount, pid, net, ipc and uts namespaces, a filesystem of only what the harness
needs (what bwrap.command() asks of bubblewrap), rlimits, nice, its own uid, no_new_privs, non-dumpable, and the
seccomp deny-list last. Three processes per sandbox: the forked one waits outside the namespaces and exits as the
sandbox did; PID 1 inside reaps (as sandbox_init.py does); its child runs the target.
Stdlib only: it is loaded by path into the runner's interpreter.
"""
import ctypes
import os
import resource
import struct

NEWNS, NEWUTS, NEWIPC, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
RDONLY, NOSUID, NODEV, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 4, 38, 22, 2
SIGKILL = 9
SYS_PIVOT_ROOT = 155  # x86_64
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
# Shared with bwrap.py, which binds the same for bubblewrap: a sandbox's /tmp and /dev/shm, and a few files from /etc
# that the dynamic loader and libc read (nothing with secrets).
TMP_MB, SHM_MB = 16, 64
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/host.conf")
# The host's paths a sandbox sees read-only besides the interpreter's (torch reads the CPU topology from sysfs).
SYSTEM = ("/usr", *ETC_FILES, "/sys/devices/system/cpu")
BUILD = "/dev/shm"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)


def _ok(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target: str, fstype, flags: int, data=None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _ok(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _bind(path: str, root: str, flags: int = NOSUID | NODEV) -> None:
    """path, read-only, at the same place under root (a file onto an empty file, a directory onto a directory)."""
    target = root + path
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(path, target, None, BIND | REC)
    _mount(None, target, None, BIND | REMOUNT | RDONLY | flags)


def _tmpfs(target: str, mb: int, mode: str, owner: int = 0) -> None:
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", NOSUID | NODEV, f"size={mb}m,mode={mode},uid={owner},gid={owner}")


def build_root(spec: dict) -> None:
    """The sandbox's filesystem in a tmpfs, then pivot_root into it (in a new mount namespace, as root)."""
    _mount(None, "/", None, REC | PRIVATE)  # nothing mounted from here on reaches the host
    # The directories made below must let the sandbox's uid through to its job whatever umask the zygote inherited
    # (the service sets 077 for what it writes), as bwrap's are
    os.umask(0o022)
    # Built on a tmpfs of this namespace's own over /dev/shm: never where a job or an interpreter lies (/tmp might
    # hold the job), and nothing of it is left on the host
    _tmpfs(BUILD, 1, "0700")
    root = BUILD + "/root"
    _tmpfs(root, 1, "0755")
    for path in (*SYSTEM, *spec["roots"]):
        if os.path.exists(path):
            _bind(path, root)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + name):
            os.symlink(os.readlink("/" + name), root + "/" + name)
        elif os.path.isdir("/" + name):
            _bind("/" + name, root)
    _tmpfs(root + "/dev", 1, "0755")
    for name in DEVICES:
        _bind("/dev/" + name, root, NOSUID)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    _tmpfs(root + "/dev/shm", SHM_MB, "1777")
    _tmpfs(root + "/tmp", TMP_MB, "1777")
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", NOSUID | NODEV | 8)  # 8: noexec
    job = spec["job"]
    _bind(job, root)
    _tmpfs(root + job + "/scratch", spec["scratch_mb"], "0700", spec["uid"])
    os.makedirs(root + "/.old")
    _ok(_libc.syscall(SYS_PIVOT_ROOT, root.encode(), (root + "/.old").encode()), "pivot_root")
    _ok(_libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    _mount(None, "/", None, BIND | REMOUNT | RDONLY | NOSUID | NODEV)  # the root tmpfs itself: read-only
    os.chdir(job + "/scratch")


def drop(spec: dict, bpf: bytes | None) -> None:
    """rlimits, nice, the uid, no_new_privs, non-dumpable, then the seccomp filter."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (spec["files"], spec["files"]))
    fsize = spec["scratch_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if spec.get("nice"):
        os.setpriority(os.PRIO_PROCESS, 0, spec["nice"])
    uid = spec["uid"]
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    _ok(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "pdeathsig")  # the uid change cleared it; dies with its parent
    resource.setrlimit(resource.RLIMIT_NPROC, (spec["pids"], spec["pids"]))
    _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _ok(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "non-dumpable")
    if bpf:
        program = ctypes.create_string_buffer(bpf, len(bpf))
        fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(program)))
        _ok(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


def close_fds_except(keep) -> None:
    """Close every descriptor but keep (the job's channel, stdin, log)."""
    keep = sorted(set(keep))
    low = 0
    for fd in (*keep, 1 << 16):
        os.closerange(low, fd)
        low = fd + 1


def _exit_as(status: int) -> None:
    """Exit as the process whose wait status this is."""
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _place(pid: int, cgroup_procs, go: int) -> None:
    """The zygote's side of a fork: write the child's pid to its cgroups, then let it go on; killed if that fails."""
    try:
        for path in cgroup_procs:
            with open(path, "w") as fh:
                fh.write(str(pid))
        os.write(go, b"1")
    except BaseException:
        os.kill(pid, SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(go)


def spawn(spec: dict, target) -> int:
    """Fork a sandbox that runs target() as spec says; the pid to wait for (its exit status is the sandbox's).

    spec: uid, job (a directory, seen read-only; its scratch/ a tmpfs of scratch_mb), roots (more directories seen
    read-only: the interpreter's), files, pids, nice, keep (descriptors the target keeps), cgroup_procs (files to
    write the sandbox's pid to), seccomp (the filter's bytes, in hex). Call as root.
    """
    placed, go = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(placed)
        os.close(go)
        raise
    if pid:
        os.close(placed)
        _place(pid, spec.get("cgroup_procs", ()), go)
        return pid
    try:
        os.close(go)
        _ok(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "pdeathsig")  # dies with the zygote, and its sandbox too
        # forks nothing before it is in its cgroups: a kill of the cgroup reaches all of it once "started" is answered
        if os.read(placed, 1) != b"1":
            os._exit(125)
        os.close(placed)
        bpf = bytes.fromhex(spec["seccomp"]) if spec.get("seccomp") else None
        _ok(_libc.unshare(NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET), "unshare")
        init = os.fork()
        if init:  # outside the namespaces, root: it only waits, and exits as the sandbox did
            close_fds_except(())
            _exit_as(os.waitpid(init, 0)[1])
        build_root(spec)
        _ok(_libc.sethostname(b"sandbox", 7), "sethostname")
        drop(spec, bpf)
        close_fds_except(spec.get("keep", ()))
    except BaseException as exc:
        try:
            os.write(2, f"the sandbox could not isolate itself: {exc!r}\n".encode())
        finally:
            os._exit(125)  # nothing of the target ran
    child = os.fork()
    if child == 0:
        try:
            target()
            os._exit(0)
        except SystemExit as exc:
            os._exit(exc.code if isinstance(exc.code, int) else 1)
        except BaseException:
            import traceback
            try:
                os.write(2, traceback.format_exc()[-4000:].encode())  # the log, when the target made fd 2 one
            finally:
                os._exit(1)
    # PID 1 of the namespace: reap every orphan until the target exits; everything else dies with it
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if done == child:
            _exit_as(status)


def serve(sock, target_for) -> None:
    """The fork server's loop on a SOCK_SEQPACKET socket: each request (a JSON spec, the sandbox's descriptors) is
    answered "started PID" (or "failed WHY"), and "exit PID CODE" follows when that sandbox has ended. target_for(spec,
    fds) gives the sandbox's target. Ends when the worker closes its end."""
    import json
    import select
    import socket
    running = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 0.05 if running else None)
        while running:
            try:
                done, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not done:
                break
            running.discard(done)
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            sock.send(f"exit {done} {code}".encode())
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        if not message:
            return
        try:
            spec = json.loads(message)
            spec["keep"] = fds
            pid = spawn(spec, target_for(spec, fds))
            running.add(pid)
            sock.send(f"started {pid}".encode())
        except Exception as exc:  # the worker reports it; the zygote serves the next request
            sock.send(f"failed {type(exc).__name__}: {exc}".encode())
        finally:
            for fd in fds:
                os.close(fd)
