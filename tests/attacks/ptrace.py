"""ptrace and friends against the harness: attach, seize, read and write its memory, open its fds; raises with what succeeded."""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "succeeded []"}
import ctypes as _ctypes
import os as _os

PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SEIZE = 0, 16, 17, 0x4206


class _IoVec(_ctypes.Structure):
    _fields_ = [("base", _ctypes.c_void_p), ("len", _ctypes.c_size_t)]


def attention(q, k, v, mask=None):
    libc = _ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = (_ctypes.c_long, _ctypes.c_long, _ctypes.c_void_p, _ctypes.c_void_p)
    results = {}
    for target in {_os.getppid(), 1}:
        for name, request in (("attach", PTRACE_ATTACH), ("seize", PTRACE_SEIZE)):
            rc = libc.ptrace(request, target, None, None)
            results[f"ptrace {name} {target}"] = rc == 0
            if rc == 0:
                libc.ptrace(PTRACE_DETACH, target, None, None)
        buf = _ctypes.create_string_buffer(64)
        local = _IoVec(_ctypes.cast(buf, _ctypes.c_void_p), 64)
        remote = _IoVec(0x400000, 64)
        results[f"process_vm_readv {target}"] = libc.process_vm_readv(target, _ctypes.byref(local), 1,
                                                                      _ctypes.byref(remote), 1, 0) > 0
        # Writing into the harness would forge its results: seccomp refuses it as it refuses the read.
        results[f"process_vm_writev {target}"] = libc.process_vm_writev(target, _ctypes.byref(local), 1,
                                                                        _ctypes.byref(remote), 1, 0) > 0
        for path in (f"/proc/{target}/mem", f"/proc/{target}/environ", f"/proc/{target}/fd/3"):
            try:
                with open(path, "rb") as fh:
                    fh.read(1)
                results[f"open {path}"] = True
            except OSError:
                results[f"open {path}"] = False
    succeeded = sorted(k for k, ok in results.items() if ok)
    raise RuntimeError(f"succeeded {succeeded} of {sorted(results)}; own child: {_own_child(libc)}")


def _own_child(libc) -> str:
    """The control: attach to a dumpable child of our own, which only seccomp forbids (the harness's processes are
    also non-dumpable, so their refusals alone do not show seccomp at work)."""
    child = _os.fork()
    if child == 0:
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: the harness made this process non-dumpable
        _os.kill(_os.getpid(), 19)  # SIGSTOP: dumpable before the parent tries
        _os._exit(0)
    _os.waitpid(child, _os.WUNTRACED)
    rc = libc.ptrace(PTRACE_ATTACH, child, None, None)
    err = _ctypes.get_errno()
    if rc == 0:
        libc.ptrace(PTRACE_DETACH, child, None, None)
    _os.kill(child, 9)
    _os.waitpid(child, 0)
    return "attached" if rc == 0 else f"refused (errno {err})"
