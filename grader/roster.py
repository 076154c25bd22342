"""The roster CSV, read one way everywhere (the instructor page, `grader roster import`, the client's batch).

Standard library only: the client imports it without flask or sqlalchemy.
"""
import csv
import io

COLUMNS = ("username", "name", "email")


class RosterError(ValueError):
    """A roster refused as a whole; the message starts with the line it is about ("line 3: ...")."""


def parse_roster(text: str) -> list[dict]:
    """Rows {"username", "name", "email", "line"} of a CSV whose header names username[,name,email].

    Header names are matched without case or surrounding spaces, other columns are ignored, a byte-order mark and
    blank lines are skipped. A row without a username (but something else), a username seen before, or a line the
    csv module cannot read refuses the whole roster, naming the line.
    """
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
    header = [h.strip().lower() for h in _fieldnames(reader)]
    if "username" not in header:
        raise RosterError(f"line 1: missing column username (the header has: {', '.join(header) or 'nothing'}); "
                          "the CSV needs a header row with a 'username' column, optionally 'name' and 'email'")
    reader.fieldnames = header
    rows, seen = [], {}
    for line, row in numbered(reader):
        username = (row.get("username") or "").strip()
        if not username:
            if any((v or "").strip() for v in row.values() if isinstance(v, str)):
                raise RosterError(f"line {line}: empty username")
            continue  # a line of empty cells (",,")
        if username in seen:
            raise RosterError(f"line {line}: username {username} is already on line {seen[username]}")
        seen[username] = line
        rows.append({"username": username, "name": (row.get("name") or "").strip(),
                     "email": (row.get("email") or "").strip(), "line": line})
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
