"""The attack corpus, graded through the real judge on both sandbox backends (and the process backend's fork
server), one property per test.

For every attack (tests/attacks/*.py) and backend: the grader stays up, the other checks keep
their verdict, the attacked check's status names what happened, nothing is left behind, and the
next submission grades normally. Some attacks add a property of their own (a listener that must see
nothing, a canary that must appear nowhere, a cap that must hold).
"""
import ast
import json
import os
import re
import secrets
import select
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from tests.sandbox.support import Recorder, backend_params, layer_missing, leftovers, require_backend

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ATTACKS_DIR = ROOT / "tests" / "attacks"
REFERENCE = ROOT / "submissions" / "reference_lm.py"
ATTACKS = sorted(p.stem for p in ATTACKS_DIR.glob("*.py") if not p.name.startswith("_"))
CHECKS = ("split_heads", "attention_sdpa", "rope")
# Small limits so the corpus runs in minutes: 3 s per check, 1.5 GiB per sandbox, 16 MiB of results.
LIMITS = dict(stage_s=3.0, stage_mem_mb=512, memory_mb=1536, pids=64, output_mb=16, scratch_mb=64)
TMP_CAPS_MB = 16 + 64  # /tmp and /dev/shm tmpfs in both backends
CANARY_ENV = "GRADER_WORKER_SECRET"


def metadata(name: str) -> dict:
    """EXPECT and EXPECT_MESSAGE of an attack file, read without running it."""
    tree = ast.parse((ATTACKS_DIR / f"{name}.py").read_text())
    found = {"EXPECT": {}, "EXPECT_MESSAGE": {}}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in found:
            found[node.targets[0].id] = ast.literal_eval(node.value)
    assert found["EXPECT"], f"{name}.py declares no EXPECT"
    return found


class AttackEnv:
    """Listeners an attack must not reach and a canary secret it must not find, for the whole session."""

    def __init__(self):
        self.canary = f"GRADER-CANARY-{secrets.token_hex(12)}"
        self.contacts: list[str] = []
        self.dir = Path(tempfile.mkdtemp(prefix="grader-attack-env-"))
        os.chmod(self.dir, 0o755)
        # A world-readable secret outside scratch: only namespaces (bwrap, docker) keep it out of reach.
        self.canary_file = self.dir / "secret.cfg"
        self.canary_file.write_text(f"token = {self.canary}\n")
        os.chmod(self.canary_file, 0o644)
        self.previous_env = os.environ.get(CANARY_ENV)
        os.environ[CANARY_ENV] = self.canary
        self.abstract = f"grader-attack-{secrets.token_hex(6)}"
        self.sockets = []
        tcp4 = socket.create_server(("127.0.0.1", 0))
        self.tcp_port = tcp4.getsockname()[1]
        self.sockets.append(tcp4)
        try:
            self.sockets.append(socket.create_server(("::1", self.tcp_port), family=socket.AF_INET6))
        except OSError:
            pass  # no IPv6 loopback here
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        self.udp_port = udp.getsockname()[1]
        self.sockets.append(udp)
        self.unix_path = str(self.dir / "listen.sock")
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        unix.listen()
        self.sockets.append(unix)
        abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        abstract.bind("\0" + self.abstract)
        abstract.listen()
        self.sockets.append(abstract)
        self.stop = False
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stop:
            ready, _, _ = select.select(self.sockets, [], [], 0.1)
            for s in ready:
                if s.type == socket.SOCK_DGRAM:
                    data, addr = s.recvfrom(4096)
                    self.contacts.append(f"udp datagram from {addr}: {data[:20]!r}")
                else:
                    conn, addr = s.accept()
                    self.contacts.append(f"connection on {s.getsockname()!r} from {addr!r}")
                    conn.close()

    def fill(self, text: str) -> str:
        """Put the placeholders' values into an attack's text (never the canary's value)."""
        for key, value in {"__TCP_PORT__": self.tcp_port, "__UDP_PORT__": self.udp_port, "__UNIX_PATH__": self.unix_path,
                           "__ABSTRACT_NAME__": self.abstract, "__CANARY_FILE__": self.canary_file,
                           "__CANARY_ENV__": CANARY_ENV}.items():
            text = text.replace(key, str(value))
        return text

    def close(self):
        self.stop = True
        self.thread.join(timeout=2)
        for s in self.sockets:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.previous_env is None:
            os.environ.pop(CANARY_ENV, None)
        else:
            os.environ[CANARY_ENV] = self.previous_env


