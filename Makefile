# The README's commands. The venv uses the system interpreter: the sandbox's unprivileged uid must be
# able to execute it (an interpreter under /root, as pyenv installs it, is unreachable for that uid).
PYTHON ?= $(shell command -v /usr/bin/python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The process sandbox's interpreter: outside the checkout, world-readable, so its unprivileged uids
# can run it wherever the repository lives (a checkout under a 0700 directory is unreachable for them).
RUNNER := /opt/transformer-grader/runner

.PHONY: setup test run clean

setup: $(VENV)/.installed $(if $(filter 0,$(shell id -u)),$(RUNNER)/.installed)

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

test: setup
	$(BIN)/pytest -q -rs

run: setup
	$(BIN)/grader check submissions/reference_lm.py
	$(BIN)/grader check submissions/reference_reverse.py

clean:
	rm -rf $(VENV) .pytest_cache
