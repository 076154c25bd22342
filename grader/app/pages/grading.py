"""Grading by hand what counts: the manual-grading queue of an assignment with its filter and graders, the grading
view with next and previous, comments on lines of the source; and the student's own source with those comments."""
import re

from flask import abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup, escape

from .. import coursework, grading, store
from ..db import session
from ..rules import rubric_for
from .common import safe_next, signed_in, who
from .instructor import bp, get_assignment, get_sub, instructor
from .results import manual_form_items, manual_grades, result_view
from .student import bp as student_bp, own_submission

SHOW_TEXT = {"needs": "needs grading", "graded": "graded", "all": "all"}
CITED_LINE = re.compile(r"\bline (\d{1,6})\b")  # as the harness cites the student's own traceback lines


def queue_filters() -> dict:
    """The queue's filter from the query string (or the form that carries it): show, grader, student."""
    args = request.values
    show = args.get("show", "needs")
    return {"show": show if show in grading.SHOW else "needs", "grader": args.get("grader", "").strip(),
            "student": args.get("student", "").strip()}


def grader_filter(f: dict) -> str | None:
    """What grading.queue takes: "mine" is the signed-in instructor's username."""
    if f["grader"] == "mine":
        return who()["username"]
    return f["grader"] or None


def entries(s, a, f: dict) -> list:
    try:
        return grading.queue(s, a, f["show"], grader_filter(f), f["student"])
    except store.NotFound as exc:  # a grader that no longer exists: say so, list nothing
        flash(exc.message[0].upper() + exc.message[1:] + ".", "error")
        return []


def filter_args(f: dict) -> dict:
    """The filter as query arguments (empty ones left out), carried from the queue to the grading view and back."""
    return {k: v for k, v in f.items() if v and not (k == "show" and v == "needs")}


@bp.get("/assignments/<slug>/grading")
@signed_in("instructor")
def grading_queue(slug):
    s = session()
    a = get_assignment(slug)
    f = queue_filters()
    rows = entries(s, a, f)
    return render_template("instructor/grading_queue.html", a=a, f=f, rows=rows, graders=grading.graders(s),
                           items=len(grading.manual_ids(s, a)), show_text=SHOW_TEXT, args=filter_args(f))


@bp.post("/assignments/<slug>/grading/assign")
@signed_in("instructor")
def grading_assign(slug):
    """Assign the selected submissions, or every unassigned one, to the chosen graders (round robin); or unassign."""
    s = session()
    a = get_assignment(slug)
    f = queue_filters()
    action = request.form.get("action", "selected")
    people = request.form.getlist("grader_to")
    selected = [int(i) for i in request.form.getlist("submission") if i.isdigit()]
    back = redirect(safe_next(request.form.get("next"), url_for(".grading_queue", slug=slug, **filter_args(f))), 303)
    if action == "unassign":
        if not selected:
            flash("Select the submissions to unassign.", "error")
            return back
        done = grading.assign(s, a, selected, None)
        s.commit()
        flash(f"Unassigned {len(done)} submission{'s' * (len(done) != 1)}.", "info")
        return back
    if not people:
        flash("Choose the grader (or graders, for round robin) to assign to.", "error")
        return back
    if action == "selected" and not selected:
        flash("Select the submissions to assign (the boxes in the first column), or assign all unassigned ones.",
              "error")
        return back
    done = grading.assign(s, a, selected if action == "selected" else None, people)
    s.commit()
    per = {}
    for name in done.values():
        per[name] = per.get(name, 0) + 1
    flash(f"Assigned {len(done)} submission{'s' * (len(done) != 1)}: "
          + (", ".join(f"{n} to {name}" for name, n in per.items()) or "none was unassigned") + ".", "info")
    return back


def queue_sub(slug: str, submission_id: int):
    """The assignment and one of its submissions (404 when the submission is another assignment's)."""
    a = get_assignment(slug)
    sub = get_sub(submission_id)
    if sub.assignment_id != a.id:
        abort(404)
    return a, sub


@bp.get("/assignments/<slug>/grading/<int:submission_id>")
@signed_in("instructor")
def grading_view(slug, submission_id):
    a, sub = queue_sub(slug, submission_id)
    return grading_page(a, sub)


