"""End to end against the real service: fifty files submitted with `grader submit`, the process killed halfway,
the same command run again (nothing uploaded twice), everything graded, results and gradebook exported,
and the gradebook CSV equal to the per-submission results.

The app on PostgreSQL over HTTP, a Redis of its own and one `grader worker` with two grading processes;
the assignment grades one check, so a grading costs mostly the sandbox's start.
"""
import csv
import io
import json
import os
import signal
import subprocess
import time

import pytest
from sqlalchemy import func, select

from .cli_helpers import GRADER, invoke, run, submission

pytestmark = pytest.mark.slow
FILES = 50
KILL_AFTER = 25


def broken(n: int) -> bool:
    return n % 5 == 0  # ten of the fifty fail split_heads


def server_rows(cluster):
    """(student, sha256) of every submission the server holds for the batch assignment."""
    from grader.app.db import get_db
    from grader.app.models import Assignment, Student, Submission
    with get_db(cluster.app).Session() as s:
        return s.execute(select(Student.username, Submission.sha256).join(Submission.student)
                         .join(Assignment, Assignment.id == Submission.assignment_id)
                         .where(Assignment.slug == "batch")).all()


def server_count(cluster) -> int:
    from grader.app.db import get_db
    from grader.app.models import Submission
    with get_db(cluster.app).Session() as s:
        return s.scalar(select(func.count()).select_from(Submission))


def settled_count(cluster, quiet_s: float = 2.0, limit_s: float = 30.0) -> int:
    """The server's submission count once it has stopped changing: an upload the killed client had in
    flight may still be committed by the server after the client died."""
    deadline = time.monotonic() + limit_s
    last, since = server_count(cluster), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = server_count(cluster)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("lms-export")
    for n in range(FILES):
        (d / f"s{n:02d}_capstone.py").write_text(submission(f"student s{n:02d}", broken=broken(n)))
    (d / "roster.csv").write_text("username,name,email\n" + "".join(f"s{n:02d},Student {n},s{n:02d}@example.edu\n"
                                                                   for n in range(FILES)))
    return d


def test_roster_import_through_the_api(cluster, batch_dir):
    ran = run("roster", "import", batch_dir / "roster.csv", env=cluster.env())
    assert ran.code == 0, ran.err
    assert ran.out.strip() == f"added {FILES} student(s); 0 already on the roster", ran.out
    again = invoke("roster", "import", batch_dir / "roster.csv", env=cluster.env())
    assert again.code == 0 and f"added 0 student(s); {FILES} already on the roster" in again.out


