"""The floor under bench/web_load.py's wrk figures: a Flask view that answers a constant, served as `grader serve` is.

    .venv/bin/python bench/web_floor.py PORT WORKERS

Same gunicorn worker and options (grader/app/pools.py: WORKERS processes of grader.app.serving.THREADS threads for
reads); no token, no database. What wrk measures here is what gunicorn and Flask alone cost on this machine.
"""
import sys
from pathlib import Path

from flask import Flask, jsonify

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grader.app.pools import TwoPoolWorker  # noqa: E402
from grader.app.serving import THREADS, Gunicorn  # noqa: E402

app = Flask(__name__)


@app.get("/status")
def status():
    """A status-sized JSON answer, computed from nothing."""
    return jsonify({"id": 1, "status": "queued", "queue_position": 1, "progress": None})


if __name__ == "__main__":
    port, workers = int(sys.argv[1]), int(sys.argv[2])
    Gunicorn(app, {"bind": f"127.0.0.1:{port}", "workers": workers, "threads": THREADS,
                   "worker_class": TwoPoolWorker, "preload_app": True}).run()
