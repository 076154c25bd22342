"""Read a rubric file, validate it against the check registry it is given, and build a Rubric."""
import hashlib
import tomllib
from collections.abc import Mapping
from pathlib import Path

from .items import build_category, close, number
from .model import Rubric, RubricError
from .policy import parse_policy
from .problems import Problems, unknown_keys

DEFAULT_PATH = Path(__file__).with_name("capstone.toml")
TOP_KEYS = {"version", "title", "total", "decimals", "policy", "categories"}


def load_rubric(path=None, *, checks: Mapping) -> Rubric:
    """Load and validate a rubric file (default: the packaged capstone rubric); RubricError says what is wrong.

    checks: the check registry the rubric may refer to, grader.registry.check_registry() for the real checks.
    """
    path = Path(path) if path else DEFAULT_PATH
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RubricError(f"{path}: cannot read the rubric file ({exc.strerror or exc})") from None
    return parse_rubric(data, str(path), checks=checks)


def metric_names(checks: Mapping) -> dict[str, tuple]:
    """check id -> the metric names it may report, from registry records (their .metrics) or plain tuples of names."""
    return {cid: tuple(getattr(check, "metrics", check)) for cid, check in checks.items()}


def parse_rubric(data: bytes | str, source: str = "<rubric>", *, checks: Mapping) -> Rubric:
    """Validate rubric text against `checks` (check id -> its registry record, or plain metric names)."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        text = raw.decode("utf-8")
        doc = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise RubricError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise RubricError(f"{source}: not valid TOML: {exc}") from None
    problems = Problems(source, text)
    rubric = build(doc, problems, metric_names(checks), hashlib.sha256(raw).hexdigest(), source)
    problems.raise_if_any()
    return rubric


def build(doc: dict, p: Problems, checks: dict, digest: str, source: str) -> Rubric:
    """The Rubric from a parsed document, recording every problem in p."""
    for msg in unknown_keys(doc, TOP_KEYS, "the top level"):
        p.add(msg)
    version = doc.get("version", f"sha256:{digest[:12]}")
    if not isinstance(version, str) or not version.strip():
        p.add('"version" must be a non-empty string, e.g. "2026-11-29.1"', key="version")
        version = f"sha256:{digest[:12]}"
    total = doc.get("total", 100)
    if not number(total) or total <= 0:
        p.add(f'"total" must be a positive number, not {total!r}', key="total")
        total = 100
    decimals = doc.get("decimals", 2)
    if not isinstance(decimals, int) or isinstance(decimals, bool) or not 0 <= decimals <= 6:
        p.add(f'"decimals" must be a whole number from 0 to 6, not {decimals!r}', key="decimals")
        decimals = 2
    policy_doc = doc.get("policy", {})
    if not isinstance(policy_doc, dict):
        p.add('"policy" must be a table ([policy])', key="policy")
        policy_doc = {}
    policy = parse_policy(policy_doc, lambda msg, key=None: p.add(msg, key=key))
    raw_categories = doc.get("categories")
    if not isinstance(raw_categories, list) or not raw_categories:
        p.add("the rubric has no categories: add [[categories]] tables, each with its [[categories.items]]")
        raw_categories = []
    categories = [c for n, raw in enumerate(raw_categories) if (c := build_category(raw, n, p, checks))]
    check_unique(categories, p)
    weights = sum(c.weight for c in categories)
    if categories and len(categories) == len(raw_categories) and not close(weights, total):
        listed = " + ".join(f"{c.id} {c.weight:g}" for c in categories)
        p.add(f"category weights sum to {weights:g}, not {total:g}: {listed}", key="total")
    title = doc.get("title", "")
    if not isinstance(title, str):
        p.add('"title" must be a string', key="title")
        title = ""
    return Rubric(version=version.strip(), digest=digest, title=title, total=float(total), decimals=decimals,
                  categories=tuple(categories), policy=policy, source=source)


def check_unique(categories: list, p: Problems) -> None:
    """Category ids are unique, and item ids are unique across the rubric (manual grades are keyed by item id)."""
    seen = set()
    for c in categories:
        if c.id in seen:
            p.add("this category id is used twice", category=c.id)
        seen.add(c.id)
    owner = {}
    for c in categories:
        for i in c.items:
            if i.id in owner:
                p.add(f'item id also used in category "{owner[i.id]}": item ids must be unique', c.id, i.id)
            owner.setdefault(i.id, c.id)
