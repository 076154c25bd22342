"""The judge: plan the stages, run them in a sandbox, and decide every verdict outside the student's process."""
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import CONTRACT_VERSION, __version__
from .checks import ALL_IDS, CHECKS
from .checks.base import Context
from .configs import DEFAULT_SEED
from .frames import STAGE_END, hello_fields, plain, stage_end_problem
from .harness.tensorbytes import encode_tensors
from .live import VERDICT, Live
from .results import CHECK_STATUSES, CheckResult, StageOutcome
from .rootcause import attribute
from .sandbox import Limits, Sandbox, make_sandbox
from .source import Rejected, bytecode, read_source
from .tensors import BadTensors, decode_tensors


@dataclass
class Options:
    """How to grade: seed, which checks, limits and sandbox backend."""
    seed: int = DEFAULT_SEED
    only: tuple = ()
    skip: tuple = ()
    limits: Limits = field(default_factory=Limits)
    backend: str = "process"
    steps: dict = field(default_factory=dict)  # track -> training steps (default: grader.configs.TRAINING)
    # The plain checks in one child of the sandbox, a child per check only after one hangs or crashes there
    # (grader/harness/main.py); False: a child per check from the start (tests compare the two).
    one_child: bool = True


def select_checks(only=(), skip=()) -> list:
    """The check modules to run, in contract order; ValueError names an unknown id."""
    for name in (*only, *skip):
        if name not in ALL_IDS:
            raise ValueError(f"unknown check id {name!r}; known: {', '.join(ALL_IDS)}")
    return [c for c in CHECKS if (not only or c.ID in only) and c.ID not in skip]


def grade_file(path, options: Options | None = None, sandbox: Sandbox | None = None, on_event=None) -> dict:
    """Grade one file on disk."""
    path = Path(path)
    return grade_bytes(path.read_bytes(), path.name, options, sandbox, on_event)


def grade_bytes(data: bytes, name: str = "submission.py", options: Options | None = None,
                sandbox: Sandbox | None = None, on_event=None) -> dict:
    """Grade a submission's bytes and return the report (a JSON-ready dict)."""
    options = options or Options()
    checks = select_checks(options.only, options.skip)
    started = time.monotonic()
    report = {"grader": {"version": __version__, "contract": CONTRACT_VERSION},
              "submission": {"name": name, "bytes": len(data)}, "seed": options.seed}
    try:
        source = read_source(data)
    except Rejected as exc:
        report["checks"] = [CheckResult(c.ID, "error", f"the submission cannot be graded: {exc}").to_dict() for c in checks]
        for check in report["checks"] if on_event else ():
            on_event({"type": VERDICT, "check": check})
        return finish(report, started)
    report["submission"].update(sha256=source.sha256, track=source.track)
    ctx = Context(options.seed, source, steps=dict(options.steps))
    results, plans = {}, {}
    ctx.verdicts = results  # filled in contract order: training's and evaluation's messages blame only failed checks
    for check in checks:
        if check.NEEDS_TRACK and not ctx.track:
            results[check.ID] = CheckResult(check.ID, "error", source.track_problem)
        else:
            plans[check.ID] = check.plan(ctx)
    # a stage two checks share (the training run) runs once
    stages = list({s.key: s for plan in plans.values() for s in plan}.values())
    # each check decided (into results) as soon as its stages have ended, and with on_event sent once final; without,
    # the decisions still overlap the sandbox's run (issue 19: the judge's verdicts off the latency path)
    live = Live(ctx, checks, plans, results, decide, outcome_from, on_event or ignore)
    outcomes, run_info = run_stages(source.text, stages, options, sandbox, live) if stages else ({}, {})
    if live:
        live.close()
    for check in checks:
        if check.ID in plans and check.ID not in results:  # decided early: the very same result stays
            results[check.ID] = decide(check, ctx, plans[check.ID], outcomes, set(plans))
    # a model-level failure that a correct contract function removes names it (one more sandbox, only when needed)
    rerun = lambda more: run_in_sandbox(source.text, more, options,  # noqa: E731
                                        (sandbox or make_sandbox(options.backend)).prepare(options.limits), None)[0]
    diagnosis_s = attribute(ctx, checks, plans, results, outcomes, options.limits.stage_s, decide, rerun)
    if live:
        live.finish(results)
    report["checks"] = [results[c.ID].to_dict() for c in checks]
    report.update(run_info)
    if diagnosis_s is not None:
        report.setdefault("timings", {})["root_cause_s"] = diagnosis_s
    return finish(report, started)


