"""`grader regrade -a`: prints how many counted submissions (or, with --all, every one) it regrades, then asks."""
import io

from click.testing import CliRunner

from tests.service.svc_helpers import Course, fake_report, judge_returning

from .cli_helpers import submission

SLUG = "regrade-cli"


def grader(api_server, *args, answer: str = ""):
    from grader.cli import main
    return CliRunner().invoke(main, list(args), env=api_server.env(), input=answer, catch_exceptions=False)


def requests(app) -> dict:
    from grader.app import store
    from grader.app.db import get_db
    with get_db(app).Session() as s:
        return {sub.id: sub.request for sub in store.list_submissions(s, store.get_assignment(s, SLUG))}


def test_regrade_a_counts_then_asks_and_regrades_only_what_counts(api_server):
    from grader.app import store
    from grader.app.db import get_db
    from worker import grading
    app, course = api_server.app, api_server.course
    with get_db(app).Session() as s:
        store.create_assignment(s, SLUG, checks=["split_heads"])
        s.commit()
    client, ids = app.test_client(), []
    for tag, status in (("best", "pass"), ("latest", "fail")):  # alice's first passes: it counts, not her latest
        r = client.post(f"/api/v1/assignments/{SLUG}/submissions", headers=Course.auth(course.alice),
                        data={"file": (io.BytesIO(submission(tag).encode()), f"{tag}.py")},
                        content_type="multipart/form-data")
        ids.append(r.get_json()["id"])
        grading.grade(app, ids[-1], judge=judge_returning(fake_report({"split_heads": status})))
    before = requests(app)
    declined = grader(api_server, "regrade", "-a", SLUG, answer="n\n")
    assert "1 counted submission(s) of regrade-cli to regrade" in declined.stdout, declined.stdout
    assert declined.exit_code == 1 and requests(app) == before, "answering no regrades nothing"
    done = grader(api_server, "regrade", "-a", SLUG, "--yes")
    assert done.exit_code == 0 and "1 submission(s) queued for regrading" in done.stdout, done.stdout
    assert requests(app) == {ids[0]: before[ids[0]] + 1, ids[1]: before[ids[1]]}
    every = grader(api_server, "regrade", "-a", SLUG, "--all", "--yes")
    assert "1 submission(s) of regrade-cli to regrade; 1 skipped (already queued or running)" in every.stdout, \
        every.stdout
    assert requests(app)[ids[1]] == before[ids[1]] + 1
