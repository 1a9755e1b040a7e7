"""`sao train` refuses, with one line and before any work, what it could not finish or honour."""

from __future__ import annotations

import socket

import pytest

from sao.cli import main
from sao.config import load_config
from sao.runtime.launch import write_config


def _refusal(argv: list[str], capsys) -> str:
    """Run the CLI, expect a non-zero exit, return what it said (one line)."""
    try:
        code = main(argv)
        message = ""
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
        message = "" if isinstance(stop.code, int) or stop.code is None else str(stop.code)
    captured = capsys.readouterr()
    text = (message or captured.err).strip()
    assert code != 0, f"{argv} succeeded"
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


@pytest.fixture
def no_warm_start(tmp_path):
    """A warm-start location that must still be empty afterwards (no SFT ran)."""
    return tmp_path / "warm"


def test_a_directory_holding_any_run_file_is_not_reused(tmp_path, capsys, no_warm_start):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 0}\n')
    line = _refusal(
        ["train", "--out", str(run_dir), "--set", f"model.warm_start_dir={no_warm_start}"], capsys
    )
    assert "already holds a run" in line and f"--resume {run_dir}" in line
    assert not no_warm_start.exists()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--preset", "grpo"], "--preset 'grpo'"),
        (["--env", "code_repair"], "--env 'code_repair'"),
        (["--set", "env.name=style_stream"], "'style_stream'"),
        (["--config", "other.yaml"], "--config other.yaml"),
        (["--out", "elsewhere"], "--out elsewhere"),
    ],
)
def test_resume_refuses_flags_that_would_change_the_run(tmp_path, capsys, flags, named):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_config(
        load_config("sao", None, [f"model.warm_start_dir={tmp_path / 'w'}"]),
        run_dir / "config.yaml",
    )
    line = _refusal(["train", "--resume", str(run_dir), *flags], capsys)
    assert named in line
    assert not (tmp_path / "w").exists()


def test_resume_of_a_directory_without_a_run(tmp_path, capsys):
    assert "no run there" in _refusal(["train", "--resume", str(tmp_path)], capsys)


def test_an_unwritable_run_directory_fails_before_the_warm_start(tmp_path, capsys, no_warm_start):
    line = _refusal(
        ["train", "--out", "/proc/sao-run", "--set", f"model.warm_start_dir={no_warm_start}"],
        capsys,
    )
    assert "--out /proc/sao-run: cannot write in /proc" in line
    assert not no_warm_start.exists()


def test_a_ray_address_where_nothing_listens_fails_before_any_work(tmp_path, capsys, no_warm_start):
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = ["train", "--out", str(tmp_path / "run"), "--backend", "ray"]
    argv += ["--ray-address", f"127.0.0.1:{port}", "--set", f"model.warm_start_dir={no_warm_start}"]
    line = _refusal(argv, capsys)
    assert f"nothing answers at Ray address 127.0.0.1:{port}" in line
    assert not no_warm_start.exists()


def test_a_missing_model_path_fails_before_the_run_directory_is_written(tmp_path, capsys):
    run_dir = tmp_path / "run"
    line = _refusal(
        ["train", "--out", str(run_dir), "--set", f"model.path={tmp_path / 'absent'}"], capsys
    )
    assert "model.path" in line and "does not exist" in line
    assert not run_dir.exists(), "a failed start must leave nothing that blocks the next one"
