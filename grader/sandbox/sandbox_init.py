"""PID 1 of a sandbox (a container, or bwrap's pid namespace): start the harness, reap every orphan, exit as it did.

Usage: python -s -P init.py HARNESS_MAIN JOB_DIR [CHANNEL_FD]

Without CHANNEL_FD (docker), fd 1 is the channel to the judge (the container's stdout): the harness
gets it as fd 3 and its own stdout goes to stderr (the instructors' log), so no stray print can
corrupt the frame stream. With CHANNEL_FD (the process backend), the channel is that fd already.

Why our own init rather than docker's (tini) or bwrap's reaper: those run as the sandbox user and
stay dumpable, so student code could open /proc/1/fd/N and write into what they hold (the channel
in docker, the instructors' log in bwrap). This init makes itself non-dumpable before it starts
anything, and the harness does the same first thing; no process the student controls can then
reach the channel. Reaping matters too: without it every process a fork bomb leaves behind stays a
zombie holding a slot of the pids limit, and the next stage could not fork.
Stdlib only: it runs inside the sandbox.
"""
import ctypes
import os
import signal
import sys

PR_SET_DUMPABLE = 4
CHANNEL_FD = 3


def main(argv):
    """Fork the harness with the channel, reap until it exits, then exit the same way."""
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    harness, job_dir = argv[1], argv[2]
    if len(argv) > 3:
        channel = int(argv[3])
    else:
        channel = CHANNEL_FD
        os.dup2(1, channel, inheritable=True)
        os.dup2(2, 1)
    pid = os.fork()
    if pid == 0:
        # base.PYTHON_FLAGS (this file runs without the grader). Of PYTHON* variables only the hash seed goes on: a
        # runner image's own (PYTHONDONTWRITEBYTECODE, or a PYTHONPATH) would otherwise reach the harness unseen
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONHASHSEED"}
        os.execve(sys.executable, [sys.executable, "-s", "-P", harness, job_dir, str(channel)], env)
    os.close(channel)  # only the harness holds the channel from here on
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if done == pid:
            break
    # The kernel kills everything else in the namespace when PID 1 exits.
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main(sys.argv)
