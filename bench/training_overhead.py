"""What the judge's training protocol costs: the graded run against the same training done plainly in one process.

Usage: .venv/bin/python bench/training_overhead.py [--track reverse|lm|both] [--repeat N] [--submission PATH]

"direct" is training as a student would run it: the submission imported in this process, built under the
same seed, the same batches, torch's AdamW, clipping at 1.0, one thread. "graded" is what the grader does
(issue 14): the judge keeps the weights and steps the optimizer, the sandbox answers each step with logits
and gradients (`training.run`), and a fresh sandbox, alongside it, re-checks the initial weights, the logits and
the gradients at the checked steps (`training.verify`; "verify" counts only what is left of it once the run has
ended). The two alternate, so a busy machine slows both alike; the ratio (run + verify) / direct, not the seconds,
is the result. Target (issue 14): at most 1.25. Saved in
build/bench/training_overhead.json. (Issue 19's target 3, a whole grading with training against the checks' compute,
is measured by bench/overhead.py.)
Sandbox starts are reported apart: a worker starts its sandboxes ahead of the job.
"""
import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.checks import training  # noqa: E402
from grader.checks.base import Context  # noqa: E402
from grader.configs import DEFAULT_SEED, SPECIAL, training_hp  # noqa: E402
from grader.judge import Options, run_stages  # noqa: E402
from grader.source import read_source  # noqa: E402

REFERENCES = {"reverse": ROOT / "submissions" / "reference_reverse.py", "lm": ROOT / "submissions" / "reference_lm.py"}


def import_file(path: Path):
    """The submission as a module of this process (the direct side trusts it: it is the reference)."""
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def direct(module, stage) -> tuple[float, list]:
    """Wall seconds of the plain loop in this process on the run's inputs, and its losses."""
    params, data = stage.params, stage.data
    hp = training_hp(params["track"])
    started = time.perf_counter()
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(int(params["seed"]))
    model = module.build_model(dict(params["config"]))
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], betas=tuple(hp["betas"]), weight_decay=hp["weight_decay"])
    vocab, losses = int(params["vocab_size"]), []
    model.train()
    for idx in data["batches"][:int(params["steps"])]:
        if params["track"] == "lm":
            rows = data["rows"][idx]
            logits, targets = model(rows[:, :-1])[0], data["targets"][idx]
        else:
            logits = model(data["src"][idx], data["tgt_in"][idx], data["src_mask"][idx])
            targets = data["tgt_out"][idx]
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=SPECIAL["pad_id"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
        opt.step()
        losses.append(loss.item())
    return time.perf_counter() - started, losses


def graded(text: str, track: str) -> dict:
    """The judge's training run and its fresh-sandbox check: stage and sandbox seconds, and the judge's losses."""
    ctx = Context(DEFAULT_SEED, read_source(text.encode()))
    stages = training.plan(ctx)
    started = time.perf_counter()
    outcomes, info = run_stages(text, stages, Options(), None, None)
    wall = time.perf_counter() - started
    bad = {k: f"{o.status}: {o.message}" for k, o in outcomes.items() if o.status != "ok"}
    run = stages[0]
    if bad or run.trainer.failure or not run.trainer.done:
        raise SystemExit(f"the graded run did not finish: {bad or run.trainer.failure}")
    timings = info["timings"]["stages"]
    # the fresh sandbox checks the steps alongside the run: what is left of it once the run has ended
    return {"run": timings[training.RUN], "verify": info["timings"]["fresh_after_s"], "wall": wall,
            "losses": run.trainer.losses, "stage": run, "ahead": getattr(run.trainer, "speculated", 0)}


def bench(track: str, path: Path, repeat: int) -> dict:
    """Alternate direct and graded runs; print medians and the ratios."""
    text = path.read_text(encoding="utf-8")
    module = import_file(path)
    rows = {k: [] for k in ("direct", "run", "verify", "wall")}
    ahead = []
    for _ in range(repeat):
        g = graded(text, track)
        ahead.append(g["ahead"])
        d_wall, d_losses = direct(module, g["stage"])
        gap = max(abs(a - b) for a, b in zip(d_losses, g["losses"]))
        if gap > 1e-3:
            print(f"  note: {track}: the judge's losses differ from the direct loop's by up to {gap:.3g}")
        for key, value in (("direct", d_wall), ("run", g["run"]), ("verify", g["verify"]), ("wall", g["wall"])):
            rows[key].append(value)
    med = {k: statistics.median(v) for k, v in rows.items()}
    steps = training_hp(track)["steps"]
    ratio = (med["run"] + med["verify"]) / med["direct"]
    print(f"{track}: {path.name}, {steps} steps, {repeat} run(s) each side, medians")
    print(f"  direct, one process           {med['direct']:7.2f} s  (torch's AdamW, no sandbox)")
    print(f"  graded: training.run          {med['run']:7.2f} s  (the judge steps; the sandbox answers)")
    print(f"  steps the sandbox took itself {min(ahead):7d}    (of {steps}, fewest in a run; the judge sent the others)")
    print(f"  graded: training.verify after {med['verify']:7.2f} s  (fresh sandbox, alongside the run: what is "
          "left once it has ended)")
    print(f"  graded: both sandboxes, wall  {med['wall']:7.2f} s  (with the sandboxes' starts and torch imports)")
    print(f"  ratio (run + verify) / direct {ratio:7.2f}   target <= 1.25: {'met' if ratio <= 1.25 else 'NOT met'}")
    return {"track": track, "ratio": ratio, **med}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", choices=("reverse", "lm", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=2, help="runs per side, alternating (default 2)")
    parser.add_argument("--submission", type=Path, help="a file to train instead of the track's reference")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the sandbox: the comparison is one thread against one thread
    results = [bench(track, args.submission or REFERENCES[track], args.repeat)
               for track in (("reverse", "lm") if args.track == "both" else (args.track,))]
    sys.path.insert(0, str(ROOT / "bench"))
    from common import save
    save("training_overhead", {"tracks": {r["track"]: r for r in results}})


if __name__ == "__main__":
    main()
