"""The client's plain functions without the service: retries and backoff, settings precedence, manifests, follow."""
import http.server
import json
import os
import socket
import stat
import threading
import time

import pytest

from grader.client import batch, settings as client_settings
from grader.client.http import ApiError, AuthFailed, Client, Unreachable
from tests.service.svc_cluster import free_port

from .cli_helpers import invoke, one_line_error


class Stub:
    """An HTTP server answering from a script: a list of (status, body) per request, the last one repeated."""

    def __init__(self, script, port: int = 0):
        self.script, self.seen = list(script), []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                stub.seen.append((self.command, self.path, self.headers.get("Authorization")))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                status, body = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_POST = answer

            def log_message(self, *args):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub():
    made = []

    def make(script, port=0):
        made.append(Stub(script, port))
        return made[-1]
    yield make
    for s in made:
        s.close()


def client(url, **kw) -> tuple[Client, list]:
    slept = []
    return Client(url, "gr_t", sleep=slept.append, **kw), slept


# ---------------------------------------------------------------- retries

def test_502_503_504_are_retried_with_growing_backoff(stub):
    s = stub([(502, {}), (503, {}), (504, {}), (200, {"role": "instructor", "student": None})])
    c, slept = client(s.url, retries=4)
    assert c.me()["role"] == "instructor"
    assert len(s.seen) == 4 and len(slept) == 3
    assert slept[0] < slept[1] < slept[2] and 0.5 <= slept[0] <= 0.63, f"exponential backoff with jitter: {slept}"
    assert all(auth == "Bearer gr_t" for _, _, auth in s.seen), "every attempt carries the token"


def test_retries_used_up_on_503_is_unreachable_with_the_servers_message(stub):
    s = stub([(503, {"error": "unavailable", "message": "database down"})])
    c, slept = client(s.url, retries=2)
    with pytest.raises(Unreachable) as exc:
        c.me()
    assert len(s.seen) == 3 and "after 3 attempts" in exc.value.message and "database down" in exc.value.message
    assert exc.value.exit_code == 3


@pytest.mark.parametrize("status,kind,code", [(400, ApiError, 1), (401, AuthFailed, 4), (403, AuthFailed, 4),
                                              (404, ApiError, 1), (409, ApiError, 1), (422, ApiError, 1),
                                              (500, ApiError, 1)])
def test_other_errors_are_not_retried_and_keep_the_servers_message(stub, status, kind, code):
    s = stub([(status, {"error": "x", "message": f"the server says {status}"})])
    c, slept = client(s.url, retries=4)
    with pytest.raises(kind) as exc:
        c.me()
    assert len(s.seen) == 1 and not slept, f"{status} must not be retried"
    assert f"the server says {status}" in exc.value.message and exc.value.exit_code == code
    assert "\n" not in exc.value.message


def test_a_connection_refused_then_a_server_coming_up_succeeds(stub):
    port = free_port()
    c = Client(f"http://127.0.0.1:{port}", "gr_t", retries=5, backoff_s=0.2)
    timer = threading.Timer(0.4, lambda: stub([(200, {"role": "student", "student": "alice"})], port))
    timer.start()
    try:
        assert c.me() == {"role": "student", "student": "alice"}, "the client should retry until the server is up"
    finally:
        timer.join()


