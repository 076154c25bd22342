"""Every error path of the client: one line on stderr, and an exit code a script can act on.

Against the real API over HTTP (SQLite, nothing grades): server down, bad or missing token, a token
without the right, missing files, bad manifests, refused uploads, unknown assignment or student.
"""
import time

import pytest

from tests.service.svc_cluster import free_port

from .cli_helpers import invoke, one_line_error, run, submission


@pytest.fixture
def folder(tmp_path):
    """alice.py and bob.py, both valid."""
    d = tmp_path / "subs"
    d.mkdir()
    for name in ("alice", "bob"):
        (d / f"{name}.py").write_text(submission(f"{name} {time.time_ns()}"))
    return d


# ---------------------------------------------------------------- server down

def test_server_down_is_exit_3_after_retries_as_a_real_process(folder):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    ran = run("submit", folder, "-a", "cap", env={"GRADER_SERVER": url, "GRADER_TOKEN": "gr_x", "GRADER_RETRIES": "2"})
    elapsed = time.monotonic() - started
    assert ran.code == 3, f"cannot reach the server must exit 3, got {ran.code}: {ran.err}"
    line = one_line_error(ran)
    assert url in line and "connection refused" in line and "tried 3 times" in line, line
    assert elapsed >= 1.4, f"two retries back off 0.5 s then 1 s; it gave up after {elapsed:.1f} s"


@pytest.mark.parametrize("args", [("status",), ("results", "-a", "cap"), ("export", "-a", "cap"),
                                  ("rescore",), ("regrade", "1"), ("roster", "import", "ROSTER")])
