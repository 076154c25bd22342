"""Collect every problem in a rubric file with where it is (line, category, item), then raise them together."""
import difflib
import re

from .model import RubricError

# `id = "x"` on its own line or inside an inline table; how a category or item is found in the text.
ID_LINE = re.compile(r"""(?:^|[{,\s])id\s*=\s*(["'])(.*?)\1""")


class Problems:
    """Problems found while reading one rubric file; instructors fix them all in one pass, so collect them all."""

    def __init__(self, source: str, text: str):
        self.source = source
        self.lines = text.splitlines()
        self.found: list[str] = []

    def add(self, message: str, category=None, item=None, key=None) -> None:
        """Record a problem at a category (id or '#n'), an item within it, or a top-level/policy key."""
        line = self.line_of(category, item) if category is not None else self.key_line(key)
        where = [self.source + (f", line {line}" if line else "")]
        if category is not None:
            where.append(f"category {quote(category)}")
        if item is not None:
            where.append(f"item {quote(item)}")
        self.found.append(", ".join(where) + ": " + message)

    def raise_if_any(self) -> None:
        """Raise one RubricError listing every problem, one per line."""
        if self.found:
            head = f"{len(self.found)} problem{'s' * (len(self.found) > 1)} in the rubric:\n  "
            raise RubricError(head + "\n  ".join(self.found), self.found)

    def line_of(self, category, item) -> int | None:
        """The 1-based line of the item's id (searched after its category's), else the category's; None if unknown."""
        line, start = None, 0
        for wanted in (category, item):
            if wanted is None or str(wanted).startswith("#"):
                break
            found = next((n for n in range(start, len(self.lines)) if self.id_at(n) == wanted), None)
            if found is None:
                break
            line, start = found + 1, found
        return line

    def id_at(self, n: int) -> str | None:
        """The id set on line n (0-based), if any."""
        m = ID_LINE.search(self.lines[n])
        return m.group(2) if m else None

    def key_line(self, key) -> int | None:
        """The first line that sets this top-level or policy key."""
        if not key:
            return None
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        return next((n + 1 for n, line in enumerate(self.lines) if pattern.match(line)), None)


def quote(value) -> str:
    """'#3' stays bare (a position), ids are quoted."""
    return str(value) if str(value).startswith("#") else f'"{value}"'


def suggest(word: str, choices) -> str:
    """' (did you mean "x"?)' when a choice is close, else ''."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def unknown_keys(table: dict, allowed, what: str) -> list[str]:
    """A message per key that the format does not define: typos would otherwise be silently ignored."""
    return [f'unknown field "{k}" in {what}{suggest(k, allowed)}; allowed: {", ".join(sorted(allowed))}'
            for k in table if k not in allowed]
