"""The agent loop: observations masked out, budgets enforced, failing environments contained."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from sao.envs.base import Environment, StepResult, Task
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import RolloutEngine, SamplingParams

TASK = Task(task_id="t", prompt="Q: 1+1=?\n", answer="2")


class ScriptedEnv(Environment):
    """Answers every action with a fixed observation; optionally fails or ends on some turn."""

    stop_tags = ("</python>", "</answer>")

    def __init__(self, fail_on_turn=None, end_on_turn=None, fail_reset=False, max_turns=3):
        self.fail_on_turn, self.end_on_turn, self.fail_reset = fail_on_turn, end_on_turn, fail_reset
        self.max_turns = max_turns
        self.turn = 0

    def reset(self, task: Task) -> str:
        if self.fail_reset:
            raise RuntimeError("reset exploded")
        self.turn = 0
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        self.turn += 1
        if self.turn == self.fail_on_turn:
            raise RuntimeError("tool exploded")
        if self.turn == self.end_on_turn or self.turn >= self.max_turns:
            # A history list is kept in the trajectory's metadata; an object is not.
            info = {"end_reason": "answer", "history": ["a", 2], "handle": object()}
            return StepResult("", 1.0, True, info)
        return StepResult("<output>ok</output>", 0.0, False, {"tool_called": True})


class TimingOutToolEnv(ScriptedEnv):
    """Its first tool call times out, as a sandbox under load does; the second answers."""

    def step(self, action_text: str) -> StepResult:
        result = super().step(action_text)
        if self.turn == 1:
            return replace(result, info={**result.info, "tool_error": "timeout"})
        return result


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    return build_tiny_policy(tokenizer, seed=0), tokenizer


def make_loop(parts, env_factory, max_tokens=200, env_workers=0, max_new_tokens=8):
    policy, tokenizer = parts
    engine = RolloutEngine(policy, tokenizer, max_batch=8, seed=0)
    params = SamplingParams(max_new_tokens=max_new_tokens)
    return AgentLoop(engine, tokenizer, env_factory, params, max_tokens, "scripted", env_workers)


@pytest.mark.parametrize("env_workers", [0, 2])
def test_observations_are_inserted_with_mask_zero(parts, env_workers):
    loop = make_loop(parts, lambda: ScriptedEnv(end_on_turn=3), env_workers=env_workers)
    (traj,) = loop.run([("e0", TASK, {"index": 7})])
    loop.close()
    tokenizer = parts[1]
    obs = tokenizer.encode("<output>ok</output>", add_special_tokens=False)
    assert traj.reward == 1.0 and traj.metadata["end_reason"] == "answer"
    assert traj.metadata["turns"] == 3 and traj.metadata["tool_calls"] == 2
    assert traj.metadata["tool_errors"] == 0
    assert traj.metadata["index"] == 7
    assert traj.metadata["info"] == {"end_reason": "answer", "history": ["a", 2]}
    assert traj.turn_rewards is None  # no action rewards: the outcome is the only reward
    # Every turn span is sampled (mask 1, version 0); the two observations between are inserted.
    inserted = [i for i, m in enumerate(traj.action_mask) if not m]
    prompt_len = traj.turn_spans[0][0]
    assert len(inserted) == prompt_len + 2 * len(obs)
    for (start, end), (next_start, _) in zip(traj.turn_spans, traj.turn_spans[1:], strict=False):
        assert list(traj.token_ids[end:next_start]) == obs
        assert set(traj.action_mask[end:next_start]) == {0}
        assert set(traj.policy_versions[end:next_start]) == {-1}
        assert set(traj.policy_versions[start:end]) == {0}


class PenalisingEnv(ScriptedEnv):
    """ScriptedEnv whose second action earns an action reward of -0.1."""

    def step(self, action_text: str) -> StepResult:
        result = super().step(action_text)
        return replace(result, action_reward=-0.1) if self.turn == 2 else result


def test_action_rewards_become_turn_rewards_and_leave_the_outcome_alone(parts):
    loop = make_loop(parts, lambda: PenalisingEnv(end_on_turn=3))
    (traj,) = loop.run([("e0", TASK, {})])
    loop.close()
    assert traj.reward == 1.0
    assert traj.turn_rewards == (0.0, -0.1, 0.0)
    last = max(i for i, m in enumerate(traj.action_mask) if m)
    second_end = traj.turn_spans[1][1] - 1
    assert sorted(traj.reward_positions()) == sorted(
        [(traj.turn_spans[0][1] - 1, 0.0), (second_end, -0.1), (last, 0.0), (last, 1.0)]
    )


def test_token_budget_ends_the_episode_with_reward_zero(parts):
    loop = make_loop(parts, lambda: ScriptedEnv(max_turns=50), max_tokens=40)
    (traj,) = loop.run([("e0", TASK, {})])
    assert traj.metadata["end_reason"] == "max_tokens"
    assert traj.reward == 0.0
    assert len(traj) <= 40


def test_a_crashing_environment_ends_only_its_own_episode(parts):
    factories = iter(
        [
            lambda: ScriptedEnv(fail_on_turn=2),
            lambda: ScriptedEnv(fail_reset=True),
            lambda: ScriptedEnv(end_on_turn=2),
        ]
    )
    made = [next(factories)() for _ in range(3)]
    envs = iter(made)
    loop = make_loop(parts, lambda: next(envs))
    out = loop.run([(f"e{i}", TASK, {"index": i}) for i in range(3)])
    by_index = {t.metadata["index"]: t for t in out}
    assert set(by_index) == {0, 2}
    assert by_index[0].metadata["end_reason"] == "env_error"
    assert "tool exploded" in by_index[0].metadata["error"]
    assert by_index[0].reward == 0.0
    assert by_index[2].metadata["end_reason"] == "answer"
    # The reset failure sampled nothing: no trajectory, but it is reported, not lost.
    assert [d["index"] for d in loop.dropped] == [1]
    assert loop.env_errors == 2


def test_failed_tool_calls_are_counted_apart_from_calls(parts):
    loop = make_loop(parts, lambda: TimingOutToolEnv(end_on_turn=3))
    (traj,) = loop.run([("e0", TASK, {})])
    loop.close()
    assert (traj.metadata["tool_calls"], traj.metadata["tool_errors"]) == (2, 1)
