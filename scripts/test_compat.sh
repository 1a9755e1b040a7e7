#!/usr/bin/env bash
# The compatibility tier: the learner, the built-in engine and the engine conformance suite on the
# LOWEST transformers the project declares (read from pyproject.toml), in a venv of its own
# (.venv-compat), so a newer API used by mistake fails here rather than on a user's machine.
# The default tier (scripts/test.sh) runs on the newest release the range allows.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-compat
LOWEST=$(sed -nE 's/^ *"transformers>=([0-9.]+).*/\1/p' pyproject.toml)
if [ -z "$LOWEST" ]; then
  echo "test_compat: no 'transformers>=X' lower bound found in pyproject.toml" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch first and pinned (the CPU build, as scripts/setup.sh installs it).
"$VENV/bin/python" -m pip install --quiet "torch==${SAO_TORCH_VERSION:-2.13.0}"
"$VENV/bin/python" -m pip install --quiet -e ".[test]" "transformers==$LOWEST"
echo "test_compat: transformers $("$VENV/bin/python" -c 'import transformers; print(transformers.__version__)')," \
  "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
# The learner step with and without gradient checkpointing, packed attention, the kernels, the
# built-in engine, and the conformance suite every engine passes.
# Tiny models: one thread each computes them as fast, and shares the cores better.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  tests/unit/test_precision.py \
  tests/unit/test_learner.py \
  tests/unit/test_packed_attention.py \
  tests/unit/test_kernels.py \
  tests/unit/test_engine.py \
  tests/conformance "$@"
