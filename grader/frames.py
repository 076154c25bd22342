"""Schemas for what comes back from the sandbox: every frame field is checked here before the judge uses it.

Everything in a frame is the student's claim (their code can write frames of its own), so nothing is
trusted for its shape: values are walked iteratively with hard limits (depth, sizes, finite numbers),
then matched against the field's schema. A problem is a sentence naming the limit, never an exception.
"""
import math
import re

MAX_DEPTH = 8  # nesting of a facts value (a dict of dicts of lists ... counts each level)
MAX_STRING = 2000  # characters of any one string
MAX_ITEMS = 4096  # items of any one list or dict
MAX_NODES = 20000  # values in one whole facts dict
MAX_INT = 2 ** 63

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")  # an exception's class name
DOTTED = re.compile(r"[A-Za-z0-9_.]{1,300}")  # a parameter's qualified name
VERSION = re.compile(r"[0-9A-Za-z.+_-]{1,40}")  # torch.__version__, sys.version's first word
LABEL = re.compile(r"[A-Za-z0-9_.:]{1,120}")  # a recorded call: torch.nn.functional.x, aten.x.default


def walk_problem(value, what: str, depth: int = MAX_DEPTH, root: str = "facts") -> str | None:
    """None when value is plain JSON data within the limits, else which limit it broke and where (iterative)."""
    stack, nodes = [(value, 1, root)], 0
    while stack:
        item, level, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"{what} exceeded {MAX_NODES} values"
        if level > depth:
            return f"{what} exceeded depth {depth} (at {path})"
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if abs(item) >= MAX_INT:
                return f"{what} holds an integer beyond 64 bits at {path}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{what} holds a non-finite number ({item}) at {path}"
        elif isinstance(item, str):
            if len(item) > MAX_STRING:
                return f"{what} holds a string of {len(item)} characters at {path}, over {MAX_STRING}"
        elif isinstance(item, list):
            if len(item) > MAX_ITEMS:
                return f"{what} holds a list of {len(item)} items at {path}, over {MAX_ITEMS}"
            stack.extend((v, level + 1, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, dict):
            if len(item) > MAX_ITEMS:
                return f"{what} holds a dict of {len(item)} keys at {path}, over {MAX_ITEMS}"
            for key, v in item.items():
                if not isinstance(key, str) or len(key) > 100:
                    return f"{what} holds a key that is not a short string at {path}"
                stack.append((v, level + 1, f"{path}.{key}"))
        else:
            return f"{what} holds a {type(item).__name__} at {path}, not JSON data"
    return None


# ---- schemas: a type, a pattern, a list of a schema, or a dict of named fields -------------------------------

class Str:
    """A string of at most `limit` characters, matching `pattern` when one is given."""

    def __init__(self, limit: int = MAX_STRING, pattern: re.Pattern | None = None, none: bool = False):
        self.limit, self.pattern, self.none = limit, pattern, none

    def problem(self, value, path):
        if value is None and self.none:
            return None
        if not isinstance(value, str):
            return f"{path} is {type(value).__name__}, not a string"
        if len(value) > self.limit:
            return f"{path} is {len(value)} characters long, over {self.limit}"
        if self.pattern is not None and not self.pattern.fullmatch(value):
            return f"{path} is not of the expected form"
        return None


class Num:
    """A finite number (int or float; bool is not a number here) within [low, high]."""

    def __init__(self, low: float = -1e18, high: float = 1e18, integer: bool = False):
        self.low, self.high, self.integer = low, high, integer

    def problem(self, value, path):
        kinds = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"{path} is {type(value).__name__}, not {'an integer' if self.integer else 'a number'}"
        if not math.isfinite(value) or not self.low <= value <= self.high:
            return f"{path} is {value}, outside [{self.low:g}, {self.high:g}]"
        return None


class List:
    """A list of at most `limit` items, each matching `item`."""

    def __init__(self, item, limit: int = MAX_ITEMS):
        self.item, self.limit = item, limit

    def problem(self, value, path):
        if not isinstance(value, list):
            return f"{path} is {type(value).__name__}, not a list"
        if len(value) > self.limit:
            return f"{path} has {len(value)} items, over {self.limit}"
        for i, v in enumerate(value):
            found = self.item.problem(v, f"{path}[{i}]")
            if found:
                return found
        return None


class Dict:
    """A dict with the known keys (each optional) and, unless open, nothing else."""

    def __init__(self, open_: bool = False, **fields):
        self.fields, self.open = fields, open_

    def problem(self, value, path):
        if not isinstance(value, dict):
            return f"{path} is {type(value).__name__}, not a dict"
        extra = sorted(str(k)[:40] for k in value if k not in self.fields)
        if extra and not self.open:
            return f"{path} has keys the probe never returns: {', '.join(extra[:5])}"
        for key, schema in self.fields.items():
            if key in value:
                found = schema.problem(value[key], f"{path}.{key}")
                if found:
                    return found
        return None


RAISED = Dict(raised=Str(100, IDENT, none=True), message=Str(300))
# What each probe of grader/harness/probes.py returns as facts. A probe not listed returns none (training and
# evaluation: the judge measures everything itself), so any fact from it is refused.
FACTS = {
    "split_heads": Dict(bad_width=RAISED),
    "attention": Dict(empty_row=RAISED),
    "rope": Dict(odd_width=RAISED),
    "gradient": Dict(trainable=List(Str(300, DOTTED)), no_grad=List(Str(300, DOTTED))),
    "shortcuts": Dict(calls=List(Str(120, LABEL), 64)),
}
EMPTY = Dict()

# The hello frame: what the report's "environment" shows.
HELLO = Dict(open_=True, type=Str(10), torch=Str(40, VERSION), python=Str(40, VERSION), threads=Num(1, 4096, integer=True),
             import_s=Num(0, 1e5), pid=Num(0, 2 ** 31, integer=True))


def facts_problem(probe: str, facts) -> str | None:
    """None when a stage's facts are within the limits and the probe's schema, else the first problem."""
    found = walk_problem(facts, "the stage's facts")
    if found:
        return found
    return FACTS.get(probe, EMPTY).problem(facts, "facts")


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def plain(text: str, limit: int) -> str:
    """Text from the sandbox made safe to show: control and bidi characters replaced, cut to limit characters."""
    text = CONTROL.sub("?", text)
    return text if len(text) <= limit else text[:limit] + " …"


STAGE_STATUSES = ("ok", "error", "violation", "timeout", "oom", "crash", "skipped")
# The stage_end fields the judge reads (others are ignored, never read); facts are checked per probe. A traceback
# line quotes the student's source line, which may be long: it is cut to 300 characters when shown.
STAGE_END = {"stage": Str(200), "status": Str(20), "message": Str(MAX_STRING), "phase": Str(20),
             "traceback": List(Str(1 << 16), 16), "stdout": Str(MAX_STRING * 2),
             "stdout_bytes": Num(0, 2 ** 62, integer=True), "duration_s": Num(0, 1e7)}


def stage_end_problem(header: dict, probe: str) -> str | None:
    """None when a stage_end frame's fields and facts are all within their schema, else the first problem."""
    for key, schema in STAGE_END.items():
        if key in header:
            found = schema.problem(header[key], f"the stage's {key}")
            if found:
                return found
    if header.get("status") not in STAGE_STATUSES:
        return f"the stage's status is not one of {', '.join(STAGE_STATUSES)}"
    return facts_problem(probe, header.get("facts", {}))


def hello_fields(header) -> dict:
    """The hello frame's known fields that match their schema (each on its own: one odd field drops only itself)."""
    if not isinstance(header, dict):
        return {}
    return {k: header[k] for k, schema in HELLO.fields.items() if k in header and not schema.problem(header[k], k)}
