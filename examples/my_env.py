"""A complete custom environment in one file: reverse a short word.

    Reverse: stone
    <answer>enots</answer>

Importing this module registers `reverse` (environment, task source and warm-start data), so
`make_env("reverse")`, `sao sft --env reverse` and `sao train --env reverse` work from a process
that imported it (see docs/environments.md).
"""

from __future__ import annotations

import random
from typing import Any

from sao.envs.base import (
    END_ANSWER,
    END_MAX_TURNS,
    Environment,
    HashSplitTaskSource,
    StepResult,
    Task,
    stable_id,
)
from sao.envs.registry import (
    known_env_names,
    register_demonstrations,
    register_env,
    register_task_source,
)
from sao.envs.text_protocol import parse_action, wrap_output
from sao.tags import ANSWER_CLOSE, ANSWER_OPEN


class ReverseTaskSource(HashSplitTaskSource):
    """Words of 3-7 letters; the prompt's hash decides train or test."""

    def generate(self, rng: random.Random) -> Task:
        """Draw one task using `rng` only."""
        word = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 7)))
        prompt = f"Reverse: {word}\n"
        return Task(stable_id("reverse", prompt), prompt, word[::-1], {"env": "reverse"})


class ReverseEnv(Environment):
    """Single turn: reward 1 for the reversed word inside answer tags, else 0."""

    stop_tags = (ANSWER_CLOSE,)

    def __init__(self, max_turns: int = 1) -> None:
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        self.max_turns = max_turns
        self._task: Task | None = None
        self._turn = 0

    def reset(self, task: Task) -> str:
        """Start an episode; returns the prompt."""
        self._task, self._turn = task, 0
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        """Score an answer; a malformed action costs a turn (and ends the last one)."""
        if self._task is None:
            raise RuntimeError("ReverseEnv.step: call reset(task) first")
        self._turn += 1
        parsed = parse_action(action_text)
        info: dict[str, Any] = {"turn": self._turn, "format_error": parsed.format_error}
        if parsed.kind == "answer":
            correct = parsed.content.strip() == self._task.answer
            info.update(end_reason=END_ANSWER, correct=correct)
            return StepResult("", 1.0 if correct else 0.0, True, info)
        if self._turn >= self.max_turns:
            return StepResult("", 0.0, True, {**info, "end_reason": END_MAX_TURNS})
        return StepResult(wrap_output("error: answer inside answer tags", 80), 0.0, False, info)


def demonstrations(n: int, seed: int) -> list[list[tuple[str, bool]]]:
    """Warm-start data: the right answer 70% of the time, a near miss otherwise."""
    rng = random.Random(seed)
    demos = []
    for task in ReverseTaskSource().train(n, seed):
        answer = task.answer if rng.random() < 0.7 else task.answer[1:] + task.answer[0]
        demos.append([(task.prompt, False), (f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}", True)])
    return demos


def register() -> None:
    """Register `reverse` once (importing this module twice is harmless)."""
    if "reverse" not in known_env_names():
        register_env("reverse", ReverseEnv)
        register_task_source("reverse", ReverseTaskSource)
        register_demonstrations("reverse", demonstrations)


register()
