"""Web latency under 50 concurrent clients: uploads and status polling against `grader serve` on 127.0.0.1.

    .venv/bin/python bench/web_load.py [--quick] [--turns-ab ROUNDS]

`grader serve` is gunicorn (bench/throughput.py's service(): 2 worker processes, each with 4 threads for reads and
28 for writes, uploads one at a time: grader/app/pools.py), on PostgreSQL. Loopback only, bounded in count: 50
client threads each upload U files (quick 1, else 2) as their own student, then poll their submission's status
P times (quick 10, else 40) back to back. Two workers grade the uploads meanwhile (a deadline rush: the web
shares the machine with the sandboxes). Then wrk (when installed: `make bench` installs it) polls one status
over 50 connections back to back, with the workers stopped and again while two grade, and once more against
bench/web_floor.py (a constant answer from the same gunicorn: the floor for any view on this machine); then 50
clients poll every 2 s, as the status page does. Percentiles are nearest-rank over every request; the target is
status p99 under 100 ms. The server runs with its access log, whose last field (the time gunicorn's worker spent
on a request: a write's wait for its turn counted, a wait for a free thread not) gives the server's own share of
the thread phase's polls. Also the web server's memory.

--turns-ab ROUNDS runs the whole load (without the constant-answer floor) on a fresh service ROUNDS times with
GRADER_WEB_TURNS=false (gunicorn's gthread) and as many times with the pools and turns (the default), alternating,
and prints both side by side.
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SUBMISSIONS, cpu_s, cpu_split, emit, memory_mb, pct, save, table  # noqa: E402

CLIENTS = 50
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
STATUS_LINE = re.compile(r'"GET /api/v1/submissions/\d+ HTTP/[\d.]+" .* (\d+)ms$')


def wrk(url: str, token: str, seconds: int) -> dict | None:
    """Status polling with wrk (50 connections, 2 threads, bounded in time): percentiles in ms, or None."""
    exe = shutil.which("wrk")
    if exe is None:
        return None
    out = subprocess.run([exe, "-t2", f"-c{CLIENTS}", f"-d{seconds}s", "--latency", "--timeout", "5s",
                          "-H", f"Authorization: Bearer {token}", url], capture_output=True, text=True,
                         timeout=seconds + 30).stdout
    found = {m[0]: float(m[1]) * UNITS[m[2]] for m in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    total = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if "99" not in found or not total:
        print(out, flush=True)
        return None
    return {"p": found, "count": int(total.group(1)), "rps": float(rps.group(1)) if rps else float("nan"),
            "errors": (int(bad.group(1)) if bad else 0) + (sum(map(int, errors.groups())) if errors else 0)}


POLL_S = 2.0  # grader/app/static/web.js: the status box polls every data-poll-s seconds, 2 by default


def floor(workers: int, token: str, seconds: int) -> dict | None:
    """wrk against bench/web_floor.py (a constant answer, same gunicorn): gunicorn and Flask's own share."""
    from tests.service.svc_cluster import free_port, wait_for
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("web_floor.py")), str(port), str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def up():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    try:
        wait_for(up, 30, what="the floor server to answer")
        return wrk(f"http://127.0.0.1:{port}/status", token, seconds)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(10)


def paced_polls(ctx, sid: int, polls: int) -> dict:
    """50 clients, each polling the status every POLL_S seconds (start times spread over one period)."""
    times, errors, lock = [], [0], threading.Lock()

    def client(k: int):
        time.sleep(POLL_S * k / CLIENTS)
        nxt = time.perf_counter()
        for _ in range(polls):
            t0 = time.perf_counter()
            status, _ = ctx["http"].get(f"/api/v1/submissions/{sid}", ctx["tokens"][0])
            with lock:
                times.append(time.perf_counter() - t0)
                errors[0] += status != 200
            nxt += POLL_S
            time.sleep(max(0.0, nxt - time.perf_counter()))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"times": times, "errors": errors[0]}


def machine_busy_s() -> float:
    """CPU seconds the machine's cores have been busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def phase_cpu(web_pid: int) -> dict:
    """CPU seconds so far: this client process (its 50 threads), the web server's processes, the whole machine."""
    from throughput import descendants, proc_tree
    me = resource.getrusage(resource.RUSAGE_SELF)
    return {"client": me.ru_utime + me.ru_stime, "web": cpu_s([web_pid, *descendants(web_pid, proc_tree())]),
            "machine": machine_busy_s()}


def pss_mb(pid: int) -> float:
    """Proportional set size of a process and its descendants (gunicorn's workers share the master's pages)."""
    from throughput import descendants, proc_tree
    return sum(memory_mb(p)["pss"] for p in [pid, *descendants(pid, proc_tree())])


