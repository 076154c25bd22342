"""Feedback visibility per rubric item (issue 17): hidden means hidden everywhere a student can look, each level shows
what it says, a level switches at its date, releases keep working, and instructors always see everything."""
import io
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from grader.app import coursework, store, visibility
from grader.app.db import get_db
from grader.app.models import FeedbackRule, Release, Submission, utcnow
from tests.web.web_helpers import sign_in_student
from worker import grading

from .svc_helpers import Course, fake_report, judge_returning, real_judge

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
# Distinctive texts of the rope check's result: none of them may reach a student while its only item is hidden.
SECRET = "ROPE-SECRET-7731 the rotated pairs are swapped"
SECRETS = (SECRET, "ROPE-DETAIL-4410", "ROPE-PRINTED-9052", "rope_secret_metric", "Rotary position embedding")


def secret_report(second_line: str = "ROPE-DETAIL-4410 second line of the message") -> dict:
    """split_heads and attention pass; rope fails with a message, details, metrics and output all distinctive."""
    report = fake_report({"split_heads": "pass", "attention_sdpa": "pass", "rope": "fail"})
    rope = next(c for c in report["checks"] if c["id"] == "rope")
    rope.update(message=f"{SECRET}\n{second_line}", details=["ROPE-DETAIL-4410 pair 3 of head 1"],
                metrics={"rope_secret_metric": 0.731, "max_abs_diff": 0.5}, stdout="ROPE-PRINTED-9052\n")
    report["timings"] = {"total_s": 0.1, "stages": {"split_heads.main": 0.01, "rope.main": 0.02}, "root_cause_s": 0.4}
    return report


def graded(app, course: Course, report: dict | None = None) -> int:
    """Alice uploads through the API; the stand-in judge grades it with `report`."""
    r = app.test_client().post(f"/api/v1/assignments/{course.slug}/submissions", headers=Course.auth(course.alice),
                               data={"file": (io.BytesIO(REFERENCE), "mine.py")}, content_type="multipart/form-data")
    assert r.status_code == 202, r.get_json()
    sid = r.get_json()["id"]
    assert grading.grade(app, sid, judge=judge_returning(report or secret_report())).status == "graded"
    return sid


def set_level(app, key: str, level: str, later: str | None = None, switch_at=None) -> None:
    with app.app_context(), get_db(app).session() as s:
        visibility.set_rule(s, store.get_assignment(s, "cap"), key, level, later, switch_at)


def student_answers(app, course: Course, sid: int) -> dict[str, bytes]:
    """Every answer a student can read about their submission: the API and the pages, as raw bytes."""
    api = app.test_client()
    auth = Course.auth(course.alice)
    paths = ["/api/v1/me", "/api/v1/assignments", "/api/v1/assignments/cap", "/api/v1/assignments/cap/submissions",
             f"/api/v1/submissions/{sid}", f"/api/v1/submissions/{sid}/result", f"/api/v1/submissions/{sid}/results",
             f"/api/v1/submissions/{sid}/comments", f"/api/v1/submissions/{sid}/file"]
    out = {path: api.get(path, headers=auth).data for path in paths}
    pages = app.test_client()
    sign_in_student(pages, "alice", course.alice)
    for path in ["/submit", "/submissions", f"/submissions/{sid}", f"/submissions/{sid}/status.json",
                 f"/submissions/{sid}/file", f"/submissions/{sid}/source"]:
        answer = pages.get(path)
        assert answer.status_code == 200, f"{path}: {answer.status_code}"
        out[path] = answer.data
    return out


def leaks(answers: dict[str, bytes], texts=SECRETS) -> list[str]:
    return [f"{path}: {text!r}" for path, data in answers.items() for text in texts if text.encode() in data]


