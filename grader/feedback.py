"""What to fix: the result page's list of fixes (and the CLI's), built from the checks' own diagnoses.

Order: one entry per root cause first (a contract function whose correct version, substituted by the judge, makes
model checks pass: grader/rootcause.py), then one entry per reason that several checks share (the template's
NotImplementedError, an import error, a missing TRACK), then each remaining failure in contract order. An entry says
what its check found in the check's own words; the registry's HINT is added only where the check said nothing
specific (a bare comparison, a timeout, a crash). A skipped check joins the entry of the check it waited for, or, on
its own, gives its reason. Pure: a report dict in, JSON-ready dicts out (no flask, no torch).
"""
import re

from .registry import check_registry

NOT_FAILED = ("pass",)
# statuses whose message is the harness's, not a diagnosis: the registry's HINT says where to look
UNSPECIFIC = ("timeout", "oom", "crash")
MORE = re.compile(r"\s*\(and \d+ more problems?\)\s*$")
# the comparison part of a message (grader/compare.py's describe): what follows it, if anything, is the diagnosis
MEASURED = re.compile(r"the largest difference is .+? \(got [^,()]+, expected [^()]+\)")
NOT_WRITTEN = re.compile(r"raised NotImplementedError\b:?\s*(?P<what>.*)$")
FUNCTIONS = re.compile(r"with a correct (?P<names>.+?) in place of yours")
WAITS_FOR = re.compile(r"needs what (?P<owner>\w+) produces")
TRACE_WHERE = re.compile(r"^(?P<where>line \d+, in [\w.<>]+)")


def title(check_id: str) -> str:
    """A check's title as students see it (its id when the registry does not know it)."""
    check = check_registry().get(check_id)
    return check.title if check else check_id


def hint_of(check_id: str) -> str:
    check = check_registry().get(check_id)
    return check.hint if check else ""