@pytest.fixture(scope="session")
def attack_env():
    env = AttackEnv()
    yield env
    env.close()


_graded: dict = {}


# The process backend's sandboxes forked by its fork server (grader/sandbox/forkserver.py, its default as root):
# the same layers taken another way, so the same corpus; `process` is the started sandbox.
FORKED = "process-fork"


def recorder(backend: str) -> Recorder:
    """The sandbox an attack is graded in: the process backend forked or started, whatever GRADER_SANDBOX_FORK says,
    either way started ahead as a worker's (its run returned at the done frame, the teardown after)."""
    if backend == FORKED:
        return Recorder("process", ahead=True, fork=True)
    return Recorder(backend, ahead=True, fork=False) if backend == "process" else Recorder(backend)


def graded(attack: str, backend: str, env: AttackEnv) -> dict:
    """Grade the attack, then at once the reference (the next submission), on one backend; cached."""
    key = (attack, backend)
    if key not in _graded:
        kind = "process" if backend == FORKED else backend
        require_backend(kind)
        text = REFERENCE.read_text() + f"\n\n# ---- attack: {attack} ----\n" + env.fill((ATTACKS_DIR / f"{attack}.py").read_text())
        sandbox = recorder(backend)
        options = Options(only=CHECKS, limits=Limits(**LIMITS), backend=kind)
        started = time.monotonic()
        error = None
        events = []  # what a worker passes on while the grading runs (the first verdicts among them)
        try:
            report = grade_bytes(text.encode(), f"{attack}.py", options, sandbox=sandbox, on_event=events.append)
        except Exception as exc:  # the property "the grader stays up" reports it
            report, error = None, f"{type(exc).__name__}: {exc}"
        elapsed = time.monotonic() - started
        left = leftovers(kind, sandbox.runs[-1], sandbox.job_dirs[-1], sandbox.ended[-1]) if sandbox.runs \
            else ["no sandbox run"]
        nxt = recorder(backend)
        next_report = grade_bytes(REFERENCE.read_bytes(), "reference_lm.py",
                                  Options(only=("split_heads",), limits=Limits(**LIMITS), backend=kind), sandbox=nxt)
        _graded[key] = {"report": report, "error": error, "elapsed": elapsed, "left": left, "events": events,
                        "run": sandbox.runs[-1] if sandbox.runs else None, "next": next_report}
    return _graded[key]


def explain(g: dict) -> str:
    if g["report"] is None:
        return g["error"]
    rows = [{k: c[k] for k in ("id", "status", "message")} for c in g["report"]["checks"]]
    return json.dumps(rows, indent=1) + "\nsandbox log tail:\n" + (g["run"].log[-1500:] if g["run"] else "")


def checks(g: dict) -> dict:
    return {c["id"]: c for c in g["report"]["checks"]}


MATRIX = [pytest.param(a, b.values[0], id=f"{a}-{b.id}", marks=b.marks) for a in ATTACKS
          for b in (*backend_params(), pytest.param(FORKED, id=FORKED))]


