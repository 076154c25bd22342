"""The result page's "What to fix" box (grader/feedback.py): one entry for the template's one reason, the check's own
diagnosis, root causes first, and every skipped check with its reason."""
import re

import pytest

from tests.feedback.reports import SKIPPED_EVALUATION, report, scale_bug, split_root_cause, template

from .web_helpers import grade_now, sign_in_instructor, sign_in_student, text_of, upload

BOX = re.compile(r'<section class="card summary" id="(?:summary|fixes)">(.*?)</section>', re.S)
ENTRY = re.compile(r'<li class="fix fix-(\w+)">(.*?)</li>', re.S)


@pytest.fixture
def alice(client, course):
    sign_in_student(client, "alice", course.alice)
    return client


def box(page) -> list[tuple[str, str]]:
    """(kind, visible text) of each entry in the page's What to fix box, in order."""
    found = BOX.search(page.get_data(as_text=True))
    assert found, "the page has a What to fix box"
    return [(kind, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip().replace("&#39;", "'"))
            for kind, html in ENTRY.findall(found.group(1))]


def graded_page(web_app, client, graded: dict):
    upload(client)
    grade_now(web_app, 1, graded)
    return client.get("/submissions/1")


def test_the_unedited_template_gets_one_entry(web_app, alice):
    entries = box(graded_page(web_app, alice, template()))
    assert len(entries) == 1, f"one reason (NotImplementedError), one entry; the box shows {entries}"
    kind, text = entries[0]
    assert kind == "shared" and "still raise NotImplementedError" in text and "write build_model" in text
    assert "Look at" not in text, "no generic registry hints when the reason is known"


def test_the_scale_bug_quotes_the_checks_diagnosis(web_app, alice):
    ((kind, text),) = box(graded_page(web_app, alice, scale_bug()))
    assert "Attention equals scaled dot-product attention" in text, "the check's title"
    assert "The weights equal softmax(q·kᵀ) without the 1/√Dh scale: divide the scores by √Dh." in text
    assert "Look at the softmax axis" not in text, "the registry hint only where the check said nothing specific"


def test_a_root_cause_leads_the_box(web_app, alice):
    entries = box(graded_page(web_app, alice, split_root_cause()))
    assert [kind for kind, _ in entries] == ["root_cause", "check"], entries
    assert entries[0][1].startswith("fail Fix split_heads first: with a correct split_heads in place of yours, these 3 "
                                    "checks pass too: No information from future tokens"), entries[0][1]
    assert "It equals x.reshape(B, H, T, Dh)" in entries[0][1], "the function check's own diagnosis"
    assert "passes with a correct split_heads (see above)" in entries[1][1], "training's pointer to causality"


def test_a_skipped_check_shows_its_reason_in_the_box_and_the_score(web_app, alice):
    page = graded_page(web_app, alice, report({}, evaluation={"status": "skipped", "message": SKIPPED_EVALUATION}))
    ((kind, text),) = box(page)
    assert kind == "skipped" and "Not run: it needs what training produces (training.run), which raised an error" in text
    assert "the check was skipped (it needs what training produces" in text_of(page), \
        "the score table's Why column gives the reason too"


def test_the_instructor_sees_the_box_the_student_sees(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, split_root_cause())
    instructor = web_app.test_client()
    sign_in_instructor(instructor)
    entries = box(instructor.get("/instructor/submissions/1"))
    assert entries and entries[0][0] == "root_cause", entries
