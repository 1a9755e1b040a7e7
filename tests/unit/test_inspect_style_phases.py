"""`sao inspect style-phases`: each preference phase's opening and closing means."""

import json
import math

import pytest

from sao.analysis import style_phases
from sao.cli import main


def _row(step, preferred, reward, **shares):
    return {
        "step": step,
        "style/preferred_index": preferred,
        "rollout/reward_mean": reward,
        "actor/entropy": 1.0,
        **{f"style/share_{name}": value for name, value in shares.items()},
    }


ROWS = [
    {"step": 0, "eval/accuracy": 0.1},  # an eval row: in no phase
    _row(1, 0, 0.1, cute=0.2, none=0.5),
    _row(2, 0, 0.3, cute=0.4, none=0.3, mixed=0.1),
    _row(3, 0, 0.5, cute=0.6, none=0.1),
    _row(4, 1, 0.0, chuunibyou=0.0, no_answer=0.4),
    _row(5, 1, 0.2, chuunibyou=0.2, no_answer=0.2),
]


def test_phases_are_cut_where_the_preferred_style_changes():
    assert [[r["step"] for r in p] for p in style_phases.phases(ROWS)] == [[1, 2, 3], [4, 5]]


def test_a_phase_is_summarised_at_its_opening_and_its_close():
    first, second = (style_phases.phase_summary(p, 2) for p in style_phases.phases(ROWS))
    assert (first["style"], first["steps"]) == ("cute", "1-3")
    assert first["open_reward"] == pytest.approx(0.2)
    assert first["close_reward"] == pytest.approx(0.4)
    assert first["open_preferred"] == pytest.approx(0.3)
    # Unstyled: mixed + none + no_answer, a share not logged counting as 0.
    assert first["open_unstyled"] == pytest.approx((0.5 + 0.4) / 2)
    assert first["close_unstyled"] == pytest.approx((0.4 + 0.1) / 2)
    assert first["open_entropy"] == pytest.approx(1.0)
    assert math.isnan(first["open_ev"])  # no critic logged
    assert (second["style"], second["steps"]) == ("chuunibyou", "4-5")
    assert second["open_preferred"] == second["close_preferred"] == pytest.approx(0.1)


def test_the_command_prints_each_run_and_writes_the_numbers(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "phases.json"
    argv = ["inspect", "style-phases", str(run), "--window", "2", "--json", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{run}  (open -> close)"
    assert lines[2].split()[:5] == ["cute", "1-3", "0.200", "->", "0.400"]
    assert json.loads(out.read_text())[str(run)][1]["style"] == "chuunibyou"
    assert main(["inspect", "style-phases", str(run), "--window", "0"]) == 2
    assert capsys.readouterr().err == "sao inspect style-phases: --window: must be >= 1, got 0\n"
