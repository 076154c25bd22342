"""Raw syscalls through ctypes: become root, leave the namespaces, mount, load BPF, use the keyring; raises with what succeeded."""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "succeeded []"}
import ctypes as _ctypes
import os as _os

# x86_64 numbers; elsewhere the attempts simply fail with ENOSYS.
SYS = {"setuid": 105, "setgid": 106, "unshare": 272, "mount": 165, "bpf": 321, "keyctl": 250, "chroot": 161,
       "setns": 308, "init_module": 175, "pivot_root": 155}
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000


def attention(q, k, v, mask=None):
    libc = _ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = _ctypes.c_long
    attempts = {
        "setuid(0)": (SYS["setuid"], 0),
        "setgid(0)": (SYS["setgid"], 0),
        "unshare(NEWUSER)": (SYS["unshare"], CLONE_NEWUSER),
        "unshare(NEWNS)": (SYS["unshare"], CLONE_NEWNS),
        "unshare(NEWNET)": (SYS["unshare"], CLONE_NEWNET),
        "mount(tmpfs)": (SYS["mount"], _ctypes.c_char_p(b"none"), _ctypes.c_char_p(b"/tmp"), _ctypes.c_char_p(b"tmpfs"), 0, 0),
        "bpf(MAP_CREATE)": (SYS["bpf"], 0, 0, 0),
        "keyctl(GET_KEYRING_ID)": (SYS["keyctl"], 0, -3, 0),
        "chroot(/)": (SYS["chroot"], _ctypes.c_char_p(b"/")),
        "init_module": (SYS["init_module"], 0, 0, 0),
    }
    results = {}
    for name, args in attempts.items():
        rc = syscall(*[_ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        results[name] = rc >= 0
    results["still not root"] = _os.getuid() != 0 and _os.geteuid() != 0
    succeeded = sorted(k for k, ok in results.items() if ok and k != "still not root")
    if not results["still not root"]:
        succeeded.append("became root")
    raise RuntimeError(f"succeeded {succeeded} of {sorted(results)}")
