#!/usr/bin/env bash
# The test command: set up on a fresh machine, lint, then run the default (non-slow) test tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/python -m pytest -q "$@"
