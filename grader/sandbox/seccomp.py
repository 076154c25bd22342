"""A seccomp deny-list for the process backend: no sockets, no debugging of other processes, no namespaces.

The filter is compiled once with pyseccomp (libseccomp) into classic BPF, then installed in the
sandbox child just before exec, either by prctl in preexec_fn or by bubblewrap's --seccomp FD, so
the same bytes guard both paths. Everything not listed is allowed: torch needs a wide surface.
"""
import ctypes
import errno
import functools
import os
import struct
import tempfile

# socket() is refused for every family (inet, inet6, unix, netlink, packet, vsock, ...): a submission
# needs none, and a unix socket would reach local services (a database socket with trust auth).
# socketpair() stays allowed: it reaches nothing outside the sandbox.
DENIED = (
    "socket", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register",  # io_uring can open sockets past seccomp
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "vhangup", "iopl", "ioperm",
    "lookup_dcookie",
)
# clone() that would make a namespace; clone3 passes its flags in memory seccomp cannot read, so it
# answers ENOSYS and glibc falls back to clone.
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x02000000)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class SeccompUnavailable(RuntimeError):
    """pyseccomp or libseccomp is missing, or the kernel refuses filters."""


@functools.lru_cache(maxsize=1)
def deny_list_bpf() -> bytes:
    """The compiled filter as raw classic-BPF instructions (8 bytes each)."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError) as exc:  # RuntimeError: "Unable to find libseccomp"
        raise SeccompUnavailable(f"pyseccomp is not usable: {exc}") from None
    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            flt.add_rule(eperm, name)
        except (OSError, ValueError):
            pass  # a syscall this architecture does not have
    for flag in CLONE_NAMESPACE_FLAGS:
        flt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    try:
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def bpf_fd() -> int:
    """A readable fd holding the compiled filter, for bubblewrap's --seccomp (the caller closes it)."""
    fd = os.memfd_create("grader-seccomp", 0)
    os.write(fd, deny_list_bpf())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def loader(bpf: bytes):
    """A function for preexec_fn that installs the filter on the calling process (after no_new_privs)."""
    count = len(bpf) // 8
    program = ctypes.create_string_buffer(bpf, len(bpf))
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", count, ctypes.addressof(program)))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

    def install():
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    install.keep = (program, fprog)  # the buffers must outlive the fork
    return install


@functools.lru_cache(maxsize=1)
def probe() -> str | None:
    """None when the filter compiles and the kernel accepts it (checked in a throwaway child), else why not."""
    try:
        install = loader(deny_list_bpf())
    except SeccompUnavailable as exc:
        return str(exc)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            install()
            import socket
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except PermissionError:
                code = 0
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code == 0 else f"the kernel did not apply the seccomp filter (probe exit {code})"
