"""Warm-start demonstrations for `reasoning_gym:<dataset>`: the reference answer, or (with
probability `p_wrong`) a near miss, scored by the environment."""

from __future__ import annotations

import random
from typing import Any

from sao.envs.demonstration import TeacherTrajectory, Turn
from sao.envs.reasoning_gym.env import ReasoningGymEnv
from sao.envs.reasoning_gym.tasks import ReasoningGymTaskSource
from sao.formats.tags import ANSWER_CLOSE, ANSWER_OPEN


def corrupt(answer: str, rng: random.Random) -> str:
    """A plausible wrong answer: one digit or letter changed (or a `1` appended)."""
    positions = [i for i, ch in enumerate(answer) if ch.isalnum()]
    if not positions:
        return answer + "1"
    i = rng.choice(positions)
    pool = "0123456789" if answer[i].isdigit() else "abcdefghijklmnopqrstuvwxyz"
    swap = rng.choice([c for c in pool if c != answer[i].lower()])
    return answer[:i] + (swap.upper() if answer[i].isupper() else swap) + answer[i + 1 :]


def demonstrations(
    dataset: str, n: int, seed: int, p_wrong: float = 0.3, **source_options: Any
) -> list[TeacherTrajectory]:
    """`n` single-turn demonstrations: the answer, wrong with probability `p_wrong`."""
    if not 0.0 <= p_wrong <= 1.0:
        raise ValueError(f"p_wrong: must be a probability, got {p_wrong!r}")
    tasks = ReasoningGymTaskSource(dataset, **source_options).train(n, seed)
    env = ReasoningGymEnv(dataset)
    rng = random.Random(seed * 7919 + 31)
    demos = []
    for task in tasks:
        answer = corrupt(task.answer, rng) if rng.random() < p_wrong else task.answer
        action = f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
        env.reset(task)
        result = env.step(action)
        demos.append(TeacherTrajectory(task, (Turn(action, result.observation),), result.reward))
    return demos