def ignore(event: dict) -> None:
    """on_event for a grading nobody watches."""


def finish(report: dict, started: float) -> dict:
    """Add the status counts and the total time."""
    counts = {s: 0 for s in CHECK_STATUSES}
    for check in report["checks"]:
        counts[check["status"]] += 1
    report["summary"] = {s: n for s, n in counts.items() if n}
    report.setdefault("timings", {})["total_s"] = round(time.monotonic() - started, 3)
    return report


def write_job(job_dir: Path, text: str, stages, options: Options, waits: dict | None = None) -> None:
    """Lay the job into a prepared job directory: the submission (and its bytecode), one safetensors file of inputs
    per stage, job.json. waits: stage key -> seconds it may spend waiting for the training run it is fed from,
    added to its budget."""
    waits = waits or {}
    written = [job_dir / "submission.py", job_dir / "job.json"]
    written[0].write_text(text, encoding="utf-8")
    code = bytecode(text)
    if code is not None:
        written.append(job_dir / "submission.code")  # the harness's CODE_FILE (grader/harness/main.py)
        written[-1].write_bytes(code)
    for stage in stages:
        path = job_dir / "inputs" / f"{stage.key}.safetensors"
        path.write_bytes(encode_tensors(stage.inputs))  # views of one another (rows of a batch) are fine
        written.append(path)
    job = {"stages": [{"key": s.key, "probe": s.probe, "params": s.params, "input_from": s.input_from,
                       "interactive": s.trainer is not None or s.feed is not None,
                       "budget_s": stage_budget(s, options) + waits.get(s.key, 0.0),
                       "mem_mb": options.limits.stage_mem_mb} for s in stages],
           "max_output_mb": options.limits.output_mb, "one_child": bool(options.one_child)}
    written[1].write_text(json.dumps(job))
    for path in written:
        os.chmod(path, 0o644)  # the sandbox uid must read the job; only scratch/ is its own


def stage_budget(stage, options: Options) -> float:
    """A stage's own budget, else the per-check default."""
    return stage.budget_s if stage.budget_s is not None else options.limits.stage_s


def run_stages(text: str, stages, options: Options, sandbox: Sandbox | None, on_event):
    """Run the stages in one sandbox and, alongside it once the judge's training has begun, those that must run
    fresh (the checks of that training, the held-out evaluation) in a second one; return outcomes by stage key and
    the runs' environment and timings."""
    sandbox = sandbox or make_sandbox(options.backend)
    first = [s for s in stages if not s.fresh]
    later = [s for s in stages if s.fresh]
    # The first sandbox is the one started ahead (a worker's); the fresh one starts now, so that its start and
    # torch import overlap the first sandbox's stages.
    prepared = sandbox.prepare(options.limits) if first else None
    fresh = None
    try:
        fresh = Fresh(text, later, first, options, sandbox.prepare(options.limits), on_event) if later else None
        try:
            outcomes, info = run_in_sandbox(text, first, options, prepared, on_event) if first else ({}, {})
        finally:
            prepared = None
            for stage in first:
                if stage.trainer is not None:
                    stage.trainer.end()  # a fresh stage still waiting for a step of it stops waiting
        if fresh is not None:
            more, fresh_info = fresh.result(outcomes)
            outcomes.update(more)
            if fresh_info:
                info = merge_runs(info, fresh_info) if info else fresh_info
    finally:
        if prepared is not None:
            prepared.close()
        if fresh is not None:
            fresh.abandon()
    return outcomes, info


