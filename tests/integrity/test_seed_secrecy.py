"""The grading seed never enters the sandbox: every seed in job.json is Context.public_seed(label), one-way."""
import json
import re

import pytest
import torch

from grader.checks import CHECKS
from grader.checks.base import Context
from grader.judge import Options, grade_bytes, write_job
from grader.sandbox import Limits
from grader.sandbox.base import new_job_dir
from grader.source import read_source
from .integrity_support import BACKENDS, LIMITS, ROOT, reference, require_backend

SECRET = 8_271_553_904_117  # above 2**31, so its reduction is a second value to look for
LEAKS = {SECRET, SECRET % 2 ** 31, SECRET % 2 ** 32, SECRET % 2 ** 63}


def numbers(value):
    """Every int in a JSON value, iteratively."""
    stack, found = [value], []
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def job_for(track: str, check) -> tuple[dict, str]:
    """job.json as the judge writes it for one check of one reference, and its raw text."""
    source = read_source((ROOT / "submissions" / f"reference_{track}.py").read_bytes())
    ctx = Context(SECRET, source)
    stages = check.plan(ctx)
    job_dir = new_job_dir()
    try:
        write_job(job_dir, source.text, stages, Options(seed=SECRET))
        text = (job_dir / "job.json").read_text()
    finally:
        import shutil
        shutil.rmtree(job_dir, ignore_errors=True)
    return json.loads(text), text


@pytest.mark.parametrize("track", ["lm", "reverse"])
@pytest.mark.parametrize("check", CHECKS, ids=[c.ID for c in CHECKS])
def test_job_json_holds_no_form_of_the_secret_seed(check, track):
    job, text = job_for(track, check)
    leaked = sorted(set(numbers(job)) & LEAKS)
    assert not leaked, f"{check.ID}: job.json holds {leaked}, a form of the grading seed"
    for value in LEAKS:
        assert str(value) not in text, f"{check.ID}: job.json spells {value}"


def test_public_seeds_are_one_way_and_distinct():
    source = read_source((ROOT / "submissions" / "reference_lm.py").read_bytes())
    ctx, other = Context(SECRET, source), Context(SECRET + 1, source)
    seeds = {ctx.public_seed(label) for label in ("model", "checkpoint_reload.other", "training", "evaluation")}
    assert len(seeds) == 4 and all(0 <= s < 2 ** 31 for s in seeds)
    assert ctx.public_seed("model") == ctx.public_seed("model"), "deterministic: the same grading replays"
    assert ctx.public_seed("model") != other.public_seed("model")
    assert ctx.model_params()["seed"] == ctx.public_seed("model") not in LEAKS


SMALL_SECRET = 4_242  # a grading seed small enough for a student to search for
SEARCHED = range(10_000)


def search_seed(drawn: torch.Tensor) -> int | None:
    """The attack: the seed in SEARCHED whose generator's first normal draws are these values (float64, as sent)."""
    flat = drawn.flatten()
    for seed in SEARCHED:
        # the whole size: CPU draws of 16 or more values are made in blocks, so a shorter draw starts differently
        first = torch.randn(flat.numel(), generator=torch.Generator().manual_seed(seed), dtype=flat.dtype)
        if torch.equal(first[:8], flat[:8]):
            return seed
    return None


@pytest.mark.parametrize("check_id,name", [("split_heads", "x"), ("attention_sdpa", "q")])
def test_the_inputs_sent_to_the_sandbox_do_not_lead_back_to_a_small_seed(check_id, name):
    """A student who reads the first random input of a check and searches seeds for a generator that draws it finds
    nothing: the check's generator is seeded through sha256 (Context.generator). Without that step the same search
    finds the seed, as the control shows, and with it every held-out draw."""
    source = read_source((ROOT / "submissions" / "reference_lm.py").read_bytes())
    check = next(c for c in CHECKS if c.ID == check_id)
    sent = check.plan(Context(SMALL_SECRET, source))[0].inputs[name]
    assert sent.dtype == torch.float64 and sent.numel() >= 8
    unhashed = torch.randn(sent.shape, generator=torch.Generator().manual_seed(SMALL_SECRET), dtype=sent.dtype)
    assert search_seed(unhashed) == SMALL_SECRET, "the search itself finds a seed drawn without the one-way step"
    assert search_seed(sent) is None, f"{check_id}'s {name} leads back to the grading seed"


