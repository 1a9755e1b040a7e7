"""The analyses that sample a saved policy, run end to end at toy size on the tiny random policy:
`sao inspect style-coverage` and `sao inspect critic-ceiling fitted|oracle`. A random policy earns
nothing, so these check what each counts and prints, not the numbers it measures (those are
`test_inspect_critic_fit.py`'s and `test_inspect_critic_oracle.py`'s)."""

import json

from sao.cli import main


def test_style_coverage_prints_every_share_and_writes_them(tiny_policy_dir, tmp_path, capsys):
    out = tmp_path / "coverage.json"
    argv = ["--model", str(tiny_policy_dir), "--n", "2", "--samples", "2", "--json", str(out)]
    assert main(["inspect", "style-coverage", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "4 replies at temperature 1.0"
    assert [line.split()[0] for line in lines[1:]] == [
        *("cute", "chuunibyou", "classical", "pirate", "mixed", "none", "no_answer", "quality"),
    ]
    saved = json.loads(out.read_text())
    assert saved["n"] == 4 and sum(saved["share"].values()) == 1.0


def test_the_fitted_ceiling_splits_tasks_3_to_1_and_reports_each_chunk(tiny_policy_dir, capsys):
    argv = ["--policy", str(tiny_policy_dir), "--tasks", "8", "--samples", "2"]
    assert main(["inspect", "critic-ceiling", "fitted", *argv, "--steps", "2", "--every", "1"]) == 0
    *chunks, last = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [c["steps"] for c in chunks] == [1, 2]
    assert (last["train_trajectories"], last["held_out_trajectories"]) == (12, 4)
    assert last["curve"] == chunks


def test_the_oracle_probes_every_trajectory(tiny_policy_dir, capsys):
    argv = ["--policy", str(tiny_policy_dir), "--trajectories", "8", "--probes", "1"]
    assert main(["inspect", "critic-ceiling", "oracle", *argv, "--continuations", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["trajectories"], result["probes"], result["endings"]) == (8, 8, 16)


def test_too_few_samples_are_refused_before_anything_loads(tiny_policy_dir, capsys):
    argv = ["--policy", str(tiny_policy_dir), "--samples", "1"]
    assert main(["inspect", "critic-ceiling", "fitted", *argv]) == 2
    err = capsys.readouterr().err
    assert err == "sao inspect critic-ceiling: --samples must be >= 2 and --tasks >= 8\n"
