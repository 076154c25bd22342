# The README's commands. The venv uses the system interpreter: the sandbox's unprivileged uid must be
# able to execute it (an interpreter under /root, as pyenv installs it, is unreachable for that uid).
PYTHON ?= $(shell command -v /usr/bin/python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test run clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

test: setup
	$(BIN)/pytest -q -rs

run: setup
	$(BIN)/grader check submissions/reference_lm.py
	$(BIN)/grader check submissions/reference_reverse.py

clean:
	rm -rf $(VENV) .pytest_cache
