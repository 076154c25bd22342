"""The instance keeps its secrets: no placeholder key, a random 0600 key of its own, 0700/0600 after a full `make run`,
and a submission graded by that service's worker reads none of it (issue 15)."""
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from grader.sandbox.uids import FIRST_UID
from .svc_cluster import BIN, free_port, wait_for
from .svc_helpers import unavailable
from tests.ci import missing

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_UID = 61000 + 63  # the last uid of the sandbox pool (grader/sandbox/uids.py): what a submission runs as


def grader(args, env, timeout=120):
    return subprocess.run([str(BIN / "grader"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def base_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    env.update(GRADER_INSTANCE_PATH=str(tmp_path / "instance"), GRADER_BROKER_URL="memory://")
    return env


def start_serve(tmp_path, args=("--workers", "2"), **settings) -> tuple[subprocess.Popen, int, dict]:
    """`grader serve` (2 workers unless args say otherwise; settings as GRADER_* variables) on a fresh SQLite
    instance under tmp_path, its output in serve.log: (process, port, its environment); the caller waits for it
    to answer."""
    env = base_env(tmp_path) | {f"GRADER_{k}": v for k, v in settings.items()}
    env["GRADER_DATABASE_URL"] = f"sqlite:///{tmp_path}/instance/grader.sqlite"
    port = free_port()
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([str(BIN / "grader"), "serve", "--port", str(port), *args], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, port, env


# ---------------------------------------------------------------- the key

@pytest.mark.parametrize("how", ["env-dev", "env-change-me", "config-dev", "env-short"])
def test_grader_serve_refuses_a_placeholder_key(tmp_path, how):
    env = base_env(tmp_path)
    if how == "config-dev":
        (tmp_path / "instance").mkdir()
        (tmp_path / "instance" / "config.py").write_text('SECRET_KEY = "dev"\n')
    else:
        env["GRADER_SECRET_KEY"] = {"env-dev": "dev", "env-change-me": "change-me", "env-short": "hunter2"}[how]
    proc = grader(["serve", "--port", str(free_port())], env, timeout=60)
    assert proc.returncode != 0, f"grader serve started with a forgeable key ({how})"
    assert "SECRET_KEY" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_fresh_instance_gets_a_random_0600_key_that_serve_uses(tmp_path):
    proc, port, env = start_serve(tmp_path)
    try:
        def up():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/signin", timeout=5)
            except OSError:
                return None
        page = wait_for(up, 60, what="grader serve to answer")
        key_file = tmp_path / "instance" / "secret_key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600, oct(key_file.stat().st_mode)
        assert stat.S_IMODE((tmp_path / "instance").stat().st_mode) == 0o700
        key = key_file.read_text().strip()
        assert re.fullmatch(r"[0-9a-f]{64}", key), "256 random bits, hex"
        cookie = page.headers["Set-Cookie"].split("session=", 1)[1].split(";", 1)[0]
        from flask import Flask
        from flask.sessions import SecureCookieSessionInterface
        for secret, valid in ((key, True), ("dev", False)):
            app = Flask("check")
            app.secret_key = secret
            serializer = SecureCookieSessionInterface().get_signing_serializer(app)
            try:
                serializer.loads(cookie)
                ok = True
            except Exception:
                ok = False
            assert ok is valid, f"the served cookie {'should' if valid else 'must not'} verify with {secret[:6]}..."
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    second = tmp_path / "second"
    # An empty GRADER_SECRET_KEY is what compose passes when build/compose.env has none: the instance's own key.
    env2 = {**env, "GRADER_INSTANCE_PATH": str(second), "GRADER_DATABASE_URL": f"sqlite:///{second}/g.sqlite",
            "GRADER_SECRET_KEY": ""}
    assert grader(["db", "upgrade"], env2).returncode == 0
    assert (second / "secret_key").read_text().strip() != key, "every instance has a key of its own"
    assert grader(["db", "current"], env).returncode == 0
    assert key_file.read_text().strip() == key, "the key is made once, then kept"


def test_a_start_closes_what_an_older_version_left_open(tmp_path):
    instance = tmp_path / "instance"
    (instance / "submissions" / "cap" / "alice").mkdir(parents=True)
    (instance / "logs").mkdir()
    for name in ("grader.sqlite", "grader.sqlite-wal", "logs/worker.log", "submissions/cap/alice/1-a.py"):
        (instance / name).write_text("old")
    for path in [instance, *instance.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    (tmp_path / "elsewhere").write_text("not ours")
    os.symlink(tmp_path / "elsewhere", instance / "link")
    os.chmod(tmp_path / "elsewhere", 0o644)
    env = {**base_env(tmp_path), "GRADER_DATABASE_URL": f"sqlite:///{tmp_path}/g.sqlite", "GRADER_AUTO_MIGRATE": "false"}
    proc = grader(["db", "current"], env)
    assert proc.returncode == 0, proc.stderr
    assert private_problems(instance) == []
    assert stat.S_IMODE((tmp_path / "elsewhere").stat().st_mode) == 0o644, "a symlink's target is not ours to change"


# ---------------------------------------------------------------- a full `make run`, then attacks on its instance

def private_problems(root: Path) -> list[str]:
    """Every path under root that group or others may use, or a folder that is not 0700."""
    problems = []
    for folder, dirs, files in os.walk(root):
        for name in [folder] + [os.path.join(folder, f) for f in files]:
            st = os.lstat(name)
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if (stat.S_ISDIR(st.st_mode) and mode != 0o700) or mode & 0o077:
                problems.append(f"{name} {oct(mode)}")
    return problems


@pytest.fixture(scope="module")
def make_run():
    """scripts/run-local.sh (what `make run` runs) on an instance of its own, on the machine's Redis (a db and queue
    of our own); the instance's parent is world-traversable, so only the instance's own modes protect it."""
    if os.geteuid() != 0:
        missing("make run's process sandbox needs root (a uid per run); CI runs as root")  # fails in CI
    top = Path(tempfile.mkdtemp(prefix="grader-make-run-"))
    os.chmod(top, 0o755)
    instance = top / "instance"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    env.update(GRADER_INSTANCE_PATH=str(instance), GRADER_PORT=str(free_port()), RUN_TIMEOUT_S="900",
               GRADER_BROKER_URL=f"redis://127.0.0.1:6379/{secrets.randbelow(14) + 1}",
               GRADER_QUEUE=f"grader-perm-{secrets.token_hex(3)}")
    try:
        import redis
        redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2).ping()
    except Exception as exc:
        unavailable(f"no Redis on 127.0.0.1:6379 for make run: {exc}")
    proc = subprocess.run(["scripts/run-local.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    try:
        assert proc.returncode == 0, f"make run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        yield instance, f"http://127.0.0.1:{env['GRADER_PORT']}", env
    finally:
        for pid_file in (instance / "run").glob("*.pid"):  # what run-local.sh started (as make stop does)
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(2)
        subprocess.run(["rm", "-rf", str(top)])


def call(url: str, token: str, method: str = "GET", body: bytes | None = None, raw: bool = False):
    req = urllib.request.Request(url, data=body, method=method, headers={"Authorization": f"Bearer {token}",
                                                                         "Content-Type": "text/x-python"})
    with urllib.request.urlopen(req, timeout=60) as r:
        data = r.read()
    return data if raw else json.loads(data)


# At import time, as the student's code runs first: which of the service's files can it open?
ATTACK = '''
import glob as _g, os as _o
_targets = {targets!r}
_targets += _g.glob("/tmp/grader-job-*/submission.py") + _g.glob("/tmp/grader-job-*/job.json")
_mine = _o.path.dirname(_o.path.abspath(__file__))
_others = [_p for _p in _g.glob("/tmp/grader-job-*") if _p != _mine]
_got = []
for _p in _targets:
    if _p.startswith(_mine):
        continue
    try:
        if _o.path.isdir(_p):
            _o.listdir(_p)
        else:
            open(_p, "rb").read(16)
        _got.append(_p)
    except OSError:
        pass
try:
    open(_o.path.join(_mine, "job.json")).read(16)
    _control = "own-job-readable"
except OSError as _e:
    _control = f"own-job-unreadable {{_e}}"
raise RuntimeError(f"{{_control}} others={{len(_others)}} readable={{sorted(_got)}}"[:900])
'''


def service_paths(instance: Path) -> list[str]:
    paths = [str(instance)]
    for folder, dirs, files in os.walk(instance):
        paths += [os.path.join(folder, d) for d in dirs] + [os.path.join(folder, f) for f in files]
    return paths


def grade_attack(instance: Path, url: str) -> tuple[str, dict]:
    """Upload the attack as the demo student; (what its import-time error said, the result's sandbox record)."""
    targets = service_paths(instance)
    token = (instance / "demo-student.token").read_text().strip()
    source = (ROOT / "submissions" / "reference_lm.py").read_text() + ATTACK.format(targets=targets)
    sub = call(f"{url}/api/v1/assignments/demo/submissions?filename=reader.py", token, "POST",
               source.encode() + f"# {secrets.token_hex(4)}\n".encode())
    status = wait_for(lambda: (lambda s: s if s["status"] in ("done", "failed") else None)(
        call(f"{url}/api/v1/submissions/{sub['id']}", token)), 900, interval=1, what="the attack to be graded")
    assert status["status"] == "done", status
    report = call(f"{url}/api/v1/submissions/{sub['id']}/result", token)["report"]
    messages = [c.get("message") or "" for c in report["checks"] if c["status"] == "error"]
    said = next((m for m in messages if "readable=" in m), None)
    assert said is not None, f"the attack's import-time error is not in the report: {messages[:3]}"
    assert "own-job-readable" in said, f"the attack could not even read its own job (the test proves nothing): {said}"
    return said, report.get("sandbox") or {}


def test_a_submission_graded_by_make_runs_worker_reads_nothing_of_the_service(make_run):
    instance, url, _ = make_run
    names = {p.name for p in instance.iterdir()}
    assert {"grader.sqlite", "secret_key", "demo-student.token", "logs", "submissions"} <= names, names
    said, _ = grade_attack(instance, url)
    assert "readable=[]" in said, f"the sandbox read the service's files: {said}"


def another_job(mode: int, group: int) -> Path:
    """A folder as another grading's job is on the host: root's until handed out (0700), then root:<its uid> 0750;
    a submission and a job.json inside, readable by their owner's sandbox."""
    folder = Path(tempfile.mkdtemp(prefix="grader-job-", dir="/tmp"))
    for name, text in (("submission.py", "# another student's work\n"), ("job.json", "{}")):
        (folder / name).write_text(text)
        os.chmod(folder / name, 0o644)
    os.chown(folder, 0, group)
    os.chmod(folder, mode)
    return folder


def test_without_bubblewrap_the_modes_alone_keep_the_service_unread(make_run):
    """A worker with no bwrap on its PATH and GRADER_SANDBOX_ALLOW_WEAK: the sandbox sees the host's files at their
    real paths (no mount namespace), so only the instance's modes stand between it and the service."""
    instance, url, env = make_run
    fakebin = instance.parent / "bin-without-bwrap"
    fakebin.mkdir()
    for entry in os.listdir("/usr/bin"):
        if entry != "bwrap":
            os.symlink(f"/usr/bin/{entry}", fakebin / entry)
    pid_file = instance / "run" / "worker.pid"
    old = int(pid_file.read_text())
    os.killpg(old, signal.SIGTERM)

    def gone():
        try:
            os.killpg(old, 0)
            return False
        except ProcessLookupError:
            return True
    wait_for(gone, 60, what="make run's worker to stop")
    weak = {**env, "PATH": str(fakebin), "GRADER_SANDBOX_ALLOW_WEAK": "true", "GRADER_SANDBOX_BACKEND": "process",
            "GRADER_ENFORCE_ATTEMPTS": "false"}
    log = os.open(instance / "logs" / "worker-weak.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = subprocess.Popen([str(BIN / "grader"), "worker", "--concurrency", "1"], env=weak, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    os.close(log)
    pid_file.write_text(str(proc.pid))  # the fixture stops it
    decoys = [another_job(0o700, 0), another_job(0o750, FIRST_UID - 1)]
    try:
        said, sandbox = grade_attack(instance, url)
    finally:
        for decoy in decoys:
            shutil.rmtree(decoy, ignore_errors=True)
    assert int(re.search(r"others=(\d+)", said).group(1)) >= len(decoys), \
        f"the other jobs' folders were not in sight, so their modes were not tried: {said}"
    assert sandbox.get("weak") is True and any("bwrap" in m for m in sandbox.get("missing", [])), \
        f"this grading was meant to run without bubblewrap: {sandbox}"
    assert "readable=[]" in said, f"without namespaces the sandbox read the service's files: {said}"


def test_the_sandbox_uid_itself_can_open_nothing_in_the_instance(make_run):
    """The layer under the namespaces: with bubblewrap off (GRADER_SANDBOX_ALLOW_WEAK) only the modes protect it."""
    instance, _, _ = make_run
    probe = ("import json, os, sys\ngot = []\nfor p in json.load(sys.stdin):\n"
             "    try:\n        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n        got.append(p)\n"
             "    except OSError:\n        pass\nprint(json.dumps(got))\n")

    def as_sandbox_uid():
        os.setgroups([])
        os.setgid(SANDBOX_UID)
        os.setuid(SANDBOX_UID)
    paths = [p for p in service_paths(instance) if p != str(instance)] + [str(instance)]
    out = subprocess.run(["/usr/bin/python3", "-I", "-c", probe], input=json.dumps(paths), capture_output=True,
                         text=True, preexec_fn=as_sandbox_uid, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [], f"uid {SANDBOX_UID} opened: {out.stdout}"


def test_the_instance_is_private_after_a_full_run(make_run):
    instance, url, _ = make_run
    instructor = (instance / "demo-instructor.token").read_text().strip()
    csv = call(f"{url}/api/v1/assignments/demo/export?format=csv", instructor, raw=True)
    assert b"demo" in csv
    with urllib.request.urlopen(f"{url}/signin", timeout=30) as r:  # a page: sessions, rate events in the store
        assert r.status == 200
    uploads = list((instance / "submissions").rglob("*.py"))
    assert uploads, "the archive holds the uploads"
    assert {"web.log", "worker.log"} <= {p.name for p in (instance / "logs").iterdir()}
    problems = private_problems(instance)
    assert problems == [], "readable or writable by group/others, or a folder not 0700:\n" + "\n".join(problems)
