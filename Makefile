# Every target does its own set-up on a fresh machine: virtual environment, Python
# packages (from PyPI, cached in ~/.cache/pip), Java and Neo4j (from Maven Central,
# cached in ~/.m2 and .cache/neo4j).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# pytest-xdist workers for `make test`, each with a Neo4j of its own (0: no xdist, one server).
TEST_WORKERS ?= 2
PYTEST_ARGS ?=

.PHONY: serve test lint neo4j-start neo4j-stop clean

# Set-up writes to stderr only: `make serve` speaks MCP on stdout.
$(PY):
	@$(PYTHON) -m venv $(VENV) >&2
	@$(PY) -m pip install --quiet --upgrade pip >&2

# Serving needs the package alone (its built-in embedder needs no PyTorch); the tests also
# install the `semantic` extra (sentence-transformers, PyTorch) to check the built-in
# embedder's vectors against it.
$(VENV)/.serve: pyproject.toml | $(PY)
	@echo "installing palimpsest into $(VENV)..." >&2
	@$(PY) -m pip install --quiet -e . >&2
	@touch $@

$(VENV)/.test: pyproject.toml | $(PY)
	@echo "installing palimpsest with its test and semantic extras into $(VENV)..." >&2
	@$(PY) -m pip install --quiet -e ".[test,semantic]" >&2
	@touch $@

## The MCP server over stdio on the embedded SQLite store.
serve: $(VENV)/.serve
	@$(VENV)/bin/palimpsest serve

## The lint, format and type gate: ruff and mypy with zero findings.
lint: $(VENV)/.test
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/mypy

# The viewer's browser tests drive Debian's headless Chromium: installed (as root, as CI
# runs) only when its driver is missing, so a machine that has it never calls apt-get.
/usr/bin/chromedriver:
	@echo "installing chromium and chromium-driver from Debian for the browser tests..." >&2
	@apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2

## The gate, then every test, the Neo4j ones included, on TEST_WORKERS workers, each against a
## Neo4j 5 of its own that this target starts and stops (tools/test.sh).
test: lint /usr/bin/chromedriver
	@tools/test.sh $(TEST_WORKERS) $(PY) $(PYTEST_ARGS)

## A local Neo4j 5 Community for development; the last line printed is its bolt URI.
neo4j-start:
	@tools/neo4j.sh start

neo4j-stop:
	@tools/neo4j.sh stop

clean:
	rm -rf $(VENV) .cache .pytest_cache .hypothesis
