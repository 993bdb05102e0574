# corpus-dagster: `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: install demo test lint ui bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m corpus_dagster.cli.demo

test: install lint
	$(VENV)/bin/pytest

lint: install
	$(VENV)/bin/ruff check corpus_dagster tests bench

ui: install
	$(PY) -c 'from pathlib import Path; from corpus_dagster.cli.run import ensure_dagster_home as e; e(Path("$(DAGSTER_HOME)"))'
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p 3000 -w workspace.yaml

clean:
	rm -rf artifacts .dagster_home