def grading_page(a, sub, errors: dict | None = None, typed=None):
    """The submission as the grader needs it: the source with comments, the report, the manual items, next/previous."""
    s = session()
    f = queue_filters()
    rows = entries(s, a, f)
    entry = grading.entry_for(s, sub)
    prev, nxt, place = grading.neighbours(rows, entry)
    view = result_view(s, sub, for_student=False)
    report = coursework.report_of(s, sub)
    report_text = report.content.decode("utf-8", "replace") if report is not None and report.kind == "markdown" \
        else None
    here = url_for(".grading_view", slug=a.slug, submission_id=sub.id, **filter_args(f))
    counted = grading.counted(s, a).get(sub.student_id)
    return render_template("instructor/grading_view.html", a=a, sub=sub, entry=entry, f=f, rows=rows, prev=prev,
                           next=nxt, place=place, view=view, report=report, report_text=report_text,
                           manual=manual_form_items(view["score"], sub.manual, rubric_for(s, a)),
                           errors=errors or {}, typed=typed,
                           lines=grading.source_view(s, sub), here=here, args=filter_args(f),
                           show_text=SHOW_TEXT, counted=counted is not None and counted.id == sub.id), \
        422 if errors else 200


@bp.post("/assignments/<slug>/grading/<int:submission_id>/manual")
@signed_in("instructor")
def grading_save(slug, submission_id):
    """Save the manual points and comments; "Save and next" goes on to the next submission of the queue."""
    s = session()
    a, sub = queue_sub(slug, submission_id)
    grades, errors = manual_grades(manual_form_items(None, sub.manual, rubric_for(s, a)), request.form)
    if errors:  # the page again, with what was typed
        return grading_page(a, sub, errors, request.form)
    if grades:
        row = coursework.grade_manual(s, sub, grades, instructor())
        s.commit()
        total = f" Total now {row.total:g} of {row.max:g}." if row else ""
        flash(f"Saved {len(grades)} manual grade{'s' * (len(grades) > 1)} of submission {sub.id}.{total}", "info")
    else:
        flash("No changes to save.", "info")
    f = queue_filters()
    if request.form.get("then") == "next":
        _, nxt, _ = grading.neighbours(entries(s, a, f), grading.entry_for(s, sub))
        if nxt is not None:
            return redirect(url_for(".grading_view", slug=slug, submission_id=nxt.id, **filter_args(f)), 303)
        flash("That was the last submission of the queue.", "info")
        return redirect(url_for(".grading_queue", slug=slug, **filter_args(f)), 303)
    return redirect(url_for(".grading_view", slug=slug, submission_id=sub.id, **filter_args(f)), 303)


@bp.post("/submissions/<int:submission_id>/comments")
@signed_in("instructor")
def add_comment(submission_id):
    """A comment on one line; back to the page it was written on, at that line."""
    s = session()
    sub = get_sub(submission_id)
    back = safe_next(request.form.get("next"), url_for(".submission", submission_id=sub.id))
    try:
        row = grading.add_comment(s, sub, request.form.get("line", ""), request.form.get("text", ""), instructor())
    except store.StoreError as exc:
        s.rollback()
        flash("The comment was not added: " + exc.message + ".", "error")
        return redirect(back + "#comment-form", 303)
    s.commit()
    flash(f"Comment added to line {row.line}.", "info")
    return redirect(f"{back}#L{row.line}", 303)


@bp.post("/submissions/<int:submission_id>/comments/<int:comment_id>/delete")
@signed_in("instructor")
def delete_comment(submission_id, comment_id):
    s = session()
    sub = get_sub(submission_id)
    row = grading.delete_comment(s, sub, comment_id)
    s.commit()
    flash(f"The comment on line {row.line} was deleted.", "info")
    back = safe_next(request.form.get("next"), url_for(".submission", submission_id=sub.id))
    return redirect(f"{back}#L{row.line}", 303)


@student_bp.get("/submissions/<int:submission_id>/source")
@signed_in("student")
def student_source(submission_id):
    """The student's own file with line numbers and their graders' comments (read-only)."""
    sub = own_submission(submission_id)
    return render_template("student/source.html", sub=sub, lines=grading.source_view(session(), sub))


@student_bp.app_template_global()
def line_comment_count(sub) -> int:
    """How many comments the graders left on the submission's lines (the result page links to them)."""
    return len(grading.comments_of(session(), sub))


@student_bp.app_template_filter()
def cite_lines(text, source: str | None):
    """A message with each "line 12" a link to that line of the numbered source at `source` (None: plain text)."""
    if source is None or text is None:
        return text
    return Markup(CITED_LINE.sub(lambda m: f'<a href="{escape(source)}#L{m[1]}">{m[0]}</a>', str(escape(text))))


@bp.app_template_global()
def grading_of(sub) -> dict:
    """What the instructor's submission page says about grading it: does it count (else which does), the manual items
    left, its grader."""
    s = session()
    counted = grading.counted(s, sub.assignment).get(sub.student_id)
    entry = grading.entry_for(s, sub)
    return {"counted": counted is not None and counted.id == sub.id, "counted_id": counted.id if counted else None,
            "items": entry.items, "left": len(entry.left), "grader": entry.grader.username if entry.grader else None}
