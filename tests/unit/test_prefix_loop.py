"""Endings of a recorded prefix: the environment replayed, the cut turn resumed, and refusals."""

from __future__ import annotations

import itertools

import pytest
import torch

from sao.envs.base import Environment, StepResult, Task
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import RolloutEngine, SamplingParams
from sao.rollout.prefix_loop import PrefixAgentLoop, prefix_at

TASK = Task(task_id="t", prompt="Q: 1+1=?\n", answer="2")


class RecordingEnv(Environment):
    """Ends on its third step; each step's observation names the step (or, with `drift`, a
    number that differs in every environment made), and every action text is kept."""

    stop_tags = ("</python>", "</answer>")
    _made = itertools.count()

    def __init__(self, drift: bool = False) -> None:
        self.turn, self.actions = 0, []
        self.instance = next(self._made) if drift else 0

    def reset(self, task: Task) -> str:
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        self.turn += 1
        self.actions.append(action_text)
        if self.turn == 3:
            return StepResult("", 1.0, True, {"end_reason": "answer"})
        return StepResult(f"<output>{self.turn + 10 * self.instance}</output>", 0.0, False, {})


class ForeignTagEnv(RecordingEnv):
    stop_tags = ("</not-a-token>",)


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    return build_tiny_policy(tokenizer, seed=0), tokenizer


def loops(parts, env_factory):
    policy, tokenizer = parts
    engine = RolloutEngine(policy, tokenizer, max_batch=8, seed=0)
    params = SamplingParams(max_new_tokens=8)
    args = (engine, tokenizer, env_factory, params, 200, "recording")
    return AgentLoop(*args), PrefixAgentLoop(*args)


def decode_with(tokenizer):
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def test_endings_continue_the_recorded_prefix_and_the_cut_turn_reaches_the_env_whole(parts):
    made = []

    def factory():
        made.append(RecordingEnv())
        return made[-1]

    recorder, resumer = loops(parts, factory)
    (recorded,) = recorder.run([("r", TASK, {})])
    assert len(recorded.turn_spans) == 3
    start, end = recorded.turn_spans[1]
    cut = start + (end - start) // 2
    decode = decode_with(parts[1])
    prefix = prefix_at(recorded, cut, decode)
    assert prefix.turn_start == start and prefix.replay == (
        decode(list(recorded.token_ids[slice(*recorded.turn_spans[0])])),
    )
    made.clear()
    for i in range(3):
        resumer.prefixes[f"e{i}"] = prefix
    endings = resumer.run([(f"e{i}", TASK, {"probe": i}) for i in range(3)])
    assert len(endings) == 3 and not resumer.prefixes
    recorded_part = decode(list(recorded.token_ids[start:cut]))
    for ending in endings:
        assert ending.token_ids[:cut] == recorded.token_ids[:cut]
        # Earlier turns are context now; the cut turn is an action from its recorded start.
        assert set(ending.action_mask[:start]) == {0}
        assert set(ending.action_mask[start : ending.turn_spans[0][1]]) == {1}
        assert ending.turn_spans[0][0] == start and ending.reward == 1.0
    for env in made:
        assert env.actions[0] == prefix.replay[0]
        assert env.actions[1].startswith(recorded_part)


def test_an_environment_that_does_not_replay_is_refused(parts):
    recorder, resumer = loops(parts, lambda: RecordingEnv(drift=True))
    (recorded,) = recorder.run([("r", TASK, {})])
    start, end = recorded.turn_spans[1]
    resumer.prefixes["e"] = prefix_at(recorded, start, decode_with(parts[1]))
    with pytest.raises(RuntimeError, match="did not replay turn 0"):
        resumer.run([("e", TASK, {})])


def test_tags_that_are_not_single_tokens_are_refused(parts):
    recorder, _ = loops(parts, RecordingEnv)
    (recorded,) = recorder.run([("r", TASK, {})])
    _, resumer = loops(parts, ForeignTagEnv)
    resumer.prefixes["e"] = prefix_at(recorded, recorded.turn_spans[0][0], decode_with(parts[1]))
    with pytest.raises(ValueError, match="not single tokens"):
        resumer.run([("e", TASK, {})])


def test_a_position_outside_every_turn_and_an_unregistered_episode_are_refused(parts):
    recorder, resumer = loops(parts, RecordingEnv)
    (recorded,) = recorder.run([("r", TASK, {})])
    with pytest.raises(ValueError, match="not an action token"):
        prefix_at(recorded, 0, decode_with(parts[1]))
    with pytest.raises(ValueError, match="no prefix registered"):
        resumer.run([("unknown", TASK, {})])
