"""A daemon outliving the run: attention double-forks a new session that execs a loop writing a heartbeat forever (its
command line carries a marker the test looks for on the host), waits until the heartbeat shows it runs, then answers
correctly; wrongly if the daemon never ran, so that an attack which tried nothing cannot pass unseen."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os
import sys as _sys
import time as _time

_reference_attention = attention
_started = []
_HEARTBEAT = "/tmp/grader-daemon-heartbeat"
_LOOP = ("import time\nwhile True:\n    try:\n        open(%r, 'w').write(str(time.time()))\n"
         "    except OSError:\n        pass\n    time.sleep(0.2)\n" % _HEARTBEAT)


def attention(q, k, v, mask=None):
    if not _started:
        _started.append(True)
        if _os.fork() == 0:
            try:
                _os.setsid()
                if _os.fork() == 0:
                    _os.closerange(0, 256)
                    _os.execv(_sys.executable, [_sys.executable, "-I", "-S", "-c", _LOOP, "grader-daemon-marker"])
            finally:
                _os._exit(0)
        _os.wait()
        deadline = _time.monotonic() + 10
        while not _os.path.exists(_HEARTBEAT) and _time.monotonic() < deadline:
            _time.sleep(0.05)
    out, weights = _reference_attention(q, k, v, mask)
    if not _os.path.exists(_HEARTBEAT):
        return out * 2, weights  # the daemon never ran
    return out, weights
