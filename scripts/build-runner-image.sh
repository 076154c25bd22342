#!/usr/bin/env bash
# Build the sandbox runner image (docker/runner/Dockerfile) on a machine that may have no registry
# access. Idempotent: skips the build when an image with the same inputs is already there.
#
#   scripts/build-runner-image.sh            # image grader-runner:latest
#   RUNNER_BASE=python:3.11-slim scripts/build-runner-image.sh   # force a base image
#   RUNNER_REBUILD=1 scripts/build-runner-image.sh               # build even if up to date
#
# The base: RUNNER_BASE if given; else python:3.11-slim if it is local or can be pulled; else a
# Debian bookworm minbase made with debootstrap and `docker import`ed as grader-base:bookworm.
# torch's CPU wheel and its dependencies are fetched on the host with pip (which finds the wheel the
# machine has) and copied in through the build context, with the host's CA bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
IMAGE=${RUNNER_IMAGE:-grader-runner:latest}
CACHE=${RUNNER_CACHE:-/var/cache/grader-runner}
DEBOOTSTRAP_IMAGE=${RUNNER_DEBOOTSTRAP_IMAGE:-grader-base:bookworm}
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
log() { echo "[build-runner-image] $*"; }

# The same torch, safetensors and numpy as the judge's own environment, so both sides agree.
version_of() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }
TORCH_VERSION=${TORCH_VERSION:-$(version_of torch | sed 's/+.*//')}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
REQS="torch==$TORCH_VERSION"
for pkg in safetensors numpy; do
    v=$(version_of "$pkg"); REQS="$REQS ${pkg}${v:+==$v}"
done

pick_base() {
    if [ -n "${RUNNER_BASE:-}" ]; then echo "$RUNNER_BASE"; return; fi
    if docker image inspect python:3.11-slim >/dev/null 2>&1; then echo python:3.11-slim; return; fi
    if timeout 30 docker pull -q python:3.11-slim >/dev/null 2>&1; then echo python:3.11-slim; return; fi
    echo "$DEBOOTSTRAP_IMAGE"
}

build_debootstrap_base() {
    if docker image inspect "$DEBOOTSTRAP_IMAGE" >/dev/null 2>&1; then
        log "base $DEBOOTSTRAP_IMAGE already present"; return
    fi
    command -v debootstrap >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null \
        || { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; }; }
    local dir="$CACHE/rootfs"
    rm -rf "$dir"; mkdir -p "$dir"
    log "debootstrap bookworm minbase into $dir (about 2 min)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$dir" \
        "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -c . | docker import -c 'CMD ["/bin/bash"]' - "$DEBOOTSTRAP_IMAGE" >/dev/null
    rm -rf "$dir"
    log "imported $DEBOOTSTRAP_IMAGE"
}

mkdir -p "$CACHE"
BASE=$(pick_base)
[ "$BASE" = "$DEBOOTSTRAP_IMAGE" ] && build_debootstrap_base
BASE_ID=$(docker image inspect --format '{{.Id}}' "$BASE")

# Everything the image depends on, hashed: skip the build when nothing changed.
KEY=$( { cat docker/runner/Dockerfile; echo "$BASE_ID"; echo "$REQS"; } | sha256sum | cut -c1-16)
if [ -z "${RUNNER_REBUILD:-}" ] && \
   [ "$(docker image inspect --format '{{index .Config.Labels "grader.inputs"}}' "$IMAGE" 2>/dev/null)" = "$KEY" ]; then
    log "$IMAGE is up to date (inputs $KEY, base $BASE)"
    exit 0
fi

CTX=$(mktemp -d "$CACHE/context.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
cp docker/runner/Dockerfile "$CTX/"
mkdir "$CTX/wheels"
log "pip download $REQS"
# pip finds the machine's own torch wheel (find-links) before any index.
"$PY" -m pip download -q --only-binary=:all: -d "$CTX/wheels" $REQS >"$CTX/pip.log" 2>&1 \
    || { cat "$CTX/pip.log" >&2; exit 1; }
rm -f "$CTX/pip.log"
printf '%s\n' $REQS >"$CTX/requirements.txt"
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$CTX/ca.crt"; else : >"$CTX/ca.crt"; fi
log "docker build $IMAGE from $BASE"
docker build -q --build-arg BASE="$BASE" --label grader.inputs="$KEY" --label grader.base="$BASE" \
    -t "$IMAGE" "$CTX" >/dev/null
log "built $IMAGE ($(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
