"""`calc` tasks: integer arithmetic questions at four difficulty levels (see `problems`)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from sao.envs.base import HashSplitTaskSource, Task, stable_id
from sao.envs.calc.problems import DIFFICULTIES, generate_problem


class CalcTaskSource(HashSplitTaskSource):
    """`calc` tasks, mixed uniformly over the chosen difficulty levels.

    Args:
        difficulties: levels to draw from (see `sao.envs.calc.problems`); one int is one level.
        test_fraction: share of the prompt space held out for `test`.
    """

    # The environment the tasks are for: it names their ids and `meta["env"]`.
    env_name = "calc"

    def __init__(
        self, difficulties: Sequence[int] | int = DIFFICULTIES, test_fraction: float = 0.1
    ) -> None:
        super().__init__(test_fraction=test_fraction)
        if isinstance(difficulties, int):
            difficulties = (difficulties,)
        levels = tuple(difficulties)
        if not levels or any(level not in DIFFICULTIES for level in levels):
            raise ValueError(
                f"difficulties: must be a non-empty subset of {DIFFICULTIES}, got {difficulties!r}"
            )
        self.difficulties = levels

    def generate(self, rng: random.Random) -> Task:
        """Draw one task (either split) using `rng` only."""
        problem = generate_problem(rng, rng.choice(self.difficulties))
        prompt = f"Q: {problem.question}\n"
        return Task(
            task_id=stable_id(self.env_name, prompt),
            prompt=prompt,
            answer=str(problem.answer),
            meta={
                "env": self.env_name,
                "difficulty": problem.difficulty,
                "kind": problem.kind,
                "expression": problem.expression,
            },
        )
