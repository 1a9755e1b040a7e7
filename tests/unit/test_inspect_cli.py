"""`sao inspect`: the run reader, and every analysis's bad input as one line with exit 2."""

import json

import pytest

from sao.analysis import runs
from sao.analysis.cli import COMMANDS
from sao.cli import main


def test_every_analysis_is_listed_in_the_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["inspect", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_no_analysis_named_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["inspect"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_torn_last_line_is_skipped_as_the_runtime_skips_it(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"ste')
    assert runs.metrics(tmp_path) == [{"step": 1}, {"step": 2}]


@pytest.mark.parametrize(
    ("argv", "file"),
    [
        (["windows", "--windows", "1-2", "--keys", "m"], "metrics.jsonl"),
        (["critic-windows"], "metrics.jsonl"),
        (["style-phases"], "metrics.jsonl"),
        (["endings"], "trajectories.jsonl"),
        (["failed-tests"], "trajectories.jsonl"),
    ],
)
def test_a_missing_run_file_is_named_in_one_line(tmp_path, capsys, argv, file):
    assert main(["inspect", argv[0], str(tmp_path), *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err == f"sao inspect {argv[0]}: {tmp_path / file}: no such file\n"


def test_a_run_without_its_config_is_named(tmp_path, capsys):
    (tmp_path / "trajectories.jsonl").write_text("")
    assert main(["inspect", "failed-tests", str(tmp_path)]) == 2
    assert f"{tmp_path / 'config.yaml'}: no such file" in capsys.readouterr().err


def test_latest_keeps_at_least_one_and_refuses_a_share_outside_0_1():
    assert runs.latest([1, 2, 3, 4], 0.5) == [3, 4]
    assert runs.latest([1, 2, 3], 0.01) == [3]
    with pytest.raises(runs.InspectError, match=r"--last: must be in \(0, 1\], got 1.5"):
        runs.latest([1], 1.5)


def test_an_unreadable_eval_is_named(tmp_path):
    (tmp_path / "eval.json").write_text("{not json")
    with pytest.raises(runs.InspectError, match="cannot read an eval result"):
        runs.eval_result(tmp_path / "eval.json")


def test_windows_prints_a_row_per_window_pooled_over_runs(tmp_path, capsys):
    for name, values in (("a", [1.0, 3.0, 5.0]), ("b", [3.0, 3.0, 3.0])):
        (tmp_path / name).mkdir()
        rows = [{"step": s, "m": v} for s, v in enumerate(values, start=1)]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["inspect", "windows", str(tmp_path / "a"), str(tmp_path / "b")]
    assert main([*argv, "--windows", "1-2,3-3", "--keys", "m"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "2 run(s)",
        "",
        "| steps | m |",
        "|---|---|",
        "| 1-2 | 2.500 |",
        "| 3-3 | 4.000 |",
    ]
    assert main([*argv, "--windows", "3-1", "--keys", "m"]) == 2
    assert capsys.readouterr().err == (
        "sao inspect windows: --windows: '3-1' is not FIRST-LAST with FIRST <= LAST\n"
    )