def test_a_hidden_item_leaks_into_no_student_answer_and_the_instructor_sees_it(app, course):
    set_level(app, "rope", "hidden")  # rope's only rubric item: the check is hidden with it
    sid = graded(app, course)
    answers = student_answers(app, course, sid)
    assert not leaks(answers), f"a hidden item's result reached the student: {leaks(answers)}"
    result = json.loads(answers[f"/api/v1/submissions/{sid}/result"])
    assert [c["id"] for c in result["report"]["checks"]] == ["split_heads", "attention_sdpa"]
    assert result["report"]["summary"] == {"pass": 2}, "the counts must not count the hidden check"
    assert "rope.main" not in result["report"]["timings"]["stages"]
    assert "root_cause_s" not in result["report"]["timings"], "a diagnosis run's time tells a function check failed"
    assert result["score"]["hidden"]["items"] >= 1 and "rope" not in json.dumps(result["score"])
    assert result["score"]["total"] == 8.0, "the total covers the visible items only (split_heads 3 + attention 5)"
    assert json.loads(answers["/api/v1/assignments/cap"])["checks"] == ["split_heads", "attention_sdpa"]
    instructor = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.instructor))
    assert SECRET in instructor.get_json()["report"]["checks"][2]["message"]
    assert all(text.encode() in instructor.data for text in SECRETS[:4]), "the instructor sees everything"
    assert instructor.get_json()["report"]["timings"]["root_cause_s"] == 0.4


def test_the_grading_seed_reaches_no_student_answer_and_the_instructor_sees_it(app, course):
    """The seed is stored twice, in the report and in the result's options: both are cut from every student answer."""
    seed = 987654321
    with app.app_context(), get_db(app).session() as s:
        store.update_assignment(s, "cap", seed=seed)
    report = secret_report()
    report["seed"] = seed  # the judge reports the seed it graded under
    sid = graded(app, course, report)
    answers = student_answers(app, course, sid)
    assert not leaks(answers, (str(seed),)), f"the seed reached the student: {leaks(answers, (str(seed),))}"
    instructor = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.instructor))
    answer = instructor.get_json()
    assert answer["options"]["seed"] == seed and answer["report"]["seed"] == seed, "the control: instructors see it"


TOLD = "causality and kv_cache passed, so look at what differs between teacher forcing and decoding from BOS"
BLIND = "the decoder reads the token it must predict (check the causal mask), or the cache may differ"


def told_report() -> dict:
    """Training fails with a message that tells how causality and kv_cache went, and the judge's aside for it."""
    report = fake_report({"split_heads": "pass", "causality": "pass", "kv_cache": "pass", "training": "fail"})
    training = next(c for c in report["checks"] if c["id"] == "training")
    training.update(message=f"the training loss is suspiciously low; {TOLD}", details=[f"greedy falls behind; {TOLD}"],
                    asides=[{"checks": ["causality", "kv_cache"], "told": TOLD, "blind": BLIND}])
    return report


@pytest.mark.parametrize("hidden", [None, "causality", "kv_cache"])
def test_a_message_tells_a_hidden_checks_outcome_to_no_student(app, course, hidden):
    """Training's message names how causality went; with causality (or kv_cache) hidden the student reads the form
    that does not, and with both visible (the control) the judge's own words."""
    if hidden:
        set_level(app, hidden, "hidden")
    sid = graded(app, course, told_report())
    answers = student_answers(app, course, sid)
    result = json.loads(answers[f"/api/v1/submissions/{sid}/result"])
    training = next(c for c in result["report"]["checks"] if c["id"] == "training")
    assert "asides" not in training, "the asides are the judge's, not the student's"
    if hidden is None:
        assert TOLD in training["message"] and TOLD in training["details"][0], training
        return
    assert not leaks(answers, (TOLD,)), f"a hidden check's outcome reached the student: {leaks(answers, (TOLD,))}"
    assert training["message"] == f"the training loss is suspiciously low; {BLIND}", training
    assert training["details"] == [f"greedy falls behind; {BLIND}"], training
    instructor = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.instructor))
    assert TOLD.encode() in instructor.data, "the instructor reads the judge's own words"


def test_live_verdicts_and_progress_hide_a_hidden_check_while_grading(app, course):
    set_level(app, "rope", "hidden")
    r = app.test_client().post("/api/v1/assignments/cap/submissions", headers=Course.auth(course.alice),
                               data={"file": (io.BytesIO(REFERENCE), "mine.py")}, content_type="multipart/form-data")
    sid = r.get_json()["id"]
    report = secret_report()
    with get_db(app).session() as s:  # mid-grading: rope decided, and rope the check running now
        sub = s.get(Submission, sid)
        sub.status, sub.current_check, sub.partial = "running", "rope", report["checks"]
        s.commit()
    answers = student_answers(app, course, sid)
    assert not leaks(answers), f"a hidden check's live verdict reached the student: {leaks(answers)}"
    partial = json.loads(answers[f"/api/v1/submissions/{sid}/result"])
    assert partial["partial"] and [c["id"] for c in partial["report"]["checks"]] == ["split_heads", "attention_sdpa"]
    assert partial["progress"]["check"] is None and "rope" not in partial["pending"]
    assert json.loads(answers[f"/api/v1/submissions/{sid}"])["progress"]["check"] is None
    assert '"rope"' not in answers[f"/submissions/{sid}/status.json"].decode()
    instructor = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.instructor))
    assert instructor.get_json()["progress"]["check"] == "rope" and SECRET.encode() in instructor.data