class Fresh:
    """The fresh sandbox's run, in a thread of its own: its go comes once the first training run it is fed from
    has begun (its stages wait for the steps they check meanwhile), or never, when that run never began."""

    def __init__(self, text: str, stages, first, options: Options, prepared, on_event):
        self.stages, self.prepared = stages, prepared
        runs = [s.feed.run for s in stages if s.feed is not None]
        self.trigger = min(runs, key=first.index) if runs else None
        # A fed stage may wait for its run's steps: its budget grows by the first sandbox's budgets from the
        # trigger's start to that run's end (what a slow but honest first sandbox may take to get there).
        ends, total = {}, 0.0
        for stage in first[first.index(self.trigger):] if self.trigger is not None else ():
            total += stage_budget(stage, options)
            ends[stage.key] = total
        self.waits = {s.key: ends.get(s.feed.run.key, 0.0) for s in stages if s.feed is not None}
        self.args = (text, stages, options, on_event)
        self.lock = threading.Lock()  # who takes the prepared sandbox: this run, or abandon()
        self.found, self.error, self.ended = None, None, None
        self.thread = threading.Thread(target=self._run, name="fresh-sandbox", daemon=True)
        self.thread.start()

    def _take(self):
        """The prepared sandbox, to whoever asks first (None after that)."""
        with self.lock:
            prepared, self.prepared = self.prepared, None
        return prepared

    def _run(self) -> None:
        try:
            if self.trigger is not None and not self.trigger.trainer.wait_until(None):
                return  # the training never began: nothing to check, and the judge reports each stage skipped
            prepared = self._take()
            if prepared is None:
                return  # abandoned: the judge's thread failed
            text, stages, options, on_event = self.args
            self.found = run_in_sandbox(text, stages, options, prepared, on_event, self.waits)
            self.ended = time.monotonic()
        except BaseException as exc:  # raised again in the judge's thread, as it was when the run was there
            self.error = exc

    def result(self, outcomes: dict) -> tuple[dict, dict]:
        """Wait for the run; its outcomes (a stage whose run did not finish: skipped) and report part."""
        first_ended = time.monotonic()
        self.thread.join()
        if self.error is not None:
            raise self.error
        more, info = self.found or ({}, {})
        known = {**outcomes, **more}
        for stage in self.stages:
            if stage.key not in more or unfinished(stage, known):
                more[stage.key] = unfed(stage)
        if info:
            # how long the fresh sandbox went on after the first had ended: the part of it on the grading's path
            info.setdefault("timings", {})["after_s"] = round(max(0.0, (self.ended or first_ended) - first_ended), 3)
        return more, info

    def abandon(self) -> None:
        """Close the fresh sandbox if its run never began (the judge's thread failed first, or it was skipped)."""
        prepared = self._take()
        if prepared is not None:
            prepared.close()


def unfed(stage) -> StageOutcome:
    """A fresh stage's outcome when the training run it needs did not finish: skipped, naming that run."""
    run = stage.needs[0] if stage.needs else stage.key
    return StageOutcome(stage.key, "skipped", f"needs {run}, which did not finish")


def unfinished(stage, outcomes: dict) -> bool:
    """A fresh stage fed from a training run that did not finish (or whose outcome is not in yet)."""
    if stage.feed is None:
        return False
    run = stage.feed.run
    outcome = outcomes.get(run.key)
    return outcome is None or outcome.status != "ok" or not run.trainer.done


def run_in_sandbox(text: str, stages, options: Options, prepared, on_event, waits: dict | None = None):
    """Run stages in a prepared sandbox, the judge answering its interactive stages' questions as they come."""
    waits = waits or {}
    try:
        write_job(prepared.job_dir, text, stages, options, waits)
        talkers = {s.key: s.trainer or s.feed for s in stages if s.trainer is not None or s.feed is not None}
        if talkers:
            prepared.talk(lambda header, blob, reply: answer(talkers, header, blob, reply))
        wall = options.limits.startup_s + sum(stage_budget(s, options) + waits.get(s.key, 0.0) for s in stages) + 10
        run = prepared.run(wall, on_frame(on_event, stages))
    finally:
        prepared.close()
    read = on_event.read() if isinstance(on_event, Live) else {}
    return collect(run, stages, read), run_summary(run, options)


def on_frame(on_event, stages):
    """The sandbox's on_frame(header, blob): a Live decides checks as their stages end; a plain on_event sees the
    headers only."""
    if isinstance(on_event, Live):
        return on_event.watch(stages)
    return (lambda header, blob=b"": header.get("type") == VERDICT or on_event(header)) if on_event else None


def answer(talkers: dict, header: dict, blob: bytes, reply) -> None:
    """Route a question to the trainer or feed of its stage; one from any other stage is answered with stop."""
    talker = talkers.get(header.get("stage")) if isinstance(header.get("stage"), str) else None
    if talker is None:
        reply({"kind": "stop"})
    else:
        talker.on_ask(header, blob, reply)


def merge_runs(first: dict, second: dict) -> dict:
    """One report part for two sandbox runs: the first's environment, the layers both had (weak if either was),
    both runs' timings."""
    merged = dict(first)
    one, two = first.get("sandbox", {}), second.get("sandbox", {})
    sandbox = dict(one, layers=[layer for layer in one.get("layers", []) if layer in two.get("layers", [])],
                   weak=bool(one.get("weak", True) or two.get("weak", True)))
    missing = list(dict.fromkeys([*one.get("missing", []), *two.get("missing", [])]))
    if missing:
        sandbox["missing"] = missing
    merged["sandbox"] = sandbox
    timings = dict(first.get("timings", {}))
    timings["stages"] = {**timings.get("stages", {}), **second.get("timings", {}).get("stages", {})}
    timings["fresh_sandbox_s"] = second.get("timings", {}).get("sandbox_s")
    timings["fresh_after_s"] = second.get("timings", {}).get("after_s")  # of it, after the first sandbox ended
    merged["timings"] = timings
    return merged


