"""Each sandbox backend's overhead against a bare subprocess running the same harness on the same job.

    .venv/bin/python bench/sandbox_overhead.py [--runs 5] [--checks split_heads,attention_sdpa,rope]

One run measures every variant, interleaved round by round so machine load hits them alike:
bare (the harness as a plain child: no uid, no rlimits, no layers), process (every layer this host
allows), process without bwrap, and docker (when an engine answers and the runner image exists).
For each it prints the median wall time of a whole run, the time until the harness said hello
(interpreter start + torch import), and the overhead against bare.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.checks.base import Context  # noqa: E402
from grader.judge import Options, select_checks, stage_budget, write_job  # noqa: E402
from grader.sandbox import Limits  # noqa: E402
from grader.sandbox.base import FrameCollector, SandboxRun, new_job_dir  # noqa: E402
from grader.sandbox.runner import runner_python  # noqa: E402
from grader.source import read_source  # noqa: E402


class Bare:
    """The harness as a plain subprocess: the floor every backend is measured against."""
    name = "bare"

    def __init__(self):
        self.python = runner_python()

    def run(self, job_dir, limits, wall_s, on_frame=None):
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        clock = lambda: time.monotonic() - started  # noqa: E731
        proc = subprocess.Popen([self.python, "-I", str(job_dir / "harness" / "main.py"), str(job_dir), str(write_fd)],
                                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=job_dir / "scratch", env={"PATH": "/usr/bin:/bin"})
        os.close(write_fd)
        collector = FrameCollector(os.fdopen(read_fd, "rb", buffering=0), limits.output_mb << 20, None, clock).start()
        proc.wait(timeout=wall_s)
        collector.join(10)
        return SandboxRun(self.name, collector.frames, proc.returncode, None, clock(), collector.hello_at)


def variants(skip_docker: bool):
    from grader.sandbox import ProcessSandbox
    from grader.sandbox import docker as docker_backend
    out = [("bare", Bare()), ("process", ProcessSandbox()),
           ("process-no-bwrap", ProcessSandbox(bwrap=False, allow_weak=True))]  # deliberately weaker
    why = "skipped (--no-docker)" if skip_docker else (docker_backend.engine_answers() or docker_backend.image_present())
    if why is None:
        out.append(("docker", docker_backend.DockerSandbox()))
    else:
        print(f"docker: not measured: {why}")
    return out


def one_job(text: str, checks: tuple, limits: Limits):
    """A fresh job directory for the reference and the chosen checks, and its wall budget."""
    options = Options(only=checks, limits=limits)
    source = read_source(text.encode())
    ctx = Context(options.seed, source)
    stages = [s for c in select_checks(options.only) for s in c.plan(ctx)]
    job_dir = new_job_dir()
    write_job(job_dir, source.text, stages, options)
    return job_dir, limits.startup_s + sum(stage_budget(s, options) for s in stages) + 10, len(stages)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--checks", default="split_heads,attention_sdpa,rope")
    parser.add_argument("--submission", default=str(ROOT / "submissions" / "reference_lm.py"))
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args(argv)
    checks = tuple(c for c in args.checks.split(",") if c)
    limits = Limits()
    text = Path(args.submission).read_text()
    chosen = variants(args.no_docker)
    times = {name: [] for name, _ in chosen}
    hellos = {name: [] for name, _ in chosen}
    stages = 0
    for round_no in range(args.runs + 1):  # round 0 warms the page cache and is not counted
        for name, sandbox in chosen:
            job_dir, wall, stages = one_job(text, checks, limits)
            try:
                started = time.monotonic()
                run = sandbox.run(job_dir, limits, wall)
                elapsed = time.monotonic() - started
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
            done = any(h.get("type") == "done" for h, _ in run.frames)
            if not done:
                raise SystemExit(f"{name}: the harness did not finish (exit {run.exit_code}, {run.killed})\n{run.log[-2000:]}")
            if round_no:
                times[name].append(elapsed)
                hellos[name].append(run.hello_at_s or 0.0)
    base = statistics.median(times["bare"])
    print(f"\n{args.runs} runs each, {stages} stages ({', '.join(checks)}), {os.cpu_count()} CPUs")
    print(f"{'variant':<18}{'median s':>10}{'min s':>9}{'max s':>9}{'hello s':>10}{'overhead s':>12}{'overhead':>10}")
    for name, _ in chosen:
        med = statistics.median(times[name])
        print(f"{name:<18}{med:>10.3f}{min(times[name]):>9.3f}{max(times[name]):>9.3f}"
              f"{statistics.median(hellos[name]):>10.3f}{med - base:>+12.3f}{(med / base - 1) * 100:>+9.1f}%")


if __name__ == "__main__":
    main()
