"""`sao simulate` against a live in-process server."""

from __future__ import annotations

import itertools
import json

import httpx
import pytest
from serve_helpers import make_service, running_server

from sao.cli import main
from sao.envs import make_env, make_task_source
from sao.serve.simulate import simulate


def test_simulated_users_are_judged_rewarded_and_reported(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", api_key="k", warmup=1)
    with running_server(service) as url:
        summary = simulate(
            url, "k", requests=6, concurrency=2, switch_every=2, window=2, out=tmp_path / "sim"
        )
        status = httpx.get(f"{url}/v1/status", headers={"Authorization": "Bearer k"}).json()
    assert summary["requests"] == 6
    assert summary["server_trained"] == 6  # the summary waits for the learner to finish
    assert status["feedback"] == 6 and status["completions"] == 6

    records = [json.loads(line) for line in (tmp_path / "sim" / "requests.jsonl").open()]
    assert sorted(r["index"] for r in records) == list(range(6))
    tasks = list(
        itertools.islice(make_task_source("style_stream", switch_every=2).stream("train", 0), 6)
    )
    for record in records:
        task = tasks[record["index"]]
        env = make_env("style_stream")
        env.reset(task)
        assert env.step(record["reply"]).reward == record["reward"]
        assert record["preferred_style"] == task.meta["preferred_style"]

    windows = [json.loads(line) for line in (tmp_path / "sim" / "windows.jsonl").open()]
    assert [w["step"] for w in windows] == [0, 1, 2]
    assert [w["style/preferred_index"] for w in windows] == [0.0, 1.0, 2.0]  # one phase each
    assert summary["style_switch_steps"] == [1, 2]
    assert (tmp_path / "sim" / "plots" / "style_shares.png").is_file()
    assert (tmp_path / "sim" / "summary.json").is_file()


def test_simulate_refuses_an_environment_without_users(capsys):
    assert main(["simulate", "--url", "http://127.0.0.1:9", "--env", "calc"]) == 2
    assert "simulated users exist for style_stream" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--requests", "--concurrency"])
def test_simulate_refuses_bad_counts(flag, capsys):
    assert main(["simulate", "--url", "http://127.0.0.1:9", flag, "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err
