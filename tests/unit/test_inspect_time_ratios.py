"""`sao inspect time-ratios`: claim (h)'s per-seed numbers for runs made outside `sao reproduce`."""

import json

import pytest

from sao.analysis import time_ratios
from sao.analysis.runs import InspectError
from sao.cli import main
from sao.reproduce.time_to_accuracy import Curve


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
    # SAO crossed in (20, 60] s, the reference in (100, 200] s.
    assert row["bracket"] == pytest.approx((20 / 200, 60 / 100))


def test_a_candidate_that_never_reaches_the_target_gives_its_lower_bound():
    reference = Curve((0.0, 100.0), (0.0, 960.0), (0.5, 0.9))
    candidate = Curve((10.0, 150.0), (0.0, 960.0), (0.5, 0.8))
    row = time_ratios.seed_row(candidate, reference)
    assert row["candidate_s"] is None and row["candidate_traj"] is None
    assert row["ratio"] == pytest.approx(1.5) and "lower bound" in row["reason"]
    assert row["bracket"] == (pytest.approx(1.5), None)


def _run_with_evals(run_dir, gains: dict[int, float], pretrain: float = 50.0):
    """A run directory whose metrics log steps 0-80 at 10 s a step and whose saved evals at the
    given steps hold those paired gains."""
    run_dir.mkdir()
    rows = [
        {"step": s, "time/train_s": 10.0 * s, "rollout/trajectories_sampled": 128 * s}
        for s in range(81)
    ]
    rows[0]["time/value_pretrain_s"] = pretrain
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step, gain in gains.items():
        saved = {"accuracy": 0.2 + gain, "paired_difference": {"difference": gain}}
        (run_dir / f"eval400_step{step}.json").write_text(json.dumps(saved))
    return run_dir


def test_an_eval_curve_is_the_paired_gain_against_the_runs_clock_from_step_0(tmp_path):
    run = _run_with_evals(tmp_path / "run", {20: 0.03, 40: 0.07, 80: 0.1})
    curve = time_ratios.read_eval_curve(run, "eval400_step{step}.json")
    assert curve.seconds == (50.0, 250.0, 450.0, 850.0)
    assert curve.trajectories == (0.0, 2560.0, 5120.0, 10240.0)
    assert curve.accuracy == (0.0, 0.03, 0.07, 0.1)
    capped = time_ratios.read_eval_curve(run, "eval400_step{step}.json", last_step=40)
    assert capped.accuracy == (0.0, 0.03, 0.07)


def test_eval_curves_give_the_ratio_to_the_references_final_gain(tmp_path, capsys):
    candidate = _run_with_evals(tmp_path / "sao", {20: 0.06, 40: 0.09}, pretrain=100.0)
    reference = _run_with_evals(tmp_path / "grpo", {40: 0.03, 64: 0.06, 73: 0.08}, pretrain=0.0)
    assert (
        main(
            [
                "inspect",
                "time-ratios",
                "--candidate",
                str(candidate),
                "--reference",
                f"{reference}@64",
                "--evals",
                "eval400_step{step}.json",
            ]
        )
        == 0
    )
    row, rule = capsys.readouterr().out.splitlines()[-2:]
    # target 0.06, the reference's gain at step 64 (640 s); SAO reaches it at step 20 (300 s):
    # SAO crossed in (100, 300] s, the reference in (400, 640] s
    assert row.startswith("| 0 | 0.060 | 300.0 | 640.0 | 0.47 | 0.16 to 0.75 |")
    assert rule.startswith("ratio - 0.5 over seeds [0]: -0.031, no interval between evals' lines")
    assert rule.endswith(": inconclusive")


def test_the_rule_line_judges_every_seed_and_a_missing_ratio_leaves_it_inconclusive():
    # Seeds 0, 2 and 3 alone: -0.26 +- 4.303 * 0.036 / sqrt(3), wholly below 0. Seed 1 is not
    # dropped to get there.
    line = time_ratios.rule_line([0.21, None, 0.23, 0.28])
    assert line == (
        "ratio - 0.5 over seeds [0, 1, 2, 3]: -0.260, no interval (no value at seed 1): "
        "inconclusive"
    )
    # With seed 1 at 0.25: -0.2575 +- 3.182 * 0.0299 / 2 = -0.2575 +- 0.0475.
    exact = time_ratios.rule_line([0.21, 0.25, 0.23, 0.28])
    assert exact.startswith("ratio - 0.5 over seeds [0, 1, 2, 3]: -0.258 [-0.305, -0.210]: ")
    assert exact.endswith(": reproduced")
    assert time_ratios.rule_line([0.9, 0.2]).endswith("inconclusive")


def test_the_rule_line_takes_a_seed_sao_never_finished_at_its_lower_bound():
    # Seed 1 never reached the target within 0.25 of the reference's time: it enters with that
    # lower bound and no upper end, so it cannot help the claim.
    ratios = [0.21, 0.25, 0.23, 0.28]
    brackets = [(0.21, 0.21), (0.25, None), (0.23, 0.23), (0.28, 0.28)]
    line = time_ratios.rule_line(ratios, brackets)
    assert "bracket ends low -0.258 [-0.305, -0.210], high unbounded (seed 1)" in line
    assert line.endswith(": inconclusive")
    # Lower bounds over 0.5 refute it.
    slow = [(0.9, 1.0), (1.2, None), (0.95, 1.1)]
    assert time_ratios.rule_line([0.95, 1.2, 1.0], slow).endswith(": not reproduced")
    # The claim is judged at each bracket's high end, not on the lines between evals.
    wide = [(0.1, 0.6), (0.15, 0.65), (0.12, 0.62)]
    assert time_ratios.rule_line([0.3, 0.32, 0.31]).endswith(": reproduced")
    assert time_ratios.rule_line([0.3, 0.32, 0.31], wide).endswith(": inconclusive")


def test_eval_curves_refuse_a_pattern_without_a_step_and_a_run_without_evals(tmp_path):
    run = _run_with_evals(tmp_path / "run", {})
    with pytest.raises(InspectError, match="must hold"):
        time_ratios.read_eval_curve(run, "eval400.json")
    with pytest.raises(InspectError, match="no eval matches"):
        time_ratios.read_eval_curve(run, "eval400_step{step}.json")


def test_an_eval_whose_checkpoint_is_not_the_step_in_its_name_is_refused(tmp_path):
    run = _run_with_evals(tmp_path / "run", {40: 0.05})
    saved = json.loads((run / "eval400_step40.json").read_text())
    saved["weights_from"] = str(run / "checkpoints" / "step_20")
    (run / "eval400_step40.json").write_text(json.dumps(saved))
    with pytest.raises(InspectError, match="named step 40, but `sao eval` scored step_20"):
        time_ratios.read_eval_curve(run, "eval400_step{step}.json")
    saved["weights_from"] = str(run / "checkpoints" / "step_40")
    (run / "eval400_step40.json").write_text(json.dumps(saved))
    assert time_ratios.read_eval_curve(run, "eval400_step{step}.json").accuracy == (0.0, 0.05)


def test_a_run_made_before_the_training_clock_and_unequal_seed_lists_are_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text("{}")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/accuracy": 0.5}) + "\n")
    assert main(["inspect", "time-ratios", "--candidate", str(run), "--reference", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"sao inspect time-ratios: {run / 'metrics.jsonl'}: no time/train_s (run made before it)\n"
    )
    argv = ["--candidate", f"{run},{run}", "--reference", str(run)]
    assert main(["inspect", "time-ratios", *argv]) == 2
    assert "2 candidate runs but 1 reference runs" in capsys.readouterr().err
