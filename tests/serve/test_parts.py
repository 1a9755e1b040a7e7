"""The service's parts on their own: message layout, rate limiter, store."""

from __future__ import annotations

import pytest

from sao.envs import make_task_source
from sao.formats.tool_calls import tool_call_format
from sao.models.tokenizer import build_tokenizer
from sao.rollout.rendering import MessageRenderer
from sao.serve.conversation import reply_text
from sao.serve.limits import RateLimiter
from sao.serve.store import (
    DuplicateFeedback,
    Store,
    StoredCompletion,
    UnknownCompletion,
)

TOKENIZER = build_tokenizer()
RENDERER = MessageRenderer(TOKENIZER, tool_call_format("sao"))


def test_a_user_message_renders_as_the_environment_prompt():
    task = next(make_task_source("style_stream").stream("train", 0))
    # The agent loop's first context: BOS + the prompt text, exactly.
    expected = [TOKENIZER.bos_token_id, *TOKENIZER.encode(task.prompt, add_special_tokens=False)]
    assert RENDERER.conversation_ids([{"role": "user", "content": task.prompt}]) == expected
    stripped = [{"role": "user", "content": task.prompt.rstrip("\n")}]
    assert RENDERER.conversation_ids(stripped) == expected


def test_roles_map_to_prompt_observation_and_action_text():
    def text(role: str, content: str) -> str:
        return RENDERER.plain_message_text({"role": role, "content": content})

    assert text("system", "be brief") == "be brief\n"
    assert text("tool", "42") == "<output>42</output>"
    assert text("assistant", "<answer>x</answer>") == "<answer>x</answer>"
    ids = TOKENIZER.encode("<answer>hi</answer>", add_special_tokens=False)
    assert reply_text([*ids, TOKENIZER.eos_token_id], TOKENIZER) == "<answer>hi</answer>"


def test_rate_limiter_slides_over_one_minute():
    now = [0.0]
    limiter = RateLimiter(3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(3)] == [None, None, None]
    now[0] = 20.0
    assert limiter.allow("a") == pytest.approx(40.0)  # the first request leaves the window at 60
    assert limiter.allow("b") is None  # another key has its own window
    now[0] = 60.5
    assert limiter.allow("a") is None


def _completion(cid: str) -> StoredCompletion:
    trajectory = {
        "token_ids": [1, 5, 6],
        "action_mask": [0, 1, 1],
        "rollout_logprobs": [0.0, -0.5, -0.25],
        "policy_versions": [-1, 0, 0],
        "turn_spans": [[1, 3]],
        "metadata": {},
    }
    return StoredCompletion(cid, None, f"hash-{cid}", [], "text", "stop", trajectory)


def test_store_feedback_states_and_reopen(tmp_path):
    store = Store(tmp_path / "s.db")
    for cid in ("a", "b", "c"):
        store.add_completion(_completion(cid), "key")
    store.add_feedback("a", 1.0)
    store.add_feedback("b", 0.0)
    with pytest.raises(DuplicateFeedback):
        store.add_feedback("a", 0.5)
    with pytest.raises(UnknownCompletion):
        store.add_feedback("zzz", 1.0)
    batch = store.pending_batch(5)
    assert [cid for cid, _ in batch] == ["a", "b"]  # in the order the rewards arrived
    assert [t.reward for _, t in batch] == [1.0, 0.0]
    store.record_checkpoint(1, 1, tmp_path / "c1.pt", ["a"], ["b"], {"x": float("nan")})
    store.close()

    reopened = Store(tmp_path / "s.db")
    assert reopened.counts() == {
        "completions": 3,
        "feedback": 2,
        "trained": 1,
        "dropped": 1,
        "pending": 0,
        "continued": 0,
        "restarted": 0,
        "tool_calls": 0,
        "malformed_tool_calls": 0,
        "episodes_started": 0,
        "episodes_open": 0,
        "episodes_rewarded": 0,
        "episodes_dropped": 0,
        "trajectories_abandoned": 0,
        "env_errors": 0,
    }
    latest = reopened.latest_checkpoint()
    assert (latest.seq, latest.version, latest.metrics) == (1, 1, {"x": None})
    assert reopened.completion_by_context("hash-c").id == "c"


def test_an_assistant_tool_call_renders_in_the_tiny_models_format():
    message = {
        "role": "assistant",
        "content": "Adding.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression":"2+3"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    assert RENDERER.plain_text([message, result]) == (
        'Adding.<tool>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool>'
        "<output>5</output>"
    )
    # Tools are not rendered in the plain layout: the prompt is the same with or without them.
    prompt = [{"role": "user", "content": "Add 2 and 3."}]
    tools = [{"type": "function", "function": {"name": "calculator"}}]
    assert RENDERER.conversation_ids(prompt, tools) == RENDERER.conversation_ids(prompt)


def test_a_database_from_before_episodes_gains_their_columns(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE completions (id TEXT PRIMARY KEY, created REAL NOT NULL, api_key_id TEXT "
        "NOT NULL, parent_id TEXT, context_hash TEXT NOT NULL, messages TEXT NOT NULL, content "
        "TEXT NOT NULL, finish_reason TEXT NOT NULL, trajectory TEXT NOT NULL)"
    )
    old.execute(
        "INSERT INTO completions VALUES ('a', 0, 'k', NULL, 'hash-a', '[]', 'x', 'stop', '{}')"
    )
    old.commit()
    old.close()
    store = Store(path)
    stored = store.completion_by_context("hash-a")
    assert (stored.id, stored.episode_id, stored.kind, stored.tool_calls) == ("a", None, "new", 0)
    store.add_feedback("a", 1.0)
    assert store.counts()["pending"] == 1
