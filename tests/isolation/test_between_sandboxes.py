"""Two sandboxes running at once cannot reach each other: here two gradings' (two workers'); a grading's training
and fresh sandboxes are made the same way. Each of two submissions, graded at the same time through the real judge,
leaves marks in five places where two processes on one host commonly meet (files in /tmp and /dev/shm, an abstract
and a TCP socket, a SysV segment under a fixed key), then looks for the other's for as long as both run. Each must
find all of its own marks (so each probe works) and none of the other's; as plain processes on the host, the same
two find each other through all five (the control). A timing channel is not tried: what it could carry is the
subject of tests/training/test_feed.py (a fresh sandbox only ever knows steps already taken)."""
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from tests.sandbox.support import Recorder, backend_params, layer_missing, require_backend

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_text()
LOOK_S = 20  # how long each side keeps looking, from the test's start: both run within it
RENDEZVOUS = r'''
import ctypes as _ctypes
import os as _os
import socket as _socket
import time as _time

_ME, _OTHER, _UNTIL = "__ME__", "__OTHER__", __UNTIL__
_PORT = {"a": __PORT_A__, "b": __PORT_B__}
_KEY = {"a": 0x72760001, "b": 0x72760002}
_libc = _ctypes.CDLL(None, use_errno=True)
_held = []


def _places(side):
    return {"tmp": f"/tmp/grader-rv-{side}", "shm": f"/dev/shm/grader-rv-{side}"}


def _sockets(side):
    return {"abstract": (_socket.AF_UNIX, "\0grader-rv-" + side), "tcp": (_socket.AF_INET, ("127.0.0.1", _PORT[side]))}


def _seen(side):
    found = [kind for kind, path in _places(side).items() if _os.path.exists(path)]
    for kind, (family, address) in _sockets(side).items():
        try:
            probe = _socket.socket(family, _socket.SOCK_STREAM)
        except OSError:
            continue  # socket() refused (the process backend's seccomp): no socket can be a channel
        probe.settimeout(0.2)
        try:
            probe.connect(address)
            found.append(kind)
        except OSError:
            pass
        finally:
            probe.close()
    if _libc.shmget(_KEY[side], 0, 0) >= 0:
        found.append("sysv")
    return found


def attention(q, k, v, mask=None):
    started, made, refused = _time.time(), [], []
    for kind, path in _places(_ME).items():
        try:
            with open(path, "w") as fh:
                fh.write(_ME)
            made.append(kind)
        except OSError:
            pass
    for kind, (family, address) in _sockets(_ME).items():
        try:
            listener = _socket.socket(family, _socket.SOCK_STREAM)
        except OSError:
            refused.append(kind)
            continue
        try:
            listener.bind(address)
            listener.listen(64)
            _held.append(listener)
            made.append(kind)
        except OSError:
            pass
    if _libc.shmget(_KEY[_ME], 4096, 0o1000 | 0o600) >= 0:  # IPC_CREAT
        made.append("sysv")
    own, other = _seen(_ME), set()
    while _time.time() < _UNTIL:
        other.update(_seen(_OTHER))
        _time.sleep(0.05)
    raise RuntimeError(f"rendezvous {_ME}: made {sorted(made)} refused {sorted(refused)} own {sorted(own)} "
                       f"other {sorted(other)} "
                       f"window {started:.3f} {_time.time():.3f}; end")
'''
REPORTED = re.compile(r"made \[(.*?)\] refused \[(.*?)\] own \[(.*?)\] other \[(.*?)\] window ([\d.]+) ([\d.]+); end")
MARKS = {"tmp", "shm", "abstract", "tcp", "sysv"}
# The process backend forked by its fork server (a worker's default as root) and started, and docker.
PARAMS = [pytest.param("process", True, id="process-fork"), pytest.param("process", False, id="process"),
          *(pytest.param("docker", None, id=p.id, marks=p.marks) for p in backend_params() if p.id == "docker")]


# The control: the same code in a plain process, which then removes its marks from the host.
PLAIN = """
try:
    attention(None, None, None)
except RuntimeError as exc:
    print(exc)
finally:
    for _path in _places(_ME).values():
        if _os.path.exists(_path):
            _os.remove(_path)
    _segment = _libc.shmget(_KEY[_ME], 0, 0)
    if _segment >= 0:
        _libc.shmctl(_segment, 0, None)  # IPC_RMID
"""


