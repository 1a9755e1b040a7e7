"""`sao inspect endings`: endings counted with their rewarded share."""

import json

from sao.analysis import endings as episode_endings
from sao.cli import main


def _episode(reason, events, reward):
    return {"reward": reward, "metadata": {"info": {"end_reason": reason, "events": events}}}


def test_endings_group_by_reason_and_last_events_most_common_first():
    rows = [
        _episode("max_turns", ["replace", "test_failed", "replace", "test_failed", "replace"], 0),
        _episode("max_turns", ["view", "test_failed", "replace", "test_failed", "replace"], 1),
        _episode("answer", ["replace", "test_passed", "submit"], 1),
    ]
    assert episode_endings.endings(rows, events=3) == [
        ("max_turns: replace > test_failed > replace", 2, 1),
        ("answer: replace > test_passed > submit", 1, 1),
    ]
    assert episode_endings.endings(rows, events=0) == [("max_turns", 2, 1), ("answer", 1, 1)]


def test_a_malformed_last_action_is_named_by_its_format_error():
    info = {"end_reason": "max_turns", "events": ["replace", "error"], "format_error": "no_tag"}
    assert (
        episode_endings.ending_key({"info": info}, events=3) == "max_turns: replace > error:no_tag"
    )
    # An edit the file refused is a `replace` event with a format error: named as it was.
    info = {"end_reason": "max_turns", "events": ["replace"], "format_error": "line_too_long"}
    assert episode_endings.ending_key({"info": info}, events=3) == "max_turns: replace"


def test_an_environment_without_events_is_named_by_its_end_reason():
    row = {"reward": 0.0, "metadata": {"end_reason": "malformed", "info": {}}}
    assert episode_endings.ending_key(row["metadata"], events=3) == "malformed"


def test_the_command_reads_the_latest_share_of_a_runs_episodes(tmp_path, capsys):
    rows = [_episode("answer", ["submit"], 1)] * 2 + [
        _episode("max_turns", ["replace", "test_failed"], 0),
        _episode("answer", ["submit"], 1),
    ]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["inspect", "endings", str(tmp_path), "--last", "0.5", "--events", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}: last 2 of 4 episodes",
        "   50.0%  rewarded    0/1    max_turns: test_failed",
        "   50.0%  rewarded    1/1    answer: submit",
    ]
