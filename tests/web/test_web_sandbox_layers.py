"""The instructor's page of a submission names the sandbox layers its grading had, and says when they were weak."""
from .web_helpers import REFERENCE, grade_now, graded_report, sign_in_instructor, sign_in_student, text_of, upload


def page_after(web_app, course, sandbox: dict) -> str:
    alice = web_app.test_client()
    sign_in_student(alice, "alice", course.alice)
    upload(alice, REFERENCE, "mine.py")
    report = graded_report(fail_split=False)
    report["sandbox"].update(sandbox)
    grade_now(web_app, 1, report)
    prof = web_app.test_client()
    sign_in_instructor(prof)
    return text_of(prof.get("/instructor/submissions/1"))


def test_the_layers_are_listed(web_app, course):
    page = page_after(web_app, course, {"layers": ["uid", "rlimits", "seccomp", "cgroup", "namespaces:user,mount"],
                                        "weak": False})
    assert "Sandbox process: uid, rlimits, seccomp, cgroup, namespaces:user,mount" in page, page
    assert "weak" not in page


def test_a_weak_grading_says_so_and_why(web_app, course):
    page = page_after(web_app, course, {"layers": ["uid", "rlimits", "seccomp", "cgroup"], "weak": True,
                                        "missing": ["namespaces: bubblewrap is not installed"]})
    assert "Sandbox process: uid, rlimits, seccomp, cgroup · weak" in page, page
    assert "bubblewrap is not installed" in page
