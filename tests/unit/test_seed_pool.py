import pytest

from sao.evaluation.stats import paired_difference
from sao.reproduce.seed_pool import pool_paired


def test_pooling_equals_paired_difference_on_all_differences():
    a_scores, a_base = [1, 0, 1, 1, 0, 0.5], [0, 0, 1, 0, 1, 0.5]
    b_scores, b_base = [0, 1, 1, 0], [0, 0, 0, 1]
    pooled = pool_paired([paired_difference(a_scores, a_base), paired_difference(b_scores, b_base)])
    whole = paired_difference(a_scores + b_scores, a_base + b_base)
    assert pooled["n"] == 10 and pooled["runs"] == 2
    assert pooled["difference"] == pytest.approx(whole["difference"])
    assert pooled["sd"] == pytest.approx(whole["sd"])
    assert pooled["difference_ci95"] == pytest.approx(whole["difference_ci95"])


def test_pooling_one_run_returns_its_interval():
    gain = paired_difference([1, 1, 0, 1], [0, 1, 0, 0])
    pooled = pool_paired([gain])
    assert pooled["difference"] == pytest.approx(0.5)
    assert pooled["difference_ci95"] == pytest.approx(gain["difference_ci95"])


def test_pooling_rejects_nothing_to_pool():
    with pytest.raises(ValueError, match="no runs"):
        pool_paired([])
    with pytest.raises(ValueError, match="at least 2"):
        pool_paired([{"difference": 1.0, "sd": 0.0, "n": 1}])
