"""What the sandbox costs a training run: the grader's training stage against the same loop called in this process.

Usage: .venv/bin/python bench/training_overhead.py [--track reverse|lm|both] [--repeat N] [--submission PATH]

Both sides run the same probe (grader/harness/probes.py: probe_train) on the same inputs, with one torch
thread. "sandboxed" is the judge's run_stages on the training stage alone: job files written, a
fresh sandbox started, torch imported, the stage forked, the submission imported, trained, outputs
serialised and checked. "direct" calls probe_train here, the submission imported once. The two
alternate, so a busy machine slows both alike; the ratio, not the seconds, is the result. The CPU
seconds of the loop (process time) are reported too: on a shared machine they move far less than
the wall clock.
"""
import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.checks import training  # noqa: E402
from grader.checks.base import Context  # noqa: E402
from grader.configs import DEFAULT_SEED  # noqa: E402
from grader.harness import probes  # noqa: E402
from grader.judge import Options, run_stages  # noqa: E402
from grader.source import read_source  # noqa: E402

REFERENCES = {"reverse": ROOT / "submissions" / "reference_reverse.py", "lm": ROOT / "submissions" / "reference_lm.py"}


def import_file(path: Path):
    """The submission as a module of this process (the direct side trusts it: it is the reference)."""
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def direct(module, stage) -> tuple[float, float, float, torch.Tensor]:
    """Wall seconds of probe_train in this process, its loop's wall and CPU seconds, and its losses."""
    started = time.perf_counter()
    outputs, facts = probes.probe_train(module, dict(stage.inputs), stage.params)
    return time.perf_counter() - started, facts["train_s"], facts["train_cpu_s"], outputs["losses"]


def sandboxed(text: str, stage) -> tuple[float, float, float, float, torch.Tensor]:
    """Wall seconds of the whole sandbox run and of the stage, its loop's wall and CPU seconds, and its losses."""
    started = time.perf_counter()
    outcomes, info = run_stages(text, [stage], Options(), None, None)
    wall = time.perf_counter() - started
    out = outcomes[stage.key]
    if out.status != "ok":
        raise SystemExit(f"the sandboxed stage ended {out.status}: {out.message}")
    return wall, out.duration_s, out.facts["train_s"], out.facts["train_cpu_s"], out.tensors["losses"]


def bench(track: str, path: Path, repeat: int) -> None:
    """Alternate direct and sandboxed runs; print medians and the ratios."""
    text = path.read_text(encoding="utf-8")
    stage = training.run_stage(Context(DEFAULT_SEED, read_source(text.encode())))
    module = import_file(path)
    keys = ("direct", "direct_loop", "direct_cpu", "sandbox_wall", "stage", "sandbox_loop", "sandbox_cpu")
    rows = {k: [] for k in keys}
    for _ in range(repeat):
        d_wall, d_loop, d_cpu, d_losses = direct(module, stage)
        s_wall, s_stage, s_loop, s_cpu, s_losses = sandboxed(text, stage)
        if not torch.equal(d_losses, s_losses):
            print(f"  note: {track}: the sandboxed losses differ from the direct ones "
                  f"(max {float((d_losses - s_losses).abs().max()):.3g})")
        for key, value in zip(keys, (d_wall, d_loop, d_cpu, s_wall, s_stage, s_loop, s_cpu)):
            rows[key].append(value)
    med = {k: statistics.median(v) for k, v in rows.items()}
    steps = stage.params["steps"]
    print(f"{track}: {path.name}, {steps} steps, {repeat} run(s) each side, medians")
    print(f"  direct, one process       {med['direct']:7.2f} s  (loop alone {med['direct_loop']:.2f} s wall, "
          f"{med['direct_cpu']:.2f} s CPU)")
    print(f"  sandboxed training stage  {med['stage']:7.2f} s  (loop alone {med['sandbox_loop']:.2f} s wall, "
          f"{med['sandbox_cpu']:.2f} s CPU)")
    print(f"  sandboxed, whole run      {med['sandbox_wall']:7.2f} s  (start, torch import, job files, outputs)")
    print(f"  ratio stage / direct      {med['stage'] / med['direct']:7.2f}   (wall clock: moves with the load)")
    print(f"  ratio loop CPU / loop CPU {med['sandbox_cpu'] / med['direct_cpu']:7.2f}   (CPU seconds: barely moves)")
    print(f"  ratio whole run / direct  {med['sandbox_wall'] / med['direct']:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", choices=("reverse", "lm", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=2, help="runs per side, alternating (default 2)")
    parser.add_argument("--submission", type=Path, help="a file to train instead of the track's reference")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the sandbox: the comparison is one thread against one thread
    probes.warm_up_training()  # as the harness does: the first optimizer step's imports are paid by neither side
    for track in ("reverse", "lm") if args.track == "both" else (args.track,):
        bench(track, args.submission or REFERENCES[track], args.repeat)


if __name__ == "__main__":
    main()