def collect(run, stages, read: dict | None = None) -> dict:
    """StageOutcomes from the frames; a stage with no frame is 'missing' with the reason. read: the outcomes a Live
    already read from these very frames (the first stage_end of each stage, by outcome_from), not read again."""
    read = read or {}
    outcomes, started = {}, set()
    probes = {s.key: s.probe for s in stages}
    for header, blob in run.frames:
        stage = header.get("stage")
        if not isinstance(stage, str) or stage not in probes:
            continue  # a stage the judge did not ask for (or not even a name): nothing of it is read
        if header.get("type") == "stage_start":
            started.add(stage)
        if header.get("type") == "stage_end" and stage not in outcomes:
            outcomes[stage] = read[stage] if stage in read else outcome_from(header, blob, probes[stage])
    for stage in stages:
        if stage.key in outcomes:
            continue
        if stage.key in started and run.killed:
            # the check that was running when the limit struck is charged with it
            outcomes[stage.key] = StageOutcome(stage.key, run.killed_kind or "crash", run.killed)
        elif stage.key in started:
            outcomes[stage.key] = StageOutcome(stage.key, "missing", f"the sandbox died during this check "
                                                                    f"({ended_how(run)})")
        else:
            why = f": {run.killed}" if run.killed else f" ({ended_how(run)})"
            outcomes[stage.key] = StageOutcome(stage.key, "missing", f"the sandbox stopped before this check started{why}")
    return outcomes


def ended_how(run) -> str:
    """The exit code, or (a run returned at the harness's done frame, exit not waited for) that it said done."""
    return f"exit code {run.exit_code}" if run.exit_code is not None else "it said done before this check ended"


def _text(value, limit=2000) -> str:
    return plain(value, limit) if isinstance(value, str) else ""


def outcome_from(header: dict, blob: bytes, probe: str = "") -> StageOutcome:
    """One stage_end frame, every field checked against its schema (grader.frames) before it is trusted."""
    problem = stage_end_problem(header, probe)
    if problem:  # the student's process sent it: that check's failure, never the judge's exception
        return StageOutcome(stage=header["stage"], status="invalid", message=f"the sandbox's result for this check "
                            f"was refused: {problem}; nothing it claimed was used")
    tb = header.get("traceback", [])
    outcome = StageOutcome(
        stage=header["stage"], status=header["status"], message=_text(header.get("message"), 1000),
        facts=header.get("facts", {}), traceback=[_text(t, 300) for t in tb[-8:]],
        phase=_text(header.get("phase"), 20), stdout=_text(header.get("stdout")),
        duration_s=float(header.get("duration_s", 0.0)), stdout_bytes=int(header.get("stdout_bytes", 0)))
    if outcome.status == "ok":
        try:
            outcome.tensors = decode_tensors(blob)
        except BadTensors as exc:
            outcome.status, outcome.message = "crash", f"the check returned malformed tensors: {exc}"
    return outcome


def decide(check, ctx: Context, plan, outcomes: dict, graded: set = frozenset()) -> CheckResult:
    """A stage that did not finish decides the status; otherwise the check's own verdict does.

    graded: the ids of this grading's checks; a failed stage of one of them (not this one) makes this check skipped.
    """
    # a fresh stage ran alongside its training run, which then did not finish: skipped, as if it had not run
    mine = {s.key: unfed(s) if unfinished(s, outcomes) else outcomes[s.key] for s in plan}
    duration = round(sum(o.duration_s for o in mine.values()), 4)
    stdout = printed_excerpt(mine.values())
    for stage in plan:
        outcome = mine[stage.key]
        if outcome.status == "ok":
            continue
        if outcome.status == "skipped" and stage.needs and stage.needs[0].split(".")[0] == check.ID:
            continue  # the check's own training run did not finish: its verdict says why
        if outcome.status == "skipped" or stage.key.split(".")[0] in graded - {check.ID}:
            # What failed is another check's stage (evaluation's training run): that check reports the failure.
            source = (stage.input_from or (stage.needs[0] if stage.needs else stage.key)) \
                if outcome.status == "skipped" else stage.key
            result = skipped(check.ID, source, outcomes)
        else:
            result = stage_failure(check.ID, outcome)
        break
    else:
        mark = len(ctx.asides)  # the asides this verdict records, and no earlier check's (live.py decides in turn)
        try:
            result = check.verdict(ctx, {s.key: s for s in plan}, mine)
        except Exception as exc:  # odd tensors (wrong dtype, rank) that the comparison could not take
            result = CheckResult(check.ID, "fail", f"the returned tensors could not be compared with the reference "
                                                    f"({type(exc).__name__}: {str(exc)[:300]})")
        said = [result.message, *map(str, result.details)]
        result.asides = [dict(a) for a in ctx.asides[mark:] if any(a["told"] in text for text in said)]
    result.duration_s, result.stdout = duration, stdout
    return result


