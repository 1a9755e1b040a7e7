"""A scripted, deliberately imperfect teacher for `tool_calc`, whose demonstrations seed SFT.

Every demonstration has one of two shapes, always the same characters in the same order:

    with the tool:     <tool>{"name": "calculator", "arguments": {"expression": "EXPR"}}</tool><output>OUT</output><answer>OUT</answer>
    without the tool:  <answer>GUESS</answer>

`EXPR` is the task's reference expression (numbers in the order the question states them), `OUT`
is what the calculator returned, copied verbatim into the answer. The observations come from
`ToolCalcEnv.step`, so the demonstrations show exactly what the policy sees during RL and what
`sao serve` renders for an agent's messages.

Imperfection knobs, as in `calc`'s teacher, so a student that imitates it is sometimes wrong and
RL has room to teach it to always call the tool and to write the expression carefully:

- `p_no_tool`: probability of answering at once by mental arithmetic.
- `mental_accuracy[d]`: probability a mental answer at difficulty `d` is right; otherwise one
  digit is wrong.
- `p_slip`: probability the expression has a slip (one wrong digit or one swapped `+ - *`); the
  copied result, hence the answer, is then wrong.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sao.envs.calc.problems import DIFFICULTIES
from sao.envs.calc.teacher import (
    ArithmeticTeacher,
    Demonstration,
    play_split,
    slip_expression,
)
from sao.envs.tool_calc.env import ToolCalcEnv
from sao.envs.tool_calc.protocol import render_call
from sao.envs.tool_calc.tasks import ToolCalcTaskSource


@dataclass(frozen=True)
class ToolCalcDemonstration(Demonstration):
    """A full teacher trajectory for one task.

    Attributes:
        task: the task.
        turns: the replies and observations, in order; the last reply is the answer.
        reward: the environment's reward for the final answer.
        used_tool: whether the teacher called the calculator.
        slipped: whether the teacher's expression had a deliberate slip.
    """


class ToolCalcTeacher(ArithmeticTeacher):
    """Writes `tool_calc` demonstrations with controlled mistakes.

    Args:
        p_no_tool: probability of answering without the tool.
        p_slip: probability of a slip in the expression sent to the calculator.
        mental_accuracy: per difficulty, probability that a no-tool answer is right (defaults to
            `calc`'s).
        env: the environment that produces observations; a default `ToolCalcEnv`.
    """

    demonstration_type = ToolCalcDemonstration

    def __init__(
        self,
        p_no_tool: float = 0.2,
        p_slip: float = 0.1,
        mental_accuracy: Mapping[int, float] | None = None,
        env: ToolCalcEnv | None = None,
    ) -> None:
        env = env if env is not None else ToolCalcEnv()
        super().__init__(p_no_tool, p_slip, mental_accuracy, env)

    def tool_call(self, expression: str) -> str:
        """One `calculator` call, as `sao serve` renders it."""
        return render_call(expression)

    def wrong_answer(self, answer: str, rng: random.Random) -> str:
        """`answer` with a slip; the answer is a bare number, so its slip is one wrong digit."""
        return slip_expression(answer, rng)


def demonstrations(
    n: int,
    seed: int,
    *,
    split: str = "train",
    difficulties: Sequence[int] = DIFFICULTIES,
    teacher: ToolCalcTeacher | None = None,
) -> list[ToolCalcDemonstration]:
    """`n` teacher demonstrations on `tool_calc` tasks of `split`, deterministic in `seed`.

    Args:
        n: number of demonstrations.
        seed: seeds both the tasks and the teacher's choices.
        split: `"train"` (for SFT) or `"test"`.
        difficulties: levels to draw tasks from.
        teacher: the teacher; a default `ToolCalcTeacher` when None.
    """
    teacher = teacher if teacher is not None else ToolCalcTeacher()
    return play_split(teacher, ToolCalcTaskSource, n, seed, split=split, difficulties=difficulties)
