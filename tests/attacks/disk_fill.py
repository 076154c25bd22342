"""Disk filling: attention writes 1 MiB blocks to every writable place it finds until each refuses, and reports the total."""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "wrote"}
import os as _os
import time as _time

BLOCK = b"\0" * (1 << 20)


def attention(q, k, v, mask=None):
    total = 0
    deadline = _time.monotonic() + 20
    places = [_os.getcwd(), _os.environ.get("HOME", "/tmp"), "/tmp", "/var/tmp", "/dev/shm", "..", "../.."]
    for place in places:
        for n in range(100000):
            if _time.monotonic() > deadline:
                break
            try:
                with open(_os.path.join(place, f"fill-{_os.getpid()}-{n}"), "wb") as fh:
                    for _ in range(8):  # 8 MiB files: under any per-file size limit
                        fh.write(BLOCK)
                        fh.flush()
                        total += 1
            except OSError:
                break
    raise RuntimeError(f"wrote {total} MiB")
