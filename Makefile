# The README's commands. The venv uses the system interpreter: the sandbox's unprivileged uid must be
# able to execute it (an interpreter under /root, as pyenv installs it, is unreachable for that uid).
PYTHON ?= $(shell command -v /usr/bin/python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The process sandbox's interpreter: outside the checkout, world-readable, so its unprivileged uids
# can run it wherever the repository lives (a checkout under a 0700 directory is unreachable for them).
RUNNER := /opt/transformer-grader/runner

.PHONY: setup test test-fast test-deps screenshots run stop system-deps images compose-up compose-down compose-test clean

setup: system-deps $(VENV)/.installed $(if $(filter 0,$(shell id -u)),$(RUNNER)/.installed)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

$(RUNNER)/.installed:
	mkdir -p -m 755 $(dir $(RUNNER))
	$(PYTHON) -m venv $(RUNNER)
	$(RUNNER)/bin/pip install -q torch==2.13.0 safetensors numpy
	chmod -R a+rX $(dir $(RUNNER))
	touch $@

# The whole suite, with what it needs installed first (as root: scripts/install-test-deps.sh; idempotent).
test: setup test-deps
	$(BIN)/pytest -q -rs

test-deps: setup
	scripts/install-test-deps.sh

# The tests that need no Docker, browser, PostgreSQL, Redis or live grader processes, and no whole-submission
# grading in the sandbox (markers in pyproject.toml; `service` is added by tests/conftest.py), timed.
# `make test` still runs everything.
FAST := not slow and not docker and not browser and not service
test-fast: setup
	@start=$$(date +%s); $(BIN)/pytest -q -rs -m "$(FAST)"; status=$$?; \
	echo "make test-fast: $$(( $$(date +%s) - start )) s"; exit $$status

# The browser tests take the screenshots docs/web.md shows (into tests/artifacts/); this refreshes the copies.
screenshots: setup test-deps
	$(BIN)/pytest -q tests/web/test_web_browser.py
	cp tests/artifacts/web_result.png tests/artifacts/web_dashboard.png \
	   tests/artifacts/web_result_phone.png tests/artifacts/web_dashboard_phone.png docs/screenshots/

# The service on this machine without Docker: SQLite, a local Redis, the process sandbox, the web and a
# worker in the background, the two reference solutions graded through the API. `make stop` stops it.
run: system-deps setup
	scripts/run-local.sh

# What a fresh Debian/Ubuntu lacks for `make setup` and `make run` (as root; otherwise it says what to install).
system-deps:
	@missing=""; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	[ -z "$$missing" ] || { \
	    if [ "$$(id -u)" = 0 ]; then echo "installing$$missing"; export DEBIAN_FRONTEND=noninteractive; \
	        apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }; \
	    else echo "please install:$$missing (sudo apt-get install$$missing)"; exit 1; fi; }

INSTANCE = $(or $(GRADER_INSTANCE_PATH),instance)

stop:
	@for f in $(INSTANCE)/run/web.pid $(INSTANCE)/run/worker.pid $(INSTANCE)/run/redis.pid; do \
	    [ -f $$f ] || continue; pid=$$(cat $$f); \
	    if kill $$pid 2>/dev/null; then echo "stopped $$(basename $$f .pid) ($$pid)"; fi; rm -f $$f; \
	done

# The compose stack (docker-compose.yml): images built where nothing can be pulled, then the stack.
COMPOSE := docker-compose --env-file build/compose.env

images:
	scripts/start-dockerd.sh
	@command -v docker-compose >/dev/null || { export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q docker-compose >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q docker-compose >/dev/null; }; }
	scripts/build-images.sh

compose-up: images
	$(COMPOSE) up -d
	@echo "the grader is at http://127.0.0.1:$${GRADER_WEB_PORT:-5000}; make compose-down stops it (keeping the data)"

compose-down:
	$(COMPOSE) down

compose-test: setup images
	$(BIN)/pytest -q -rs tests/test_compose.py

# Benchmarks (bench/run_all.py): latency split, overhead, the naive baseline, throughput, web load, memory;
# prints the tables and writes BENCHMARKS.md. `make bench QUICK=1` is the short run.
.PHONY: bench bench-deps
bench: setup bench-deps
	$(BIN)/python bench/run_all.py $(if $(QUICK),--quick)

# wrk drives the web benchmark's back-to-back status polling (bench/web_load.py); without it that part is skipped.
bench-deps:
	@command -v wrk >/dev/null || { \
	    if [ "$$(id -u)" = 0 ]; then echo "installing wrk"; export DEBIAN_FRONTEND=noninteractive; \
	        apt-get install -y -q wrk >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }; \
	    else echo "wrk is not installed (sudo apt-get install wrk): the web benchmark runs without it"; fi; }

clean:
	rm -rf $(VENV) .pytest_cache