STDOUT_SHOWN = 2000  # characters of what a check printed that its result keeps


def printed_excerpt(outcomes) -> str:
    """The start of what the check's stages printed, saying so when there was more (the harness caps it too)."""
    text = "".join(o.stdout for o in outcomes)
    printed = sum(o.stdout_bytes for o in outcomes)
    shown = text[:STDOUT_SHOWN]
    if printed > len(shown.encode("utf-8", "replace")):
        shown += f"\n[output truncated: the check printed {printed} bytes; the first {len(shown)} characters are shown]"
    return shown


def skipped(check_id: str, source: str, outcomes: dict) -> CheckResult:
    """A check that needs another check's stage (evaluation needs training's model), which did not succeed."""
    before = outcomes.get(source)
    owner = source.split(".")[0]
    # "ok" with a dependant skipped: the stage ended, but the judge's training run in it did not reach its end
    why = UNFINISHED.get(before.status, "did not finish") if before is not None else "was not run"
    told, blind = f"which {why}; see {owner}", "which did not finish"
    result = CheckResult(check_id, "skipped", f"not run: it needs what {owner} produces ({source}), {told}")
    # how the source ended is its check's outcome: a student who may not read that check reads only the blind form
    result.asides = [{"checks": [owner], "told": told, "blind": blind}]
    return result


UNFINISHED = {"error": "raised an error", "violation": "broke the contract", "timeout": "ran out of time",
              "oom": "ran out of memory", "crash": "crashed", "missing": "never finished (the sandbox stopped)",
              "skipped": "was not run",
              "invalid": "sent results that broke their schema"}


def stage_failure(check_id: str, outcome: StageOutcome) -> CheckResult:
    """The check's result when its stage raised, broke the contract, timed out, ran out of memory or crashed."""
    if outcome.status == "violation":
        return CheckResult(check_id, "fail", outcome.message)
    if outcome.status == "error":
        where = "importing the submission" if outcome.phase == "import" else "your code"
        return CheckResult(check_id, "error", f"{where} raised {outcome.message}", details=outcome.traceback)
    if outcome.status == "missing":
        return CheckResult(check_id, "crash", outcome.message)
    if outcome.status == "invalid":
        return CheckResult(check_id, "error", outcome.message)
    return CheckResult(check_id, outcome.status, outcome.message)


def run_summary(run, options: Options) -> dict:
    """Environment, sandbox and timing facts for the report."""
    hello = hello_fields(next((h for h, _ in run.frames if h.get("type") == "hello"), {}))
    stages = {h["stage"]: h.get("duration_s") for h, _ in run.frames if h.get("type") == "stage_end"
              and isinstance(h.get("stage"), str) and len(h["stage"]) <= 200
              and not STAGE_END["duration_s"].problem(h.get("duration_s"), "duration_s")}
    import_s = hello.get("import_s") if isinstance(hello.get("import_s"), (int, float)) else None
    start_s = round(run.hello_at_s - import_s, 3) if run.hello_at_s is not None and import_s is not None else None
    # started ahead: up to ahead_s of the start and import happened before the job arrived, off sandbox_s
    return {"environment": {"torch": hello.get("torch"), "python": hello.get("python"), "threads": hello.get("threads")},
            "sandbox": {"backend": run.backend, "limits": options.limits.to_dict(), "killed": run.killed,
                        # the isolation layers this grading had; weak: fewer than its backend's full set (allowed by
                        # the operator), or a sandbox that does not say (unknown counts as weak)
                        "layers": list(run.layers.get("active", [])), "weak": bool(run.layers.get("weak", True)),
                        **({"missing": run.layers["missing"]} if run.layers.get("missing") else {})},
            "timings": {"sandbox_start_s": start_s, "torch_import_s": import_s, "stages": stages,
                        "sandbox_s": round(run.wall_s, 3), "sandbox_ahead_s": run.ahead_s}}
