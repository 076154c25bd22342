"""Batch work for instructors as plain functions: collect files, name their students, upload, resume, follow.

Resume is decided by the server, not by a local state file: before uploading, the client lists the
assignment's submissions and skips every file whose sha256 that student already has (any earlier
submission, not only the latest, so a batch run again never puts an older file back on top of a newer
one the student sent since). The server is the one place that knows what arrived, including an upload
that committed just before the client was killed, and the same run works from any machine.
"""
import csv
import hashlib
import io
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rubric import gradescope_results
from rubric.export import number_cell, text_cell

from ..roster import RosterError, numbered, parse_roster
from .http import ApiError, Client, ClientError

DEFAULT_PATTERN = r"^(?P<student>[^_.\s]+)"  # alice.py, alice_transformer.py -> alice
FINAL = ("done", "failed")
MANIFEST_FILE = ("file", "path", "filename")
MANIFEST_STUDENT = ("student", "username")


class BatchError(Exception):
    """Bad input to a batch (a missing file, a bad manifest or roster, a pattern that does not match): exit 2."""


@dataclass
class Item:
    """One file to upload and the student it belongs to."""
    path: Path
    student: str | None
    line: int | None = None  # the manifest line it came from
    data: bytes = field(default=b"", repr=False)
    sha256: str = ""

    def load(self) -> "Item":
        try:
            self.data = self.path.read_bytes()
        except OSError as exc:
            raise BatchError(f"cannot read {self.path}: {exc.strerror}") from None
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        return self


@dataclass
class Outcome:
    """What happened to one item: uploaded, identical (the server already had it as latest), skipped, refused."""
    item: Item
    status: str
    submission: dict | None = None
    message: str = ""

    def to_json(self) -> dict:
        sub = self.submission or {}
        return {"file": str(self.item.path), "student": self.item.student, "sha256": self.item.sha256,
                "outcome": self.status, "submission": sub.get("id"), "message": self.message}


# ---------------------------------------------------------------- which files, whose