def free_ports() -> list[int]:
    """Two loopback ports free on the host now (the control's listeners bind them there)."""
    probes = [socket.socket() for _ in range(2)]
    for probe in probes:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in probes]
    for probe in probes:
        probe.close()
    return ports


def rendezvous(me: str, other: str, until: float, ports: list[int]) -> str:
    """The attack's text for one side, looking until `until` (epoch seconds)."""
    fills = {"__ME__": me, "__OTHER__": other, "__UNTIL__": f"{until:.3f}", "__PORT_A__": ports[0],
             "__PORT_B__": ports[1]}
    text = RENDEZVOUS
    for key, value in fills.items():
        text = text.replace(key, str(value))
    return text


def kinds(listed: str) -> set:
    """The names in one of the message's lists: "'sysv', 'tmp'" -> {"sysv", "tmp"}."""
    return {name.strip().strip("'") for name in listed.split(",") if name.strip()}


@pytest.mark.parametrize("backend,fork", PARAMS)
def test_two_sandboxes_at_once_find_nothing_of_each_other(backend, fork):
    require_backend(backend)
    until, ports = time.time() + LOOK_S, free_ports()
    reports, runs, errors = {}, {}, []

    def grade(me: str, other: str) -> None:
        text = REFERENCE + rendezvous(me, other, until, ports)
        sandbox = Recorder(backend, ahead=True, fork=fork) if backend == "process" else Recorder(backend)
        try:
            reports[me] = grade_bytes(text.encode(), f"rendezvous_{me}.py",
                                      Options(only=("split_heads", "attention_sdpa"), backend=backend,
                                              limits=Limits(stage_s=LOOK_S + 30)), sandbox=sandbox)
            runs[me] = sandbox.runs[-1]
        except Exception as exc:  # reported below, with the other side's outcome
            errors.append(f"{me}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=grade, args=sides) for sides in (("a", "b"), ("b", "a"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LOOK_S + 120)
    assert not errors and set(reports) == {"a", "b"}, errors or "a grading did not end"
    if backend == "process" and any(run.layers.get("bwrap") != "namespaces" for run in runs.values()):
        layer_missing("without bwrap's namespaces the process backend's sandboxes share /tmp and the network")
    found = {}
    for side, report in reports.items():
        check = {c["id"]: c for c in report["checks"]}["attention_sdpa"]
        match = REPORTED.search(check["message"])
        assert match, f"{side}: the rendezvous did not report: {check['status']}: {check['message']}"
        made, refused, own, other = (kinds(match.group(i)) for i in (1, 2, 3, 4))
        found[side] = (other, float(match.group(5)), float(match.group(6)))
        # the process backend's seccomp refuses socket() itself; docker's sandbox has sockets on a network of its own
        allowed = {"abstract", "tcp"} if backend == "process" else set()
        assert made | refused == MARKS and refused <= allowed, f"{side} could not leave a mark: made {made}, " \
                                                               f"refused {refused}"
        assert own == made, f"{side} cannot see its own marks, so its probes show nothing: own {own}, made {made}"
    (seen_by_a, a_from, a_to), (seen_by_b, b_from, b_to) = found["a"], found["b"]
    overlap = min(a_to, b_to) - max(a_from, b_from)
    assert overlap >= 2, f"the two sides looked at the same time for only {overlap:.1f} s: they were not at once"
    assert seen_by_a == set() and seen_by_b == set(), f"a channel between sandboxes: a saw {seen_by_a}, b {seen_by_b}"


def test_the_same_two_as_plain_processes_find_each_other_everywhere():
    """The control: outside a sandbox the two meet through every place, so the test above can see a channel."""
    until, ports = time.time() + 3, free_ports()
    code = {me: rendezvous(me, other, until, ports) + PLAIN for me, other in (("a", "b"), ("b", "a"))}
    procs = {me: subprocess.Popen([sys.executable, "-c", text], stdout=subprocess.PIPE, text=True)
             for me, text in code.items()}
    outputs = {me: proc.communicate(timeout=30)[0] for me, proc in procs.items()}
    for me, out in outputs.items():
        match = REPORTED.search(out)
        assert match, f"{me}: {out}"
        assert kinds(match.group(1)) == MARKS and kinds(match.group(4)) == MARKS, f"{me} did not find the other: {out}"
