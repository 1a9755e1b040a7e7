"""code_repair in a run: behaviour shares of a batch, read off each episode's command history."""

import json

import pytest
from stub_trajectories import stub_trajectory

from sao.envs.base import END_ANSWER, END_MAX_TURNS
from sao.envs.code_repair.report import KEYS, run_report, step_metrics
from sao.envs.registration import RunReport
from sao.runtime.plots import save_run_report


def traj(events, end_reason=END_ANSWER, reward=0.0):
    return stub_trajectory(reward, {"end_reason": end_reason, "info": {"events": events}})


def test_step_metrics_read_each_history():
    batch = [
        traj(["replace", "test_passed", "submit"], reward=1.0),
        traj(["replace", "test_failed", "submit"]),
        traj(["replace", "test_failed", "view", "replace"], END_MAX_TURNS),
        traj(["error", "test_failed", "replace", "test_passed"], END_MAX_TURNS),
    ]
    m = step_metrics(batch)
    assert set(m) == set(KEYS)
    assert m["code_repair/first_test_passed"] == pytest.approx(0.25)
    assert m["code_repair/submitted_failing"] == pytest.approx(0.25)
    assert m["code_repair/viewed"] == pytest.approx(0.25)
    assert m["code_repair/out_of_turns"] == pytest.approx(0.5)
    assert m["code_repair/malformed"] == pytest.approx(0.25)


def test_trajectories_without_a_history_count_as_doing_nothing():
    bare = stub_trajectory(0.0, {})
    assert step_metrics([bare])["code_repair/first_test_passed"] == 0.0
    assert step_metrics([]) == {}


def test_report_plots_and_summarises_first_and_last_steps(tmp_path):
    rows = [{"step": s, "code_repair/first_test_passed": s / 20} for s in range(1, 21)]
    rows.append({"step": 20, "eval/accuracy": 0.3})  # rows without the key are skipped
    report = run_report(rows, window=5)
    assert report.panels == {"behaviour.png": ("share of trained trajectories", list(KEYS))}
    summary = report.summary
    first_test = summary["code_repair_behaviour"]["first_test_passed"]
    assert first_test == {
        "first_5_steps": pytest.approx(0.15),
        "last_5_steps": pytest.approx(0.9),
    }
    json.dumps(summary)  # goes into summary.json
    assert save_run_report(report, rows, tmp_path / "plots") == [
        tmp_path / "plots" / "behaviour.png"
    ]
    assert (tmp_path / "plots" / "behaviour.png").read_bytes()[:4] == b"\x89PNG"
    assert run_report([{"step": 1}]).summary == {}
    assert isinstance(run_report([]), RunReport)
