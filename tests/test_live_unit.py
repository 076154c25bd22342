"""grader/live.py without a sandbox: a verdict frame from the sandbox is never taken for the judge's, and every other
frame header still reaches on_event as before."""
from grader.judge import on_frame
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
