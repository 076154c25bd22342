"""Loading a rubric: the packaged capstone rubric, and a message that names each problem in a broken file."""
import re
import tomllib

import pytest

from grader.registry import check_registry
from rubric import DEFAULT_PATH, RubricError, load_rubric, parse_rubric
from tests.support.rubrics import SMALL_RUBRIC

REGISTRY = check_registry()

# A small valid rubric on registered checks; each case below breaks one thing in it.
GOOD = SMALL_RUBRIC  # tests/rubric/small_rubric.toml, shared by the rubric tests


def load_text(tmp_path, text, checks=REGISTRY):
    """Write text to a rubric file and load it."""
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    return load_rubric(path, checks=checks)


def test_small_rubric_loads(tmp_path):
    rubric = load_text(tmp_path, GOOD)
    assert rubric.version == "t.1" and rubric.total == 10
    assert [(c.id, c.weight) for c in rubric.categories] == [("correct", 6), ("report", 4)]
    assert rubric.item("grad").partial[0].per == "parameters" and rubric.item("written").kind == "manual"
    assert rubric.item("written").visibility == "hidden", "an item takes its category's visibility by default"


BROKEN = [
    # (what is changed, old, new, fragments the message must contain)
    ("unknown check id", 'check = "causality"', 'check = "causalty"',
     ['item "causal"', 'unknown check id "causalty"', 'did you mean "causality"']),
    ("category weights do not sum", "weight = 4", "weight = 5",
     ['category "report"', "item points sum to 4, not the category weight 5"]),
    ("categories do not sum to the total", "total = 10", "total = 12", ["category weights sum to 10, not 12"]),
    ("threshold on a metric the check does not report", 'metric = "without_gradient"', 'metric = "grad_norm"',
     ['item "grad"', 'partial[0]: threshold on metric "grad_norm", which check "gradient_path" does not report',
      "it reports: parameters, without_gradient, nonfinite, all_zero"]),
    ("per on a metric the check does not report", 'per = "parameters"', 'per = "params"',
     ['metric "params"', 'did you mean "parameters"']),
    ("full equals zero", "full = 0, zero = 1", "full = 1, zero = 1", ['"full" and "zero" are both 1']),
    ("a typo in a field name", "points = 2", "pionts = 2",
     ['unknown field "pionts" in an item (did you mean "points"?)', '"points" must be a number']),
    ("manual item without a description", 'description = "the report states the masks"', "",
     ['item "written"', 'a manual item needs a "description"']),
    ("manual item with a check", 'description = "the report states the masks"',
     'description = "x"\nkind = "manual"\ncheck = "rope"', ['a manual item takes no "check"']),
    ("bad visibility", 'visibility = "hidden"', 'visibility = "secret"',
     ['"visibility" must be one of visible, hidden']),
    ("duplicate item id", 'id = "causal"', 'id = "grad"', ['item "grad"', "item ids must be unique"]),
    ("negative points", "points = 2", "points = -2", ['"points" must be a number (0 or more), not -2']),
    ("boolean points", "points = 2", "points = true", ['"points" must be a number (0 or more), not True']),
    ("bad track", "full = 0, zero = 1", 'full = 0, zero = 1, track = "vision"', ['"track" must be one of reverse, lm']),
    ("fail_cap above 1", 'check = "gradient_path"', 'check = "gradient_path"\nfail_cap = 1.5',
     ['"fail_cap" must be a fraction from 0 to 1']),
    ("partial on a manual item", 'description = "the report states the masks"',
     'description = "x"\npartial = [{metric = "a", full = 1, zero = 0}]',
     ['"partial" applies to automatic items only']),
    ("bad policy", 'total = 10', 'total = 10\n[policy]\ncounts = "first"\nperiod = "month"',
     ['"counts" must be "best" or "last"', '"period" must be one of day, week, term']),
    ("deadline without a time", 'total = 10', 'total = 10\n[policy]\ndeadline = 2026-12-18',
     ['"deadline" needs a time of day too']),
    ("unknown timezone", 'total = 10', 'total = 10\n[policy]\ntimezone = "Mars/Olympus"',
     ['"timezone" must be an IANA name']),
]


