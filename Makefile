PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo local-model bench fuzz lint typecheck clean

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

test: lint typecheck
	$(BIN)/pytest -q

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

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
