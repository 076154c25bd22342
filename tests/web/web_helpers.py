"""Helpers for the page tests: a signed-in test client, stand-in judge reports with diagnostics and a loss curve."""
import io
import re
from html import unescape
from pathlib import Path

from tests.service.svc_helpers import fake_report, judge_returning

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf(client, path: str = "/signin") -> str:
    """This session's form token, read from a page as a browser would."""
    page = client.get(path)
    found = CSRF.search(page.get_data(as_text=True))
    assert found, f"{path} has no CSRF field (status {page.status_code})"
    return found.group(1)


def sign_in_student(client, username: str, token: str):
    return client.post("/signin", data={"username": username, "token": token, "csrf_token": csrf(client)})


def sign_in_instructor(client, username: str = "prof", password: str = PASSWORD):
    return client.post("/instructor/signin", data={"username": username, "password": password,
                                                   "csrf_token": csrf(client, "/instructor/signin")})


def upload(client, module: bytes = REFERENCE, filename: str = "mine.py", report: tuple | None = None,
           assignment: str = "cap", token: str | None = None):
    """Post the submit form (report: (bytes, filename)); token defaults to the session's."""
    data = {"assignment": assignment, "csrf_token": token or csrf(client, "/submit"),
            "module": (io.BytesIO(module), filename)}
    if report is not None:
        data["report"] = (io.BytesIO(report[0]), report[1])
    return client.post("/submit", data=data, content_type="multipart/form-data")


def text_of(response) -> str:
    """The page's visible text, tags dropped and spaces collapsed (for assertions a reader can follow)."""
    html = response.get_data(as_text=True)
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def graded_report(fail_split: bool = True) -> dict:
    """A report like the judge's: split_heads failing with a located difference, training with a loss curve."""
    report = fake_report({"split_heads": "fail" if fail_split else "pass", "attention_sdpa": "pass",
                          "training": "pass"})
    checks = {c["id"]: c for c in report["checks"]}
    if fail_split:
        checks["split_heads"].update(
            message="split_heads(x, 4)[0, 2, 2] should be x[0, 2, 12:18]; compared with the correct split: 216 of "
                    "240 values differ; the largest difference is 4.4 at batch 0, head 2, position 2, channel 5 "
                    "(got 1.55087, expected -2.85023).",
            details=["split_heads(x, 4)[0, 2, 2] should be x[0, 2, 12:18]", "merge_heads(split_heads(x)) is not x"],
            metrics={"max_abs_diff": 4.4011, "mismatched": 216, "compared": 240, "worst_index": [0, 2, 2, 5]})
    curve = [round(3.9 * 0.985 ** i + 0.8, 5) for i in range(100)]
    checks["training"].update(
        message="300 steps: loss on training rows 3.937 -> 0.889 (unigram baseline 3.023, ratio 0.294)",
        metrics={"final_loss": 0.889, "baseline_loss": 3.023, "loss_ratio": 0.294, "steps": 300,
                 "loss_curve": curve, "loss_curve_every": 3, "parameters": 72748,
                 "optimizer": {"name": "AdamW", "lr": 0.003}})
    return report


def grade_now(app, submission_id: int, report: dict) -> None:
    """Grade a queued submission in this process with a stand-in judge returning `report`."""
    from worker.grading import grade
    outcome = grade(app, submission_id, judge=judge_returning(report))
    assert outcome.status == "graded", outcome


def known_bad(name: str = "split_no_transpose") -> bytes:
    """A known-bad submission (submissions/known_bad.py): the reference with one realistic bug."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("known_bad", ROOT / "submissions" / "known_bad.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bug = next(b for b in module.KNOWN_BAD if b.name == name)
    return (ROOT / "submissions" / bug.base).read_text().replace(bug.old, bug.new).encode()