# The attack, appended to the reference: build_model (which every model check, the training and the evaluation call
# in the sandbox) reads job.json and every other file of its job, the environment and each command line it can see,
# and raises with every number of seven digits or more; the list ends with "; end", so a message cut short shows.
HUNT = r"""
import os as _os
import re as _re


def build_model(config):
    numbers, where = set(), []

    def take(text, source):
        found = {int(n) for n in _re.findall(r"\d{7,}", text)}
        if found:
            where.append(source)
        numbers.update(found)

    here, job = _os.getcwd(), None  # the job's root: the nearest directory above the stage's holding job.json
    while here != "/" and job is None:
        job = here if _os.path.exists(_os.path.join(here, "job.json")) else None
        here = _os.path.dirname(here)
    for root, _, files in _os.walk(job or "/nonexistent"):
        for name in files:
            if not name.endswith(".py"):  # the harness's code and the submission's: public anyway
                try:
                    with open(_os.path.join(root, name), "rb") as fh:
                        take(fh.read(1 << 20).decode(errors="replace"), name)
                except OSError:
                    pass
    take(repr(dict(_os.environ)), "environ")
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                take(fh.read().decode(errors="replace"), "cmdline")
        except OSError:
            pass
    raise RuntimeError(f"found in {sorted(set(where))}: {sorted(numbers)}; end")
"""
HUNTED = ("gradient_path", "checkpoint_reload", "training")
FOUND = re.compile(r"found in \[(.*?)\]: \[([\d, ]*)\]; end")


def hunted(backend: str) -> tuple[dict, set]:
    """The hunt graded under SECRET: check id -> (where it found numbers, the numbers), and the stages' public
    seeds."""
    text = reference("lm") + HUNT
    options = Options(seed=SECRET, only=HUNTED, limits=Limits(**LIMITS), backend=backend)
    report = grade_bytes(text.encode(), "seed_hunt.py", options)
    ctx = Context(SECRET, read_source(text.encode()))
    public = {ctx.public_seed(label) for label in ("model", "checkpoint_reload.other", "training", "evaluation")}
    hunts = {}
    for check in report["checks"]:
        match = FOUND.search(check["message"])
        if match:
            hunts[check["id"]] = (match.group(1), {int(n) for n in re.findall(r"\d+", match.group(2))})
    assert set(hunts) == set(HUNTED), {c["id"]: (c["status"], c["message"][:300]) for c in report["checks"]}
    return hunts, public


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sandboxed_submission_that_reads_its_whole_job_finds_only_public_seeds(backend):
    """Graded under a secret seed, the hunt finds the stages' seeds in job.json (so it looked where they are) and no
    form of the secret anywhere it can read."""
    require_backend(backend)
    hunts, public = hunted(backend)
    for check_id, (where, found) in hunts.items():
        assert "job.json" in where and found & public, f"{check_id}: the hunt found no stage seed: {where} {found}"
        assert not found & LEAKS, f"{check_id}: the sandbox could read a form of the grading seed: {found & LEAKS}"


def test_the_hunt_finds_the_seed_when_a_stage_carries_it(monkeypatch):
    """The control: with the model's public seed made the secret's 31-bit reduction, the same hunt finds it."""
    honest = Context.public_seed
    monkeypatch.setattr(Context, "public_seed",
                        lambda self, label: self.seed % 2 ** 31 if label == "model" else honest(self, label))
    hunts, _ = hunted("process")
    assert all(SECRET % 2 ** 31 in found for _, found in hunts.values()), hunts