@pytest.mark.parametrize("what, old, new, fragments", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_rubric_says_exactly_what_is_wrong(tmp_path, what, old, new, fragments):
    assert GOOD.count(old) == 1, f"test setup: {old!r} must occur once"
    with pytest.raises(RubricError) as info:
        load_text(tmp_path, GOOD.replace(old, new))
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{what}: expected {fragment!r} in the message:\n{message}"
    assert str(tmp_path / "rubric.toml") in message, "the message names the file"


WRONG_TYPES = [
    ('check = "causality"', 'check = ["causality"]', '"check" must be a check id'),
    ("points = 2", 'points = "2"', '"points" must be a number'),
    ("weight = 6", 'weight = "six"', '"weight" must be a number'),
    ('version = "t.1"', "version = 3", '"version" must be a non-empty string'),
    ("total = 10", "total = 10\ndecimals = 9", '"decimals" must be a whole number from 0 to 6'),
    ("total = 10", "total = 10\npolicy = 5", '"policy" must be a table'),
    ('metric = "without_gradient"', "metric = [1]", '"metric" must name one metric'),
    ('partial = [{metric = "without_gradient", per = "parameters", full = 0, zero = 1}]', "partial = 3",
     '"partial" must be a list of rules'),
    ('partial = [{metric = "without_gradient", per = "parameters", full = 0, zero = 1}]', 'partial = ["x"]',
     "must be a table with metric, full and zero"),
    ('id = "causal"', "id = 7", '"id" must be a string of letters'),
    ('kind = "manual"', 'kind = "robot"', '"kind" must be "auto" or "manual"'),
]


@pytest.mark.parametrize("old, new, fragment", WRONG_TYPES, ids=[w[1] for w in WRONG_TYPES])
def test_wrong_types_are_problems_not_crashes(tmp_path, old, new, fragment):
    text = GOOD.replace('description = "the report states the masks"',
                        'description = "the report states the masks"\nkind = "manual"')
    assert text.count(old) == 1, f"test setup: {old!r} must occur once"
    with pytest.raises(RubricError, match=re.escape(fragment)):
        load_text(tmp_path, text.replace(old, new))


def test_message_gives_the_line_of_the_item(tmp_path):
    text = GOOD.replace('check = "causality"', 'check = "nope"')
    with pytest.raises(RubricError) as info:
        load_text(tmp_path, text)
    line = next(n for n, l in enumerate(text.splitlines(), 1) if l == 'id = "causal"')
    assert f"line {line}, category \"correct\", item \"causal\"" in str(info.value), str(info.value)


def test_every_problem_is_reported_at_once(tmp_path):
    text = GOOD.replace('check = "causality"', 'check = "nope"').replace('"hidden"', '"secret"')
    with pytest.raises(RubricError) as info:
        load_text(tmp_path, text)
    assert len(info.value.problems) == 2 and str(info.value).startswith("2 problems"), str(info.value)
    assert "nope" in info.value.problems[0] and "secret" in info.value.problems[1], info.value.problems


@pytest.mark.parametrize("content, fragment", [
    ("version = [", "not valid TOML"),
    (b"\xff\xfe", "not UTF-8"),
    ("version = \"x\"", "no categories"),
])
def test_unreadable_files(tmp_path, content, fragment):
    path = tmp_path / "rubric.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(RubricError, match=fragment):
        load_rubric(path, checks=REGISTRY)


def test_missing_file(tmp_path):
    with pytest.raises(RubricError, match="cannot read the rubric file"):
        load_rubric(tmp_path / "absent.toml", checks=REGISTRY)


def test_version_falls_back_to_a_content_hash(tmp_path):
    rubric = load_text(tmp_path, GOOD.replace('version = "t.1"', ""))
    assert rubric.version.startswith("sha256:") and len(rubric.version) == 19, rubric.version
    other = load_text(tmp_path, GOOD.replace('version = "t.1"', "").replace("weight = 6", "weight = 6.0"))
    assert other.version != rubric.version, "different content, different fallback version"


def test_metric_of_a_check_that_does_not_exist_yet_fails_clearly(tmp_path):
    """A rubric may name a check before its module lands; until then loading names the missing check."""
    text = GOOD.replace('check = "causality"', 'check = "future_check"')
    with pytest.raises(RubricError, match='unknown check id "future_check"'):
        load_text(tmp_path, text)
    assert load_text(tmp_path, text, checks={**REGISTRY, "future_check": ()}), \
        "the same file loads once the registry has the check"


def packaged_checks() -> set:
    """The check ids the packaged rubric draws on, read from the file itself (not hard-coded here)."""
    doc = tomllib.loads(DEFAULT_PATH.read_text())
    return {i["check"] for c in doc["categories"] for i in c["items"] if "check" in i}


def test_packaged_rubric_loads():
    missing = sorted(packaged_checks() - set(REGISTRY))
    assert not missing, f"the packaged rubric names checks the registry does not have: {missing}"
    rubric = load_rubric(checks=REGISTRY)
    assert rubric.version and rubric.total == 100


def test_packaged_rubric_has_the_capstone_weights():
    doc = tomllib.loads(DEFAULT_PATH.read_text())
    weights = {c["id"]: c["weight"] for c in doc["categories"]}
    assert weights == {"specification": 15, "implementation": 20, "correctness": 20, "training": 15,
                       "evaluation": 15, "ablation": 10, "honesty": 5}, weights
    for cat in doc["categories"]:
        assert sum(i["points"] for i in cat["items"]) == cat["weight"], f"{cat['id']}: items must sum to the weight"
    manual = [i for c in doc["categories"] for i in c["items"] if "check" not in i]
    assert all(i.get("description") for i in manual), "every manual item tells the instructor what to look for"


def test_packaged_rubric_metrics_match_the_registry():
    """Every threshold in the packaged rubric names a metric its check declares."""
    doc = tomllib.loads(DEFAULT_PATH.read_text())
    for cat in doc["categories"]:
        for item in cat["items"]:
            if "check" in item:
                for rule in item.get("partial", []):
                    names = rule["metric"] if isinstance(rule["metric"], list) else [rule["metric"]]
                    for name in names + ([rule["per"]] if "per" in rule else []):
                        assert name in REGISTRY[item["check"]].metrics, f"{item['id']}: {name} is not a metric"


def test_packaged_rubric_is_installed_package_data():
    assert DEFAULT_PATH.is_file() and DEFAULT_PATH.parent.name == "rubric", DEFAULT_PATH


def test_parse_text_without_a_file():
    rubric = parse_rubric(GOOD, "inline", checks=REGISTRY)
    assert rubric.source == "inline" and len(rubric.digest) == 64
