"""Entries a careless cleanup trips on, in /tmp, /dev/shm and scratch: a mode-000 directory with files, a read-only
directory, a FIFO, a unix socket (where socket() is allowed), a symlink to /etc; then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os
import socket as _socket

_attention_before_odd = attention


def _odd(place):
    base = _os.path.join(place, f"grader-odd-{_os.getpid()}")
    try:
        _os.makedirs(_os.path.join(base, "closed", "inner"))
        for sub in ("closed", "closed/inner"):
            with open(_os.path.join(base, sub, "note"), "w") as fh:
                fh.write("left")
        _os.chmod(_os.path.join(base, "closed", "inner"), 0)
        _os.chmod(_os.path.join(base, "closed"), 0)
        _os.makedirs(_os.path.join(base, "readonly"))
        open(_os.path.join(base, "readonly", "note"), "w").close()
        _os.chmod(_os.path.join(base, "readonly"), 0o500)
        _os.mkfifo(_os.path.join(base, "fifo"))
        _os.symlink("/etc", _os.path.join(base, "etc-link"))
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.bind(_os.path.join(base, "sock"))
            s.close()
        except OSError:
            pass  # seccomp refuses socket() in the process sandbox
        _os.chmod(base, 0o500)
        print(f"left odd entries in {place}")
    except OSError:
        pass


def attention(q, k, v, mask=None):
    for place in ("/tmp", "/dev/shm", "."):
        _odd(place)
    return _attention_before_odd(q, k, v, mask)
