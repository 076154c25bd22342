"""grader/feedback.py: "What to fix" from the checks' own diagnoses, root causes first, one entry per shared reason,
every skipped check with its reason, the registry's hint only where a check said nothing specific."""
import pytest

from grader.feedback import what_to_fix
from grader.registry import check_registry

from .reports import SCALE, SKIPPED_EVALUATION, report, scale_bug, split_root_cause, template

TITLES = {cid: c.title for cid, c in check_registry().items()}


def shown(entry: dict) -> str:
    """Everything an entry shows a student."""
    return " ".join([entry["headline"], entry["text"], entry["where"], entry["look_at"], *entry["also"]])


def test_a_report_where_everything_passed_has_nothing_to_fix():
    assert what_to_fix(report({})) == []
    assert what_to_fix(None) == [] and what_to_fix({"checks": []}) == []


def test_the_unedited_template_gets_one_entry_naming_not_implemented_error():
    entries = what_to_fix(template())
    assert len(entries) == 1, f"one reason, one entry; got {[e['headline'] for e in entries]}"
    (entry,) = entries
    assert entry["kind"] == "shared" and "NotImplementedError" in entry["headline"]
    for placeholder in ("write split_heads", "write attention", "write apply_rope", "write build_model"):
        assert placeholder in entry["headline"], f"the entry names each placeholder ({placeholder!r})"
    assert "line 158, in build_model" in entry["where"], "where the student's code raised"
    assert set(entry["checks"]) == set(TITLES) - {"no_shortcuts"}, "every failing check is covered, evaluation too"
    assert entry["look_at"] == "", "no registry hint: the reason is known"
    assert any(TITLES["evaluation"] in note for note in entry["also"]), \
        "the skipped evaluation joins the entry of training, which it waited for"


def test_the_same_error_on_every_check_is_one_entry_with_that_message():
    bad = {"status": "error", "message": "importing the submission raised ModuleNotFoundError: No module named 'numpy'",
           "details": ["line 3, in <module>: import numpy"]}
    entries = what_to_fix(report({}, **{cid: bad for cid in TITLES}))
    assert len(entries) == 1 and entries[0]["headline"].startswith("Importing the submission raised ModuleNotFound")
    assert entries[0]["where"] == "line 3, in <module>" and len(entries[0]["checks"]) == len(TITLES)


def test_a_missing_track_is_one_entry():
    missing = {"status": "error", "message": "TRACK is missing: add a module-level line TRACK = \"lm\" or \"reverse\""}
    needs_track = ("gradient_path", "causality", "padding", "kv_cache", "checkpoint_reload", "training", "evaluation")
    entries = what_to_fix(report({}, **{cid: missing for cid in needs_track}))
    assert [e["kind"] for e in entries] == ["shared"] and "TRACK is missing" in entries[0]["headline"]


def test_a_diagnosed_failure_quotes_the_diagnosis_and_leaves_out_the_generic_hint():
    (entry,) = what_to_fix(scale_bug())
    assert entry["headline"] == TITLES["attention_sdpa"], "students see the title, not the id"
    assert entry["text"] == "The weights equal softmax(q·kᵀ) without the 1/√Dh scale: divide the scores by √Dh."
    assert entry["where"] in SCALE and "largest difference is 0.471" in entry["where"], "the comparison behind it"
    assert entry["look_at"] == "", "the check said exactly what to change: no registry hint"


def test_a_bare_comparison_gets_the_registry_hint():
    bare = ("attention output with mask 'none' against SDPA: 70 of 70 values differ; the largest difference is 0.2 "
            "at batch 0, head 1, query 2, channel 3 (got 0.1, expected 0.3).")
    (entry,) = what_to_fix(report({}, attention_sdpa={"status": "fail", "message": bare}))
    assert entry["look_at"] == check_registry()["attention_sdpa"].hint


@pytest.mark.parametrize("status", ["timeout", "oom", "crash"])
def test_a_check_that_did_not_report_gets_the_registry_hint(status):
    (entry,) = what_to_fix(report({}, rope={"status": status, "message": "the check ran out of its 30 s"}))
    assert entry["look_at"] == check_registry()["rope"].hint and entry["status"] == status