def test_every_client_command_says_server_down_the_same_way(args, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("username\nzed\n")
    args = [str(roster) if a == "ROSTER" else a for a in args]
    url = f"http://127.0.0.1:{free_port()}"
    ran = invoke(*args, env={"GRADER_SERVER": url, "GRADER_TOKEN": "gr_x", "GRADER_RETRIES": "0"})
    assert ran.code == 3, f"grader {' '.join(args)}: exit {ran.code}, {ran.err}"
    assert "cannot reach the server" in one_line_error(ran)


# ---------------------------------------------------------------- tokens

def test_bad_token_is_exit_4_as_a_real_process(api_server, folder):
    ran = run("submit", folder, "-a", "cap", env=api_server.env("gr_not-a-token"))
    assert ran.code == 4, f"a refused token must exit 4, got {ran.code}: {ran.err}"
    line = one_line_error(ran)
    assert "401" in line and "GRADER_TOKEN" in line, f"the line should say what failed and where to fix it: {line}"


@pytest.mark.parametrize("args", [("status",), ("results", "-a", "cap"), ("export", "-a", "cap"), ("rescore",)])
def test_bad_token_on_every_command(api_server, args):
    ran = invoke(*args, env=api_server.env("gr_wrong"))
    assert ran.code == 4 and "401" in one_line_error(ran), (args, ran.code, ran.err)


def test_no_token_at_all_is_exit_4_naming_the_three_ways_to_give_one(api_server, folder):
    ran = invoke("submit", folder, "-a", "cap", "--server", api_server.url)
    assert ran.code == 4
    line = one_line_error(ran)
    assert "--token" in line and "GRADER_TOKEN" in line and "config" in line, line


@pytest.mark.parametrize("args", [("export", "-a", "cap"), ("rescore",), ("status",), ("regrade", "-a", "cap")])
def test_a_student_token_on_instructor_commands_is_exit_4(api_server, args):
    ran = invoke(*args, env=api_server.env(api_server.course.alice))
    assert ran.code == 4 and "403" in one_line_error(ran), (args, ran.code, ran.err)


# ---------------------------------------------------------------- files and manifests

def test_missing_file_is_a_usage_error_before_any_network(folder):
    # the server is down: a usage error must not wait for retries
    env = {"GRADER_SERVER": f"http://127.0.0.1:{free_port()}", "GRADER_TOKEN": "gr_x"}
    ran = invoke("submit", folder / "alice.py", folder / "carol.py", "-a", "cap", env=env)
    assert ran.code == 2, ran.err
    assert one_line_error(ran) == f"error: no such file or directory: {folder / 'carol.py'}"


def test_an_empty_directory_is_a_usage_error(tmp_path, api_server):
    ran = invoke("submit", tmp_path, "-a", "cap", env=api_server.env())
    assert ran.code == 2 and "no files matching *.py" in one_line_error(ran)


def test_nothing_to_upload_is_a_usage_error(api_server):
    ran = invoke("submit", "-a", "cap", env=api_server.env())
    assert ran.code == 2 and "give --manifest" in one_line_error(ran)


BAD_MANIFESTS = [
    ("no student column", "file,name\nalice.py,Alice\n", "line 1: missing column student"),
    ("no columns we know", "a,b\nalice.py,alice\n", "line 1: missing column file and student"),
    ("empty", "", "empty; expected a header line"),
    ("unknown file", "file,student\nalice.py,alice\ncarol.py,carol\n", "line 3: no such file carol.py"),
    ("duplicate student", "file,student\nalice.py,alice\nbob.py,alice\n",
     "line 3: student alice already has a file on line 2"),
    ("duplicate file", "file,student\nalice.py,alice\nalice.py,bob\n", "line 3: file alice.py is already listed on line 2"),
    ("empty student", "file,student\nalice.py,\n", "line 2: empty student"),
    ("header only", "file,student\n", "no rows after the header"),
]


@pytest.mark.parametrize("why,text,expected", BAD_MANIFESTS, ids=[b[0] for b in BAD_MANIFESTS])
def test_bad_manifest_is_one_line_naming_the_row(folder, why, text, expected):
    manifest = folder / "manifest.csv"
    manifest.write_text(text)
    env = {"GRADER_SERVER": f"http://127.0.0.1:{free_port()}", "GRADER_TOKEN": "gr_x"}
    ran = invoke("submit", "-a", "cap", "--manifest", manifest, env=env)
    assert ran.code == 2, f"{why}: exit {ran.code} {ran.err}"
    line = one_line_error(ran)
    assert str(manifest) in line and expected in line, f"{why}: {line!r} should contain {expected!r}"


def test_a_file_given_but_not_in_the_manifest_is_named(folder):
    manifest = folder / "manifest.csv"
    manifest.write_text("file,student\nalice.py,alice\n")
    ran = invoke("submit", folder / "bob.py", "-a", "cap", "--manifest", manifest,
                 env={"GRADER_SERVER": f"http://127.0.0.1:{free_port()}", "GRADER_TOKEN": "gr_x"})
    assert ran.code == 2 and f"{folder / 'bob.py'} is not in the manifest" in one_line_error(ran), ran.err


def test_two_files_for_one_student_by_pattern_is_named(folder, api_server):
    (folder / "alice_v2.py").write_text(submission("alice again"))
    ran = invoke("submit", folder, "-a", "cap", env=api_server.env())
    assert ran.code == 2
    line = one_line_error(ran)
    assert "alice_v2.py" in line and "student alice already has" in line and "alice.py" in line, line


def test_a_pattern_without_the_student_group_is_a_usage_error(folder, api_server):
    ran = invoke("submit", folder, "-a", "cap", "--pattern", "^(\\w+)", env=api_server.env())
    assert ran.code == 2 and "(?P<student>...)" in one_line_error(ran)


# ---------------------------------------------------------------- the server says no

def test_unknown_assignment_is_exit_1_before_any_upload(folder, api_server):
    ran = invoke("submit", folder, "-a", "nope", env=api_server.env())
    assert ran.code == 1 and "no assignment 'nope'" in one_line_error(ran), ran.err


def test_refused_uploads_are_named_and_exit_1_while_the_others_upload(tmp_path, api_server):
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "alice.py").write_text(submission(f"refusals {time.time_ns()}"))
    (d / "bob.py").write_text("TRACK = 'lm'\ndef broken(:\n")
    (d / "carol.py").write_text(submission("carol is not on the roster"))
    ran = invoke("submit", d, "-a", "cap", env=api_server.env())
    assert ran.code == 1, f"some uploads refused must exit 1: {ran.err}"
    refused = [line for line in ran.err.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 2, ran.err
    assert any("bob.py" in line and "line 2" in line for line in refused), refused
    assert any("carol.py" in line and "no student 'carol'" in line for line in refused), refused
    assert "1 uploaded" in ran.out and "2 refused" in ran.out, ran.out


def test_a_server_that_is_not_the_grader_is_one_line(tmp_path):
    import http.server
    import threading

    class Plain(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        ran = invoke("status", env={"GRADER_SERVER": f"http://127.0.0.1:{httpd.server_port}", "GRADER_TOKEN": "t"})
    finally:
        httpd.shutdown()
    assert ran.code == 1 and "without JSON" in one_line_error(ran), ran.err


# ---------------------------------------------------------------- students

def test_a_student_submits_their_own_file_and_is_refused_a_batch(folder, api_server):
    env = api_server.env(api_server.course.bob)
    ran = invoke("submit", folder / "alice.py", "-a", "cap", "--json", env=env)  # the name does not matter
    assert ran.code == 0, ran.err
    assert '"student": "bob"' in ran.out and '"outcome": "uploaded"' in ran.out, ran.out
    again = invoke("submit", folder / "alice.py", "-a", "cap", env=env)
    assert again.code == 0 and "0 uploaded, 1 already on the server" in again.out, again.out
    batch = invoke("submit", folder, "-a", "cap", env=env)
    assert batch.code == 2 and "a student token uploads one file, for bob" in one_line_error(batch)


# ---------------------------------------------------------------- roster import

def test_roster_import_without_a_server_writes_the_local_database(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name\nann,Ann\nben,Ben\n")
    env = {"GRADER_INSTANCE_PATH": str(tmp_path / "instance"), "GRADER_DATABASE_URL": f"sqlite:///{tmp_path}/g.sqlite",
           "GRADER_BROKER_URL": "memory://"}
    ran = invoke("roster", "import", roster, env=env)
    assert ran.code == 0 and "added 2 student(s)" in ran.out, (ran.out, ran.err)


def test_roster_import_through_the_api_skips_those_already_there(api_server, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email\nalice,Alice,\ndora,Dora,dora@example.edu\n")
    ran = invoke("roster", "import", roster, env=api_server.env())
    assert ran.code == 0 and ran.out.strip() == "added 1 student(s); 1 already on the roster", ran.out


@pytest.mark.parametrize("text,expected", [("name\nAnn\n", "line 1: missing column username"),
                                           ("username\nann\nann\n", "line 3: username ann is already on line 2")])
def test_a_bad_roster_is_a_usage_error_naming_the_line(api_server, tmp_path, text, expected):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    ran = invoke("roster", "import", roster, env=api_server.env())
    assert ran.code == 2 and expected in one_line_error(ran), ran.err


def test_roster_import_with_a_student_token_is_exit_4(api_server, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("username\nzed\n")
    ran = invoke("roster", "import", roster, env=api_server.env(api_server.course.alice))
    assert ran.code == 4 and "403" in one_line_error(ran), ran.err


# ---------------------------------------------------------------- before anything is graded

def test_status_results_and_export_before_grading_show_what_is_queued(api_server, tmp_path):
    (tmp_path / "dora.py").write_text(submission(f"dora {time.time_ns()}"))
    invoke("roster", "import", _roster(tmp_path, "dora"), env=api_server.env())
    assert invoke("submit", tmp_path / "dora.py", "-a", "cap", env=api_server.env()).code == 0
    st = invoke("status", "-a", "cap", "--student", "dora", env=api_server.env())
    assert st.code == 0 and "queued (position" in st.out, st.out
    res = invoke("results", "-a", "cap", "--student", "dora", "--csv", env=api_server.env())
    assert res.code == 0 and ",dora,dora.py," in res.out and ",queued,,,," in res.out, (res.out, res.err)
    gs = invoke("export", "-a", "cap", "--gradescope", tmp_path / "gs", env=api_server.env())
    assert gs.code == 0 and "not exported: dora: none of 1 submission(s) graded yet" in gs.err, gs.err


def _roster(folder, *names):
    path = folder / "roster.csv"
    path.write_text("username\n" + "".join(f"{n}\n" for n in names))
    return path