def collect_files(paths, glob: str = "*.py") -> list[Path]:
    """The files named, and those matching glob under the directories named (recursively), sorted, unique."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found += sorted(f for f in p.rglob(glob) if f.is_file() and not any(
                part.startswith(".") for part in f.relative_to(p).parts))
        elif p.is_file():
            found.append(p)
        elif p.exists():
            raise BatchError(f"not a file or directory: {p}")
        else:
            raise BatchError(f"no such file or directory: {p}")
    unique, seen = [], set()
    for f in found:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def compile_pattern(pattern: str) -> re.Pattern:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise BatchError(f"--pattern {pattern!r} is not a regular expression: {exc}") from None
    if "student" not in regex.groupindex:
        raise BatchError(f"--pattern {pattern!r} has no (?P<student>...) group")
    return regex


def by_pattern(files, pattern: str = DEFAULT_PATTERN) -> list[Item]:
    """Each file's student from its name: the pattern's `student` group; two files for one student is an error."""
    regex = compile_pattern(pattern)
    items, owner = [], {}
    for f in files:
        m = regex.search(f.name)
        student = (m.group("student") or "").strip() if m else ""
        if not student:
            raise BatchError(f"{f}: the file name does not match --pattern {pattern!r}; rename it or use --manifest")
        if student in owner:
            raise BatchError(f"{f}: student {student} already has {owner[student]} in this batch "
                             f"(one file per student; use --manifest to choose)")
        owner[student] = f
        items.append(Item(f, student))
    return items


def read_manifest(path, files=None) -> list[Item]:
    """The manifest CSV's rows (columns file and student; files relative to the manifest's folder), validated.

    With `files` (the PATHS given), each of them must be in the manifest and only those rows are kept.
    Any problem is a BatchError naming the manifest's line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is not part of the header
    except FileNotFoundError:
        raise BatchError(f"no such manifest: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"cannot read manifest {path}: {getattr(exc, 'strerror', None) or exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in reader.fieldnames or []]
    if not header:
        raise BatchError(f"{path}: empty; expected a header line with the columns file,student")
    reader.fieldnames = header
    file_col = next((c for c in MANIFEST_FILE if c in header), None)
    student_col = next((c for c in MANIFEST_STUDENT if c in header), None)
    missing = [name for name, col in (("file", file_col), ("student", student_col)) if col is None]
    if missing:
        raise BatchError(f"{path} line 1: missing column {' and '.join(missing)} (the header has: "
                         f"{', '.join(header)}); expected file,student")
    items, students, seen_files = [], {}, {}
    for line, row in numbered(reader, lambda line, exc: BatchError(f"{path} line {line}: {exc}")):
        name, student = (row.get(file_col) or "").strip(), (row.get(student_col) or "").strip()
        if not name and not student:
            continue  # a blank line
        if not name or not student:
            raise BatchError(f"{path} line {line}: empty {'file' if not name else 'student'}")
        f = Path(name) if Path(name).is_absolute() else path.parent / name
        if not f.is_file():
            raise BatchError(f"{path} line {line}: no such file {name} (relative to {path.parent})")
        key = f.resolve()
        if key in seen_files:
            raise BatchError(f"{path} line {line}: file {name} is already listed on line {seen_files[key]}")
        if student in students:
            raise BatchError(f"{path} line {line}: student {student} already has a file on line {students[student]}")
        seen_files[key], students[student] = line, line
        items.append(Item(f, student, line))
    if not items:
        raise BatchError(f"{path}: no rows after the header")
    if files is not None:
        listed = {item.path.resolve(): item for item in items}
        unknown = [f for f in files if f.resolve() not in listed]
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise BatchError(f"{unknown[0]} is not in the manifest {path}{more}")
        items = [listed[f.resolve()] for f in files]
    return items


def read_roster(path) -> list[dict]:
    """A roster CSV (username[,name,email]) as rows, by the rules of grader.roster; BatchError names the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BatchError(f"no such roster file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"cannot read roster {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return parse_roster(text)
    except RosterError as exc:
        raise BatchError(f"{path} {exc}") from None


# ---------------------------------------------------------------- resume and upload

def uploaded_shas(client: Client, slug: str) -> dict[str, dict]:
    """student -> {sha256: the newest submission id with that file} for the assignment (a student: their own)."""
    have: dict[str, dict] = {}
    for sub in client.submissions(slug):
        shas = have.setdefault(sub["student"], {})
        shas[sub["sha256"]] = max(shas.get(sub["sha256"], 0), sub["id"])
    return have


def plan(items, have: dict[str, dict]) -> tuple[list, list]:
    """(to upload, already on the server) for items loaded with their sha256."""
    todo, skipped = [], []
    for item in items:
        (skipped if item.sha256 in have.get(item.student, ()) else todo).append(item)
    return todo, skipped


def upload_one(client: Client, slug: str, item: Item, as_instructor: bool) -> Outcome:
    """Upload one item; a refusal (422, 413, 429, an unknown student...) is an outcome, anything else raises."""
    try:
        sub = client.upload(slug, item.data, item.path.name, item.student if as_instructor else None)
    except ApiError as exc:
        return Outcome(item, "refused", None, exc.message)
    return Outcome(item, "uploaded" if sub.get("queued") else "identical", sub, sub.get("message", ""))


def upload_all(client: Client, slug: str, items, as_instructor: bool = True, jobs: int = 4, on_done=None):
    """Upload items with `jobs` threads; on_done(outcome) as each finishes. Unreachable/AuthFailed stop the batch."""
    outcomes = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(upload_one, client, slug, item, as_instructor) for item in items]
        try:
            for future in futures:
                outcome = future.result()
                outcomes.append(outcome)
                if on_done:
                    on_done(outcome)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return outcomes


# ---------------------------------------------------------------- follow grading

def counts(subs) -> dict:
    out = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    for sub in subs:
        out[sub["status"]] = out.get(sub["status"], 0) + 1
    return out


def follow(client: Client, slug: str, ids, on_change=None, poll_s: float = 1.0, timeout_s: float | None = None,
           clock=time.monotonic, sleep=time.sleep) -> dict[int, dict]:
    """Poll until every submission in ids is done or failed; on_change(subs) when the statuses change.

    Each round lists the assignment's queued and running submissions (two calls, whatever the batch size)
    and asks individually only about those that left both lists, to confirm where they went.
    Raises TimeoutError (the submissions as last seen in its args) after timeout_s.
    """
    ids = list(ids)
    subs: dict[int, dict] = {i: client.submission(i) for i in ids} if len(ids) <= 5 else {}
    if not subs:
        subs = {s["id"]: s for s in client.submissions(slug) if s["id"] in set(ids)}
        for i in ids:
            if i not in subs:
                subs[i] = client.submission(i)
    last = None
    deadline = None if timeout_s is None else clock() + timeout_s
    while True:
        state = tuple(sorted((i, s["status"], (s.get("progress") or {}).get("check"), s.get("queue_position"))
                             for i, s in subs.items()))
        if state != last and on_change:
            on_change(subs)
        last = state
        pending = [i for i, s in subs.items() if s["status"] not in FINAL]
        if not pending:
            return subs
        if deadline is not None and clock() > deadline:
            raise TimeoutError(subs)
        sleep(poll_s)
        if len(pending) <= 5:
            for i in pending:
                subs[i] = client.submission(i)
            continue
        wanted, active = set(pending), {}
        for status in ("queued", "running"):
            for s in client.submissions(slug, status=status):
                if s["id"] in wanted:
                    active[s["id"]] = s
        for i in pending:
            subs[i] = active[i] if i in active else client.submission(i)


# ---------------------------------------------------------------- results and exports

def latest_per_student(subs) -> list[dict]:
    """Each student's newest submission, in the order students first appear."""
    latest: dict[str, dict] = {}
    for sub in subs:
        if sub["student"] not in latest or sub["id"] > latest[sub["student"]]["id"]:
            latest[sub["student"]] = sub
    return sorted(latest.values(), key=lambda s: (s["student"], s["id"]))


def has_result(sub: dict) -> bool:
    """Whether a submission can have a result: graded, or regrading with an earlier request's result."""
    return sub["status"] == "done" or sub.get("request", 1) > 1


def fetch_results(client: Client, subs, jobs: int = 4) -> list[dict]:
    """[{"submission": sub, "result": result or None}] in the order of subs (only graded ones are asked for)."""
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda s: client.result(s["id"]) if has_result(s) else None, subs))
    return [{"submission": s, "result": r} for s, r in zip(subs, results)]


