PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo local-model bench fuzz lint typecheck dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy src

# Progress per test file; PYTEST_ARGS adds options, e.g.
#   make test PYTEST_ARGS='-m "not local_model and not durable"'   # skip the heavy servers
test: lint typecheck
	$(BIN)/pytest $(PYTEST_ARGS)

# A wheel in $(DIST) (pip install dist/toolweave-*.whl; extras: 'dist/toolweave-*.whl[mcp]').
DIST ?= dist
dist: $(BIN)/python
	rm -rf $(DIST)
	$(BIN)/python -m pip wheel -q --no-deps --wheel-dir $(DIST) .
	@ls $(DIST)/*.whl

# The seed's weather scenario end to end: a cloud provider when its key is set, otherwise a
# local model (llama.cpp's server, built once and cached, with SmolLM2).
demo: $(STAMP)
	$(BIN)/toolweave demo

# Build (once) and cache the local llama.cpp server used by the demo and the e2e tests.
local-model: $(STAMP)
	$(BIN)/python -m toolweave.local build

fuzz: $(STAMP)
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} $(BIN)/pytest tests/fuzz -q -s

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# Peer comparison (benchmarks/peers): pinned peers in their own venv, never in .venv.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: bench-peers

$(BENCH_STAMP): benchmarks/peers/requirements.txt pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -r benchmarks/peers/requirements.txt -e .
	touch $(BENCH_STAMP)

bench-peers: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m benchmarks.peers

# MCP serving (benchmarks/mcp_serve.py): FastMCP 4 in its own venv, .venv-bench-serve/
# (created by the script from benchmarks/mcp_serve_requirements.txt), never in .venv.
.PHONY: bench-serve

bench-serve: $(STAMP)
	$(BIN)/python -m benchmarks.mcp_serve

clean:
	rm -rf $(VENV) dist .mypy_cache .pytest_cache .ruff_cache
