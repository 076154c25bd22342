"""Benchmark: rescore 1000 stored results under a changed rubric, against the time to json-decode them.

Run: .venv/bin/python bench/rescore.py [--n 1000] [--repeat 5] [--no-store]

Then the same through the service's store, as `grader rescore` does it: 1000 results stored in SQLite (and in
PostgreSQL when one answers, GRADER_TEST_PG), the rubric file changed, `coursework.rescore` timed with its commit.
"""
import argparse
import contextlib
import gc
import json
import os
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests.rubric.reports

from grader.registry import check_registry  # noqa: E402
from rubric import DEFAULT_PATH, RubricError, load_rubric, parse_rubric, score  # noqa: E402
from tests.rubric.reports import make_report, rescore  # noqa: E402

STATUSES = ["pass"] * 14 + ["fail"] * 3 + ["error", "timeout", "oom", "crash", "skipped"]


def random_metrics(rng: random.Random, check: str, track: str) -> dict:
    """Plausible metrics, including the bulky ones real reports carry (a 100-point loss curve, samples)."""
    if check == "gradient_path":
        n = rng.randint(20, 60)
        return {"parameters": n, "without_gradient": rng.choice([0, 0, 0, 1, 3]), "nonfinite": 0, "all_zero": 0}
    if check == "training":
        ratio = rng.uniform(0.05, 1.1)
        return {"loss_ratio": ratio, "final_loss": 2.6 * ratio, "baseline_loss": 2.6, "steps": 300,
                "loss_curve": [round(3 - 2 * i / 100 + rng.random() * 0.1, 6) for i in range(100)]}
    if check == "evaluation" and track == "reverse":
        return {"token_accuracy": rng.random(), "exact_match": rng.random() * 0.7, "heldout_rows": 512}
    if check == "evaluation":
        return {"ppl_ratio": rng.uniform(0.1, 1.2), "perplexity": 3.0, "unigram_perplexity": 20.0,
                "samples": [{"prompt": "The old ", "text": "x" * 60}] * 4}
    return {}


def stored_results(rubric, n: int, seed: int = 0) -> list[str]:
    """n stored records as the store keeps them: JSON text with the report, manual grades and the old score."""
    rng = random.Random(seed)
    manual_ids = [i.id for _, i in rubric.items() if i.kind == "manual"]
    out = []
    for k in range(n):
        track = rng.choice(["reverse", "lm"])
        statuses = {c: rng.choice(STATUSES) for c in sorted({i.check for _, i in rubric.items() if i.check})}
        report = make_report(statuses, {c: random_metrics(rng, c, track) for c in statuses}, track)
        manual = {i: {"points": 1.0, "comment": "ok"} for i in manual_ids if rng.random() < 0.5}
        out.append(json.dumps({"id": k, "report": report, "manual": manual, "score": score(report, rubric, manual)}))
    return out


def best_of(repeat: int, fn) -> float:
    """The fastest of `repeat` runs, in seconds (the least disturbed by other work on a shared machine).

    The garbage collector is off while timing, as in timeit: otherwise its passes over the thousand decoded
    reports kept alive in memory are charged to whichever step happens to trigger them.
    """
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times)


