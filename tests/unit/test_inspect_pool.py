"""`sao inspect pool`: one gain over seeds scored on the same held-out tasks."""

import json

import pytest

from sao.analysis import pool_evals
from sao.analysis.runs import InspectError
from sao.cli import main


def _eval(model: list[float], baseline: list[float]) -> dict:
    return {
        "accuracy": sum(model) / len(model),
        "task_scores": model,
        "format_error_rate": 0.0,
        "end_reasons": {"answer": len(model)},
        "n": len(model),
        "samples": 1,
        "baseline": {"accuracy": sum(baseline) / len(baseline), "task_scores": baseline},
        "paired_difference": {"difference": (sum(model) - sum(baseline)) / len(model)},
    }


def test_seeds_are_averaged_per_task_before_the_interval():
    baseline = [0.0, 0.0, 1.0, 1.0]
    first = _eval([1.0, 0.0, 1.0, 1.0], baseline)
    second = _eval([1.0, 1.0, 1.0, 0.0], baseline)
    pooled = pool_evals.pooled_gain([first, second])
    assert pooled["n"] == 4
    # Per task: (1 + 1) / 2, (0 + 1) / 2, 0, (0 - 1) / 2 -> mean 0.25.
    assert pooled["difference"] == pytest.approx(0.25)
    low, high = pooled["difference_ci95"]
    assert low < 0.25 < high


def test_evals_on_different_task_counts_are_refused():
    with pytest.raises(InspectError, match="different numbers of tasks"):
        pool_evals.pooled_gain([_eval([1.0, 0.0], [0.0, 0.0]), _eval([1.0], [0.0])])


def test_an_eval_without_a_baseline_is_named(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"accuracy": 0.5, "task_scores": [0.5]}))
    with pytest.raises(InspectError, match="no baseline"):
        pool_evals.load_eval(path)


def test_two_groups_are_compared_task_by_task():
    baseline = [0.0, 0.0, 0.0, 0.0]
    first = [_eval([1.0, 1.0, 0.0, 0.0], baseline), _eval([1.0, 0.0, 0.0, 0.0], baseline)]
    second = [_eval([0.0, 1.0, 0.0, 1.0], baseline)]
    diff = pool_evals.preset_difference(first, second)
    # Per task: 1 - 0, 0.5 - 1, 0 - 0, 0 - 1 -> mean -0.125.
    assert diff["n"] == 4
    assert diff["difference"] == pytest.approx(-0.125)


def test_versus_names_a_missing_group(tmp_path, capsys):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(_eval([1.0, 0.0], [0.0, 0.0])))
    assert main(["inspect", "pool", f"a={path}", "--versus", "a", "b"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no group labelled 'b'" in err
