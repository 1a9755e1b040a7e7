"""Kill `sao train` (SIGINT and SIGKILL) at chosen moments, resume it, and check from its files
that nothing completed was lost or trained twice.

One run directory goes through every kill in turn: each invocation is stopped at a named pause
point (`sao.plumbing.faults`), the next one is `--resume`, and the last one finishes. After each
kill the test notes which trajectories had completed (were in `trajectories.jsonl`); at the end
it checks, per kill, how many of those were trained, lost or duplicated, prints the table, and
writes it to `$SAO_FAULT_TABLE` when that is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sao.plumbing.durable import read_jsonl

TOY = [
    "sft.steps=20",
    "sft.batch_size=8",
    "sft.warmup_steps=2",
    "sft.num_demonstrations=64",
    "sft.checkpoint_every=10",
    "critic.pretrain.num_trajectories=8",
    "critic.pretrain.max_steps=3",
    "critic.pretrain.batch_size=4",
    "rollout.concurrency=4",
    "rollout.max_new_tokens=24",
    "env.max_tokens=128",
    "env.max_turns=2",
    "train.batch_size=4",
    "train.steps=4",
    "train.eval_every=3",
    "train.eval_n=4",
    "train.checkpoint_every=2",
]

# (moment, signal): in the order a run reaches them.
KILLS = [
    ("sft-saved:10", signal.SIGINT),
    ("value-pretraining", signal.SIGKILL),
    ("step-logged:1", signal.SIGKILL),  # trajectories logged, only the step-0 checkpoint exists
    ("checkpoint-write:2", signal.SIGKILL),
    ("eval:3", signal.SIGINT),
]
FINAL_STEPS = 7  # enough for the last invocation to train everything completed before a kill
TIMEOUT_S = 180


def _default_sigint() -> None:
    # A shell starting this suite in the background (`cmd &`) makes SIGINT ignored, and an
    # ignored signal stays ignored across exec: the child must get Ctrl-C as a user's run would.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sao_train(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sao.cli", "train", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_default_sigint,
    )


def _wait_for(marker: Path, proc: subprocess.Popen, moment: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not marker.exists():
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"sao train ended (rc {proc.returncode}) before {moment}:\n{out[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"sao train did not reach {moment} within {TIMEOUT_S}s")
        time.sleep(0.1)


def _logged_indices(run_dir: Path) -> list[int]:
    return [row["metadata"]["index"] for row in read_jsonl(run_dir / "trajectories.jsonl")]


def _latest_record(run_dir: Path) -> dict:
    steps = sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").glob("step_*"))
    return json.loads((run_dir / "checkpoints" / f"step_{steps[-1]}" / "record.json").read_text())


def _newest_saved(run_dir: Path, sft_partial: Path) -> str:
    """What a resume can start from: the newest learner checkpoint, else the SFT state, else the
    finished warm start (`sft_partial` sits beside it)."""
    steps = [int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").glob("step_*")]
    if steps:
        return f"checkpoint {max(steps)}"
    if (sft_partial / "sft_state.pt").exists():
        state = torch.load(sft_partial / "sft_state.pt", weights_only=False)
        return f"sft step {len(state['curve'])}"
    return "warm start" if (sft_partial.with_name("warm") / "config.json").exists() else "nothing"


def _strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_killed_anywhere_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    marker = tmp_path / "marker"
    src = Path(__file__).resolve().parents[2] / "src"
    base_env = {
        **os.environ,
        "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
        "SAO_FAULT_MARKER": str(marker),
    }
    flags = [f"--set={item}" for item in [*TOY, f"model.warm_start_dir={tmp_path / 'warm'}"]]
    completed_at_kill: dict[str, set[int]] = {}
    saved_at_kill: dict[str, str] = {}
    outputs: list[str] = []
    for number, (moment, sig) in enumerate(KILLS):
        args = ["--out", str(run_dir), *flags] if number == 0 else ["--resume", str(run_dir)]
        marker.unlink(missing_ok=True)
        proc = _sao_train(args, {**base_env, "SAO_FAULT_PAUSE_AT": moment}, tmp_path)
        _wait_for(marker, proc, moment)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode != 0, f"killed at {moment} but exited 0:\n{out[-2000:]}"
        if sig == signal.SIGINT:
            assert "Traceback" not in out, out[-3000:]
        outputs.append(out)
        completed_at_kill[f"{moment} ({sig.name})"] = set(_logged_indices(run_dir))
        saved_at_kill[f"{moment} ({sig.name})"] = _newest_saved(run_dir, tmp_path / "warm.partial")

    final = _sao_train(["--resume", str(run_dir), "--steps", str(FINAL_STEPS)], base_env, tmp_path)
    out, _ = final.communicate(timeout=TIMEOUT_S)
    assert final.returncode == 0, out[-3000:]

    record = _latest_record(run_dir)
    trained = record["trained_indices"]
    logged = _logged_indices(run_dir)
    # The SFT stopped at step 10 continued from there, not from scratch.
    assert saved_at_kill[f"{KILLS[0][0]} ({KILLS[0][1].name})"] == "sft step 10"
    assert "sft: continuing from step 10" in outputs[1]
    table = [
        "kill moment                    saved before kill  completed  trained  lost  duplicated"
    ]
    for moment, completed in completed_at_kill.items():
        trained_once = {i for i in completed if trained.count(i) == 1}
        duplicated = {i for i in completed if trained.count(i) > 1 or logged.count(i) > 1}
        lost = completed - set(trained) - set(record["dropped_indices"])
        table.append(
            f"{moment:30s} {saved_at_kill[moment]:17s} {len(completed):10d} "
            f"{len(trained_once):8d} {len(lost):5d} {len(duplicated):11d}"
        )
        assert not lost, f"{moment}: completed but never trained: {sorted(lost)}"
        assert not duplicated, f"{moment}: trained or logged twice: {sorted(duplicated)}"
    report = "\n".join(table)
    print("\n" + report)
    if os.environ.get("SAO_FAULT_TABLE"):
        Path(os.environ["SAO_FAULT_TABLE"]).write_text(report + "\n")

    # At least one kill came after trajectories had completed and before they were checkpointed.
    assert any(completed_at_kill.values())
    assert len(trained) == len(set(trained)) == FINAL_STEPS * 4
    assert len(logged) == len(set(logged)), "a trajectory index was logged twice"
    rows = read_jsonl(run_dir / "metrics.jsonl")
    steps = [row["step"] for row in rows]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == FINAL_STEPS
    summary = _strict_json((run_dir / "summary.json").read_text())
    assert summary["steps"] == FINAL_STEPS and summary["trajectories_trained"] == len(trained)
    assert summary["trajectories_completed"] == len(logged)
    sessions = _strict_json((run_dir / "sessions.json").read_text())["sessions"]
    assert len(sessions) == len(KILLS) + 1
    assert summary["wall_s"] >= sum(s["wall_s"] for s in sessions[:-1])
    for name in ("metrics.jsonl", "value_pretrain.jsonl", "trajectories.jsonl"):
        for line in (run_dir / name).read_text().splitlines():
            _strict_json(line)
    assert (run_dir / "policy" / "config.json").exists()
    assert not (tmp_path / "warm.partial").exists(), "the SFT state outlived the warm start"