@pytest.mark.parametrize("attack,backend", MATRIX)
def test_grader_stays_up(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    assert g["error"] is None, f"grading raised instead of reporting: {g['error']}"
    assert [c["id"] for c in g["report"]["checks"]] == list(CHECKS), explain(g)


@pytest.mark.parametrize("attack,backend", MATRIX)
def test_rest_of_submission_keeps_its_verdict(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    expect = metadata(attack)["EXPECT"]
    others = {cid: c["status"] for cid, c in checks(g).items() if cid not in expect}
    assert all(s == "pass" for s in others.values()), f"checks the attack did not touch must pass: {others}\n{explain(g)}"


@pytest.mark.parametrize("attack,backend", MATRIX)
def test_status_names_what_happened(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    meta = metadata(attack)
    got = checks(g)
    for cid, want in meta["EXPECT"].items():
        allowed = want if isinstance(want, tuple) else (want,)
        assert got[cid]["status"] in allowed, f"{cid}: expected {want}, got {got[cid]['status']}\n{explain(g)}"
        assert got[cid]["message"], f"{cid} has no message"
    for cid, text in meta["EXPECT_MESSAGE"].items():
        assert text in got[cid]["message"], f"{cid}: {text!r} not in {got[cid]['message']!r}"


@pytest.mark.parametrize("attack,backend", MATRIX)
def test_nothing_left_behind(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    assert g["left"] == [], f"left behind after {attack} on {backend}: {g['left']}"


@pytest.mark.parametrize("attack,backend", MATRIX)
def test_next_submission_grades_normally(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    statuses = {c["id"]: (c["status"], c["message"]) for c in g["next"]["checks"]}
    assert statuses["split_heads"][0] == "pass", f"the reference graded after {attack}: {statuses}"


# ---- properties of single attacks ----------------------------------------------------------------

def _no_canary(g, env):
    text = json.dumps(g["report"])
    assert env.canary not in text, "the worker's secret appears in the student's report"
    assert env.canary not in g["run"].log, "the worker's secret appears in the sandbox log"


def _filesystem_isolated(g, env):
    layers = g["run"].layers
    if g["run"].backend == "process" and layers.get("bwrap") != "namespaces":
        layer_missing(f"without bwrap the process backend has file permissions only: {layers.get('bwrap')}")
    _no_canary(g, env)


def _listeners_saw_nothing(g, env):
    time.sleep(0.3)
    assert env.contacts == [], f"the test's listeners were reached: {env.contacts}"
    if g["run"].backend == "docker" or g["run"].layers.get("bwrap") == "namespaces":
        message = checks(g)["attention_sdpa"]["message"]
        assert "interfaces ['lo']" in message, f"a network namespace with more than a loopback: {message}"


def _disk_capped(g, env):
    message = checks(g)["attention_sdpa"]["message"]
    wrote = int(re.search(r"wrote (\d+) MiB", message).group(1))
    layers = g["run"].layers
    if g["run"].backend == "process" and layers.get("bwrap") != "namespaces":
        layer_missing("without bwrap /tmp is the host's disk (files are swept after the run)")
    cap = LIMITS["scratch_mb"] + TMP_CAPS_MB + 8
    assert wrote <= cap, f"the sandbox wrote {wrote} MiB, over its {cap} MiB of tmpfs"


def _output_bounded(g, env):
    check = checks(g)["attention_sdpa"]
    assert "FLOOD" in check["stdout"], "the start of what the student printed is shown to them"
    shown, _, marker = check["stdout"].rpartition("\n[output truncated: ")
    assert len(shown) <= 2000, f"{len(shown)} characters of stdout in the report"
    # the flood stops at the file-size cap (16 MiB), and the report says how much there was
    assert marker.startswith(f"the check printed {16 << 20} bytes; the first 2000 characters are shown]"), marker


def _memory_cap_held(g, env):
    layers = g["run"].layers
    if g["run"].backend == "process" and not str(layers.get("cgroup", "")).startswith("v"):
        layer_missing(f"no cgroup here: {layers.get('cgroup')}")
    hit = layers.get("oom_kills", 0) > 0 or layers.get("oom_killed")
    assert hit, f"the sandbox memory cap should have killed the helpers: {layers}"


def _no_forgery_in_verdicts(g, env):
    for check in g["report"]["checks"]:
        assert "FORGED" not in check["message"] + json.dumps(check["details"]), check


def _forgery_left_and_was_not_believed(g, env):
    """The patched framing did write forged frames (the attack acted), and no verdict took their word."""
    left = [header for header, _ in g["run"].frames]
    assert any(h.get("message") == "FORGED-HARNESS" for h in left), \
        f"no forged frame left the sandbox: the attack patched nothing ({[h.get('type') for h in left][:20]})"
    _no_forgery_in_verdicts(g, env)


def _no_forged_verdict_events(g, env):
    """Nor in the first verdicts sent while the grading ran: only the judge's verdict events reach on_event. Two layers
    drop the forged frames; the first, the harness, is shown on the frames that left the sandbox, before the judge's
    own drop (grader/live.py) sees them."""
    _no_forgery_in_verdicts(g, env)
    left = [header for header, _ in g["run"].frames]
    assert any(h.get("type") == "stage_end" for h in left), "no frame of the run was recorded: nothing to look at"
    passed_on = [h for h in left if h.get("type") == "verdict"]
    assert not passed_on, f"the harness passed on verdict frames the stage wrote: {passed_on[:2]}"
    verdicts = [e["check"] for e in g["events"] if e.get("type") == "verdict"]
    assert verdicts, "no verdict was sent while grading: nothing shows the forged ones were dropped"
    forged = [v for v in verdicts if "FORGED" in json.dumps(v) or (v["id"] == "attention_sdpa" and v["status"] != "fail")]
    assert not forged, f"a verdict event the sandbox wrote reached on_event: {forged}"


def _daemon_gone(g, env):
    """The daemon ran (its check passes only once its heartbeat was seen) and no process of it is left on the host
    (a container's processes are in the host's /proc too)."""
    assert checks(g)["attention_sdpa"]["status"] == "pass", f"the daemon never ran: the attack tried nothing\n{explain(g)}"
    deadline = time.monotonic() + 1.0
    while True:
        alive = [pid for pid in os.listdir("/proc") if pid.isdigit() and b"grader-daemon-marker" in _cmdline(pid)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert alive == [], f"the daemon outlived its sandbox: processes {alive}"


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _seccomp_refused_ptrace(g, env):
    """Where seccomp is a layer, even a dumpable child of the attacker's own is refused; elsewhere it is attached,
    which shows the attack's calls work."""
    message = checks(g)["attention_sdpa"]["message"]
    if g["run"].backend == "docker":  # docker's default profile allows ptrace; its walls are the pid namespace
        assert "own child: attached" in message, message
    else:
        assert "own child: refused (errno 1)" in message, message  # EPERM, from seccomp's rule


def _threads_did_not_hold_the_stage(g, env):
    check = checks(g)["attention_sdpa"]
    assert check["duration_s"] < LIMITS["stage_s"], f"the stage took {check['duration_s']} s"


SPECIFIC = {
    "environment_canary": _no_canary,
    "read_files": _filesystem_isolated,
    "connect_local": _listeners_saw_nothing,
    "disk_fill": _disk_capped,
    "stdout_flood": _output_bounded,
    "memory_bomb_forked": _memory_cap_held,
    "forged_stdout": _no_forgery_in_verdicts,
    "forged_channel": _no_forged_verdict_events,
    "forged_result_files": _no_forgery_in_verdicts,
    "monkeypatch_harness": _forgery_left_and_was_not_believed,
    "daemon": _daemon_gone,
    "lingering_threads": _threads_did_not_hold_the_stage,
    "ptrace": _seccomp_refused_ptrace,
}


@pytest.mark.parametrize("attack,backend", [p for p in MATRIX if p.values[0] in SPECIFIC])
def test_attack_specific_property(attack, backend, attack_env):
    g = graded(attack, backend, attack_env)
    assert g["report"] is not None, g["error"]
    SPECIFIC[attack](g, attack_env)


def test_every_attack_declares_its_expectation():
    for name in ATTACKS:
        meta = metadata(name)
        assert set(meta["EXPECT"]) <= set(CHECKS), f"{name}: EXPECT names checks not graded here"
