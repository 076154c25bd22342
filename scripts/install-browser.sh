#!/usr/bin/env bash
# Headless Chromium for the browser tests (tests/web, marker `browser`): Debian's chromium package, driven by
# Playwright (the Python package, in the [test] extra), which cannot download a browser of its own here.
# axe-core (npm), which the browser tests inject into every page to check accessibility, goes into build/axe
# (outside git), pinned. Idempotent: does nothing when chromium, playwright and that axe-core are already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q chromium >/dev/null; }
fi
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import playwright" 2>/dev/null; then
    .venv/bin/pip install -q playwright
fi
AXE_VERSION=4.14.1
AXE=build/axe/node_modules/axe-core
if ! grep -qs "\"version\": \"$AXE_VERSION\"" "$AXE/package.json"; then
    if ! command -v npm >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q npm >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q npm >/dev/null; }
    fi
    mkdir -p build/axe
    npm install --prefix build/axe --no-save --no-audit --no-fund --silent "axe-core@$AXE_VERSION" >/dev/null
fi
chromium --version 2>/dev/null | head -n 1
echo "axe-core $AXE_VERSION: $AXE/axe.min.js"
