"""scripts/time_ratios.py: claim (h)'s per-seed numbers for runs made outside `sao reproduce`."""

import pytest

from repo_scripts import load_script
from sao.reproduce.time_to_accuracy import Curve

time_ratios = load_script("time_ratios")


def test_a_seed_row_reads_seconds_and_trajectories_to_the_references_final_accuracy():
    reference = Curve((0.0, 100.0, 200.0), (0.0, 960.0, 1920.0), (0.5, 0.7, 0.9))
    candidate = Curve((20.0, 60.0, 140.0), (0.0, 960.0, 1920.0), (0.5, 0.9, 0.95))
    row = time_ratios.seed_row(candidate, reference)
    assert row["target"] == 0.9
    assert row["reference_s"] == pytest.approx(200.0)
    assert row["candidate_s"] == pytest.approx(60.0)
    assert row["ratio"] == pytest.approx(0.3)
    assert row["candidate_traj"] == pytest.approx(960.0)
    assert row["reference_traj"] == pytest.approx(1920.0)


def test_a_candidate_that_never_reaches_the_target_gives_its_lower_bound():
    reference = Curve((0.0, 100.0), (0.0, 960.0), (0.5, 0.9))
    candidate = Curve((10.0, 150.0), (0.0, 960.0), (0.5, 0.8))
    row = time_ratios.seed_row(candidate, reference)
    assert row["candidate_s"] is None and row["candidate_traj"] is None
    assert row["ratio"] == pytest.approx(1.5) and "lower bound" in row["reason"]