def test_a_root_cause_leads_with_the_checks_it_explains():
    entries = what_to_fix(split_root_cause())
    first = entries[0]
    assert first["kind"] == "root_cause" and first["checks"] == ["split_heads", "causality", "padding", "kv_cache"]
    assert first["headline"].startswith("Fix split_heads first: with a correct split_heads in place of yours, these 3 "
                                        "checks pass too")
    for cid in ("causality", "padding", "kv_cache"):
        assert TITLES[cid] in first["headline"], f"the root cause lists {cid} by its title"
    assert first["text"].startswith("It equals x.reshape(B, H, T, Dh)"), "the function check's own diagnosis"
    assert [e["checks"][0] for e in entries[1:]] == ["training"], "then the failures no root cause explains"
    assert sum(cid == "causality" for e in entries for cid in e["checks"]) == 1, "each check in one entry only"


def test_a_message_that_points_at_an_explained_check_says_where_that_comes_from():
    training = what_to_fix(split_root_cause())[1]
    assert training["text"].startswith("The training loss 0.0018 is suspiciously low")
    assert training["also"] == [f"{TITLES['causality']}, which this points to, passes with a correct split_heads "
                                "(see above)."]


def test_two_root_causes_are_two_entries_in_contract_order():
    r = split_root_cause()
    checks = {c["id"]: c for c in r["checks"]}
    checks["attention_sdpa"].update(status="fail", message=SCALE)
    checks["padding"]["root_cause"] = {"check": "attention_sdpa",
                                       "evidence": "with a correct attention in place of yours, padding passes"}
    entries = what_to_fix(r)
    assert [e["kind"] for e in entries[:2]] == ["root_cause", "root_cause"]
    assert entries[0]["checks"] == ["split_heads", "causality", "kv_cache"]
    assert entries[1]["checks"] == ["attention_sdpa", "padding"]
    assert entries[1]["headline"].startswith("Fix attention first: with a correct attention in place of yours, this "
                                             "check passes too: " + TITLES["padding"])


def test_remaining_failures_follow_in_contract_order():
    r = report({"training": "fail", "rope": "fail", "kv_cache": "fail"})
    assert [e["checks"][0] for e in what_to_fix(r)] == ["rope", "kv_cache", "training"]


def test_a_skipped_check_whose_dependency_is_not_listed_gives_its_reason():
    (entry,) = what_to_fix(report({}, evaluation={"status": "skipped", "message": SKIPPED_EVALUATION}))
    assert entry["kind"] == "skipped" and entry["headline"] == TITLES["evaluation"]
    assert entry["text"] == "Not run: it needs what training produces (training.run), which raised an error; see " \
                            "training."


def test_a_skipped_check_without_a_message_still_says_something():
    (entry,) = what_to_fix(report({}, evaluation={"status": "skipped", "message": ""}))
    assert entry["text"] == "Not run; no reason was recorded."


def test_a_skipped_check_joins_the_failure_it_waited_for():
    r = report({"training": "fail"}, evaluation={"status": "skipped", "message": SKIPPED_EVALUATION})
    (entry,) = what_to_fix(r)
    assert entry["checks"] == ["training", "evaluation"]
    assert entry["also"] == [f"Not run until this is fixed: {TITLES['evaluation']}, which needs the result of "
                             f"{TITLES['training']}."]


def test_no_entry_shows_an_id_where_a_title_exists():
    for r in (template(), scale_bug(), split_root_cause()):
        for entry in what_to_fix(r):
            assert entry["headline"] not in TITLES, f"{entry['headline']!r} is an id"


def test_grader_check_ends_with_the_same_list(capsys):
    from grader.cli.check import print_table
    print_table(template())
    out = capsys.readouterr().out
    assert "What to fix:\n  1. Write the parts that still raise NotImplementedError" in out, out
    assert "  2. " not in out.split("What to fix:")[1], "one reason, one entry"


def test_odd_fields_from_an_old_or_damaged_report_do_not_break_the_box():
    odd = report({}, rope={"status": "error", "message": None, "details": "not a list", "root_cause": "split_heads"})
    (entry,) = what_to_fix(odd)
    assert entry["checks"] == ["rope"] and entry["where"] == ""