def server_times(log: Path, offset: int, count: int) -> list[float]:
    """The milliseconds gunicorn's worker spent on the first `count` status polls in its access log from byte
    `offset` on (the line's last field, grader.app.serving.ACCESS_LOG_FORMAT): the server's share of what the
    clients measured. Empty when the server runs without its access log."""
    found = []
    with open(log, "rb") as fh:
        fh.seek(offset)
        text = fh.read().decode("utf-8", "replace")
    for line in text.splitlines():
        hit = STATUS_LINE.search(line)
        if hit:
            found.append(float(hit[1]))
    return found[:count]


def run(ctx, quick: bool) -> str:
    """The load against a running service (throughput.service) and its table; its figures saved as web_load."""
    figures, text = measure(ctx, quick)
    save("web_load", figures)
    return text


def measure(ctx, quick: bool, with_floor: bool = True) -> tuple[dict, str]:
    """The load against a running service: its figures and its table."""
    uploads, polls = (1, 10) if quick else (2, 40)
    http, data = ctx["http"], SUBMISSIONS["reference_lm"].read_bytes()
    times = {"upload": [], "status": []}
    errors = {"upload": 0, "status": 0}
    lock, barrier, first_id = threading.Lock(), threading.Barrier(CLIENTS), []

    def client(k: int):
        token, mine = ctx["tokens"][k], []
        barrier.wait()
        for u in range(uploads):
            t0 = time.perf_counter()
            status, sub = http.upload("web", token, data + f"\n# web {k} {u}\n".encode(), "sub.py")
            dt = time.perf_counter() - t0
            with lock:
                times["upload"].append(dt)
                errors["upload"] += status != 202
            if status == 202:
                mine.append(sub["id"])
                if k == 0 and not first_id:
                    first_id.append(sub["id"])
        for p in range(polls if mine else 0):
            t0 = time.perf_counter()
            status, _ = http.get(f"/api/v1/submissions/{mine[p % len(mine)]}", token)
            dt = time.perf_counter() - t0
            with lock:
                times["status"].append(dt)
                errors["status"] += status != 200

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    log_from = ctx["web_log"].stat().st_size  # the service may have served other benchmarks before this one
    cpu_from = phase_cpu(ctx["web_pid"])
    started = time.perf_counter()
    for t in threads:
        t.start()
    peak_web = 0.0
    while any(t.is_alive() for t in threads):
        peak_web = max(peak_web, pss_mb(ctx["web_pid"]))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    # where the cores went meanwhile: the clients measure their own thread's wait for the interpreter's lock too
    cpu = {k: v - cpu_from[k] for k, v in phase_cpu(ctx["web_pid"]).items()}
    rows = [[f"{kind} (Python threads, during the uploads)", len(v), errors[kind], 1e3 * pct(v, 50), 1e3 * pct(v, 95),
             1e3 * pct(v, 99), 1e3 * max(v), None, "" if kind != "status" else ("yes" if pct(v, 99) < 0.1 else "no")]
            for kind, v in times.items()]
    served = server_times(ctx["web_log"], log_from, len(times["status"]))
    if served:
        rows.append(["status, the same polls: the server's own time (access log; no wait for a thread)", len(served),
                     None, pct(served, 50), pct(served, 95), pct(served, 99), max(served), None, ""])
    url = ctx["http"].base + f"/api/v1/submissions/{first_id[0]}" if first_id else None
    measured = {}
    for label, workers in (("idle workers", 0), ("2 workers grading the uploads", 2)):
        if url is None:
            break
        ctx["start_workers"](workers)
        if workers:
            time.sleep(3)  # the backlog of uploads is being graded
        w = wrk(url, ctx["tokens"][0], 5 if quick else 15)
        if w is None:
            break
        measured[label] = w
        rows.append([f"status (wrk, {label})", w["count"], w["errors"], w["p"]["50"], w["p"].get("90"),
                     w["p"]["99"], None, round(w["rps"]), "yes" if w["p"]["99"] < 100 else "no"])
        if not workers and with_floor:  # wrk on a constant answer, same gunicorn: what is left for the status itself
            f = floor(ctx["web_workers"], ctx["tokens"][0], 5 if quick else 15)
            if f is not None:
                measured["floor"] = f
                rows.append(["floor: a constant answer, same gunicorn, no database (wrk, idle workers)", f["count"],
                             f["errors"], f["p"]["50"], f["p"].get("90"), f["p"]["99"], None, round(f["rps"]),
                             "yes" if f["p"]["99"] < 100 else "no"])
    if url is not None:  # what the status page does: every client polls once every POLL_S seconds
        paced = paced_polls(ctx, first_id[0], 5 if quick else 15)
        rows.append([f"status (50 clients polling every {POLL_S:.0f} s, as the page does; 2 workers grading)",
                     len(paced["times"]), paced["errors"], 1e3 * pct(paced["times"], 50), 1e3 * pct(paced["times"], 95),
                     1e3 * pct(paced["times"], 99), 1e3 * max(paced["times"]), None,
                     "yes" if pct(paced["times"], 99) < 0.1 else "no"])
        measured["paced"] = {"p": {"99": 1e3 * pct(paced["times"], 99)}, "count": len(paced["times"])}
    note = (f"{CLIENTS} concurrent clients (threads, a new connection per request, as urllib does), {uploads} "
            f"upload(s) then {polls} status polls each ({cpu_split(cpu, wall)}); `grader serve` "
            f"(gunicorn, "
            f"{ctx['web_workers']} worker processes, {serving(turns_on())}) on PostgreSQL; uploads and the thread "
            f"polls while 2 workers grade, then wrk (50 connections, "
            f"{5 if quick else 15} s) polling one status back to back with the workers stopped and again while 2 grade the backlog, then 50 "
            f"clients polling every {POLL_S:.0f} s (the status page's pace); "
            f"{os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f}. Peak memory of the web server (PSS of the gunicorn master and its workers, "
            f"shared pages divided among them): {peak_web:.0f} MB. Target: status p99 < 100 ms.")
    figures = {"times": times, "errors": errors, "wall_s": wall, "cpu_s": cpu, "web_pss_mb": peak_web,
               "wrk": measured, "server_status_ms": served}
    return figures, emit("Web latency under 50 concurrent clients", note + "\n\n" + table(
        ["request", "count", "errors", "p50 ms", "p95 (wrk: p90) ms", "p99 ms", "max ms", "req/s", "p99 < 100 ms"],
        rows))


