"""Claim (h), time to accuracy: the interpolated first crossing and the bracket the evals allow
for it, the per-seed ratio and its edge cases, the verdict at the brackets' ends, the runs it
plans, and a study judged end to end from stub runs."""

import json
from pathlib import Path

import pytest

from sao.reproduce.budgets import BUDGETS
from sao.reproduce.claims import CLAIMS, PAPER_CLAIMS
from sao.reproduce.command import parse_claims, run_reproduce_command
from sao.reproduce.readers import MissingMetric
from sao.reproduce.refresh import refresh
from sao.reproduce.report import judge_brackets
from sao.reproduce.runs import run_config
from sao.reproduce.time_to_accuracy import (
    Curve,
    crossing_bracket,
    read_curve,
    time_ratio,
    time_to_accuracy,
)


def test_time_to_accuracy_interpolates_the_first_crossing():
    xs, ys = [0.0, 10.0, 20.0, 30.0], [0.2, 0.4, 0.3, 0.8]
    # 0.3 is first crossed between 0 and 10 (0.2 -> 0.4), not at the later point 20.
    assert time_to_accuracy(xs, ys, 0.3) == pytest.approx(5.0)
    assert time_to_accuracy(xs, ys, 0.4) == pytest.approx(10.0)
    # 0.6: below it again at 20, crossed between 20 and 30 at (0.6 - 0.3) / 0.5 of the way.
    assert time_to_accuracy(xs, ys, 0.6) == pytest.approx(26.0)
    assert time_to_accuracy(xs, ys, 0.1) == 0.0  # reached at the start
    assert time_to_accuracy(xs, ys, 0.81) is None  # never


@pytest.mark.parametrize(
    ("xs", "ys", "message"),
    [([0.0, 1.0], [0.5], "2 x values but 1"), ([], [], "empty"), ([2.0, 1.0], [0, 1], "non-dec")],
)
def test_time_to_accuracy_refuses_a_malformed_curve(xs, ys, message):
    with pytest.raises(ValueError, match=message):
        time_to_accuracy(xs, ys, 0.5)


def _curve(seconds, accuracy):
    return Curve(tuple(seconds), tuple(range(len(seconds))), tuple(accuracy))


def test_time_ratio_reads_the_reference_final_accuracy_as_the_target():
    reference = _curve([0, 100, 200], [0.2, 0.5, 0.6])  # target 0.6, reached at 200 s
    candidate = _curve([10, 40, 80], [0.2, 0.4, 0.8])  # 0.6 crossed at 60 s
    result = time_ratio(candidate, reference)
    assert (result.target, result.candidate_s, result.reference_s) == (0.6, 60.0, 200.0)
    assert result.ratio == pytest.approx(0.3) and result.reason == ""
    # The reference's own time is its first crossing, which may come before its end.
    early = _curve([0, 50, 200], [0.2, 0.7, 0.6])
    assert time_ratio(candidate, early).reference_s == pytest.approx(50 * 0.4 / 0.5)


def test_the_crossing_lies_between_the_last_eval_below_the_target_and_the_first_at_it():
    xs, ys = [0.0, 10.0, 20.0, 30.0], [0.2, 0.4, 0.3, 0.8]
    assert crossing_bracket(xs, ys, 0.3) == (0.0, 10.0)
    assert crossing_bracket(xs, ys, 0.4) == (0.0, 10.0)  # met at 10, may have been before
    assert crossing_bracket(xs, ys, 0.6) == (20.0, 30.0)
    assert crossing_bracket(xs, ys, 0.1) == (0.0, 0.0)  # reached at the start
    assert crossing_bracket(xs, ys, 0.81) is None
    for target in (0.3, 0.4, 0.6, 0.1):
        low, high = crossing_bracket(xs, ys, target)
        assert low <= time_to_accuracy(xs, ys, target) <= high


def test_the_ratios_bracket_runs_from_earliest_over_latest_to_latest_over_earliest():
    reference = _curve([0, 100, 200], [0.2, 0.5, 0.6])  # target 0.6: crossed in (100, 200]
    candidate = _curve([10, 40, 80], [0.2, 0.4, 0.8])  # crossed in (40, 80], at 60 on the line
    result = time_ratio(candidate, reference)
    assert result.ratio == pytest.approx(0.3)
    assert (result.low, result.high) == pytest.approx((40 / 200, 80 / 100))
    # A reference crossing that may lie at 0 s leaves the ratio unbounded above.
    quick = time_ratio(candidate, _curve([0, 100], [0.2, 0.6]))
    assert quick.low == pytest.approx(40 / 100) and quick.high is None


