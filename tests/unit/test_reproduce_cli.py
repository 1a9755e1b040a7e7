"""`sao reproduce` on the command line: its flags, and one line for each bad one."""

import pytest

import sao.reproduce.command
from sao.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--claims", "c,z"],
            "argument --claims: unknown claim 'z' (claims are a, b, c, d, e, f, g, h, "
            "h_code_repair, h_code_repair_lr25, h_latency, h_mb4, h_latency_mb4)",
        ),
        (["--claims", ","], "argument --claims: expected claim letters such as c or a,c,f"),
        (["--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
        (["--budget", "huge"], "argument --budget: invalid choice: 'huge'"),
    ],
)
def test_bad_flags_are_refused_with_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(["reproduce", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("sao reproduce: ") and message in err


def test_flags_reach_the_study(monkeypatch):
    calls = []
    monkeypatch.setattr(
        sao.reproduce.command,
        "run_reproduce_command",
        lambda claims, seeds, budget, out, report_only: (
            calls.append((claims, seeds, budget, out, report_only)) or 0
        ),
    )
    assert main(["reproduce", "--claims", "f,c"]) == 0
    assert main(["reproduce", "--seeds", "5", "--budget", "full", "--out", "x"]) == 0
    assert main(["reproduce", "--budget", "full", "--out", "x", "--report-only"]) == 0
    assert calls == [
        (["c", "f"], 3, "quick", "runs/reproduce", False),
        (list("abcdefg"), 5, "full", "x", False),
        (list("abcdefg"), 3, "full", "x", True),
    ]