def test_an_answer_that_never_comes_is_a_timeout_not_a_hang():
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        c, slept = client(f"http://127.0.0.1:{listener.getsockname()[1]}", retries=1, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(Unreachable) as exc:
            c.me()
    assert "no answer within 0.3 s" in exc.value.message and "tried 2 times" in exc.value.message
    assert time.monotonic() - started < 5


def test_an_upload_retried_after_a_502_is_sent_whole_again(stub):
    s = stub([(502, {}), (202, {"id": 7, "status": "queued", "duplicate": False})])
    c, _ = client(s.url)
    sub = c.upload("cap", b"TRACK = 'lm'\n", "a.py", "alice")
    assert sub["id"] == 7 and sub["queued"] and [m for m, _, _ in s.seen] == ["POST", "POST"]


def test_submissions_are_read_page_by_page(stub, monkeypatch):
    monkeypatch.setattr("grader.client.http.PAGE", 2)
    s = stub([(200, [{"id": 1}, {"id": 2}]), (200, [{"id": 3}, {"id": 4}]), (200, [])])
    c, _ = client(s.url)
    assert [x["id"] for x in c.submissions("cap")] == [1, 2, 3, 4]
    assert "offset=2" in s.seen[1][1] and "limit=2" in s.seen[1][1], s.seen


# ---------------------------------------------------------------- settings

def test_option_beats_environment_beats_file_beats_default(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('server = "file.example:1"\ntoken = "gr_file"\nretries = 7\n')
    os.chmod(path, 0o600)
    env = {"GRADER_SERVER": "https://env.example", "GRADER_RETRIES": "2"}
    s = client_settings.resolve(token="gr_option", env=env, path=path)
    assert (s.server, s.token, s.retries, s.timeout) == ("https://env.example", "gr_option", 2, 60.0)
    assert s.sources == {"server": "environment GRADER_SERVER", "token": "option", "retries": "environment GRADER_RETRIES",
                         "timeout": "default"}
    s = client_settings.resolve(env={}, path=path)
    assert (s.server, s.token, s.retries) == ("http://file.example:1", "gr_file", 7) and not s.warnings
    assert client_settings.resolve(env={}, path=tmp_path / "none.toml").server == client_settings.DEFAULT_SERVER


@pytest.mark.parametrize("text,expected", [
    ("server = \n", "config file"),
    ("retries = 'many'\n", "retries must be an integer"),
    ("server = 'ftp://x'\n", "http:// or https://"),
    ("timeout = -1\n", "timeout must not be negative"),
])
def test_a_bad_config_file_is_a_usage_error_naming_it(tmp_path, monkeypatch, text, expected):
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("GRADER_CONFIG", str(path))
    ran = invoke("status")
    assert ran.code == 2, ran.err
    line = one_line_error(ran)
    assert expected in line and (str(path) in line or "config file" in line), line


def test_config_set_writes_a_private_file_that_the_client_then_uses(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "config.toml"
    monkeypatch.setenv("GRADER_CONFIG", str(path))
    assert invoke("config", "set", "server", "grader.example.edu:8000").code == 0
    assert invoke("config", "set", "token", "gr_secret_token_value").code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the file holds a token: readable by its owner only"
    shown = invoke("config", "show")
    assert "http://grader.example.edu:8000" in shown.out and "gr_secret_token_value" not in shown.out, shown.out
    assert f"config file {path}" in shown.out


def test_a_token_in_a_world_readable_config_file_is_warned_about(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('token = "gr_x"\n')
    os.chmod(path, 0o644)
    assert any("chmod 600" in w for w in client_settings.resolve(env={}, path=path).warnings)


# ---------------------------------------------------------------- files, students, manifests

def test_students_from_file_names_and_a_custom_pattern(tmp_path):
    for name in ("alice.py", "bob_final.py", "smith_1234_5678_attention.py"):
        (tmp_path / name).write_text("x")
    files = batch.collect_files([tmp_path])
    assert [i.student for i in batch.by_pattern(files)] == ["alice", "bob", "smith"]
    canvas = batch.by_pattern([tmp_path / "smith_1234_5678_attention.py"], r"_(?P<student>\d+)_")
    assert canvas[0].student == "1234"
    with pytest.raises(batch.BatchError, match="does not match --pattern"):
        batch.by_pattern([tmp_path / "alice.py"], r"^(?P<student>\d+)")


def test_collect_skips_hidden_files_and_takes_each_file_once(tmp_path):
    (tmp_path / ".state").mkdir()
    (tmp_path / ".state" / "x.py").write_text("x")
    (tmp_path / "a.py").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    assert batch.collect_files([tmp_path, tmp_path / "a.py"]) == [tmp_path / "a.py"]


def test_a_manifest_from_a_spreadsheet_reads_with_bom_extra_columns_and_subfolders(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "model.py").write_text("x")
    (tmp_path / "b.py").write_text("x")
    (tmp_path / "m.csv").write_bytes("\ufeffStudent,Name,File\r\nalice,Alice,alice/model.py\r\n\r\nbob,Bob,b.py\r\n"
                                     .encode())
    items = batch.read_manifest(tmp_path / "m.csv")
    assert [(i.student, i.path.name, i.line) for i in items] == [("alice", "model.py", 2), ("bob", "b.py", 4)]


def test_roster_validation_names_the_line(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("username,name\nann,Ann\n\nann,Ann B\n")
    with pytest.raises(batch.BatchError, match=r"line 4: username ann is already on line 2"):
        batch.read_roster(path)
    path.write_text("name\nAnn\n")
    with pytest.raises(batch.BatchError, match="line 1: missing column username"):
        batch.read_roster(path)


def test_plan_skips_what_the_student_already_has_even_an_older_file():
    items = [batch.Item(None, "ann", sha256="a1"), batch.Item(None, "bob", sha256="b2")]
    todo, skipped = batch.plan(items, {"ann": {"a0": 1, "a1": 2}, "bob": {"b1": 3}})
    assert [i.student for i in todo] == ["bob"] and [i.student for i in skipped] == ["ann"]


class FakeApi:
    """Submissions whose status advances one step per poll; listing by status as the API does."""

    def __init__(self, n):
        self.subs = {i: {"id": i, "student": f"s{i}", "status": "queued", "progress": None, "queue_position": i}
                     for i in range(1, n + 1)}
        self.calls = 0

    def tick(self):
        for s in self.subs.values():
            s["status"] = {"queued": "running", "running": "done"}.get(s["status"], s["status"])
            if s["id"] % 4 == 0 and s["status"] == "done":
                s["status"] = "failed"

    def submissions(self, slug, student=None, status=None):
        self.calls += 1
        if status == "queued":  # each round lists queued first: the world moves once per round
            self.tick()
        return [dict(s) for s in self.subs.values() if status is None or s["status"] == status]

    def submission(self, i):
        self.calls += 1
        return dict(self.subs[i])


def test_follow_ends_when_all_are_done_or_failed_and_asks_little():
    api = FakeApi(20)
    seen = []
    subs = batch.follow(api, "cap", list(api.subs), on_change=lambda s: seen.append(batch.counts(s.values())),
                        sleep=lambda s: None)
    assert batch.counts(subs.values()) == {"queued": 0, "running": 0, "done": 15, "failed": 5}
    assert seen[0]["queued"] == 20 and seen[-1]["done"] == 15
    assert api.calls < 60, f"{api.calls} calls to follow 20 submissions: it should list, not poll each"


def test_follow_times_out_with_what_is_pending():
    api = FakeApi(8)
    api.tick = lambda: None
    clock = iter(range(100)).__next__
    with pytest.raises(TimeoutError) as exc:
        batch.follow(api, "cap", list(api.subs), timeout_s=3, clock=clock, sleep=lambda s: None)
    assert batch.counts(exc.value.args[0].values())["queued"] == 8


# ---------------------------------------------------------------- help

def test_help_lists_every_command_and_the_exit_codes():
    ran = invoke("--help")
    for command in ("check", "serve", "worker", "submit", "status", "results", "regrade", "rescore", "export",
                    "roster", "config"):
        assert f"  {command} " in ran.out, f"grader --help should list {command}"
    assert "3  cannot reach the server" in ran.out and "4  authentication" in ran.out, ran.out


@pytest.mark.parametrize("command", ["submit", "status", "results", "regrade", "rescore", "export"])
def test_each_client_command_has_examples_and_exit_codes(command):
    ran = invoke(command, "--help")
    assert ran.code == 0 and "Examples:" in ran.out and f"grader {command}" in ran.out and "Exit codes" in ran.out
