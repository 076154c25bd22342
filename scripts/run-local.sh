#!/usr/bin/env bash
# `make run`: the whole service on this machine without Docker, and the two reference solutions
# graded through it. SQLite under instance/, a local Redis (started if none answers), the process
# sandbox, `grader serve` and `grader worker --beat` in the background. `make stop` stops what this
# started (and only that).
#
# Settings (environment): GRADER_PORT (5000), GRADER_BROKER_URL (redis://127.0.0.1:6379/0),
# GRADER_INSTANCE_PATH (./instance), GRADER_WORKER_CONCURRENCY (1), RUN_TIMEOUT_S (900: how long to
# wait for the two gradings).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/.venv/bin
PORT=${GRADER_PORT:-5000}
export GRADER_INSTANCE_PATH=${GRADER_INSTANCE_PATH:-$ROOT/instance}
export GRADER_BROKER_URL=${GRADER_BROKER_URL:-redis://127.0.0.1:6379/0}
export GRADER_SANDBOX_BACKEND=process
# A demo re-run uploads the same files again: do not let the rubric's attempts-per-day refuse them.
export GRADER_ENFORCE_ATTEMPTS=${GRADER_ENFORCE_ATTEMPTS:-false}
RUNDIR=$GRADER_INSTANCE_PATH/run
LOGDIR=$GRADER_INSTANCE_PATH/logs
# The instance holds every submission, token hash and log: the sandbox uids on this host must read none of it.
# Everything this script and its processes write there is 0600 in 0700 folders (installs run under umask 022).
umask 077
mkdir -p "$RUNDIR" "$LOGDIR"
chmod -R go-rwx "$GRADER_INSTANCE_PATH"
log() { echo "[run] $*"; }
die() { echo "[run] error: $*" >&2; exit 1; }
alive() { [ -f "$RUNDIR/$1.pid" ] && kill -0 "$(cat "$RUNDIR/$1.pid")" 2>/dev/null; }

[ -x "$BIN/grader" ] || die "no venv: run make setup first"

# 0. bubblewrap: the process sandbox refuses to grade without its namespaces (GRADER_SANDBOX_ALLOW_WEAK=true
# would grade anyway, every result marked weak).
if ! command -v bwrap >/dev/null; then
    [ "$(id -u)" = 0 ] || die "bubblewrap is not installed (sudo apt-get install bubblewrap)"
    log "installing bubblewrap"
    export DEBIAN_FRONTEND=noninteractive
    (umask 022; apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q bubblewrap >/dev/null; })
fi
case ${GRADER_SANDBOX_ALLOW_WEAK:-} in 1|true|yes|on) log "GRADER_SANDBOX_ALLOW_WEAK is set: results may be marked weak";;
    *) [ "$(id -u)" = 0 ] || die "the process sandbox needs root (a uid of its own per grading, a cgroup); run as root, or set GRADER_SANDBOX_ALLOW_WEAK=true to grade with fewer layers, every result marked weak";;
esac

# 1. Redis: use the one that answers on the broker's host and port, else start our own there.
read -r RHOST RPORT < <("$BIN/python" -c "
from urllib.parse import urlsplit; import os
u = urlsplit(os.environ['GRADER_BROKER_URL']); print(u.hostname or '127.0.0.1', u.port or 6379)")
redis_answers() { "$BIN/python" -c "import redis,sys; redis.Redis(host='$RHOST', port=$RPORT, socket_timeout=2).ping()" 2>/dev/null; }
if redis_answers; then
    log "Redis answers on $RHOST:$RPORT"
else
    case $RHOST in 127.0.0.1|localhost) ;; *) die "no Redis answers on $RHOST:$RPORT (GRADER_BROKER_URL)";; esac
    if ! command -v redis-server >/dev/null; then
        [ "$(id -u)" = 0 ] || die "redis-server is not installed (sudo apt-get install redis-server)"
        log "installing redis-server"
        export DEBIAN_FRONTEND=noninteractive
        (umask 022; apt-get install -y -q redis-server >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q redis-server >/dev/null; })
    fi
    log "starting redis-server on $RPORT (data and log in $GRADER_INSTANCE_PATH)"
    redis-server --port "$RPORT" --bind 127.0.0.1 --daemonize yes --dir "$GRADER_INSTANCE_PATH" \
        --pidfile "$RUNDIR/redis.pid" --logfile "$LOGDIR/redis.log" --save 60 1 --appendonly no
    for _ in $(seq 50); do redis_answers && break; sleep 0.2; done
    redis_answers || die "redis-server did not answer; see $LOGDIR/redis.log"
fi

# 2. The store (SQLite in the instance folder unless GRADER_DATABASE_URL says otherwise).
"$BIN/grader" db upgrade