def test_a_candidate_that_never_reaches_the_target_enters_with_its_lower_bound():
    reference = _curve([0, 50, 100], [0.2, 0.4, 0.6])
    slow = time_ratio(_curve([0, 70], [0.2, 0.5]), reference)
    assert slow.candidate_s is None and slow.ratio == pytest.approx(0.7)
    assert "lower bound" in slow.reason
    assert (slow.low, slow.high) == (pytest.approx(0.7), None)
    # A bound below the claimed 0.5 is a bound all the same: the seed is not dropped.
    short = time_ratio(_curve([0, 30], [0.2, 0.5]), reference)
    assert short.ratio == pytest.approx(0.3) and "lower bound" in short.reason
    assert (short.low, short.high) == (pytest.approx(0.3), None)


def test_claim_h_is_judged_at_the_end_of_each_bracket_least_favourable_to_it():
    # On the lines between evals every seed is under 0.5, and the interval with them.
    values = [0.30, 0.32, 0.31]
    assert judge_brackets(values, [(v, v) for v in values], 0.5, "less", 0.0)["verdict"] == (
        "reproduced"
    )
    # But each crossing could lie as late as 0.6-0.65 of the reference's time: not shown.
    wide = [(0.20, 0.60), (0.25, 0.65), (0.22, 0.62)]
    judged = judge_brackets(values, wide, 0.5, "less", 0.0)
    assert judged["verdict"] == "inconclusive"
    assert judged["mean_difference"] == pytest.approx(-0.19)  # the lines' figure, still shown
    assert judged["ends"]["high"]["mean_difference"] == pytest.approx(0.123, abs=1e-3)
    assert judged["ends"]["low"]["mean_difference"] == pytest.approx(-0.277, abs=1e-3)
    # Narrow brackets wholly under 0.5 reproduce it.
    narrow = [(0.28, 0.33), (0.30, 0.34), (0.29, 0.33)]
    assert judge_brackets(values, narrow, 0.5, "less", 0.0)["verdict"] == "reproduced"


def test_a_seed_where_sao_never_reached_the_target_counts_against_claim_h():
    # Seed 1 never reached the target within 0.3 of the reference's time: it cannot support
    # the claim, and it is not dropped to let the other two decide it.
    values = [0.20, 0.30, 0.21]
    judged = judge_brackets(values, [(0.19, 0.22), (0.30, None), (0.20, 0.23)], 0.5, "less", 0.0)
    assert judged["verdict"] == "inconclusive" and judged["seeds_used"] == [0, 1, 2]
    assert judged["ends"]["high"]["ci95"] == [None, None]
    assert judged["seeds_needed"] is None
    # Lower bounds already over 0.5 refute it.
    slow = judge_brackets(
        [1.0, 1.2, 0.95], [(0.85, 1.1), (1.2, None), (0.9, 1.0)], 0.5, "less", 0.0
    )
    assert slow["verdict"] == "not reproduced"
    # A seed with no ratio at all (a reference that never rose) leaves it inconclusive.
    none = judge_brackets([0.3, None, 0.3], [(0.28, 0.32), None, (0.29, 0.31)], 0.5, "less", 0.0)
    assert none["verdict"] == "inconclusive" and none["seeds_missing"] == [1]


def test_a_reference_that_never_rose_gives_no_ratio():
    result = time_ratio(_curve([0, 5], [0.5, 0.9]), _curve([0, 100], [0.5, 0.4]))
    assert result.ratio is None and result.reference_s == 0.0


def _write_run(run_dir: Path, pretrain_s: float, points: list[tuple[float, int, float]]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "step": k,
            "time/train_s": t,
            "rollout/trajectories_sampled": n,
            "eval/accuracy": a,
            **({"time/value_pretrain_s": pretrain_s} if k == 0 else {}),
        }
        for k, (t, n, a) in enumerate(points)
    ]
    rows.insert(2, {"step": 1, "time/train_s": 3.0, "rollout/trajectories_sampled": 9})  # no eval
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "summary.json").write_text(json.dumps({"final_accuracy": points[-1][2]}))
    (run_dir / "config.yaml").write_text("preset: x\n")


def test_read_curve_starts_the_clock_after_value_pretraining(tmp_path):
    _write_run(tmp_path, 7.0, [(0.0, 0, 0.1), (5.0, 16, 0.3), (9.0, 32, 0.5)])
    curve = read_curve(tmp_path)
    assert curve == Curve((7.0, 12.0, 16.0), (0.0, 16.0, 32.0), (0.1, 0.3, 0.5))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/accuracy": 0.1}) + "\n")
    with pytest.raises(MissingMetric, match="no time/train_s"):
        read_curve(tmp_path)


