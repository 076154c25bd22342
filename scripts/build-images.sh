#!/usr/bin/env bash
# Build every image the compose stack needs, on a machine that may reach no registry. Idempotent:
# an image whose inputs (Dockerfile, base image, wheels, sources) are unchanged is not rebuilt.
#
#   scripts/build-images.sh           # runner, app, and redis/postgres where the official ones are absent
#   IMAGES_REBUILD=1 scripts/build-images.sh
#
# It writes build/compose.env, the image names for `docker-compose --env-file build/compose.env`.
# Settings (environment): GRADER_APP_IMAGE (grader-app:latest), GRADER_RUNNER_IMAGE
# (grader-runner:latest), GRADER_REDIS_IMAGE / GRADER_POSTGRES_IMAGE (default: redis:7 and
# postgres:15 when local or pullable, else grader-redis:local / grader-postgres:local built from
# Debian's packages), APP_BASE (python:3.11-slim when available, else the debootstrap base that
# scripts/build-runner-image.sh makes, grader-base:bookworm).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${IMAGES_CACHE:-/var/cache/grader-images}
APP_IMAGE=${GRADER_APP_IMAGE:-grader-app:latest}
RUNNER_IMAGE=${GRADER_RUNNER_IMAGE:-grader-runner:latest}
DEBOOTSTRAP_IMAGE=${RUNNER_DEBOOTSTRAP_IMAGE:-grader-base:bookworm}
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
log() { echo "[build-images] $*"; }
have() { docker image inspect "$1" >/dev/null 2>&1; }
pullable() { timeout 30 docker pull -q "$1" >/dev/null 2>&1; }
label() { docker image inspect --format "{{index .Config.Labels \"grader.inputs\"}}" "$1" 2>/dev/null || true; }
PROXY_ARGS=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && PROXY_ARGS+=(--build-arg "$v=${!v}")
done

# 1. The runner image, and with it the shared debootstrap base (the other script owns both).
RUNNER_IMAGE=$RUNNER_IMAGE scripts/build-runner-image.sh

# 2. The base for our own images: APP_BASE, else the official Python image if here, else the debootstrap one.
if [ -n "${APP_BASE:-}" ]; then BASE=$APP_BASE
elif have python:3.11-slim; then BASE=python:3.11-slim
elif have "$DEBOOTSTRAP_IMAGE"; then BASE=$DEBOOTSTRAP_IMAGE
elif pullable python:3.11-slim; then BASE=python:3.11-slim
else log "no base image: neither python:3.11-slim nor $DEBOOTSTRAP_IMAGE" >&2; exit 1
fi
BASE_ID=$(docker image inspect --format '{{.Id}}' "$BASE")
mkdir -p "$CACHE"

# build IMAGE DIR KEY [docker build args...]: build DIR's context as IMAGE unless its label says KEY.
build() {
    local image=$1 ctx=$2 key=$3; shift 3
    if [ -z "${IMAGES_REBUILD:-}" ] && [ "$(label "$image")" = "$key" ]; then
        log "$image is up to date (inputs $key)"; return
    fi
    log "docker build $image from $BASE"
    local start=$SECONDS
    docker build -q "${PROXY_ARGS[@]}" --build-arg BASE="$BASE" --label grader.inputs="$key" --label grader.base="$BASE" \
        "$@" -t "$image" "$ctx" >/dev/null
    log "built $image in $((SECONDS - start)) s ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# 3. The app image: every wheel fetched on the host (pip finds the machine's own torch CPU wheel),
# so the build itself needs no index; the package's sources copied in.
CTX=$(mktemp -d "$CACHE/app.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CACHE/wheels" "$CTX/src"
"$PY" - >"$CTX/requirements.txt" <<'PYEOF'
import importlib.metadata as m, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
torch = "torch==" + m.version("torch").split("+")[0] if any(d.startswith("torch") for d in deps) else None
for d in deps:
    print(torch if d.startswith("torch") and torch else d)
print("gunicorn>=22")
print("setuptools>=68")
PYEOF
log "pip download into $CACHE/wheels"
"$PY" -m pip download -q --only-binary=:all: -d "$CACHE/wheels" -r "$CTX/requirements.txt" >"$CTX/pip.log" 2>&1 \
    || { cat "$CTX/pip.log" >&2; exit 1; }
# Only the wheels this resolution needs (the cache may hold older ones): pip's report names them.
"$PY" -m pip download -q --only-binary=:all: -d "$CTX/wheels" --find-links "$CACHE/wheels" --no-index \
    -r "$CTX/requirements.txt" >"$CTX/pip.log" 2>&1 || { cat "$CTX/pip.log" >&2; exit 1; }
rm -f "$CTX/pip.log"
cp -r pyproject.toml grader worker rubric "$CTX/src/"
[ -f README.md ] && cp README.md "$CTX/src/"
find "$CTX/src" -name __pycache__ -prune -exec rm -rf {} +
cp docker/app/Dockerfile "$CTX/"
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$CTX/ca.crt"; else : >"$CTX/ca.crt"; fi
KEY=$( { echo "$BASE_ID"; cd "$CTX" && find . -type f ! -name ca.crt -print0 | sort -z | xargs -0 sha256sum; } \
       | sha256sum | cut -c1-16)
build "$APP_IMAGE" "$CTX" "$KEY"

# 4. Redis and PostgreSQL: the official images when here or pullable, else Debian's packages on our base.
service_image() {  # NAME OFFICIAL LOCAL -> the image to use, built if needed
    local name=$1 official=$2 local_image=$3 var=GRADER_${1^^}_IMAGE
    if [ -n "${!var:-}" ] && [ "${!var}" != "$local_image" ]; then echo "${!var}"; return; fi
    if [ -z "${!var:-}" ] && { have "$official" || pullable "$official"; }; then echo "$official"; return; fi
    local key
    key=$( { echo "$BASE_ID"; cat docker/"$name"/*; } | sha256sum | cut -c1-16)
    build "$local_image" "docker/$name" "$key" >&2
    echo "$local_image"
}
REDIS_IMAGE=$(service_image redis redis:7 grader-redis:local)
POSTGRES_IMAGE=$(service_image postgres postgres:15 grader-postgres:local)

mkdir -p build
# The stack's session key: random, kept across rebuilds (a new one signs everyone out); GRADER_SECRET_KEY wins.
SECRET_KEY=${GRADER_SECRET_KEY:-$(sed -n 's/^GRADER_SECRET_KEY=//p' build/compose.env 2>/dev/null || true)}
[ -n "$SECRET_KEY" ] || SECRET_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077; cat >build/compose.env.new <<ENVEOF
GRADER_APP_IMAGE=$APP_IMAGE
GRADER_RUNNER_IMAGE=$RUNNER_IMAGE
GRADER_REDIS_IMAGE=$REDIS_IMAGE
GRADER_POSTGRES_IMAGE=$POSTGRES_IMAGE
GRADER_SECRET_KEY=$SECRET_KEY
ENVEOF
)
mv build/compose.env.new build/compose.env
log "images: app $APP_IMAGE, runner $RUNNER_IMAGE, redis $REDIS_IMAGE, postgres $POSTGRES_IMAGE (build/compose.env)"
