"""A daemon outliving the run: attention double-forks a new session that sleeps and writes a heartbeat forever, then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os
import time as _time

_reference_attention = attention
_started = []


def attention(q, k, v, mask=None):
    if not _started:
        _started.append(True)
        if _os.fork() == 0:
            _os.setsid()
            if _os.fork() == 0:
                for fd in range(0, 256):
                    try:
                        _os.close(fd)
                    except OSError:
                        pass
                while True:
                    for place in ("/tmp", "/dev/shm", "."):
                        try:
                            with open(_os.path.join(place, "grader-daemon-heartbeat"), "w") as fh:
                                fh.write(str(_time.time()))
                        except OSError:
                            pass
                    _time.sleep(0.2)
            _os._exit(0)
        _os.wait()
    return _reference_attention(q, k, v, mask)
