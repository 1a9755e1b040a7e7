"""Bad input to any command: one line on stderr that names the problem, a non-zero exit, no traceback.

Each case runs `python -m sao.cli ...` as a user would, in a directory holding the files the cases
name, and must fail before any model is loaded. `python tests/unit/test_bad_input.py` prints every
case with the line it gets.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# (argv, a substring the one line must contain)
CASES: list[tuple[list[str], str]] = [
    (["train", "--env", "reasoning_gym:nonexistent_dataset"], "'nonexistent_dataset' is unknown"),
    (["train", "--env", "reasoning_gym"], "needs a variant"),
    (["config", "--env", "reasoning_gym:nonexistent_dataset"], "'nonexistent_dataset' is unknown"),
    (["config", "--env", "reasoning_gym"], "needs a variant"),
    (["sft", "--env", "nope"], "unknown environment 'nope'"),
    (["eval", "--env", "nope", "--model", "model"], "unknown environment 'nope'"),
    (["config", "--set", "env.options={no_such_option: 1}"], "no_such_option"),
    (["eval"], "--model PATH or --run RUN_DIR is required"),
    (["eval", "--model", "not_a_model"], "not a saved model"),
    (["eval", "--model", "notes.txt"], "is a file, not a directory"),
    (["eval", "--model", "missing_dir"], "does not exist"),
    (["eval", "--model", "model", "--baseline", "not_a_model"], "--baseline"),
    (["eval", "--model", "model", "--temperature", "0"], "--temperature: must be > 0"),
    (["eval", "--model", "model", "--temperature", "-0.5"], "--temperature: must be > 0"),
    (["eval", "--model", "model", "--n", "0"], "--n: must be >= 1"),
    (["eval", "--model", "model", "--samples", "0"], "--samples: must be >= 1"),
    (["eval", "--model", "model", "--json", "/proc/x/out.json"], "--json /proc/x/out.json"),
    (["eval", "--model", "model", "--json", "not_a_model"], "is a directory"),
    (["eval", "--run", "missing_run"], "run directory missing_run: does not exist"),
    (["eval", "--run", "run", "--env", "calc"], "--run: it evaluates under the run's own"),
    (["eval", "--run", "not_a_model"], "run config not_a_model/config.yaml: does not exist"),
    (["eval", "--run", "run"], "--run run/policy: does not exist"),
    (["eval", "--run", "run", "--model", "not_a_model"], "--model not_a_model: not a saved model"),
    (["eval", "--model", "model", "--step", "1"], "--step N needs --run RUN_DIR and no --model"),
    (["eval", "--run", "run", "--step", "3"], "--step 3: run has no checkpoint at step 3"),
    (["eval", "--run", "run", "--step", "-1"], "--step: must be >= 0"),
    (["eval", "--import", "no_such_module_xyz", "--model", "model"], "No module named"),
    (["sft", "--import", "no_such_module_xyz"], "No module named"),
    (["train", "--out", "notes.txt"], "--out notes.txt: exists and is not a directory"),
    (["train", "--out", "notes.txt/run"], "--out notes.txt/run: notes.txt is a file"),
    (["sft", "--out", "notes.txt"], "--out notes.txt: exists and is not a directory"),
    (["sft", "--out", "/proc/x"], "--out /proc/x: cannot write in /proc"),
    (["train", "--import", "no_such_module_xyz"], "No module named 'no_such_module_xyz'"),
    (["config", "--config", "latin1.yaml"], "not UTF-8"),
    (["config", "--config", "broken.yaml"], "not valid YAML"),
    (["config", "--config", "list.yaml"], "top level must be a mapping"),
    (["train", "--config", "missing.yaml"], "config file missing.yaml: does not exist"),
    (["sft", "--config", "not_a_model"], "is not a file"),
    (["config", "--set", "algo.eps_low"], "expected key.path=value"),
    (["train", "--set", "algo.eps_lo=0.2"], "algo.eps_lo: unknown field"),
    (["sft", "--set", "model.warm_start_from=missing_dir"], "model.warm_start_from missing_dir"),
    (["train", "--set", "model.warm_start_from=notes.txt"], "is a file, not a directory"),
    (["train", "--set", "model.lora.rank=-1"], "model.lora.rank"),
    (["config", "--set", "model.lora.target_modules=[]"], "must name at least one module"),
    (["import-gguf", "missing.gguf", "--out", "ckpt"], "missing.gguf: does not exist"),
    (["import-gguf", "notes.txt", "--out", "ckpt"], "not a GGUF file"),
    (["config", "--set", "nosuch.key=1"], "nosuch: unknown field"),
    (["config", "--set", "train.steps.x=1"], "train.steps: Input should be a valid integer"),
    (["config", "--set", "algo.eps_low=1.5"], "algo.eps_low: Input should be less than 1"),
    (["config", "--preset", "ppo"], "unknown preset 'ppo'"),
    (["train", "--steps", "0"], "--steps: must be >= 1"),
    (["train", "--set", "rollout.top_p=0.9"], "training needs top_p = 1"),
    (["config", "--set", "rollout.top_p=0.9"], "training needs top_p = 1"),
    (["train", "--steps", "-3"], "--steps: must be >= 1"),
    (["train", "--steps", "many"], "--steps: expected an integer"),
    (["sft", "--steps", "0"], "--steps: must be >= 1"),
    (["train", "--set", "model.path=not_a_model"], "model.path not_a_model: not a saved model"),
    (["train", "--resume", "run", "--preset", "grpo"], "--preset 'grpo' would change it"),
    (["train", "--resume", "missing_run"], "--resume missing_run: no run there"),
    (["train", "--backend", "slurm"], "invalid choice: 'slurm'"),
    (
        ["train", "--backend", "ray", "--set", "train.learner_ranks=2"],
        "several learner ranks run with train.backend=local",
    ),
    (
        ["train", "--set", "train.learner_ranks=2", "--set", "train.learner_device=cuda:1"],
        "learner_device='cuda:1' names one device",
    ),
    (
        ["train", "--set", "train.learner_ranks=1024", "--set", "train.learner_device=cuda"],
        "puts one rank on each GPU, and this machine has",
    ),
    (
        ["train", "--set", "train.learner_ranks=1024"],
        "learner_device=cpu runs one process per rank, and this machine has",
    ),
    (
        ["serve", "--model", "model", "--set", "train.learner_ranks=2"],
        "sao serve trains in its own process",
    ),
    (["serve", "--model", "model", "--port", "99999"], "--port: must be a port 1 to 65535, got"),
    (["serve", "--model", "model", "--port", "0"], "--port: must be a port 1 to 65535, got 0"),
    (["serve", "--model", "model", "--port", "http"], "--port: expected a port 1 to 65535"),
    (["serve", "--model", "missing_dir"], "--model missing_dir: does not exist"),
    (["serve", "--model", "not_a_model"], "--model not_a_model: not a saved model"),
    (["fly"], "invalid choice: 'fly'"),
    (["presets", "--bogus"], "unrecognized arguments: --bogus"),
]


def make_inputs(root: Path) -> None:
    """The files and directories the cases name, under `root`."""
    (root / "not_a_model").mkdir()
    (root / "notes.txt").write_text("not a model\n")
    (root / "latin1.yaml").write_bytes("train:\n  out: caf\xe9\n".encode("latin-1"))
    (root / "broken.yaml").write_text("train:\n  steps: [1, 2\n")
    (root / "list.yaml").write_text("- train\n")
    # Shaped like a saved model on the outside, so only a later check can stop the command.
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}\n")
    (root / "model" / "model.safetensors").write_bytes(b"")
    (root / "run").mkdir()
    (root / "run" / "config.yaml").write_text("preset: sao\n")


def run_case(
    argv: list[str], cwd: Path, debug_env: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("SAO_DEBUG", None)
    if debug_env:
        env["SAO_DEBUG"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "sao.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad_input")
    make_inputs(root)
    return root


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_and_a_nonzero_exit(inputs, argv, expected):
    before = sorted(p.relative_to(inputs) for p in inputs.rglob("*"))
    result = run_case(argv, inputs)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in lines[0]
    assert result.stdout == ""
    # Refused before any work: nothing was written.
    assert sorted(p.relative_to(inputs) for p in inputs.rglob("*")) == before


def test_a_port_in_use_is_refused_before_the_model_loads(inputs):
    # `model` holds no real weights: only a check made before loading can be the line printed.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_case(["serve", "--model", "model", "--port", str(port)], inputs)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"sao serve: --port {port}: 127.0.0.1:{port} is already in use by another process; "
        "choose another --port or stop that process"
    ]


@pytest.mark.parametrize("debug", [["--debug"], ["SAO_DEBUG=1"]])
def test_debug_shows_the_traceback(inputs, debug):
    argv = ["config", "--set", "algo.eps_low"]
    result = run_case(
        argv + debug if debug[0] == "--debug" else argv, inputs, debug[0] != "--debug"
    )
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert (
        result.stderr.splitlines()[-1]
        == "sao config: --set 'algo.eps_low': expected key.path=value"
    )


def main() -> None:
    """Print each case, its exit code and the line it prints."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_inputs(root)
        for argv, _ in CASES:
            result = run_case(argv, root)
            print(f"$ sao {' '.join(argv)}    [exit {result.returncode}]")
            print(f"  {result.stderr.rstrip()}")


if __name__ == "__main__":
    main()