LEVELS = [  # level -> (rope's check in the report?, its message, its details/metrics/output, rope's points and note)
    ("hidden", False, False, False, False),
    ("points", False, False, False, True),
    ("summary", True, True, False, True),
    ("full", True, True, True, True),
]


@pytest.mark.parametrize("level, listed, message, details, points", LEVELS, ids=[row[0] for row in LEVELS])
def test_each_level_shows_what_it_says(app, course, level, listed, message, details, points):
    set_level(app, "rope", level)
    sid = graded(app, course)
    result = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).get_json()
    rope = next((c for c in result["report"]["checks"] if c["id"] == "rope"), None)
    assert (rope is not None) == listed, f"{level}: the rope check listed: {rope}"
    text = json.dumps(result)
    assert (SECRET in text) == message, f"{level}: the one-line message shown: {SECRET in text}"
    assert ("ROPE-DETAIL-4410" in text or "ROPE-PRINTED-9052" in text or "rope_secret_metric" in text) == details, \
        f"{level}: details, metrics or output shown"
    items = {i["id"]: i for c in result["score"]["categories"] for i in c["items"]}
    assert ("rope" in items) == points, f"{level}: rope's points in the score"
    if level == "points":
        assert items["rope"]["note"] == "" and items["rope"]["check"] is None and items["rope"]["points"] == 0.0
    if level == "summary":
        assert rope["message"] == SECRET and rope["details"] == [] and rope["stdout"] == ""
    page = app.test_client()
    sign_in_student(page, "alice", course.alice)
    html = page.get(f"/submissions/{sid}").data
    assert (SECRET.encode() in html) == message and (b"ROPE-DETAIL-4410" in html) == details, level
    assert (b"Rotary position embedding" in html) == points, f"{level}: the item's title on the result page"


@pytest.mark.parametrize("past, seen", [(True, "full"), (False, "points")], ids=["switched", "not-yet"])
def test_a_level_switches_at_its_date(app, course, past, seen):
    when = utcnow() + (timedelta(hours=-1) if past else timedelta(days=3))
    set_level(app, "rope", "points", "full", when.isoformat() + "Z")
    sid = graded(app, course)
    data = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).data
    assert (b"ROPE-DETAIL-4410" in data) == (seen == "full"), f"switch_at {when} ({'past' if past else 'future'})"
    rows = app.test_client().get("/api/v1/assignments/cap/feedback", headers=Course.auth(course.instructor))
    rope = next(r for r in rows.get_json()["items"] if r["key"] == "rope")
    assert (rope["level"], rope["later_level"], rope["effective"]) == ("points", "full", seen)


def test_a_level_set_at_the_due_date_moves_with_the_due_date(app, course):
    """Moving the due date later must not release hidden feedback at the old one (it used to copy the date)."""
    instructor = Course.auth(course.instructor)
    client = app.test_client()

    def move_due(when):
        r = client.patch("/api/v1/assignments/cap", headers=instructor, json={"due_at": when.isoformat() + "Z"})
        assert r.status_code == 200, r.get_json()

    def seen():
        data = client.get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).data
        rope = next(r for r in client.get("/api/v1/assignments/cap/feedback", headers=instructor).get_json()["items"]
                    if r["key"] == "rope")
        return b"ROPE-DETAIL-4410" in data, rope

    move_due(utcnow() - timedelta(hours=1))
    r = client.put("/api/v1/assignments/cap/feedback/rope", headers=instructor,
                   json={"level": "points", "later_level": "full", "switch_at": "due"})
    assert r.status_code == 200, r.get_json()
    sid = graded(app, course)
    shown, rope = seen()
    assert shown and rope["effective"] == "full" and rope["switch_at_due"] is True, rope
    later = utcnow() + timedelta(days=7)
    move_due(later)
    shown, rope = seen()
    assert not shown, "the due date moved a week later: the details must be hidden again until then"
    assert rope["effective"] == "points" and rope["switch_at"] == later.strftime("%Y-%m-%dT%H:%M:%SZ"), rope
    move_due(utcnow() - timedelta(minutes=5))
    assert seen()[0], "the due date moved back into the past: the details show"


