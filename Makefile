# corpus-dagster: `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: install warm demo test test-deploy test-e2e test-cluster lint ui bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Compile the numba kernels into their on-disk cache ahead of a build, one process per core (about 20 CPU s once;
# a second or two when the cache is warm), so no build, test worker or pool process compiles them itself.
warm: install
	$(PY) -m corpus_dagster.cli.warm

demo: warm
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m corpus_dagster.cli.demo

# One pytest worker per core (pytest-xdist); a module's tests stay on one worker, so its fixtures are built
# once. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
test: warm lint
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadscope

# A shared deployment played as an attacker would: whole CLI builds with the artifacts on moto's S3 server on
# 127.0.0.1 (planted keys, planted step values, two writers, a store gone mid-run, secrets nowhere): tests/deploy/.
test-deploy: warm
	CORPUS_DEPLOY=1 $(VENV)/bin/pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadscope tests/deploy -rs

# The UI in a real browser: dagster dev on 127.0.0.1 and Debian's chromium (installed here when missing; never a
# browser download). Screenshots land in tests/e2e/artifacts/.
test-e2e: install
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; } || \
	  { sudo apt-get update -qq && sudo apt-get install -y -qq chromium; } || echo "chromium could not be installed"
	$(PY) -c 'import playwright' 2>/dev/null || $(PY) -m pip install -q playwright
	CORPUS_E2E=1 $(VENV)/bin/pytest -p no:cacheprovider tests/e2e -rs

# A cluster in a box on 127.0.0.1: moto's S3 server holds the sources and the artifacts, PostgreSQL the Dagster
# instance (Debian's package, installed here when missing), and two `dask worker` processes, each in an empty
# folder of its own, run every step (tests/cluster/).
test-cluster: install
	command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq postgresql; } || \
	  { sudo apt-get update -qq && sudo apt-get install -y -qq postgresql; } || echo "postgresql could not be installed"
	$(PY) -m pip install -q -e '.[dev,deploy,cluster-test]'
	CORPUS_CLUSTER=1 $(VENV)/bin/pytest -p no:cacheprovider tests/cluster -rs

# ruff, and the import contract of pyproject.toml: core <- lib <- stages <- explain <- defs <- cli, a stage reads
# another only through its driver, no dagster below defs
lint: install
	$(VENV)/bin/ruff check corpus_dagster tests bench verify
	$(VENV)/bin/lint-imports --no-cache

# `make ui PORT=3001` when 3000 is taken. Dagster has no setting that opens the lineage view with its groups
# expanded: the UI keeps the open groups per browser (local storage, and the `expanded=` URL parameter); press
# "Expand all groups" (Alt+E) once and it stays so.
PORT ?= 3000
ui: install
	$(PY) -c 'from pathlib import Path; from corpus_dagster.defs.instance import prepare_home; prepare_home(Path("$(DAGSTER_HOME)"))'
	@echo "UI on http://127.0.0.1:$(PORT) (lineage: Alt+E expands every group)"
	$(VENV)/bin/dagster dev -h 127.0.0.1 -p $(PORT) -w workspace.yaml

clean:
	rm -rf artifacts .dagster_home
