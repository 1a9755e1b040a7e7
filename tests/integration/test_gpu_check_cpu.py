"""`scripts/gpu_check.sh --cpu`: every stage of the GPU measurement at toy size on the CPU.

The GPU check runs rarely and on machines CI does not have; its toy mode runs every stage's code
here, so a renamed function or a changed CLI breaks CI rather than the next GPU run. The check
reads the one table it prints: every stage is there, and passes (vLLM's row may say it was
skipped, and only because vllm does not import).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = [
    "model",
    "learner_auto",
    "learner_eager",
    "engine",
    "fsdp2",
    "train_ranks",
    "conformance",
    "train_vllm",
    "imported_full",
    "imported_lora",
    "train_default",
]


def vllm_imports() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True)
    return probe.returncode == 0


def test_the_cpu_mode_prints_the_table_with_every_stage_passing(tmp_path) -> None:
    from gguf_files import tiny_gguf
    from sao.models.gguf_import import import_gguf

    imported = import_gguf(tiny_gguf(tmp_path / "tiny.gguf")[0], tmp_path / "imported").out
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_IMPORTED": str(imported)}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--cpu", str(tmp_path / "work")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert "stage" in out and "status" in out, out[-3000:] + done.stderr[-3000:]
    table = out[out.rindex("\nstage ") :].splitlines()[3:]
    rows = {line.split()[0]: line.split()[1] for line in table if line.strip()}
    assert list(rows) == STAGES, out[-3000:]
    expected = {name: "PASS" for name in STAGES}
    if not vllm_imports():
        expected["train_vllm"] = "SKIP"
        assert "train_vllm     SKIP    vllm does not import here" in out
    assert rows == expected, out[-4000:]
    assert done.returncode == 0
    # The figures are in the rows: tokens/s for the learner and both sides of the engine.
    assert "trained tokens/s" in out and "HF generate" in out and "built-in/generate" in out
