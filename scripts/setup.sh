#!/usr/bin/env bash
# Creates .venv (if missing) with the CPU build of torch and sao installed editable with its test
# extras. Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build on a CPU machine.
.venv/bin/python -m pip install --quiet "torch==${SAO_TORCH_VERSION:-2.13.0}"
.venv/bin/python -m pip install --quiet -e ".[test,gym]"
