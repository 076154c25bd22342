"""`grader check` starts its sandbox before it imports the judge (issue 19): the first grading takes that sandbox,
a later prepare() starts its own, and a sandbox no grading took is closed."""
from grader.cli import check as check_cli
from grader.sandbox import Limits


class FakePrepared:
    def __init__(self, limits):
        self.limits, self.closed = limits, False

    def alive(self):
        return not self.closed

    def close(self):
        self.closed = True


class FakeBackend:
    name = "process"

    def __init__(self):
        self.started, self.forked = [], None

    def prepare(self, limits):
        self.started.append(FakePrepared(limits))
        return self.started[-1]


def early(monkeypatch, limits):
    backend = FakeBackend()

    def make_sandbox(name, fork=True):
        backend.forked = fork
        return backend
    monkeypatch.setattr("grader.sandbox.make_sandbox", make_sandbox)
    return check_cli.StartedEarly("process", limits), backend


def test_the_first_prepare_takes_the_sandbox_started_early(monkeypatch):
    limits = Limits(stage_s=5)
    sandbox, backend = early(monkeypatch, limits)
    assert backend.forked is False, "a one-shot command starts its sandbox: it has no zygote to fork from"
    first = sandbox.prepare(limits)
    assert first is backend.started[0], "the grading's first sandbox is the one started with the command"
    second = sandbox.prepare(limits)
    assert second is backend.started[1] and not first.closed, "a second sandbox (training's fresh one) starts anew"
    sandbox.close()
    assert not first.closed, "close() leaves the sandboxes a grading took to the grading"


def test_other_limits_or_no_grading_close_the_early_sandbox(monkeypatch):
    sandbox, backend = early(monkeypatch, Limits(stage_s=5))
    taken = sandbox.prepare(Limits(stage_s=9))
    assert backend.started[0].closed and taken is backend.started[1], "limits that differ: a new sandbox"
    sandbox, backend = early(monkeypatch, Limits(stage_s=5))
    sandbox.close()
    assert backend.started[0].closed, "a refused file grades nothing: the early sandbox is stopped"
