"""A complete custom environment in one file: reverse a short word.

    Reverse: stone
    <answer>enots</answer>

Importing this module registers `reverse` (environment, task source and warm-start teacher), so
`make_env("reverse")`, `sao sft --env reverse` and `sao train --env reverse` work from a process
that imported it (see docs/environments.md).
"""

from __future__ import annotations

import random
from typing import Any

from sao.envs import (
    END_ANSWER,
    END_MAX_TURNS,
    EnvRegistration,
    HashSplitTaskSource,
    StepResult,
    Task,
    TeacherTrajectory,
    Turn,
    TurnLimitedEnvironment,
    known_env_names,
    register,
)
from sao.envs.base import stable_id
from sao.envs.text_protocol import parse_action, wrap_output
from sao.formats.tags import ANSWER_CLOSE, ANSWER_OPEN


class ReverseTaskSource(HashSplitTaskSource):
    """Words of 3-7 letters; the prompt's hash decides train or test."""

    def generate(self, rng: random.Random) -> Task:
        """Draw one task using `rng` only."""
        word = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 7)))
        prompt = f"Reverse: {word}\n"
        return Task(stable_id("reverse", prompt), prompt, word[::-1], {"env": "reverse"})


class ReverseEnv(TurnLimitedEnvironment):
    """Single turn: reward 1 for the reversed word inside answer tags, else 0.

    The base class checks `max_turns`, refuses a step before `reset` or after the end, and
    counts turns; this class says what one turn does.
    """

    stop_tags = (ANSWER_CLOSE,)

    def __init__(self, max_turns: int = 1) -> None:
        super().__init__(max_turns)

    def start(self, task: Task) -> str:
        """Nothing to check or set up; returns the prompt."""
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Score an answer; a malformed action costs a turn (and ends the last one)."""
        parsed = parse_action(action_text)
        info: dict[str, Any] = {"turn": self.turn, "format_error": parsed.format_error}
        if parsed.kind == "answer":
            correct = parsed.content.strip() == self.task.answer
            info.update(end_reason=END_ANSWER, correct=correct)
            return StepResult("", 1.0 if correct else 0.0, True, info)
        if self.last_turn:
            return StepResult("", 0.0, True, {**info, "end_reason": END_MAX_TURNS})
        return StepResult(wrap_output("error: answer inside answer tags", 80), 0.0, False, info)


def demonstrations(n: int, seed: int) -> list[TeacherTrajectory]:
    """Warm-start data: the right answer 70% of the time, a near miss otherwise."""
    rng = random.Random(seed)
    env = ReverseEnv()
    demos = []
    for task in ReverseTaskSource().train(n, seed):
        answer = task.answer if rng.random() < 0.7 else task.answer[1:] + task.answer[0]
        action = f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
        env.reset(task)
        result = env.step(action)
        demos.append(TeacherTrajectory(task, (Turn(action, result.observation),), result.reward))
    return demos


REGISTRATION = EnvRegistration(
    name="reverse",
    make_env=ReverseEnv,  # called with env.options
    make_tasks=ReverseTaskSource,  # called with env.task_options
    demonstrations=demonstrations,  # demonstrations(n, seed) for `sao sft`
)


def register_once() -> None:
    """Register `reverse` once (importing this module twice is harmless)."""
    if REGISTRATION.name not in known_env_names():
        register(REGISTRATION)


register_once()
