"""`sao inspect edit-credit`: the advantage on a replace's first tokens, by its test's outcome."""

import pytest
import torch

from sao.analysis import edit_credit


def test_a_replace_is_labelled_by_the_test_right_after_it():
    events = ["replace", "test_failed", "replace", "test_passed", "submit"]
    assert edit_credit.replace_labels(events) == [
        "replace, then its test failed",
        None,
        "replace, then its test passed",
        None,
        None,
    ]
    assert edit_credit.replace_labels(["replace", "submit"]) == [None, None]


def test_head_means_read_each_replace_head_and_refuse_mismatched_spans():
    # Three actions: replace (tokens 1-4), observation (5), test (6-7), observation (8), submit (9).
    mask = torch.tensor([0, 1, 1, 1, 1, 0, 1, 1, 0, 1], dtype=torch.float)
    advantages = torch.tensor([0.0, 0.4, 0.2, -1.0, -1.0, 0.0, 0.5, 0.5, 0.0, 0.9])
    means = edit_credit.head_means(advantages, mask, ["replace", "test_passed", "submit"], head=2)
    assert means == [("replace, then its test passed", pytest.approx(0.3))]
    assert edit_credit.head_means(advantages, mask, ["replace", "test_passed"], head=2) is None


def test_describe_puts_lambdas_side_by_side():
    results = {"0.95": {"a": [0.1, 0.3]}, "1": {"a": [1.0], "b": [-0.5]}}
    assert edit_credit.describe(results) == [
        "| edit | lambda 0.95 | lambda 1 |",
        "|---|---|---|",
        "| a | +0.200 +- 0.141 (n=2) | +1.000 (n=1) |",
        "| b | - | -0.500 (n=1) |",
    ]


def test_a_bad_lambda_and_a_missing_checkpoint_are_one_line(tmp_path, capsys):
    from sao.cli import main

    assert main(["inspect", "edit-credit", str(tmp_path), "--lambdas", "0.9", "high"]) == 2
    err = capsys.readouterr().err
    assert err == "sao inspect edit-credit: --lambdas: 'high' is neither a number nor 'adaptive'\n"
    assert main(["inspect", "edit-credit", str(tmp_path), "--from-step", "3"]) == 2
    missing = tmp_path / "checkpoints" / "step_3"
    assert capsys.readouterr().err == f"sao inspect edit-credit: {missing}: no such checkpoint\n"