def test_fifty_files_interrupted_halfway_then_resumed_without_duplicates(cluster, batch_dir):
    started = time.monotonic()
    proc = subprocess.Popen([GRADER, "submit", str(batch_dir), "-a", "batch", "--jobs", "1"],
                            env={**os.environ, **cluster.env()}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    progress = []
    for line in proc.stderr:
        progress.append(line)
        if line.startswith(f"[{KILL_AFTER}/{FILES}]"):
            proc.send_signal(signal.SIGKILL)  # no clean-up, no flush: as if the laptop's lid closed
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the upload should have been killed mid-way: {''.join(progress)}"
    uploaded_before = settled_count(cluster)
    assert KILL_AFTER <= uploaded_before < FILES, \
        f"killed after {KILL_AFTER} reported uploads, the server holds {uploaded_before} of {FILES}"

    ran = run("submit", batch_dir, "-a", "batch", "--wait", "--json", "--timeout", "400", env=cluster.env(),
              timeout=450)
    assert ran.code == 0, f"exit {ran.code}: {ran.err[-2000:]}"
    doc = json.loads(ran.out)
    outcomes = {o["student"]: o for o in doc["outcomes"]}
    assert len(outcomes) == FILES
    # "skipped" is the client's own resume; "identical" would be the server refusing a file sent again
    skipped = [s for s, o in outcomes.items() if o["outcome"] == "skipped"]
    uploaded = [s for s, o in outcomes.items() if o["outcome"] == "uploaded"]
    assert len(skipped) == uploaded_before and len(uploaded) == FILES - uploaded_before, \
        f"resume should skip the {uploaded_before} already uploaded: {len(skipped)} skipped, {len(uploaded)} uploaded"

    rows = server_rows(cluster)
    assert len(rows) == FILES, f"{len(rows)} submissions on the server for {FILES} files: duplicates"
    expected = {(o["student"], o["sha256"]) for o in doc["outcomes"]}
    assert set(rows) == expected, "each student's submission must be their own file"
    assert len(doc["graded"]) == FILES and set(doc["graded"].values()) == {"done"}, doc["graded"]
    print(f"\n50 files: interrupted at {uploaded_before}, resumed and graded in {time.monotonic() - started:.0f} s")

    third = invoke("submit", batch_dir, "-a", "batch", env=cluster.env())
    assert third.code == 0 and f"0 uploaded, {FILES} already on the server" in third.out, third.out
    again = run("submit", batch_dir, "-a", "batch", "--json", env=cluster.env(), timeout=120)
    assert again.code == 0 and {o["outcome"] for o in json.loads(again.out)["outcomes"]} == {"skipped"}, again.out


def test_gradebook_csv_matches_the_per_submission_results(cluster, batch_dir, tmp_path):
    ran = run("export", "-a", "batch", "-o", tmp_path / "gradebook.csv", env=cluster.env())
    assert ran.code == 0, ran.err
    gradebook = {r["student"]: r for r in csv.DictReader(io.StringIO((tmp_path / "gradebook.csv").read_text()))}
    res = invoke("results", "-a", "batch", "--json", env=cluster.env())
    assert res.code == 0, res.err
    results = {r["submission"]["student"]: r for r in json.loads(res.out)}
    assert len(results) == FILES
    for student, r in results.items():
        score = r["result"]["score"]
        row = gradebook[student]
        assert float(row["total"]) == score["total"] and float(row["max"]) == score["max"], \
            f"{student}: gradebook {row['total']}/{row['max']} but the result says {score['total']}/{score['max']}"
        assert row["rubric_version"] == score["rubric_version"]
        split = {c["id"]: c["status"] for c in r["result"]["report"]["checks"]}["split_heads"]
        assert split == ("fail" if broken(int(student[1:])) else "pass"), f"{student}: split_heads {split}"
    totals = {broken(int(s[1:])): float(gradebook[s]["total"]) for s in results}
    assert totals[True] < totals[False], "a failing split_heads must cost points"
    for student in ("alice", "bob"):  # on the roster, nothing submitted: a row with empty cells
        assert gradebook[student]["total"] == "", gradebook[student]

    res_csv = invoke("results", "-a", "batch", "--csv", env=cluster.env())
    per_submission = {r["student"]: r for r in csv.DictReader(io.StringIO(res_csv.out))}
    assert {s: float(r["total"]) for s, r in per_submission.items()} == \
        {s: float(gradebook[s]["total"]) for s in per_submission}, "results --csv and the gradebook disagree"
    assert {r["split_heads"] for r in per_submission.values()} == {"pass", "fail"}


def test_gradescope_export_writes_one_results_json_per_student(cluster, tmp_path):
    ran = invoke("export", "-a", "batch", "--gradescope", tmp_path / "gs", env=cluster.env())
    assert ran.code == 0, ran.err
    files = sorted((tmp_path / "gs").glob("*/results.json"))
    assert len(files) == FILES, f"{len(files)} results.json for {FILES} students: {ran.out}"
    assert "not exported: alice: no submission" in ran.err
    doc = json.loads(files[0].read_text())
    assert doc["score"] == round(sum(t["score"] for t in doc["tests"]), 6) and doc["tests"], doc


def test_status_regrade_and_rescore(cluster):
    st = invoke("status", "-a", "batch", env=cluster.env())
    assert st.code == 0 and f"{FILES} submission(s): 0 queued, 0 running, {FILES} done, 0 failed" in st.out, st.out
    sid = json.loads(invoke("status", "-a", "batch", "--student", "s07", "--json", env=cluster.env()).out)[0]["id"]
    rg = run("regrade", sid, "--wait", "--timeout", "120", env=cluster.env())
    assert rg.code == 0 and "1 submission(s) queued" in rg.out and "graded 1: 1 done" in rg.out, (rg.out, rg.err)
    res = json.loads(invoke("results", sid, "--json", env=cluster.env()).out)[0]["result"]
    assert res["request"] == 2, "a regrade is a second grading request; the first result stays"
    rs = invoke("rescore", "-a", "batch", env=cluster.env())
    assert rs.code == 0 and f"rescored {FILES + 1} result(s)" in rs.out and "0 changed" in rs.out, rs.out
