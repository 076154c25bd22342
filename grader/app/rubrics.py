"""Rubric versions in the store: a rubric file is validated when it is loaded and kept whole in the `rubrics` table
(the same text is one row), so an assignment pinned to it is always scored by exactly that text."""
import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..registry import check_registry
from .models import RubricVersion
from .store import NotFound, StoreError

_parsed: dict = {}  # digest -> Rubric: a stored text never changes, so it is parsed once per process


def parse(text: str | bytes, source: str = "the rubric"):
    """The validated Rubric, or StoreError with every problem (each names its line)."""
    from rubric import RubricError, parse_rubric
    try:
        return parse_rubric(text, source, checks=check_registry())
    except RubricError as exc:
        raise StoreError(str(exc)) from None


def store_rubric(s: Session, text: str | bytes, filename: str = "", instructor=None) -> RubricVersion:
    """Validate a rubric file and keep it: the same text (by sha256) is the row already stored."""
    raw = text.encode() if isinstance(text, str) else bytes(text)
    rubric = parse(raw, filename or "the rubric")
    digest = hashlib.sha256(raw).hexdigest()
    row = s.scalar(select(RubricVersion).where(RubricVersion.digest == digest))
    if row is None:
        row = RubricVersion(version=rubric.version[:64], digest=digest, title=rubric.title[:200],
                            filename=(filename or "")[:255], text=raw.decode("utf-8"),
                            instructor_id=instructor.id if instructor is not None else None)
        s.add(row)
        s.flush()
    _parsed.setdefault(digest, rubric)
    return row


def get_rubric_version(s: Session, rubric_id: int) -> RubricVersion:
    """The stored rubric with this id, or NotFound."""
    row = s.get(RubricVersion, rubric_id) if isinstance(rubric_id, int) and not isinstance(rubric_id, bool) else None
    if row is None:
        raise NotFound(f"no stored rubric with id {rubric_id!r}")
    return row


def list_rubric_versions(s: Session) -> list[RubricVersion]:
    return list(s.scalars(select(RubricVersion).order_by(RubricVersion.id)))


def loaded(row: RubricVersion):
    """The Rubric of a stored row (parsed once per process, keyed by its digest)."""
    if row.digest not in _parsed:
        _parsed[row.digest] = parse(row.text, row.filename or f"rubric {row.version}")
    return _parsed[row.digest]


def rubric_json(row: RubricVersion | None) -> dict | None:
    """What the API says of a pinned rubric (None: the packaged one)."""
    if row is None:
        return None
    return {"id": row.id, "version": row.version, "digest": row.digest, "title": row.title, "filename": row.filename,
            "created_at": row.created_at.isoformat(timespec="seconds") + "Z" if row.created_at else None}
