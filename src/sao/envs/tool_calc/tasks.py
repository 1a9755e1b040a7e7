"""`tool_calc` tasks: the `calc` problems (`sao.envs.calc.problems`), asked the same way."""

from __future__ import annotations

import random

from sao.envs.base import Task, stable_id
from sao.envs.calc.problems import generate_problem
from sao.envs.calc.tasks import CalcTaskSource


class ToolCalcTaskSource(CalcTaskSource):
    """`tool_calc` tasks, mixed uniformly over the chosen difficulty levels.

    The prompt is the user message of an agent's first request, `Q: QUESTION\\n`; `meta` holds the
    problem's reference `expression` (what the calculator should be asked) and its difficulty.

    Args (as `CalcTaskSource`):
        difficulties: levels to draw from (see `sao.envs.calc.problems`); one int is one level.
        test_fraction: share of the prompt space held out for `test`.
    """

    def generate(self, rng: random.Random) -> Task:
        """Draw one task (either split) using `rng` only."""
        problem = generate_problem(rng, rng.choice(self.difficulties))
        prompt = f"Q: {problem.question}\n"
        return Task(
            task_id=stable_id("tool_calc", prompt),
            prompt=prompt,
            answer=str(problem.answer),
            meta={
                "env": "tool_calc",
                "difficulty": problem.difficulty,
                "kind": problem.kind,
                "expression": problem.expression,
            },
        )