def check_statuses(result: dict | None) -> dict:
    return {c["id"]: c["status"] for c in (result or {}).get("report", {}).get("checks", [])}


def results_csv(rows) -> str:
    """A row per submission: who, which file, status, points, then one column per check with its status."""
    checks: list[str] = []
    for row in rows:
        for cid in check_statuses(row["result"]):
            if cid not in checks:
                checks.append(cid)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["submission", "student", "filename", "sha256", "status", "request", "total", "max",
                     "rubric_version", *checks])
    for row in rows:
        sub, result = row["submission"], row["result"] or {}
        score = result.get("score") or {}
        statuses = check_statuses(result)
        writer.writerow([sub["id"], text_cell(sub["student"]), text_cell(sub["filename"]), sub["sha256"],
                         sub["status"], result.get("request", ""), number_cell(score.get("total")),
                         number_cell(score.get("max")), text_cell(score.get("rubric_version")),
                         *(statuses.get(c, "") for c in checks)])
    return out.getvalue()


def results_json(rows) -> str:
    return json.dumps([{"submission": r["submission"], "result": r["result"]} for r in rows], indent=2,
                      sort_keys=True)


def write_gradescope(client: Client, slug: str, directory) -> tuple[list, list]:
    """DIR/<student>/results.json (Gradescope's format) for each student whose counted submission is scored.

    Returns (written paths, [(student, why not)]).
    """
    directory = Path(directory)
    written, missing = [], []
    for row in client.export(slug):
        student = row["student"]
        if row.get("submission") is None:
            n = row.get("submissions") or 0
            missing.append((student, f"none of {n} submission(s) graded yet" if n else "no submission"))
            continue
        result = client.result(row["submission"]) if row.get("status") == "done" else None
        score = (result or {}).get("score")
        if result is None or not score:
            missing.append((student, f"submission {row['submission']} is not scored yet ({row.get('status')})"))
            continue
        folder = directory / safe_name(student)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "results.json"
        target.write_text(json.dumps(gradescope_results(result["report"], score), indent=2, sort_keys=True) + "\n")
        written.append(target)
    return written, missing


def safe_name(student: str) -> str:
    """A student id as a folder name: no separators, no leading dots."""
    name = re.sub(r"[^\w.@+-]", "_", student).lstrip(".")
    return name or "_"


def import_roster(client: Client, rows) -> tuple[list, list]:
    """Add the roster's students that are not on the server's roster yet: (added, already there)."""
    known = {s["username"] for s in client.students()}
    added, existing = [], []
    for row in rows:
        if row["username"] in known:
            existing.append(row["username"])
            continue
        try:
            client.add_student(row["username"], row["name"], row["email"])
        except ApiError as exc:
            if exc.status != 409:  # 409: added by someone else meanwhile
                raise ClientError(f"student {row['username']}: {exc.message}", exc.status, exc.code) from None
            existing.append(row["username"])
            continue
        added.append(row["username"])
    return added, existing