def turns_on() -> bool:
    """WEB_TURNS as `grader serve` will read it from this process's environment (the service inherits it)."""
    from flask import Config
    config = Config(".")
    config.from_prefixed_env("GRADER")
    return bool(config.get("WEB_TURNS", True))


def serving(turns: bool) -> str:
    """How `grader serve` runs requests with or without its pools and turns."""
    from grader.app.pools import TwoPoolWorker
    from grader.app.serving import THREADS
    if not turns:
        return f"gunicorn's gthread worker, {THREADS} threads per process for every request"
    return (f"{THREADS} threads per process for reads and {TwoPoolWorker.writers} for writes, each write read whole "
            "before its turn, uploads one at a time (grader/app/pools.py, grader/app/admission.py)")


def figures(saved: dict) -> dict:
    """The figures the turns are judged by, from one run's saved results (milliseconds; None when not measured)."""
    wrk = saved["wrk"]
    return {"thread-phase status p99": 1e3 * pct(saved["times"]["status"], 99),
            "thread-phase upload p50": 1e3 * pct(saved["times"]["upload"], 50),
            "wrk p99, idle workers": wrk.get("idle workers", {}).get("p", {}).get("99"),
            "wrk p99, 2 workers grading": wrk.get("2 workers grading the uploads", {}).get("p", {}).get("99"),
            "paced polls p99": wrk.get("paced", {}).get("p", {}).get("99")}


def values_of(runs: list[dict], name: str) -> list[float]:
    """One figure over the runs of one serving, where it was measured."""
    return [x[name] for x in runs if x[name] is not None]


def turns_ab(rounds: int, quick: bool) -> str:
    """The whole load on a fresh service with and without the pools and turns, alternating; both side by side."""
    from common import check_set, med
    from throughput import service
    runs = {"false": [], "true": []}
    for r in range(rounds):
        for turns in (("false", "true") if r % 2 == 0 else ("true", "false")):
            os.environ["GRADER_WEB_TURNS"] = turns
            try:
                with service(check_set(True), CLIENTS, access_log=True) as ctx:
                    ctx["start_workers"](2)
                    runs[turns].append(figures(measure(ctx, quick, with_floor=False)[0]))
            finally:
                del os.environ["GRADER_WEB_TURNS"]
    names = list(runs["true"][0])
    rows = []
    for name in names:
        def cell(turns):
            values = values_of(runs[turns], name)
            return (f"{med(values):.0f} ({', '.join(f'{v:.0f}' for v in values)})" if values else "not measured")
        rows.append([name, cell("false"), cell("true")])
    save("web_turns", {"rounds": rounds, "runs": runs})
    return emit("The web with and without its pools and turns, side by side (GRADER_WEB_TURNS)",
                f"The whole load above (without its constant-answer floor) on a fresh service, {rounds} time(s) each "
                "way, alternating (`.venv/bin/python bench/web_load.py --turns-ab "
                f"{rounds}{' --quick' if quick else ''}`): without them, `grader serve` is {serving(False)}; with "
                f"them (the default), {serving(True)}. Milliseconds: the median, then each run in order. The target "
                "for every status figure is p99 < 100 ms.\n\n"
                + table(["figure (ms)", "gthread (WEB_TURNS=false)", "pools and turns (the default)"], rows))


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--turns-ab", type=int, default=0, metavar="ROUNDS",
                        help="the load with and without the pools and turns, ROUNDS times each, side by side")
    args = parser.parse_args(argv)
    if args.turns_ab:
        return turns_ab(args.turns_ab, args.quick)
    from common import check_set
    from throughput import service
    with service(check_set(True), CLIENTS, access_log=True) as ctx:
        ctx["start_workers"](2)
        return run(ctx, args.quick)


if __name__ == "__main__":
    main()
