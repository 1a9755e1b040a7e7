"""`sao inspect critic-windows`: the first/last-window table of the critic's error variance."""

import json
import math

import pytest

from sao.analysis import critic_windows
from sao.cli import main


def _row(step, reward, ev, returns_var, **extra):
    return {
        "step": step,
        "rollout/reward_mean": reward,
        "critic/vf_explained_var": ev,
        "critic/returns_var": returns_var,
        **extra,
    }


def test_a_falling_explained_variance_can_hide_a_falling_error_variance():
    rows = [
        {"step": 0, "eval/accuracy": 0.5},  # an eval row: not a trained step
        _row(1, 0.5, 0.34, 0.25),
        _row(2, 0.5, 0.34, 0.25, **{"code_repair/out_of_turns": 0.25}),
        _row(3, 0.85, 0.10, 0.1275),
        _row(4, 0.85, 0.10, 0.1275, **{"critic/vf_explained_var": math.nan}),
    ]
    means = critic_windows.window_means(rows, window=2)
    assert means["first"]["ev"] == pytest.approx(0.34)
    assert means["first"]["error_var"] == pytest.approx(0.66 * 0.25)  # 0.165
    assert means["first"]["out_of_turns"] == pytest.approx(0.25)  # only the row that has it
    # The last window: EV 0.10 (the NaN row left out), yet the error variance fell to 0.115.
    assert means["last"]["ev"] == pytest.approx(0.10)
    assert means["last"]["error_var"] == pytest.approx(0.9 * 0.1275)
    assert means["last"]["error_var"] < means["first"]["error_var"]
    assert math.isnan(means["last"]["out_of_turns"])


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="window: must be >= 1"):
        critic_windows.window_means([], window=0)


def test_the_command_prints_a_first_and_a_last_line_per_run(tmp_path, capsys):
    rows = [_row(1, 0.5, 0.5, 0.25), _row(2, 0.5, 0.0, 0.25)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["inspect", "critic-windows", str(tmp_path), "--window", "1"]) == 0
    header, first, last = capsys.readouterr().out.splitlines()
    assert header.split() == ["run", "end", *critic_windows.COLUMNS]
    assert first.split()[1:5] == ["first", "0.5000", "0.5000", "0.2500"]
    assert last.split()[1:6] == ["last", "0.5000", "0.0000", "0.2500", "0.2500"]