@contextlib.contextmanager
def databases():
    """(label, URL) of an empty SQLite file, then of a new PostgreSQL database when one answers; dropped after."""
    with tempfile.TemporaryDirectory(prefix="grader-bench-rescore-") as tmp:
        os.environ["GRADER_INSTANCE_PATH"] = str(Path(tmp) / "instance")
        found, admin, name = [("SQLite", f"sqlite:///{tmp}/grader.sqlite")], None, None
        try:
            import psycopg
            admin = psycopg.connect(os.environ.get("GRADER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
                                    autocommit=True, connect_timeout=3)
            name = f"grader_bench_rescore_{secrets.token_hex(4)}"
            admin.execute(f'CREATE DATABASE "{name}"')
            found.append(("PostgreSQL", admin.info.dsn.rsplit("dbname=", 1)[0].strip() and
                          f"postgresql://{admin.info.user}@{admin.info.host}:{admin.info.port}/{name}"))
        except Exception as exc:  # no server, no driver: SQLite alone
            print(f"  (PostgreSQL not measured: {exc})")
        try:
            yield found
        finally:
            if admin is not None and name is not None:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
                admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
                admin.close()


def through_the_store(url: str, stored: list[str], new_rubric_path: Path) -> tuple[float, int, int]:
    """Store the results (scored under the packaged rubric), change the rubric file, time coursework.rescore + commit."""
    import rubric.load
    from grader.app import accounts, coursework, create_app, scoring, store
    from grader.app.db import get_db
    from grader.app.models import Result, Submission, utcnow
    app = create_app({"DATABASE_URL": url, "BROKER_URL": "memory://", "SECRET_KEY": "bench"})
    db = get_db(app)
    try:
        scoring.reload_rubric()
        with db.session() as s:
            assignment = store.create_assignment(s, "bench", title="Bench")
            students = [accounts.add_student(s, f"s{k:04d}") for k in range(len(stored) // 5 or 1)]
            for k, text in enumerate(stored):
                record = json.loads(text)
                sub = Submission(assignment_id=assignment.id, student_id=students[k % len(students)].id,
                                 filename="sub.py", sha256=f"{k:064x}", size=1, content=b"x", track="lm",
                                 status="done", request=1, attempts=1, manual=record["manual"], created_at=utcnow())
                s.add(sub)
                s.flush()
                result = Result(submission_id=sub.id, request=1, attempt=1, report=record["report"])
                s.add(result)
                s.flush()
                coursework.score_result(s, result)
        saved = rubric.load.DEFAULT_PATH
        rubric.load.DEFAULT_PATH = new_rubric_path  # the instructor edits the rubric file
        try:
            with db.session() as s:
                start = time.perf_counter()
                summary = coursework.rescore(s)
                s.commit()
                took = time.perf_counter() - start
        finally:
            rubric.load.DEFAULT_PATH = saved
            scoring.reload_rubric()
        totals = sum(1 for c in summary["changed"] if c["before"] != c["after"])
        return took, summary["rescored"], totals
    finally:
        db.engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-store", action="store_true", help="only the in-memory rescoring")
    args = parser.parse_args()
    try:
        old = load_rubric(checks=check_registry())
    except RubricError as exc:
        print(f"the packaged rubric does not load yet:\n{exc}", file=sys.stderr)
        return 2
    # the change an instructor makes mid-term: a new version with a stricter training threshold
    text = DEFAULT_PATH.read_text()
    new = parse_rubric(text.replace(f'version = "{old.version}"', 'version = "bench.2"')
                       .replace('metric = "loss_ratio", full = 0.5', 'metric = "loss_ratio", full = 0.3'), "bench",
                       checks=check_registry())
    stored = stored_results(old, args.n)
    size = sum(len(s) for s in stored)

    decode = best_of(args.repeat, lambda: [json.loads(s) for s in stored])
    records = [json.loads(s) for s in stored]
    alone = best_of(args.repeat, lambda: [score(r["report"], new, r["manual"]) for r in records])
    scores = best_of(args.repeat, lambda: [score(r["report"], new, r["manual"]) for r in map(json.loads, stored)])
    full = best_of(args.repeat, lambda: rescore(map(json.loads, stored), new))

    changed = sum(1 for r in rescore(map(json.loads, stored), new) if r["totals"]["delta"])
    print(f"{args.n} stored results, {size / 1e6:.1f} MB of JSON, rubric {old.version} -> {new.version} "
          f"({changed} totals changed); best of {args.repeat} runs, gc off while timing")
    print(f"  json-decode only (baseline)          {decode * 1e3:8.1f} ms")
    print(f"  score only (already decoded)          {alone * 1e3:8.1f} ms   {alone / decode:5.2f}x baseline  "
          f"({alone / args.n * 1e6:.0f} us per result)")
    print(f"  decode + score                        {scores * 1e3:8.1f} ms   {scores / decode:5.2f}x baseline  "
          f"({scores / args.n * 1e6:.0f} us per result)")
    print(f"  decode + score + item-by-item diff    {full * 1e3:8.1f} ms   {full / decode:5.2f}x baseline  "
          f"({full / args.n * 1e6:.0f} us per result)")
    if args.no_store:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        new_path = Path(tmp) / "capstone.toml"
        new_path.write_text(text.replace('metric = "loss_ratio", full = 0.5', 'metric = "loss_ratio", full = 0.3')
                            .replace(f'version = "{old.version}"', 'version = "bench.2"'))
        print("through the store (grader rescore: read every result, score, store the new score, commit; once):")
        with databases() as found:
            for label, url in found:
                took, count, changed = through_the_store(url, stored, new_path)
                print(f"  {label:<12} {count} results rescored in {took:6.2f} s ({took / count * 1e3:.2f} ms per "
                      f"result), {changed} totals changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
