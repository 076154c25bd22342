"""A 3000-level directory tree in /tmp and in scratch (deeper than PATH_MAX allows to name, and than a recursive
remover's stack allows to walk), a mode-000 directory at the bottom; then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os

_attention_before_tree = attention
DEPTH = 3000


def _deep(place):
    try:
        fd = _os.open(place, _os.O_RDONLY | _os.O_DIRECTORY)
    except OSError:
        return
    try:
        name = f"grader-deep-{_os.getpid()}"
        for level in range(DEPTH):
            _os.mkdir(name, dir_fd=fd)
            sub = _os.open(name, _os.O_RDONLY | _os.O_DIRECTORY, dir_fd=fd)
            _os.close(fd)
            fd, name = sub, "d"
        _os.mkdir("locked", dir_fd=fd)
        _os.close(_os.open("locked/note", _os.O_CREAT | _os.O_WRONLY, 0o600, dir_fd=fd))
        _os.chmod("locked", 0, dir_fd=fd)
        _os.fchmod(fd, 0o500)  # the bottom level read-only too
        print(f"left a tree in {place}: {level + 1} levels")
    except OSError:
        pass  # a full tmpfs: what exists is left
    finally:
        _os.close(fd)


def attention(q, k, v, mask=None):
    _deep("/tmp")
    _deep(".")
    return _attention_before_tree(q, k, v, mask)
