#!/usr/bin/env bash
# The main job: set up on a fresh machine, then `sao train` on the embedded tiny default.
# Extra arguments go to `sao train` (e.g. --preset grpo --steps 20).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/sao train "$@"
