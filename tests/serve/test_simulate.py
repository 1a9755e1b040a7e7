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


def test_users_who_name_the_preferred_style_are_counted_apart(policy_dir, tmp_path):
    service = make_service(policy_dir, tmp_path / "s.db", api_key="k", warmup=1)
    options = {"switch_every": 3, "request_rate": 0.5}
    with running_server(service) as url:
        simulate(url, "k", requests=6, concurrency=2, window=3, out=tmp_path / "sim", **options)
    tasks = list(
        itertools.islice(make_task_source("style_stream", **options).stream("train", 0), 6)
    )
    asked = [t.meta.get("requested_style") for t in tasks]
    assert any(asked) and not all(asked)  # the stream at seed 0 mixes both kinds

    records = {r["index"]: r for r in map(json.loads, (tmp_path / "sim" / "requests.jsonl").open())}
    assert [records[i]["requested_style"] for i in range(6)] == asked
    windows = [json.loads(line) for line in (tmp_path / "sim" / "windows.jsonl").open()]
    for w, chunk in zip(windows, (range(0, 3), range(3, 6)), strict=True):
        requested = [records[i] for i in chunk if asked[i]]
        assert w["style/requested_share"] == pytest.approx(len(requested) / 3)
        if requested:
            mean = sum(r["reward"] for r in requested) / len(requested)
            assert w["style/reward_requested"] == pytest.approx(mean)


def test_simulate_refuses_a_request_rate_outside_0_1(capsys, tmp_path):
    out = tmp_path / "sim"
    code = main(
        ["simulate", "--url", "http://127.0.0.1:9", "--request-rate", "1.5", "--out", str(out)]
    )
    assert code == 2
    assert "--request-rate: must be in [0, 1], got 1.5" in capsys.readouterr().err
    assert not out.exists()
