"""Files left in the host's world-writable places other than /tmp (/run/lock, /var/lock, /var/tmp, /dev/mqueue,
/var/crash), plus a subdirectory of its own in each, for the next submission to read; then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os

_attention_before_files = attention
PLACES = ("/run/lock", "/var/lock", "/var/tmp", "/dev/mqueue", "/var/crash", "/dev/shm", "/tmp")


def _leave_files():
    wrote = []
    for place in PLACES:
        try:
            with open(_os.path.join(place, "grader-left-note"), "w") as fh:
                fh.write("left by a previous submission")
            _os.makedirs(_os.path.join(place, "grader-left-dir", "inner"), exist_ok=True)
            with open(_os.path.join(place, "grader-left-dir", "inner", "note"), "w") as fh:
                fh.write("left")
            wrote.append(place)
        except OSError:
            pass  # not there in this sandbox (bwrap and docker show none of the host's)
    print("left files in " + " ".join(wrote))


def attention(q, k, v, mask=None):
    _leave_files()
    return _attention_before_files(q, k, v, mask)
