#!/usr/bin/env bash
# Make a Docker engine answer on this machine: install docker.io if missing, start dockerd in the
# background if `docker info` does not answer, then wait for it. Idempotent; safe to run twice.
# Usage: scripts/start-dockerd.sh [LOGFILE]   (default /var/log/dockerd.log)
set -euo pipefail
LOG=${1:-/var/log/dockerd.log}
WAIT_S=${DOCKERD_WAIT_S:-60}

answers() { docker info >/dev/null 2>&1; }

if answers; then
    echo "docker engine already answers"
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { echo "dockerd is not installed and we are not root" >&2; exit 1; }
    echo "installing docker.io"
    # apt's lists may be missing on a fresh machine: update once, then install.
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q docker.io >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q docker.io >/dev/null; }
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "starting dockerd (log: $LOG)"
    mkdir -p "$(dirname "$LOG")"
    # setsid + nohup: the engine outlives this script and the shell that ran it.
    setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
fi
for _ in $(seq "$WAIT_S"); do
    if answers; then
        echo "docker engine answers: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"
        exit 0
    fi
    sleep 1
done
echo "docker engine did not answer within ${WAIT_S}s; last lines of $LOG:" >&2
tail -20 "$LOG" >&2 || true
exit 1