def test_claim_ids_parse_whole_or_letter_by_letter():
    assert parse_claims("h_latency,a") == ["a", "h_latency"]
    assert parse_claims("cf") == ["c", "f"]
    assert parse_claims("h, h_code_repair") == ["h", "h_code_repair"]
    with pytest.raises(ValueError, match="unknown claim 'z'"):
        parse_claims("h,z")
    with pytest.raises(ValueError, match="unknown claim 'h_mb'"):
        parse_claims("a,h_mb")
    assert tuple("abcdefg") == PAPER_CLAIMS


def test_timed_arms_get_the_budget_eval_points_and_the_latency_overlay(tmp_path):
    sao, grpo, grpo_dis = CLAIMS["h_latency"].arms
    assert [a.preset for a in (sao, grpo, grpo_dis)] == ["sao", "grpo", "grpo_dis"]
    config = run_config(sao, 2, BUDGETS["quick"], tmp_path)
    assert (config.train.eval_every, config.train.eval_every_s) == (4, 5.0)
    latency = config.env.latency
    assert (latency.distribution, latency.median_s, latency.sigma) == ("lognormal", 0.5, 1.0)
    plain = run_config(CLAIMS["h"].arms[0], 0, BUDGETS["full"], tmp_path)
    assert (plain.train.eval_every, plain.train.eval_every_s) == (10, 30.0)
    assert plain.env.latency.distribution == "off"
    code = run_config(CLAIMS["h_code_repair"].arms[1], 0, BUDGETS["quick"], tmp_path)
    assert (code.env.name, code.train.steps, code.rollout.group_size) == ("code_repair", 12, 8)
    # The sao_mb4 variant shares the references' runs and differs only in its candidate.
    variant = CLAIMS["h_latency_mb4"].arms
    assert [a.preset for a in variant] == ["sao_mb4", "grpo", "grpo_dis"]
    assert [a.key for a in variant[1:]] == [grpo.key, grpo_dis.key]
    assert "`sao_mb4`" in CLAIMS["h_mb4"].statement
    # On code_repair a reference that learns: GRPO at a quarter of its learning rate, its own arm,
    # against the SAO arm claim h_code_repair runs.
    sao_cr, slow = CLAIMS["h_code_repair_lr25"].arms
    assert sao_cr.key == CLAIMS["h_code_repair"].arms[0].key
    assert slow.key == "code_repair_grpo_lr25_timed" != CLAIMS["h_code_repair"].arms[1].key
    slow_config = run_config(slow, 0, BUDGETS["full"], tmp_path)
    assert (slow_config.preset, slow_config.actor.lr) == ("grpo", 2.5e-5)
    assert (slow_config.train.eval_every, slow_config.train.eval_every_s) == (10, 30.0)
    # On code_repair the overlay scaled to a turn: every arm its own run, under median 5 s.
    tools = CLAIMS["h_code_repair_latency"].arms
    assert [a.preset for a in tools] == ["sao", "grpo", "grpo_dis"]
    assert not {a.key for a in tools} & {a.key for a in CLAIMS["h_code_repair"].arms}
    tools_config = run_config(tools[2], 0, BUDGETS["full"], tmp_path)
    tools_latency = tools_config.env.latency
    assert (tools_config.env.name, tools_latency.distribution, tools_latency.median_s) == (
        "code_repair",
        "lognormal",
        5.0,
    )
    # Claim (a)'s arms are other runs: untimed, never shared with claim (h)'s.
    assert not {a.key for a in CLAIMS["a"].arms} & {a.key for a in CLAIMS["h"].arms}


# SAO crosses every target at a third of GRPO's time, plus a seed-dependent wobble; GRPO's evals
# at 90 and 100 s pin its crossing, so that every bracket's high end is under 0.5.
def _stub_run(config, run_dir: Path, resume: bool) -> None:
    seed = config.train.seed
    if config.preset == "sao":
        points = [(0.0, 0, 0.2), (20.0 + 2 * seed, 64, 0.7), (60.0, 128, 0.8)]
        _write_run(run_dir, 10.0, points)
    else:
        final = 0.6 if config.preset == "grpo" else 0.65
        points = [(0.0, 0, 0.2), (50.0, 64, 0.4), (90.0, 96, 0.5), (100.0, 128, final)]
        _write_run(run_dir, 0.0, points)


