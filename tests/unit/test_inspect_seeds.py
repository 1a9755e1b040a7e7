"""`sao inspect seeds`: one row per preset over seeds, every cell worked out by hand."""

import json
import math

import pytest

from sao.analysis import seed_table
from sao.cli import main


def _run(path, *, initial, final, gain, wall, drift, failing, ev, staleness, formats):
    """A finished run directory: `summary.json` and `metrics.jsonl` with one trained row per EV
    value and an eval row before and after them."""
    path.mkdir()
    summary = {
        "initial_accuracy": initial,
        "final_accuracy": final,
        "accuracy_gain": {"difference": gain, "sd": 0.5, "n": 100},
        "wall_s": wall,
        "drift": {
            "first": {"max_turns": drift[0][0], "malformed": drift[1][0]},
            "last": {"max_turns": drift[0][1], "malformed": drift[1][1]},
        },
        "code_repair_behaviour": {
            "submitted_failing": {"first_10_steps": failing[0], "last_10_steps": failing[1]}
        },
    }
    (path / "summary.json").write_text(json.dumps(summary))
    rows = [{"step": 0, "eval/format_error_rate": formats[0]}]
    for step, value in enumerate(ev, start=1):
        rows.append(
            {
                "step": step,
                "rollout/reward_mean": 0.5,
                "critic/vf_explained_var": value,
                "rollout/staleness_mean": staleness,
            }
        )
    rows.append({"step": len(ev), "eval/format_error_rate": formats[1]})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def two_seeds(tmp_path):
    first = _run(
        tmp_path / "s0",
        initial=0.2,
        final=0.4,
        gain=0.2,
        wall=100,
        drift=((0.1, 0.3), (0.0, 0.1)),
        failing=(0.2, 0.1),
        ev=[s / 8 for s in range(1, 13)],  # first 10: 0.6875, last 10: 0.9375, all: 0.8125
        staleness=1.0,
        formats=(0.5, 0.25),
    )
    # A run without a critic: its EV is logged as null.
    second = _run(
        tmp_path / "s1",
        initial=0.3,
        final=0.4,
        gain=0.1,
        wall=200,
        drift=((0.2, 0.2), (0.1, 0.1)),
        failing=(0.3, 0.3),
        ev=[None] * 12,
        staleness=2.0,
        formats=(0.1, 0.15),
    )
    return first, second


def test_a_row_pools_the_seeds_and_averages_each_column(two_seeds):
    row = seed_table.group_row("sao", list(two_seeds))
    # Pooled: n = 200, mean 0.15; sd = sqrt((2 * 99 * 0.25 + 2 * 100 * 0.05**2) / 199),
    # half-width 1.96 * sd / sqrt(200) = 0.0695.
    assert row == (
        "| `sao` | 2 | 0.250 -> 0.400 | +0.20, +0.10 | **+0.150** (+0.081, +0.219), n=200 "
        "| 0.15 -> 0.25 (rise +0.20) | 0.05 -> 0.10 (rise +0.10) | 0.25 -> 0.20 (rise +0.00) "
        "| 0.30 -> 0.20 (rise +0.05) | 0.81 (0.69 / 0.94) | 1.50 | 150 s |"
    )


def test_the_critics_explained_variance_is_read_over_the_first_and_last_10_steps(two_seeds):
    facts = seed_table.run_facts(two_seeds[0])
    assert facts["ev"] == pytest.approx((0.8125, 0.6875, 0.9375))
    assert all(math.isnan(v) for v in seed_table.run_facts(two_seeds[1])["ev"])


def test_a_group_without_a_critic_shows_a_dash(two_seeds):
    row = seed_table.group_row("grpo", [two_seeds[1]])
    assert row.split(" | ")[-3] == "-"


def test_the_command_prints_the_header_then_a_row_per_group(two_seeds, capsys):
    first, second = two_seeds
    assert main(["inspect", "seeds", f"a={first},{second}", f"b={second}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == seed_table.HEADER.splitlines()
    assert lines[2].startswith("| `a` | 2 |") and lines[3].startswith("| `b` | 1 |")


def test_an_unfinished_run_and_a_group_without_a_label_are_one_line(two_seeds, tmp_path, capsys):
    (tmp_path / "running").mkdir()
    assert main(["inspect", "seeds", f"a={tmp_path / 'running'}"]) == 2
    err = capsys.readouterr().err
    assert err == f"sao inspect seeds: {tmp_path / 'running' / 'summary.json'}: no such file " + (
        "(is the run finished?)\n"
    )
    assert main(["inspect", "seeds", str(two_seeds[0])]) == 2
    assert "expected LABEL=RUN_DIR[,RUN_DIR...]" in capsys.readouterr().err
