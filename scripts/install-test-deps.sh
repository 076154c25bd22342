#!/usr/bin/env bash
# Everything the whole test suite needs beyond `make setup`: Chromium (browser tests), bubblewrap (the process
# sandbox's namespaces), a Docker engine with the runner image (the docker backend), docker-compose and the
# service images (the compose test). `make test` and .ci/run run it. Idempotent: what is there is left alone,
# and a second run takes seconds. PostgreSQL and Redis are the machine's (see README, Troubleshooting).
# Without root nothing can be installed: it says what is missing, and those tests skip (fail in CI).
set -euo pipefail
cd "$(dirname "$0")/.."

timed() {  # run a step and say how long it took
    local name=$1 start=$SECONDS
    shift
    echo "== $name"
    "$@"
    echo "== $name: $((SECONDS - start)) s"
}

apt_install() {  # apt-get install, updating the package lists once if a fresh machine has none
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "$@" >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q "$@" >/dev/null; }
}

if [ "$(id -u)" != 0 ]; then
    missing=""
    command -v chromium >/dev/null || missing="$missing chromium"
    command -v bwrap >/dev/null || missing="$missing bubblewrap"
    docker info >/dev/null 2>&1 || missing="$missing docker-engine"
    command -v docker-compose >/dev/null || missing="$missing docker-compose"
    [ -z "$missing" ] || echo "not root, so not installed:$missing (their tests skip; run as root to install them)"
    exit 0
fi

install_bwrap() { command -v bwrap >/dev/null || apt_install bubblewrap; }
install_compose() { command -v docker-compose >/dev/null || apt_install docker-compose; }

timed "browser" scripts/install-browser.sh
timed "bubblewrap" install_bwrap
timed "docker engine" scripts/start-dockerd.sh
timed "runner image" scripts/build-runner-image.sh
timed "docker-compose" install_compose
timed "service images" scripts/build-images.sh
