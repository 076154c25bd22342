"""First verdicts while training runs: the judge decides a check as soon as every stage it reads has ended, and
reports it through on_event as {"type": "verdict", "check": <CheckResult dict>}.

Checks are decided in contract order, each one only once every check before it is decided: a verdict may read the
verdicts decided before it (ctx.verdicts, the report's own results dict, which this fills), never later ones. A
decided result goes into that dict and the report keeps it as it is. It is sent early only when the root-cause
diagnosis, which runs after all stages, cannot add to it (grader.rootcause.settled); every other check is sent at
the end, after the diagnosis. So each check is sent exactly once, always equal to the report's entry. Frames count
exactly as grader.judge.collect counts them: only the run's own stages, the first stage_end of each.
"""
import logging
import threading

from .rootcause import settled

log = logging.getLogger(__name__)
VERDICT = "verdict"  # the event's type; never taken from the sandbox's frames


def reads(plan) -> set:
    """The stage keys a check's decision reads: its stages, and the ones they take inputs from or need."""
    keys = {s.key for s in plan}
    for s in plan:
        keys.update(k for k in (s.input_from, *s.needs) if k)
    return keys


class Live:
    """Stage outcomes as their stage_end frames arrive; each check decided once every stage it reads has ended."""

    def __init__(self, ctx, checks, plans: dict, results: dict, decide, outcome_from, on_event):
        self.ctx, self.checks, self.plans, self.on_event = ctx, checks, plans, on_event
        self.decide, self.outcome_from = decide, outcome_from
        self.outcomes: dict = {}
        # the report's results (ctx.verdicts): the checks decided before any stage ran (no valid TRACK), then each
        # check decided here; the judge decides the rest after the stages, in the same order
        self.results = results
        self.sent: set = set()
        self.lock = threading.Lock()
        self.closed = False
        with self.lock:
            self._send()

    def watch(self, stages):
        """The sandbox's on_frame(header, blob) for one run: every header goes on to on_event as before."""
        probes = {s.key: s.probe for s in stages}

        def on_frame(header: dict, blob: bytes = b"") -> None:
            if header.get("type") == VERDICT:
                return  # only the judge sends verdicts: one in the sandbox's frames is forged
            stage = header.get("stage")
            with self.lock:  # the two sandboxes' collectors call this from their own threads
                self.on_event(header)
                if header.get("type") != "stage_end" or not isinstance(stage, str) or stage not in probes:
                    return
                if self.closed or stage in self.outcomes:
                    return
                try:
                    self.outcomes[stage] = self.outcome_from(header, blob, probes[stage])
                    self._decide_ready()
                except Exception:  # the collector's thread must go on reading: the report decides at the end anyway
                    log.exception("deciding a check early failed; the rest are decided at the end")
                    self.closed = True
        return on_frame

    def _decide_ready(self) -> None:
        """Decide, in contract order, the checks whose stages have all ended; stop at the first that cannot be."""
        graded = set(self.plans)
        for check in self.checks:
            plan = self.plans.get(check.ID)
            if plan is None or check.ID in self.results:
                continue
            if not reads(plan) <= self.outcomes.keys():
                break  # a later check may read this one's verdict (ctx.verdicts)
            self.results[check.ID] = self.decide(check, self.ctx, plan, self.outcomes, graded)
        self._send()

    def _send(self) -> None:
        """Report, in contract order, every decided check whose verdict can no longer change."""
        for check in self.checks:
            result = self.results.get(check.ID)
            if result is None or check.ID in self.sent:
                continue
            if check.ID in self.plans and not settled(check, self.plans, self.results, self.outcomes):
                continue
            self.sent.add(check.ID)
            self.on_event({"type": VERDICT, "check": result.to_dict()})

    def read(self) -> dict:
        """The stage outcomes read so far, each from its stage's first stage_end frame (as grader.judge.collect
        reads them): the judge takes these rather than decoding the same tensors again after the run."""
        with self.lock:
            return dict(self.outcomes)

    def close(self) -> None:
        """Stop deciding: the stages have all run, and the judge decides the checks still undecided."""
        with self.lock:
            self.closed = True
            self.outcomes = {}  # the judge has them all now (collect)

    def finish(self, results: dict) -> None:
        """Send the checks not sent yet (their final results, root causes included), in contract order."""
        for check in self.checks:
            if check.ID not in self.sent and check.ID in results:
                self.sent.add(check.ID)
                self.on_event({"type": VERDICT, "check": results[check.ID].to_dict()})