def sentence(text: str) -> str:
    """Capitalised, ending with a full stop (or the ? or ! it has)."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


def listing(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def diagnosis(check: dict) -> dict:
    """What a failing check found, in its own words: {"text", "where", "specific"}.

    A comparison followed by a diagnosis (" The weights equal softmax(q·kᵀ) without the 1/√Dh scale: ...") gives the
    diagnosis as the text and the comparison as where; an error gives its message and the student's own traceback line
    where it raised; a bare comparison, a timeout or a crash is not specific (the registry's HINT is added).
    """
    status = str(check.get("status"))
    message = MORE.sub("", str(check.get("message") or "")).strip()
    details = [str(d) for d in check.get("details") or [] if str(d).strip()] \
        if isinstance(check.get("details"), list) else []
    if status == "error":
        return {"text": sentence(message), "where": details[-1] if details else "", "specific": True}
    if status in UNSPECIFIC or not message:
        return {"text": sentence(message or f"the check ended with {status}"), "where": "", "specific": False}
    found = MEASURED.search(message)
    if found:
        rest = message[found.end():].strip(" .;:")
        if rest:
            return {"text": sentence(rest), "where": message[:found.end()], "specific": True}
        return {"text": sentence(message), "where": "", "specific": False}
    return {"text": sentence(message), "where": "", "specific": True}


def entry(kind: str, checks: list, status: str, headline: str, found: dict | None = None, look_at: str = "") -> dict:
    found = found or {"text": "", "where": ""}
    return {"kind": kind, "checks": list(checks), "status": status, "headline": headline, "text": found["text"],
            "where": found["where"], "look_at": look_at, "also": [], "functions": ""}


def check_entry(check: dict) -> dict:
    """A failure in its check's own words, under the check's title."""
    cid, status = str(check.get("id")), str(check.get("status"))
    found = diagnosis(check)
    return entry("check", [cid], status, title(cid), found, "" if found["specific"] else hint_of(cid))


def root_cause_entries(failing: dict) -> tuple[list, set]:
    """One entry per contract function check named as a root cause, leading with the function's own diagnosis."""
    explained: dict[str, list] = {}
    for cid, c in failing.items():
        cause = c.get("root_cause")
        if isinstance(cause, dict) and isinstance(cause.get("check"), str):
            explained.setdefault(cause["check"], []).append(cid)
    entries, covered = [], set()
    for fid in sorted(explained, key=order):
        ids = explained[fid]
        found = FUNCTIONS.search(str(failing[ids[0]]["root_cause"].get("evidence") or ""))
        names = found["names"] if found else fid
        own = failing.get(fid)
        headline = (f"Fix {names} first: with a correct {names} in place of yours, "
                    f"{'this check passes' if len(ids) == 1 else f'these {len(ids)} checks pass'} too: "
                    f"{listing(title(i) for i in ids)}")
        e = check_entry(own) if own else entry("check", [], "fail", "")
        e.update(kind="root_cause", checks=([fid] if own else []) + ids, headline=headline,
                 status=str(own.get("status")) if own else "fail", functions=names)
        entries.append(e)
        covered.update(e["checks"])
    return entries, covered


def reason(check: dict) -> str | None:
    """What several checks may share: NotImplementedError (whatever its text) or the same error message."""
    if check.get("status") == "skipped":
        return None
    message = MORE.sub("", str(check.get("message") or "")).strip()
    if check.get("status") == "error" and NOT_WRITTEN.search(message):
        return "NotImplementedError"
    return message or None


def shared_entry(key: str, checks: list) -> dict:
    """One entry for checks that fail for one reason."""
    ids = [str(c.get("id")) for c in checks]
    wheres = list(dict.fromkeys(m["where"] for c in checks for m in [TRACE_WHERE.match(diagnosis(c)["where"])] if m))
    if key == "NotImplementedError":
        placeholders = list(dict.fromkeys(NOT_WRITTEN.search(str(c.get("message")))["what"].strip() or "?"
                                          for c in checks))
        headline = f"Write the parts that still raise NotImplementedError ({'; '.join(placeholders)})"
        text = (f"Replace each raise NotImplementedError with your own code: every check that reached one "
                f"({len(ids)} of them) stopped there.")
    else:
        headline = sentence(key)
        text = f"{len(ids)} checks fail for this one reason: {listing(title(i) for i in ids)}."
    return entry("shared", ids, str(checks[0].get("status")), headline, {"text": text, "where": "; ".join(wheres)})


def order(check_id: str) -> int:
    check = check_registry().get(check_id)
    return check.order if check else 10 ** 6


def mentioned(text: str, ids) -> list:
    """The check ids a message names, as whole words."""
    return [i for i in ids if re.search(rf"\b{re.escape(i)}\b", text)]


def what_to_fix(report: dict | None) -> list[dict]:
    """The "What to fix" entries of a report, in the order to fix them (empty when every check passed).

    Each entry: kind (root_cause, shared, check, skipped), checks (ids it covers, the first one leads), status (its
    lead check's), headline (what to fix, with titles, never ids), text (the check's diagnosis), where (the
    comparison or the traceback line it comes from), look_at (the registry's HINT, only where the check said nothing
    specific), also (further notes: checks not run until this one passes, a root cause upstream) and functions (a
    root cause's contract functions, as the evidence names them).
    """
    checks = [c for c in (report or {}).get("checks", []) if isinstance(c, dict) and c.get("id")]
    failing = {str(c["id"]): c for c in checks if c.get("status") not in NOT_FAILED}
    entries, covered = root_cause_entries(failing)
    causes = {cid: e["functions"] for e in entries for cid in e["checks"] if cid not in failing or
              failing[cid].get("root_cause")}  # an explained check -> the functions that explain it
    rest = [c for cid, c in failing.items() if cid not in covered]
    groups: dict[str, list] = {}
    for c in rest:
        key = reason(c)
        if key is not None:
            groups.setdefault(key, []).append(c)
    later = []
    for key, members in groups.items():
        if len(members) > 1:
            later.append(shared_entry(key, members))
            covered.update(str(c["id"]) for c in members)
    skipped = []
    for c in rest:
        cid = str(c["id"])
        if cid in covered:
            continue
        if c.get("status") == "skipped":
            skipped.append(c)
            continue
        e = check_entry(c)
        upstream: dict[str, list] = {}  # training's message points at causality, which split_heads explains
        for named in mentioned(e["text"], causes):
            upstream.setdefault(causes[named], []).append(title(named))
        for names, titles in upstream.items():
            e["also"].append(f"{listing(titles)}, which this points to, {'passes' if len(titles) == 1 else 'pass'} "
                             f"with a correct {names} (see above).")
        later.append(e)
    later.sort(key=lambda e: order(e["checks"][0]))
    entries += later
    for c in skipped:  # a skipped check joins the entry of the check it waited for; otherwise it says why on its own
        cid, message = str(c["id"]), str(c.get("message") or "")
        waited = WAITS_FOR.search(message)
        owner = next((e for e in entries if waited and waited["owner"] in e["checks"]), None)
        if owner is not None:
            owner["checks"].append(cid)
            owner["also"].append(f"Not run until this is fixed: {title(cid)}, which needs the result of "
                                 f"{title(waited['owner'])}.")
        else:
            entries.append(entry("skipped", [cid], "skipped", title(cid),
                                 {"text": sentence(message or "not run; no reason was recorded"), "where": ""}))
    return entries
