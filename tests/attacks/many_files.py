"""100,000 empty files in scratch (and up to as many in /tmp, in one directory); then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os

_attention_before_many = attention
COUNT = 100_000


def _many(place):
    try:
        fd = _os.open(place, _os.O_RDONLY | _os.O_DIRECTORY)
    except OSError:
        return
    try:
        name = f"grader-many-{_os.getpid()}"
        _os.mkdir(name, dir_fd=fd)
        sub = _os.open(name, _os.O_RDONLY | _os.O_DIRECTORY, dir_fd=fd)
        made = 0
        try:
            for n in range(COUNT):
                _os.close(_os.open(str(n), _os.O_CREAT | _os.O_WRONLY, 0o600, dir_fd=sub))
                made += 1
        finally:
            _os.close(sub)
            print(f"left files in {place}: {made}")
    except OSError:
        pass  # out of inodes or space: what exists is left
    finally:
        _os.close(fd)


def attention(q, k, v, mask=None):
    _many(".")
    _many("/tmp")
    return _attention_before_many(q, k, v, mask)
