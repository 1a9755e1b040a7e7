"""`sao inspect retry-warm-start`: the warm start learns from a teacher with another `p_retry`,
everything else as `sao sft --env code_repair`."""

import sao.envs.code_repair.teacher
import sao.warmstart.sft
from sao.cli import main
from sao.envs.code_repair.teacher import demonstrations


def test_the_warm_start_gets_the_retrying_teachers_demonstrations(monkeypatch, capsys, tmp_path):
    asked, trained = [], []

    def few(n, seed, *, teacher):
        asked.append((n, seed, teacher.p_retry))
        return demonstrations(60, seed, teacher=teacher)

    def record(env, out, config, *, seed, demonstrations):
        trained.append((env, out, config.steps, seed, demonstrations))

    monkeypatch.setattr(sao.envs.code_repair.teacher, "demonstrations", few)
    monkeypatch.setattr(sao.warmstart.sft, "warm_start", record)
    out = str(tmp_path / "somewhere")
    assert main(["inspect", "retry-warm-start", "--p-retry", "1.0", "--out", out]) == 0
    ((n, seed, p_retry),) = asked
    assert (seed, p_retry) == (0, 1.0) and n == 20000
    ((env, out_given, steps, seed, segments),) = trained
    assert (env, out_given, steps, seed, len(segments)) == ("code_repair", out, 400, 0, 60)
    assert segments[0][-1] == ("<tool>submit</tool>", True)
    assert "of demonstrations retry" in capsys.readouterr().out


def test_a_retry_probability_outside_0_1_is_one_line(capsys, tmp_path):
    argv = ["inspect", "retry-warm-start", "--p-retry", "1.5", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "sao inspect retry-warm-start: --p-retry: must be a probability, got 1.5\n"
    )
