#!/usr/bin/env bash
# The test command: set up on a fresh machine, lint, then run the default (non-slow) test tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
.venv/bin/python -m pytest -q "$@"
