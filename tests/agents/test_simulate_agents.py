"""`sao simulate --agent`: a crowd of framework agents against the real server, and its refusals."""

from __future__ import annotations

import json

import pytest
from agents_helpers import BATCH, free_port

from sao.cli import main

REQUESTS = 4


def test_simulate_agent_crowd_reports_what_the_server_counted(live_server, tmp_path, capsys):
    before = live_server.status()
    out = tmp_path / "sim"
    rc = main(
        [
            "simulate", "--url", live_server.url, "--agent", "langgraph",
            "--requests", str(REQUESTS), "--concurrency", "2", "--window", "2",
            "--max-turns", "3", "--seed", "11", "--out", str(out),
        ]
    )  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(capsys.readouterr().out)  # what it prints is what it wrote
    after = summary["server_status"]

    records = [json.loads(line) for line in (out / "requests.jsonl").open()]
    assert sorted(r["index"] for r in records) == list(range(REQUESTS))
    assert len({r["episode_id"] for r in records}) == REQUESTS
    assert all(r["episode_id"].startswith("sim-langgraph-") for r in records)
    assert summary["episodes"] == REQUESTS and summary["agent"] == "langgraph"
    assert summary["tool_calls"] == sum(r["tool_calls"] for r in records)
    assert summary["model_calls"] == sum(r["model_calls"] for r in records)
    assert summary["solved_share"] == sum(r["solved"] for r in records) / REQUESTS
    assert after["episodes_started"] - before["episodes_started"] == REQUESTS
    assert after["episodes_rewarded"] - before["episodes_rewarded"] == REQUESTS
    assert after["feedback"] - before["feedback"] == REQUESTS
    assert after["tool_calls"] - before["tool_calls"] == summary["tool_calls"]
    assert after["completions"] - before["completions"] == summary["model_calls"]
    # The summary waits for the learner: what is left untrained is less than one batch.
    assert after["feedback"] - after["trained"] - after["dropped"] < BATCH

    windows = [json.loads(line) for line in (out / "windows.jsonl").open()]
    by_index = sorted(records, key=lambda r: r["index"])
    assert [w["episodes"] for w in windows] == [2, 2]
    for window, pair in zip(windows, (by_index[:2], by_index[2:]), strict=True):
        assert window["rollout/reward_mean"] == sum(r["reward"] for r in pair) / 2
        assert window["agent/tool_calls_mean"] == sum(r["tool_calls"] for r in pair) / 2
    assert (out / "plots" / "reward.png").is_file()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--env", "style_stream"], "the agents solve tool_calc, not --env style_stream"),
        (["--switch-every", "4"], "--switch-every: tool_calc has no preferred style to switch"),
        (["--max-turns", "0"], "--max-turns: must be >= 1, got 0"),
        (["--agents-dir", "/nonexistent"], "not found (the agents live in a source checkout"),
    ],
)
def test_simulate_agent_refuses_settings_it_cannot_honour(flags, message, capsys):
    rc = main(["simulate", "--url", "http://127.0.0.1:9", "--agent", "openai", *flags])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1


def test_simulate_without_agent_points_tool_calc_at_it(capsys):
    assert main(["simulate", "--url", "http://127.0.0.1:9", "--env", "tool_calc"]) == 2
    assert capsys.readouterr().err == (
        "sao simulate: --env tool_calc: simulated users exist for style_stream "
        "(tool_calc's users are agents: pass --agent)\n"
    )


def test_simulate_agent_names_are_checked(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--url", "http://127.0.0.1:9", "--agent", "crewai"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'crewai'" in capsys.readouterr().err


def test_simulate_agent_reports_an_unreachable_server_in_one_line(capsys):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    rc = main(["simulate", "--url", url, "--agent", "openai", "--requests", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith(f"sao simulate: the server at {url} failed: ") and err.count("\n") == 1