# 3. A demo assignment (every check, as `grader check`), a demo student and their token.
"$BIN/grader" assignment create demo --title "Capstone (demo)" >/dev/null 2>&1 || true
"$BIN/grader" roster add demo --name "Demo Student" >/dev/null 2>&1 || true
TOKEN=$("$BIN/grader" token create --student demo --label "make run" | tail -1)
INSTRUCTOR=$("$BIN/grader" token create --instructor --label "make run" | tail -1)
printf '%s\n' "$TOKEN" >"$GRADER_INSTANCE_PATH/demo-student.token"
printf '%s\n' "$INSTRUCTOR" >"$GRADER_INSTANCE_PATH/demo-instructor.token"

# 4. Web and worker in the background (restarted if already running from an earlier make run).
start() {  # NAME COMMAND...
    local name=$1; shift
    if alive "$name"; then kill "$(cat "$RUNDIR/$name.pid")" 2>/dev/null || true; sleep 1; fi
    setsid nohup "$@" >"$LOGDIR/$name.log" 2>&1 </dev/null &
    echo $! >"$RUNDIR/$name.pid"
}
if ! alive web && "$BIN/python" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null; then
    die "port $PORT is taken by another program; set GRADER_PORT"
fi
start web "$BIN/grader" serve --host 127.0.0.1 --port "$PORT"
start worker "$BIN/grader" worker --concurrency "${GRADER_WORKER_CONCURRENCY:-1}" --beat
URL=http://127.0.0.1:$PORT
for _ in $(seq 60); do
    "$BIN/python" -c "import urllib.request; urllib.request.urlopen('$URL/api/v1/health', timeout=2)" 2>/dev/null && break
    alive web || die "the web server stopped; see $LOGDIR/web.log"
    sleep 0.5
done
log "web at $URL (log $LOGDIR/web.log), worker (log $LOGDIR/worker.log)"

# 5. The two reference solutions, uploaded through the API as a student would, then their results.
"$BIN/python" - "$URL" "$TOKEN" "${RUN_TIMEOUT_S:-900}" submissions/reference_lm.py submissions/reference_reverse.py <<'PYEOF'
import json, sys, time, urllib.error, urllib.request
url, token, timeout, paths = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]

def call(method, path, body=None):
    req = urllib.request.Request(url + path, data=body, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "text/x-python"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        sys.exit(f"[run] {method} {path}: {exc.code} {exc.read().decode(errors='replace')}")

subs = {}
for p in paths:
    name = p.rsplit("/", 1)[-1]
    subs[name] = call("POST", f"/api/v1/assignments/demo/submissions?filename={name}", open(p, "rb").read())["id"]
    print(f"[run] uploaded {p}: submission {subs[name]}", flush=True)
deadline, start = time.monotonic() + timeout, time.monotonic()
pending = dict(subs)
while pending and time.monotonic() < deadline:
    for name, sid in list(pending.items()):
        if call("GET", f"/api/v1/submissions/{sid}")["status"] in ("done", "failed"):
            print(f"[run] {name} graded after {time.monotonic() - start:.0f} s", flush=True)
            del pending[name]
    time.sleep(1)
if pending:
    sys.exit(f"[run] not graded within {timeout:g} s: {sorted(pending)}; see instance/logs/worker.log")
for name, sid in subs.items():
    status = call("GET", f"/api/v1/submissions/{sid}")
    if status["status"] != "done":
        print(f"\n{name}: {status['status']} {status.get('error') or ''}")
        continue
    result = call("GET", f"/api/v1/submissions/{sid}/result")
    score = result.get("score") or {}
    points = f"  {score.get('total')}/{score.get('max')} points" if "total" in score else ""
    print(f"\n{name} (submission {sid}){points}")
    for c in result["report"]["checks"]:
        print(f"  {c['id']:<22} {c['status']:<8} {(c.get('message') or '')[:80]}")
PYEOF

STOP="make stop"
[ "$GRADER_INSTANCE_PATH" = "$ROOT/instance" ] || STOP="GRADER_INSTANCE_PATH=$GRADER_INSTANCE_PATH make stop"
cat <<MSG

The grader is running: open $URL/ and sign in with a token
  student token:    $TOKEN   (also in $GRADER_INSTANCE_PATH/demo-student.token)
  instructor token: $INSTRUCTOR   (also in $GRADER_INSTANCE_PATH/demo-instructor.token)
  upload a file:    curl -H "Authorization: Bearer \$TOKEN" -F file=@my_transformer.py $URL/api/v1/assignments/demo/submissions
  logs:             $LOGDIR/
  stop it:          $STOP
MSG
