"""What a fork server would save: a sandbox forked from a process that already holds torch, against a cold one.

    sudo .venv/bin/python bench/fork_probe.py [--rounds 5]

Issue 19's targets 7 (throughput with training) and 8 (an idle worker's memory) are bound by each sandbox
importing torch afresh: about 1 s of CPU and a torch interpreter's memory per sandbox, two sandboxes per
grading with training. This measures the alternative before anyone builds it. Interleaved round by round:

- cold: the process backend's sandbox started ahead (every layer: uid, rlimits, seccomp, cgroup, bubblewrap),
  from its start until the harness has imported torch and said hello, then closed;
- forked: a zygote (the runner's interpreter, empty environment, torch imported, nothing run) forks a child that
  takes the layers itself: new mount, pid, net, ipc and uts namespaces, a tmpfs root holding only /usr and the
  interpreter read-only and tmpfs /tmp and scratch, pivot_root, rlimits, a uid of its own, then the seccomp
  deny-list; it checks that (its uid, no socket, no /etc, nothing beside the interpreter's venv), reports ready
  and runs a few steps of a transformer layer. No cgroup, no job files, no reaper as PID 1: this is a
  measurement of the approach, not a sandbox the grader uses;
- judge-born: the same zygote forked from a process that imported torch first (as a worker's judge would, before
  it reads any secret), for target 8's shape: what the three hold together against a bare `import torch`.

Prints, per variant, the time to ready, the CPU it took (the cold sandbox's whole process tree; the forked
child's own), and the memory (PSS: shared pages divided among the processes mapping them) at rest.
Needs root (namespaces, pivot_root, setuid) and the runner interpreter.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from grader.sandbox import Limits  # noqa: E402
from grader.sandbox.process import ProcessSandbox  # noqa: E402
from grader.sandbox.runner import runner_python  # noqa: E402
from grader.sandbox.seccomp import deny_list_bpf  # noqa: E402
from common import save  # noqa: E402

UID = 64999  # the probe's children: outside the grader's uid pool, owning no file

# The zygote: stdlib and torch only (it runs in the runner's interpreter). One line on stdin per fork; the child
# answers "ready <cpu s> <ms after fork>" on stdout, waits for a line on its own stdin pipe, then works and exits.
ZYGOTE = r'''
import ctypes, os, resource, struct, sys, time
import torch
torch.set_num_threads(1)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
NS = 0x20000 | 0x4000000 | 0x8000000 | 0x20000000 | 0x40000000  # mount, uts, ipc, pid, net
BIND, REC, PRIVATE, REMOUNT, RDONLY, NOSUID, NODEV = 4096, 16384, 1 << 18, 32, 1, 2, 4
bpf = open(sys.argv[1], "rb").read()
program = ctypes.create_string_buffer(bpf, len(bpf))
fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(program)))

def ok(r, what):
    if r != 0:
        raise OSError(ctypes.get_errno(), what)

def mount(src, dst, fs, flags, data=None):
    ok(libc.mount(src and src.encode(), dst.encode(), fs and fs.encode(), flags, data and data.encode()), dst)

def isolate(uid):
    ok(libc.unshare(NS), "unshare")
    pid = os.fork()
    if pid:  # PID 1 of the new namespace: when it exits, everything in it dies
        os.waitpid(pid, 0)
        os._exit(0)
    mount(None, "/", None, REC | PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", NOSUID | NODEV, "size=1m")  # this namespace's own: nothing left on the host
    root = "/tmp/root"
    os.mkdir(root)
    mount("tmpfs", root, "tmpfs", NOSUID | NODEV, "size=1m,mode=755")
    for path in ("/usr", sys.prefix, os.path.realpath(sys.base_prefix)):
        if not os.path.isdir(root + path):
            os.makedirs(root + path)
            mount(path, root + path, None, BIND | REC)
            mount(None, root + path, None, BIND | REMOUNT | RDONLY | NOSUID | NODEV)
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + name):
            os.symlink(os.readlink("/" + name), root + "/" + name)
    for path, mb in (("/tmp", 16), ("/dev/shm", 64), ("/job/scratch", 64)):
        os.makedirs(root + path)
        mount("tmpfs", root + path, "tmpfs", NOSUID | NODEV, f"size={mb}m,mode=1777")
    os.mkdir(root + "/proc")
    mount("proc", root + "/proc", "proc", NOSUID | NODEV)
    os.mkdir(root + "/old")
    ok(libc.syscall(155, root.encode(), (root + "/old").encode()), "pivot_root")  # x86_64 SYS_pivot_root
    os.chdir("/job/scratch")
    ok(libc.umount2(b"/old", 2), "umount")
    os.rmdir("/old")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    ok(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    ok(libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0), "seccomp")

def work():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    x = torch.randn(8, 32, 64)
    for _ in range(10):
        layer(x).sum().backward()

if sys.argv[2] == "judge-born" and os.fork():
    # this process stands for the judge: it imported torch, forked the zygote before reading any secret, and idles
    sys.stdin.close()
    while True:
        time.sleep(3600)
print("zygote ready", flush=True)
for line in sys.stdin:
    uid = int(line)
    t0 = time.perf_counter()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        try:
            isolate(uid)
            cpu = time.process_time()  # this process's own, from its fork (os.times ticks are 10 ms)
            import socket
            try:
                socket.socket()
                raise RuntimeError("socket() allowed")
            except PermissionError:
                pass
            beside = os.listdir(os.path.dirname(sys.prefix))  # the venv's parent: a checkout, for the judge's
            if os.getuid() != uid or os.path.exists("/etc") or beside != [os.path.basename(sys.prefix)]:
                raise RuntimeError(f"not isolated: uid {os.getuid()}, / holds {sorted(os.listdir('/'))}")
        except BaseException as exc:
            print(f"failed {exc!r}", flush=True)
            os._exit(1)
        print(f"ready {cpu:.4f} {1e3 * (time.perf_counter() - t0):.2f} {os.getpid()}", flush=True)
        os.read(go_r, 1)
        work()
        os._exit(0)
    os.close(go_r)
    print(f"child {pid}", flush=True)
    if sys.stdin.readline().strip() == "go":
        os.write(go_w, b"g")
        os.close(go_w)
        os.waitpid(pid, 0)
        print("done", flush=True)
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
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(x.split()[1]) for x in fh if x.startswith("Pss:")) / 1024
        except (OSError, StopIteration):
            pass
    return total


def cpu_s(pids) -> float:
    """CPU these processes used, with their reaped children's (utime, stime, cutime, cstime of /proc/PID/stat)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


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

    def __init__(self, python: str, bpf: Path, mode: str):
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([python, "-I", "-c", ZYGOTE, str(bpf), mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env={}, cwd="/")
        if self.proc.stdout.readline().strip() != "zygote ready":
            raise RuntimeError("the zygote did not start")
        self.ready_s = time.perf_counter() - t0
        time.sleep(0.5)
        self.pss_mb = pss_mb(tree(self.proc.pid))

    def fork(self) -> dict:
        """One child, until it reports ready (isolated); memory at rest with the zygote's (and judge's)."""
        t0 = time.perf_counter()
        self.proc.stdin.write(f"{UID}\n")
        self.proc.stdin.flush()
        lines = {}
        while len(lines) < 2:  # the zygote's "child PID" and the child's "ready ...", in either order
            words = self.proc.stdout.readline().split()
            if not words:
                raise RuntimeError("the zygote ended")
            if words[0] == "failed":
                raise RuntimeError("the forked child could not isolate itself: " + " ".join(words[1:]))
            lines[words[0]] = words
        ready = time.perf_counter() - t0
        time.sleep(0.5)
        row = {"ready_s": ready, "cpu_s": float(lines["ready"][1]), "in_child_ms": float(lines["ready"][2]),
               "with_zygote_mb": pss_mb(tree(self.proc.pid))}
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "done":
            raise RuntimeError("the forked child did not finish")
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
    bpf = Path(os.environ.get("TMPDIR", "/tmp")) / f"fork-probe-{os.getpid()}.bpf"
    bpf.write_bytes(deny_list_bpf())
    zygotes = {}
    sandbox = ProcessSandbox()
    rows = {"cold": [], "runner": [], "judge-born": []}
    try:
        zygotes["runner"] = Zygote(runner_python(), bpf, "runner")
        zygotes["judge-born"] = Zygote(sys.executable, bpf, "judge-born")
        for _ in range(args.rounds):
            rows["cold"].append(cold_round(sandbox))
            for mode, z in zygotes.items():
                rows[mode].append(z.fork())
        bare = bare_torch(sys.executable)
        time.sleep(0.5)
        judge_born, bare_pss = zygotes["judge-born"].fork()["with_zygote_mb"], pss_mb([bare.pid])
        bare.stdin.close()
        bare.wait(30)
    finally:
        for z in zygotes.values():
            z.close()
        bpf.unlink()
    med = lambda mode, key: statistics.median(r[key] for r in rows[mode])  # noqa: E731
    print(f"{args.rounds} rounds each, interleaved; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          "medians. CPU until ready: the cold sandbox's process tree's (/proc), the forked child's own. PSS: shared pages divided among the processes "
          "that map them.\n")
    print(f"{'':62} {'to ready ms':>12} {'CPU s':>8} {'PSS MB':>8}")
    print(f"{'cold: process sandbox started ahead (all layers), at rest':62} {1e3 * med('cold', 'ready_s'):12.0f} "
          f"{med('cold', 'cpu_s'):8.3f} {med('cold', 'pss_mb'):8.1f}")
    print(f"{'forked: a child of the zygote, isolated (see above)':62} {1e3 * med('runner', 'ready_s'):12.1f} "
          f"{med('runner', 'cpu_s'):8.3f}")
    print(f"{'  of which in the child, from fork to isolated':62} {med('runner', 'in_child_ms'):12.1f}")
    z = zygotes["runner"]
    print(f"{'the zygote (runner interpreter, torch imported), once, at rest':62} {1e3 * z.ready_s:12.0f} "
          f"{'':>8} {z.pss_mb:8.1f}")
    print(f"{'zygote + one forked child, at rest':62} {'':>12} {'':>8} {med('runner', 'with_zygote_mb'):8.1f}")
    print(f"{'judge-born: a torch process + the zygote it forked + a child':62} {'':>12} {'':>8} "
          f"{med('judge-born', 'with_zygote_mb'):8.1f}")
    print(f"\nTarget 8's shape with a judge-born zygote: (a torch process + its zygote + a forked child) / a bare "
          f"`import torch` process, measured at the same moment: {judge_born:.1f} / {bare_pss:.1f} MB = "
          f"{judge_born / bare_pss:.2f} (celery's own processes not included).")
    save("fork_probe", {"rows": rows, "zygote_ready_s": z.ready_s, "zygote_pss_mb": z.pss_mb,
                        "judge_born_mb": judge_born, "bare_mb": bare_pss})


if __name__ == "__main__":
    main()
