#!/usr/bin/env bash
# Headless Chromium for the browser tests (tests/web, marker `browser`): Debian's chromium package, driven by
# Playwright (the Python package, in the [test] extra), which cannot download a browser of its own here.
# Idempotent: does nothing when /usr/bin/chromium and playwright are already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q chromium >/dev/null; }
fi
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import playwright" 2>/dev/null; then
    .venv/bin/pip install -q playwright
fi
chromium --version 2>/dev/null | head -n 1
