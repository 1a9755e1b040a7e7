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
            "h_code_repair, h_code_repair_lr25, h_latency, h_code_repair_latency, h_mb4, "
            "h_latency_mb4)",
        ),
        (["--claims", ","], "argument --claims: expected claim letters such as c or a,c,f"),
        (["--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
        (["--budget", "huge"], "argument --budget: invalid choice: 'huge'"),
        (["--workers", "0"], "argument --workers: must be >= 1, got 0"),
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
        lambda claims, seeds, budget, out, report_only, workers: (
            calls.append((claims, seeds, budget, out, report_only, workers)) or 0
        ),
    )
    assert main(["reproduce", "--claims", "f,c"]) == 0
    assert main(["reproduce", "--seeds", "5", "--budget", "full", "--out", "x"]) == 0
    assert main(["reproduce", "--budget", "full", "--out", "x", "--report-only"]) == 0
    assert main(["reproduce", "--claims", "d", "--workers", "2"]) == 0
    assert calls == [
        (["c", "f"], 3, "quick", "runs/reproduce", False, 1),
        (list("abcdefg"), 5, "full", "x", False, 1),
        (list("abcdefg"), 3, "full", "x", True, 1),
        (["d"], 3, "quick", "runs/reproduce", False, 2),
    ]


def test_a_timed_claim_is_refused_more_than_one_worker_in_one_line(tmp_path, capsys):
    out = tmp_path / "study"
    assert main(["reproduce", "--claims", "c,h", "--workers", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "sao reproduce: --workers 2: claim (h) times its runs, which need the cores alone "
        "(run it with --workers 1)"
    )
    assert not out.exists()