def test_an_items_rule_wins_over_its_categorys_and_a_category_rule_covers_the_rest(app, course):
    set_level(app, "implementation", "hidden")
    set_level(app, "split_heads", "full")
    sid = graded(app, course)
    result = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).get_json()
    shown = [i["id"] for c in result["score"]["categories"] for i in c["items"]]
    assert "split_heads" in shown and "attention_sdpa" not in shown and "rope" not in shown, shown
    assert [c["id"] for c in result["report"]["checks"]] == ["split_heads"]


def test_the_feedback_api_sets_and_clears_levels_and_refuses_bad_ones(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    url = "/api/v1/assignments/cap/feedback"
    r = client.put(f"{url}/rope", headers=auth, json={"level": "points", "later_level": "full", "switch_at": "due"})
    assert r.status_code == 200, r.get_json()
    rope = next(row for row in r.get_json()["items"] if row["key"] == "rope")
    assert rope["switch_at"] == "2026-12-18T23:59:00Z", "due: the rubric policy's deadline (no date of its own)"
    bad = [({"level": "secret"}, "level must be one of hidden, points, summary, full"),
           ({"level": "points", "later_level": "full"}, "a later level needs switch_at"),
           ({"level": "points", "later_level": "full", "switch_at": "soon"}, "ISO 8601"),
           ({"level": "points", "later_level": "full", "switch_at": "2026-12-19T00:00"}, "has no time zone"),
           ]
    for data, message in bad:
        r = client.put(f"{url}/rope", headers=auth, json=data)
        assert r.status_code == 400 and message in r.get_json()["message"], (data, r.get_json())
    r = client.put(f"{url}/nonsense", headers=auth, json={"level": "full"})
    assert r.status_code == 400 and "'nonsense' is not an item or category" in r.get_json()["message"]
    assert client.put(f"{url}/rope", headers=Course.auth(course.alice), json={"level": "full"}).status_code == 403
    assert client.get(url, headers=Course.auth(course.alice)).status_code == 403
    assert client.delete(f"{url}/rope", headers=auth).status_code == 200
    assert client.delete(f"{url}/rope", headers=auth).status_code == 404, "no rule left to clear"
    rope = next(row for row in client.get(url, headers=auth).get_json()["items"] if row["key"] == "rope")
    assert (rope["level"], rope["default"], rope["effective"]) == (None, "full", "full")


def test_releases_are_rules_at_full_and_old_release_rows_still_count(app, course):
    with app.app_context(), get_db(app).session() as s:
        a = store.get_assignment(s, "cap")
        s.add(Release(assignment_id=a.id, key="honesty"))  # a release made before levels existed
        s.flush()
        assert {"honesty"} <= coursework.released_keys(s, a)
        assert visibility.levels(s, a).items["honesty_limits"] == "full"
        coursework.set_releases(s, a, ["specification"], None)
        s.commit()
        rules = {r.key: r.level for r in s.query(FeedbackRule).filter_by(assignment_id=a.id)}
        assert rules == {"specification": "full"}, "the release is a rule; the unlisted old one is gone"
        assert s.query(Release).count() == 0
        assert coursework.released_keys(s, a) == {"specification"}
        levels = visibility.levels(s, a).items
        assert levels["spec_contract"] == "full" and levels["honesty_limits"] == "hidden"


def test_the_student_status_page_names_no_hidden_running_check(app, course):
    set_level(app, "rope", "hidden")
    r = app.test_client().post("/api/v1/assignments/cap/submissions", headers=Course.auth(course.alice),
                               data={"file": (io.BytesIO(REFERENCE), "mine.py")}, content_type="multipart/form-data")
    sid = r.get_json()["id"]
    with get_db(app).session() as s:
        sub = s.get(Submission, sid)
        sub.status, sub.current_check = "running", "rope"
        s.commit()
    pages = app.test_client()
    sign_in_student(pages, "alice", course.alice)
    status = pages.get(f"/submissions/{sid}/status.json").get_json()
    assert status["text"] == "Running the checks", status["text"]
    instructor = pages.get(f"/api/v1/submissions/{sid}", headers=Course.auth(course.instructor)).get_json()
    assert instructor["progress"]["check"] == "rope"


def test_the_cli_sets_a_level_now_and_later_and_back_to_the_default(local_cli):
    grader = local_cli
    assert grader("assignment", "create", "cap", "--due", "2027-01-05T12:00:00Z")[0] == 0
    code, out = grader("assignment", "feedback", "cap", "rope", "points", "--then", "full", "--at", "due")
    assert code == 0 and out.strip() == ("cap rope: points; full from 2027-01-05 12:00 UTC (the due date, following "
                                         "it if it moves); students see points now"), out
    code, out = grader("assignment", "feedback", "cap", "specification", "summary")
    assert code == 0 and "students see summary now" in out, out
    code, out = grader("assignment", "feedback", "cap", "rope", "default")
    assert code == 0 and out.strip() == "cap rope: default (full); students see full now", out
    code, out = grader("assignment", "feedback", "cap", "nonsense", "full")
    assert code == 1 and "'nonsense' is not an item or category of cap's rubric" in out, out
    code, out = grader("assignment", "feedback", "cap", "rope", "full", "--then", "hidden")
    assert code == 2 and "--then and --at go together" in out, out
    code, out = grader("assignment", "feedback", "cap", "rope", "points", "--then", "full", "--at", "tomorrow")
    assert code == 1 and "switch_at must be an ISO 8601 date" in out, out
    later = ("assignment", "feedback", "cap", "rope", "points", "--then", "full", "--at")
    code, out = grader(*later, "2027-01-01T00:00")
    assert code == 1 and "has no time zone" in out, out
    code, out = grader(*later, "2027-01-01T01:00+01:00")
    assert code == 0 and "full from 2027-01-01 00:00 UTC" in out, out


@pytest.mark.slow
def test_a_real_grading_tells_no_student_a_hidden_checks_outcome_nor_the_seed(svc):
    """The judge's own report, not a hand-built one: rope ignores its positions, so rope fails and kv_cache fails
    with rope as its root cause. With rope hidden and a seed of the assignment's own, no student answer carries
    rope's words, the root cause, the diagnosis run's time or the seed; the instructor's answer (the control) does."""
    from tests.feedback import bugs
    app, course = svc
    seed = 987654321
    with app.app_context(), get_db(app).session() as s:
        store.update_assignment(s, "cap", seed=seed, checks=["split_heads", "attention_sdpa", "rope", "kv_cache"])
    set_level(app, "rope", "hidden")
    upload = bugs.source("rope_ignores_positions_lm").encode()
    r = app.test_client().post(f"/api/v1/assignments/{course.slug}/submissions", headers=Course.auth(course.alice),
                               data={"file": (io.BytesIO(upload), "mine.py")}, content_type="multipart/form-data")
    sid = r.get_json()["id"]
    assert grading.grade(app, sid, judge=real_judge()).status == "graded"
    full = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.instructor))
    report = full.get_json()["report"]
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["rope"]["status"] == "fail" and checks["kv_cache"]["status"] == "fail", report["checks"]
    cause = checks["kv_cache"].get("root_cause") or {}
    assert cause.get("check") == "rope" and report["seed"] == seed and report["timings"].get("root_cause_s"), report
    # the plain runs of their words: what JSON and HTML both carry as written (quotes, newlines and symbols escape)
    told = [piece for text in (checks["rope"]["message"], *map(str, checks["rope"]["details"]), cause["evidence"])
            for piece in re.findall(r"[A-Za-z0-9 ,.:;()_=-]{20,}", text)] + [str(seed)]
    assert len(told) > 2 and all(piece.encode() in full.data for piece in told), told  # the search finds them
    answers = student_answers(app, course, sid)
    assert not leaks(answers, told), f"a hidden check's outcome or the seed reached the student: {leaks(answers, told)}"
    mine = json.loads(answers[f"/api/v1/submissions/{sid}/result"])["report"]
    assert [c["id"] for c in mine["checks"]] == ["split_heads", "attention_sdpa", "kv_cache"], mine["checks"]
    assert mine["checks"][2]["status"] == "fail" and "root_cause" not in mine["checks"][2], mine["checks"][2]
    assert "root_cause_s" not in mine["timings"] and "seed" not in mine, mine
