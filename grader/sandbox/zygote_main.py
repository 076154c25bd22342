"""The fork server's process: the runner's interpreter with torch and the harness imported, forking sandboxes.

Usage: python -s -P zygote_main.py ZYGOTE_PY HARNESS_DIR SOCKET_FD   (started by forkserver.py, as root, with only
PYTHONHASHSEED in its environment: every sandbox forked from it shares that hash seed)

Each sandbox (zygote.spawn) runs the harness's main() as the process backend's harness would run after its exec:
its stdin, channel and log are the three descriptors the worker sent, as fd 0, CHANNEL_FD and fds 1 and 2. Torch
is imported here once, with one thread and nothing run, so every fork starts from the same memory and is fork-safe.
Stdlib, torch and the harness only: it runs in the runner's interpreter.
"""
import importlib.util
import os
import shutil
import socket
import sys

CHANNEL_FD = 3
# What the process backend gives the harness's environment (process.py), for the sandbox's own os.environ.
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "PYTHONHASHSEED": "0"}


def load(name: str, path: str):
    """A module from a file, by path (neither file is on this interpreter's path)."""
    found = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def main(argv) -> None:
    zygote = load("zygote", argv[1])
    harness = load("harness_main", os.path.join(argv[2], "main.py"))  # puts the harness's folder on sys.path
    import torch
    torch.set_num_threads(1)  # the harness sets both again in each sandbox (interop threads only there: once only)
    import probes  # noqa: F401  (imported once here, as the harness would import it after torch)
    # the harness imports this one only for a root-cause stage, inside the sandbox, where the harness's folder is
    # not mounted: it must be in sys.modules before the fork
    import reference_parts  # noqa: F401

    def target_for(spec: dict, fds: list):
        def target():
            stdin, channel, log = fds
            os.dup2(stdin, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.dup2(channel, CHANNEL_FD)
            for fd in fds:
                if fd not in (0, 1, 2, CHANNEL_FD):
                    os.close(fd)
            scratch = os.path.join(spec["job"], "scratch")
            os.environ.clear()
            os.environ.update(ENV, HOME=scratch, TMPDIR=scratch)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            harness.main(["main.py", spec["job"], str(CHANNEL_FD)])
        return target

    try:
        zygote.serve(socket.socket(fileno=int(argv[3])), target_for)
    finally:
        # the worker is gone (or closed us): nobody else removes the harness copy it made for us
        shutil.rmtree(os.path.dirname(argv[1]), ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
