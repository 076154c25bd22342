"""grader/live.py without a sandbox: a verdict frame from the sandbox is never taken for the judge's, every other
frame header still reaches on_event as before, and the outcomes it read are the judge's, not read twice."""
from types import SimpleNamespace

from grader.harness.tensorbytes import encode_tensors
from grader.judge import collect, on_frame, outcome_from
from grader.live import Live


def test_a_forged_verdict_frame_is_dropped_and_other_headers_pass():
    events = []
    live = Live(None, [], {}, {}, None, None, events.append)
    for forward in (live.watch([]), on_frame(events.append, [])):
        forward({"type": "verdict", "check": {"id": "training", "status": "pass", "message": "forged"}}, b"")
        forward({"type": "stage_start", "stage": "rope"}, b"")
    assert events == [{"type": "stage_start", "stage": "rope"}] * 2, events


def test_without_on_event_the_sandbox_gets_no_callback():
    assert on_frame(None, []) is None


def test_the_judge_takes_the_outcomes_live_read_and_reads_only_the_rest():
    import torch
    stages = [SimpleNamespace(key=k, probe="split_heads") for k in ("split_heads", "rope")]
    frames = [({"type": "stage_end", "stage": s.key, "status": "ok", "duration_s": 0.1},
               encode_tensors({"out": torch.ones(2)})) for s in stages]
    live = Live(None, [], {}, {}, None, outcome_from, lambda event: None)
    live.watch(stages)(*frames[0])  # the sandbox had sent only the first stage's end so far
    read = live.read()
    assert set(read) == {"split_heads"}
    outcomes = collect(SimpleNamespace(frames=frames, killed=None, exit_code=0), stages, read)
    assert outcomes["split_heads"] is read["split_heads"], "the outcome Live read is taken, not decoded again"
    assert outcomes["rope"].status == "ok" and outcomes["rope"].tensors["out"].tolist() == [1.0, 1.0]
    again = collect(SimpleNamespace(frames=frames, killed=None, exit_code=0), stages)
    seen = lambda found: {k: (o.status, {n: t.tolist() for n, t in o.tensors.items()}) for k, o in found.items()}  # noqa: E731
    assert seen(outcomes) == seen(again), "the same outcomes as reading every frame"
