"""Every script in `benchmarks/` runs at toy size and prints the figure docs/results.md quotes.

Nothing is timed here: the sizes are the smallest each script takes, so these check that a
benchmark still runs against the package as it is now, not what it measures. They run in this
process (the package is imported once) except `serve.py`, whose server and learner threads
outlive its `main`. `time_to_accuracy.py` trains two runs of `sao reproduce`'s quick budget,
minutes on two cores; its smoke test gives it two finished runs, which it reuses as it does on a
second call, so the reading and the ratio are what run.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_benchmark(monkeypatch: pytest.MonkeyPatch, name: str, *argv: str) -> None:
    """`python benchmarks/NAME.py ARGV...`, in this process (its folder first on the path, as
    when it is run as a script)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [name, *argv])
    try:
        runpy.run_path(str(BENCHMARKS / name), run_name="__main__")
    except SystemExit as done:  # a `sys.exit(main())` that returned 0
        assert done.code in (0, None)


def figures(out: str) -> dict[str, str]:
    """`key: value` lines as a dict (the layout of most benchmarks' output)."""
    pairs = (line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_engine_throughput(monkeypatch, capsys):
    argv = ["--requests", "4", "--batch", "2", "--repeats", "1", "--median", "4", "--cap", "8"]
    run_benchmark(monkeypatch, "engine_throughput.py", *argv)
    out = figures(capsys.readouterr().out)
    assert out["requests"] == "4" and float(out["ratio_builtin"]) > 0


def test_learner(monkeypatch, capsys):
    run_benchmark(monkeypatch, "learner.py", "--batch", "2", "--repeats", "1")
    out = figures(capsys.readouterr().out)
    assert out["batch"] == "2" and float(out["overhead_ratio"]) > 0
    assert float(out["packed_speedup"]) > 0


def test_learner_presets(monkeypatch, capsys):
    argv = ["--batch", "2", "--repeats", "1", "--shape", "calc", "--presets", "sao,grpo"]
    run_benchmark(monkeypatch, "learner_presets.py", *argv)
    out = figures(capsys.readouterr().out)
    assert float(out["ratio_sao"]) == 1.0 and float(out["ratio_grpo"]) > 0
    assert out["grpo_critic_k_updates"] == "0"


def test_pipeline(monkeypatch, capsys, tmp_path):
    argv = ["--steps", "2", "--concurrency", "8", "--batch", "8", "--median-s", "0.001"]
    run_benchmark(monkeypatch, "pipeline.py", *argv, "--json", str(tmp_path / "p.json"))
    assert "SAO / GRPO sync" in capsys.readouterr().out
    result = json.loads((tmp_path / "p.json").read_text())
    # Over 2 steps the drawn durations can beat the expected limit: only a positive figure.
    assert result["sao_over_grpo_sync"] > 0 and result["sao_over_limit"] > 0


def test_precision_mismatch(monkeypatch, capsys):
    run_benchmark(monkeypatch, "precision_mismatch.py", "--requests", "2", "--tokens", "4")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in lines] == [
        "initial/fp32",
        "initial/bf16",
        "sharpened_x8/fp32",
        "sharpened_x8/bf16",
    ]
    assert all("(8 tokens)" in line for line in lines)


def test_sft(monkeypatch, capsys):
    argv = ["--batch", "2", "--repeats", "1", "--micro-batch-tokens", "1024"]
    run_benchmark(monkeypatch, "sft.py", *argv)
    out = figures(capsys.readouterr().out)
    assert out["env"] == "code_repair" and float(out["speedup"]) > 0


def test_code_repair_tests(monkeypatch, capsys):
    run_benchmark(monkeypatch, "code_repair_tests.py", "--episodes", "2")
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 2 and result["identical_observations_and_rewards"]
    assert result["speedup"] > 0


def _finished_run(run_dir: Path, seconds: list[float], accuracy: list[float]) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text("{}")
    rows = [
        {"step": i, "time/train_s": s, "eval/accuracy": a, "rollout/trajectories_sampled": 16 * i}
        for i, (s, a) in enumerate(zip(seconds, accuracy, strict=True))
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_time_to_accuracy_reuses_finished_runs(monkeypatch, capsys, tmp_path):
    _finished_run(tmp_path / "quick" / "calc_sao_timed" / "seed0", [0, 50, 100], [0.2, 0.6, 0.7])
    _finished_run(tmp_path / "quick" / "calc_grpo_timed" / "seed0", [0, 100, 200], [0.2, 0.4, 0.6])
    run_benchmark(monkeypatch, "time_to_accuracy.py", "--out", str(tmp_path))
    # GRPO reaches its final 0.6 at 200 s, SAO at 50 s; between evals, anywhere from 0 to 0.5.
    assert capsys.readouterr().out.splitlines() == [
        "calc (quick, seed 0): target 0.600 (grpo final); grpo 200.0 s, sao 50.0 s; "
        "ratio 0.250 (between evals: 0.000 to 0.500) (claimed < 0.5)"
    ]


def test_serve():
    argv = ["--rounds", "1", "--requests", "2", "--concurrency", "1", "--batch-size", "2"]
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "serve.py"), *argv, "--max-tokens", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[2].startswith("requests/s") and float(lines[2].split()[-1]) > 0
    assert lines[-1].startswith("learner busy during training rounds:")


def test_lora_memory(monkeypatch, capsys, tmp_path, bpe_qwen3_dense_dir):
    result = tmp_path / "lora.json"
    argv = ["--model", str(bpe_qwen3_dense_dir), "--batch", "2", "--steps", "1", "--rank", "4"]
    run_benchmark(monkeypatch, "lora_memory.py", *argv, "--json", str(result))
    assert "lora / full:" in capsys.readouterr().out
    rows = json.loads(result.read_text())
    assert rows["lora"]["trainable_parameters"] < rows["full"]["trainable_parameters"]
    assert rows["ratios"]["optimizer_states_gb"] < 1
    full = rows["full"]
    assert full["resident_after_build_gb"] > 0
    if "peak_steps_gb" in full:  # where the kernel lets the benchmark split its peak by phase
        phases = (
            *("load", "build", "first_step", "steps", "publish", "sampling"),
            *("step_while_sampling", "checkpoint_snapshot", "checkpoint_live"),
        )
        assert all(0 < full[f"peak_{p}_gb"] <= full["peak_rss_gb"] for p in phases)
        # A phase starts from what is resident, so its peak is at least that (less what the
        # interpreter may free between the two readings).
        assert full["peak_checkpoint_live_gb"] >= full["resident_after_steps_gb"] - 0.01


def test_precision_mismatch_on_a_saved_model(monkeypatch, capsys, bpe_qwen3_dense_dir):
    argv = ["--requests", "2", "--tokens", "4", "--model", str(bpe_qwen3_dense_dir)]
    run_benchmark(monkeypatch, "precision_mismatch.py", *argv)
    lines = capsys.readouterr().out.splitlines()
    fp32 = next(line for line in lines if "/fp32:" in line)
    assert fp32.split(":")[0].strip() == f"{bpe_qwen3_dense_dir.name}/fp32"
    assert float(fp32.split("max|gap|")[1].split()[0]) < 1e-4