def test_claim_h_is_judged_from_the_curves_and_plotted(tmp_path, capsys):
    code = run_reproduce_command(["h"], 3, "quick", tmp_path, _stub_run, lambda c: None, False)
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    (claim,) = report["claims"]
    grpo, grpo_dis = claim["comparisons"]
    # vs grpo: target 0.6, SAO at 10 + (0.4 / 0.5) * (20 + 2k) s against GRPO's 100 s.
    expected = [(10 + 0.8 * (20 + 2 * k)) / 100 for k in range(3)]
    assert grpo["left_values"] == pytest.approx(expected)
    assert grpo["right_values"] == [0.5, 0.5, 0.5]
    assert grpo["targets"] == [0.6, 0.6, 0.6]
    assert grpo["arm_values"]["calc_grpo_timed"] == [100.0, 100.0, 100.0]
    assert grpo["differences"] == pytest.approx([v - 0.5 for v in expected])
    # SAO crossed in (10, 30 + 2k] s, GRPO in (90, 100] s.
    brackets = [[10 / 100, (30 + 2 * k) / 90] for k in range(3)]
    flat = [end for bracket in brackets for end in bracket]
    assert [end for bracket in grpo["brackets"] for end in bracket] == pytest.approx(flat)
    assert grpo["verdict"] == grpo_dis["verdict"] == claim["verdict"] == "reproduced"
    # High ends 0.333, 0.356, 0.378: SD 0.022 around -0.144, decided at 3 seeds, not 2.
    assert claim["seeds_needed"] == 3
    assert claim["curves"]["calc_sao_timed"][1]["train_s"] == [10.0, 32.0, 70.0]
    assert (tmp_path / "plots" / "claim_h_curves.png").stat().st_size > 0
    markdown = (tmp_path / "report.md").read_text()
    assert "time_to_accuracy_ratio(calc_sao_timed, calc_grpo_timed) < 0.5" in markdown
    assert "plots/claim_h_curves.png" in markdown
    assert "(h) reproduced" in capsys.readouterr().out
    assert "seed 1: 0.6000, calc_sao_timed 27.6 s, calc_grpo_timed 100.0 s" in markdown
    # The study is judged again from the curves its data keeps.
    rejudged = refresh(tmp_path / "report.json")["claims"][0]
    assert rejudged["verdict"] == "reproduced"
    assert rejudged["comparisons"][0]["ci95"] == pytest.approx(grpo["ci95"])
    rebracketed = rejudged["comparisons"][0]["brackets"]
    assert [end for bracket in rebracketed for end in bracket] == pytest.approx(flat)


def _edit_curves(tmp_path: Path, edit) -> None:
    """Run `edit(line)` on every line of the study's `data/seeds.jsonl`."""
    path = tmp_path / "data" / "seeds.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        edit(line)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_curve_changed_in_the_data_is_judged_again_at_its_brackets(tmp_path):
    run_reproduce_command(["h"], 3, "quick", tmp_path, _stub_run, lambda c: None, False)

    def never_reached(line):
        # Seed 1's SAO curve now never reaches GRPO's final accuracy.
        if line["arm"] == "calc_sao_timed" and line["seed"] == 1:
            line["curve"]["accuracy"] = [0.2, 0.3, 0.35]

    _edit_curves(tmp_path, never_reached)
    refreshed = refresh(tmp_path / "report.json")["claims"][0]
    grpo = refreshed["comparisons"][0]
    assert grpo["left_values"][1] == pytest.approx(70 / 100)  # its whole run: a lower bound
    assert grpo["brackets"][1] == [pytest.approx(70 / 100), None]
    assert grpo["verdict"] == refreshed["verdict"] == "inconclusive"
    assert "seed 1: never reached 0.600: lower bound" in grpo["seed_notes"]


def test_a_curve_missing_from_the_data_judges_nothing_at_its_seed(tmp_path):
    run_reproduce_command(["h"], 3, "quick", tmp_path, _stub_run, lambda c: None, False)

    def drop(line):
        if line["arm"] == "calc_grpo_timed" and line["seed"] == 2:
            line["curve"] = None
            line["missing"]["curve"] = "runs/x/metrics.jsonl: no time/train_s"

    _edit_curves(tmp_path, drop)
    refreshed = refresh(tmp_path / "report.json")["claims"][0]
    grpo = refreshed["comparisons"][0]
    assert grpo["seeds_missing"] == [2] and grpo["verdict"] == "inconclusive"
    assert grpo["missing"] == ["runs/x/metrics.jsonl: no time/train_s"]
    assert refreshed["curves"]["calc_grpo_timed"][2] is None


def test_a_sao_run_that_never_reaches_the_target_refutes_through_its_bound(tmp_path):
    def never(config, run_dir, resume):
        if config.preset == "sao":
            _write_run(run_dir, 0.0, [(0.0, 0, 0.2), (90.0 + config.train.seed, 64, 0.3)])
        else:
            _stub_run(config, run_dir, resume)

    run_reproduce_command(["h"], 3, "quick", tmp_path, never, lambda c: None, False)
    (claim,) = json.loads((tmp_path / "report.json").read_text())["claims"]
    assert claim["comparisons"][0]["left_values"] == pytest.approx([0.90, 0.91, 0.92])
    assert claim["verdict"] == "not reproduced"
    assert "never reached 0.600: lower bound" in claim["comparisons"][0]["seed_notes"][0]
