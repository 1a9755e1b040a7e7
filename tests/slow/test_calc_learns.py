"""The headline, guarded: from a fixed small warm start, a short `calc` run of `sao` gains
held-out accuracy over its start, paired over the same tasks, with the 95% interval above 0.

Minutes on 2 cores (SFT about 3 min, value pretraining, 30 learner steps, two 200-task evals), so
it is marked `slow` and left out of the default run: `python -m pytest -m slow tests/slow`.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SFT_STEPS = 400  # smaller than the 500-step default: a weaker start leaves more to gain
RL_STEPS = 30


def sao(*args: str, cwd: Path) -> None:
    """Run `sao ARGS` as a user would, from `cwd`, with this checkout's sources first."""
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "sao.cli", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"sao {' '.join(args)} failed:\n{done.stderr[-3000:]}"


def test_short_calc_run_gains_accuracy_over_its_warm_start(tmp_path):
    warm = tmp_path / "warm_start"
    sao("sft", "--env", "calc", "--out", str(warm), "--steps", str(SFT_STEPS), cwd=tmp_path)
    run = tmp_path / "run"
    sao(
        "train",
        "--env",
        "calc",
        "--out",
        str(run),
        "--steps",
        str(RL_STEPS),
        *("--set", f"model.path={warm}"),
        *("--set", "train.eval_every=0"),
        *("--set", "train.eval_n=200"),
        cwd=tmp_path,
    )
    summary = json.loads((run / "summary.json").read_text())
    gain = summary["accuracy_gain"]
    print(
        f"calc, {RL_STEPS} steps of sao from a {SFT_STEPS}-step warm start: "
        f"{summary['initial_accuracy']:.3f} -> {summary['final_accuracy']:.3f}, paired gain "
        f"{gain['difference']:+.3f} (95% CI {gain['difference_ci95'][0]:+.3f} to "
        f"{gain['difference_ci95'][1]:+.3f}) over {gain['n']} tasks"
    )
    assert summary["trajectories_trained"] >= RL_STEPS * 32
    assert gain["difference_ci95"][0] > 0.0, gain
