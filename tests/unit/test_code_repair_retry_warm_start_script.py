"""scripts/code_repair_retry_warm_start.py: the warm start learns from a teacher with another
`p_retry`, everything else as `sao sft --env code_repair`."""

from repo_scripts import load_script
from sao.envs.code_repair.teacher import demonstrations

script = load_script("code_repair_retry_warm_start")


def test_the_warm_start_gets_the_retrying_teachers_demonstrations(monkeypatch, capsys):
    asked, trained = [], []

    def few(n, seed, *, teacher):
        asked.append((n, seed, teacher.p_retry))
        return demonstrations(60, seed, teacher=teacher)

    def record(env, out, config, *, seed, demonstrations):
        trained.append((env, out, config.steps, seed, demonstrations))

    monkeypatch.setattr(script, "demonstrations", few)
    monkeypatch.setattr(script, "warm_start", record)
    script.main(["--p-retry", "1.0", "--out", "somewhere"])
    ((n, seed, p_retry),) = asked
    assert (seed, p_retry) == (0, 1.0) and n == 20000
    ((env, out, steps, seed, segments),) = trained
    assert (env, out, steps, seed, len(segments)) == ("code_repair", "somewhere", 400, 0, 60)
    assert segments[0][-1] == ("<tool>submit</tool>", True)
    assert "of demonstrations retry" in capsys.readouterr().out
