"""The roster CSV, read one way everywhere (the instructor page, `grader roster import`, the client's batch).

Standard library only: the client imports it without flask or sqlalchemy.
"""
import csv
import io
import re

COLUMNS = ("username", "name", "email")
# A roster id goes into URLs, file names (exports) and sign-in forms: ASCII letters, digits and . _ - only.
USERNAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
# An address an LMS or a mail client takes: one @, no spaces, and a dot in the domain (local@domain.tld).
EMAIL = re.compile(r"[^@\s\"(),:;<>\[\]\\]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,63}")
MAX_NAME = MAX_EMAIL = 200  # the columns' sizes


class RosterError(ValueError):
    """A roster refused as a whole: the message names each bad line ("line 3: ..."), `problems` lists them."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


def username_problem(username: str) -> str | None:
    """Why `username` cannot be a roster id, or None."""
    if not username:
        return "empty username"
    if len(username) > 64:
        return f"username {username[:20]!r}... is {len(username)} characters; at most 64"
    if not USERNAME.fullmatch(username):
        bad = ", ".join(repr(c) for c in dict.fromkeys(c for c in username if not USERNAME.fullmatch(c)))
        return (f"username {username!r} has {bad}: use only letters a-z/A-Z, digits and . _ - "
                "(it appears in URLs and file names)")
    return None


def email_problem(email: str) -> str | None:
    """Why `email` is not an address (local@domain.tld), or None; an empty e-mail is allowed (it is optional)."""
    if not email:
        return None
    if len(email) > MAX_EMAIL:
        return f"e-mail is {len(email)} characters; at most {MAX_EMAIL}"
    if not EMAIL.fullmatch(email):
        return f"e-mail {email!r} is not an address like name@example.edu"
    return None


def student_problems(username: str, name: str = "", email: str = "") -> list[str]:
    """Every reason a student's fields are refused (empty when they are fine): the one check for every way in."""
    problems = [p for p in (username_problem(username), email_problem(email)) if p]
    if len(name) > MAX_NAME:
        problems.append(f"name is {len(name)} characters; at most {MAX_NAME}")
    return problems


def parse_roster(text: str) -> list[dict]:
    """Rows {"username", "name", "email", "line"} of a CSV whose header names username[,name,email].

    Header names are matched without case or surrounding spaces, other columns are ignored, a byte-order mark and
    blank lines are skipped. One bad row refuses the whole roster (nothing is imported, so a fixed file can simply
    be imported again), and every bad row is named with its line and why: a row without a username (but something
    else), a username that is not 1-64 of letters, digits, ".", "_", "-", an e-mail that is not an address, a
    username seen before. A line the csv module cannot read stops the reading there.
    """
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
    header = [h.strip().lower() for h in _fieldnames(reader)]
    if "username" not in header:
        raise RosterError(f"line 1: missing column username (the header has: {', '.join(header) or 'nothing'}); "
                          "the CSV needs a header row with a 'username' column, optionally 'name' and 'email'")
    reader.fieldnames = header
    rows, seen, problems = [], {}, []
    for line, row in numbered(reader):
        username = (row.get("username") or "").strip()
        if not username:
            if any((v or "").strip() for v in row.values() if isinstance(v, str)):
                problems.append(f"line {line}: empty username")
            continue  # a line of empty cells (",,")
        name, email = (row.get("name") or "").strip(), (row.get("email") or "").strip()
        problems += [f"line {line}: {p}" for p in student_problems(username, name, email)]
        if username in seen:
            problems.append(f"line {line}: username {username} is already on line {seen[username]}")
        seen.setdefault(username, line)
        rows.append({"username": username, "name": name, "email": email, "line": line})
    if len(problems) == 1:
        raise RosterError(problems[0], problems)
    if problems:
        raise RosterError(f"{len(problems)} problems, nothing imported: " + "; ".join(problems), problems)
    return rows


def _fieldnames(reader: csv.DictReader) -> list[str]:
    try:
        return reader.fieldnames or []
    except csv.Error as exc:
        raise RosterError(f"line 1: {exc}") from None


def numbered(reader: csv.DictReader, refuse=lambda line, exc: RosterError(f"line {line}: {exc}")):
    """(line, row) pairs; the line is where the row ends (its only line unless a quoted cell holds a newline).

    An unreadable line raises refuse(line, csv.Error): the caller's error, naming the line its way.
    """
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise refuse(reader.line_num, exc) from None
        yield reader.line_num, row
