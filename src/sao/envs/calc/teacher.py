"""A scripted, deliberately imperfect teacher for `calc`, whose demonstrations seed SFT.

Every demonstration has one of two shapes, always the same characters in the same order:

    with the tool:     <python>print(EXPR)</python><output>OUT</output><answer>OUT</answer>
    without the tool:  <answer>GUESS</answer>

`EXPR` is the task's reference expression (numbers in the order the question states them), `OUT`
is what the real environment printed, copied verbatim into the answer. The observations come from
`CalcEnv.step`, so the demonstrations show exactly what the policy will see during RL.

Imperfection knobs, chosen so a student that imitates the teacher is often wrong and RL has room
to teach it to always use the tool and write the code carefully:

- `p_no_tool`: probability of answering at once with mental arithmetic.
- `mental_accuracy[d]`: probability a mental answer at difficulty `d` is right; otherwise one
  digit is wrong. A tiny student cannot do the arithmetic at all, so its no-tool answers are
  mostly wrong whatever this says.
- `p_slip`: probability the written code has a slip: one digit of one number, or one `+ - *`
  operator, is wrong. The copied output, hence the answer, is then wrong.
"""

from __future__ import annotations

import abc
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sao.envs.base import Environment, Task
from sao.envs.calc.env import CalcEnv
from sao.envs.calc.problems import DIFFICULTIES, evaluate_expression
from sao.envs.calc.tasks import CalcTaskSource
from sao.envs.demonstration import TeacherTrajectory, Turn, probability
from sao.formats.tags import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    OUTPUT_CLOSE,
    OUTPUT_OPEN,
    PYTHON_CLOSE,
    PYTHON_OPEN,
)

DEFAULT_MENTAL_ACCURACY: dict[int, float] = {1: 0.5, 2: 0.15, 3: 0.05, 4: 0.1}
_TOKEN = re.compile(r"\d+|[-+*/()]")


@dataclass(frozen=True)
class Demonstration(TeacherTrajectory):
    """A full teacher trajectory for one task.

    Attributes:
        task: the task.
        turns: the actions and observations, in order; the last action is the answer.
        reward: the environment's reward for the final answer.
        used_tool: whether the teacher ran code.
        slipped: whether the teacher's code had a deliberate slip.
    """

    used_tool: bool
    slipped: bool


def _wrong_digit(number: str, rng: random.Random) -> str:
    """`number` with one digit changed (never a leading zero, so the result stays valid Python)."""
    sign, digits = ("-", number[1:]) if number.startswith("-") else ("", number)
    position = rng.randrange(len(digits))
    low = 1 if position == 0 and len(digits) > 1 else 0
    choices = [str(d) for d in range(low, 10) if str(d) != digits[position]]
    return sign + digits[:position] + rng.choice(choices) + digits[position + 1 :]


def slip_expression(expression: str, rng: random.Random) -> str:
    """A plausible mistake in `expression`: one wrong digit or one swapped `+ - *` operator.

    Numbers next to `/` and the `/` itself are left alone, so a slip never turns an exact division
    into a long fraction. The result always differs from `expression` as text.
    """
    tokens = _TOKEN.findall(expression)
    if "".join(tokens) != expression:
        raise ValueError(
            f"expression: only digits, + - * / and brackets allowed, got {expression!r}"
        )
    near_division = {i + d for i, tok in enumerate(tokens) if tok == "/" for d in (-1, 1)}
    numbers = [i for i, t in enumerate(tokens) if t.isdigit() and i not in near_division]
    operators = [i for i, t in enumerate(tokens) if t in "+-*"]
    if not numbers and not operators:
        raise ValueError(f"expression: nothing to slip in {expression!r}")
    if operators and (not numbers or rng.random() < 0.3):
        i = rng.choice(operators)
        tokens[i] = rng.choice([op for op in "+-*" if op != tokens[i]])
    else:
        i = rng.choice(numbers)
        tokens[i] = _wrong_digit(tokens[i], rng)
    return "".join(tokens)


@dataclass(frozen=True)
class ArithmeticResult:
    """A successful `print(...)`, shaped like `sao.tools.sandbox.SandboxResult`."""

    stdout: str
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    error: str | None = None


def teacher_arithmetic_runner(code: str, *, timeout_s: float, memory_mb: int) -> ArithmeticResult:
    """Answers the teacher's own `print(ARITHMETIC)` without executing any code.

    The teacher writes nothing else, and its code is ours, not the model's: walking the
    expression's syntax tree gives exactly what Python would print, thousands of times faster
    than starting a sandboxed interpreter, which makes tens of thousands of SFT demonstrations
    cheap. Anything that is not `print(ARITHMETIC)` raises `ValueError`.
    """
    if not (code.startswith("print(") and code.endswith(")")):
        raise ValueError(f"code: the teacher only writes print(ARITHMETIC), got {code!r}")
    return ArithmeticResult(stdout=f"{evaluate_expression(code[len('print(') : -1])}\n")


class ArithmeticTeacher(abc.ABC):
    """The teacher `calc` and `tool_calc` share: answer by mental arithmetic or use the tool, with
    controlled mistakes (see the module docstring); subclasses say how the tool is asked
    (`tool_call`) and how a wrong mental answer looks (`wrong_answer`).

    Args:
        p_no_tool: probability of answering without the tool.
        p_slip: probability of a slip in what is sent to the tool.
        mental_accuracy: per difficulty, probability that a no-tool answer is right.
        env: the environment that produces observations.
    """

    # The trajectory type `demonstrate` returns.
    demonstration_type: type[Demonstration] = Demonstration

    def __init__(
        self,
        p_no_tool: float,
        p_slip: float,
        mental_accuracy: Mapping[int, float] | None,
        env: Environment,
    ) -> None:
        self.p_no_tool = probability("p_no_tool", p_no_tool)
        self.p_slip = probability("p_slip", p_slip)
        accuracy = dict(DEFAULT_MENTAL_ACCURACY if mental_accuracy is None else mental_accuracy)
        missing = [d for d in DIFFICULTIES if d not in accuracy]
        if missing:
            raise ValueError(f"mental_accuracy: missing difficulties {missing}")
        self.mental_accuracy = {
            d: probability(f"mental_accuracy[{d}]", p) for d, p in accuracy.items()
        }
        self.env = env

    @abc.abstractmethod
    def tool_call(self, expression: str) -> str:
        """The action that asks the tool for the value of `expression`."""

    @abc.abstractmethod
    def wrong_answer(self, answer: str, rng: random.Random) -> str:
        """A mistaken mental answer in place of the right `answer`."""

    def demonstrate(self, task: Task, rng: random.Random) -> Demonstration:
        """Play `task` through the environment and return the trajectory."""
        expression = task.meta.get("expression")
        difficulty = task.meta.get("difficulty")
        if not isinstance(expression, str) or difficulty not in self.mental_accuracy:
            raise ValueError(
                f"task.meta: needs 'expression' (str) and 'difficulty' in "
                f"{sorted(self.mental_accuracy)}, got {task.meta!r}"
            )
        self.env.reset(task)
        turns: list[Turn] = []
        used_tool = rng.random() >= self.p_no_tool
        slipped = used_tool and rng.random() < self.p_slip
        if used_tool:
            action = self.tool_call(slip_expression(expression, rng) if slipped else expression)
            result = self.env.step(action)
            turns.append(Turn(action, result.observation))
            if result.done:
                return self.demonstration_type(
                    task, tuple(turns), result.reward, used_tool, slipped
                )
            answer = result.observation.removeprefix(OUTPUT_OPEN).removesuffix(OUTPUT_CLOSE)
        elif rng.random() < self.mental_accuracy[difficulty]:
            answer = task.answer
        else:
            answer = self.wrong_answer(task.answer, rng)
        action = f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
        result = self.env.step(action)
        turns.append(Turn(action, result.observation))
        return self.demonstration_type(task, tuple(turns), result.reward, used_tool, slipped)


class CalcTeacher(ArithmeticTeacher):
    """Writes `calc` demonstrations with controlled mistakes.

    Args:
        p_no_tool: probability of answering without the tool.
        p_slip: probability of a slip in the written code.
        mental_accuracy: per difficulty, probability that a no-tool answer is right.
        env: the environment that produces observations; a default `CalcEnv` (real sandbox).
    """

    def __init__(
        self,
        p_no_tool: float = 0.35,
        p_slip: float = 0.15,
        mental_accuracy: Mapping[int, float] | None = None,
        env: CalcEnv | None = None,
    ) -> None:
        super().__init__(p_no_tool, p_slip, mental_accuracy, env if env is not None else CalcEnv())

    def tool_call(self, expression: str) -> str:
        """`<python>print(EXPRESSION)</python>`."""
        return f"{PYTHON_OPEN}print({expression}){PYTHON_CLOSE}"

    def wrong_answer(self, answer: str, rng: random.Random) -> str:
        """`answer` with one digit wrong."""
        return _wrong_digit(answer, rng)


@dataclass(frozen=True)
class DemoStats:
    """Summary of a set of demonstrations.

    Attributes:
        count: number of demonstrations.
        accuracy: mean reward.
        tool_rate: share that used the tool.
        accuracy_by_difficulty: mean reward per difficulty level.
        mean_chars / max_chars: length of `Demonstration.text` in characters.
    """

    count: int
    accuracy: float
    tool_rate: float
    accuracy_by_difficulty: dict[int, float] = field(default_factory=dict)
    mean_chars: float = 0.0
    max_chars: int = 0


def summarize(demos: Sequence[Demonstration]) -> DemoStats:
    """Accuracy, tool use and length of `demos`."""
    if not demos:
        raise ValueError("demos: empty")
    by_level: dict[int, list[float]] = {}
    for demo in demos:
        by_level.setdefault(demo.task.meta["difficulty"], []).append(demo.reward)
    lengths = [len(demo.text) for demo in demos]
    return DemoStats(
        count=len(demos),
        accuracy=sum(d.reward for d in demos) / len(demos),
        tool_rate=sum(d.used_tool for d in demos) / len(demos),
        accuracy_by_difficulty={k: sum(v) / len(v) for k, v in sorted(by_level.items())},
        mean_chars=sum(lengths) / len(lengths),
        max_chars=max(lengths),
    )


def demonstrations(
    n: int,
    seed: int,
    *,
    split: str = "train",
    difficulties: Sequence[int] = DIFFICULTIES,
    teacher: CalcTeacher | None = None,
) -> list[Demonstration]:
    """`n` teacher demonstrations on `calc` tasks of `split`, deterministic in `seed`.

    Args:
        n: number of demonstrations.
        seed: seeds both the tasks and the teacher's choices.
        split: `"train"` (for SFT) or `"test"`.
        difficulties: levels to draw tasks from.
        teacher: the teacher (and, through it, the environment); by default a `CalcTeacher`
            whose environment answers the teacher's arithmetic with `teacher_arithmetic_runner`.
    """
    if teacher is None:
        teacher = CalcTeacher(env=CalcEnv(runner=teacher_arithmetic_runner))
    return play_split(teacher, CalcTaskSource, n, seed, split=split, difficulties=difficulties)


def play_split(
    teacher: ArithmeticTeacher,
    source_type: type[CalcTaskSource],
    n: int,
    seed: int,
    *,
    split: str,
    difficulties: Sequence[int],
) -> list[Demonstration]:
    """`teacher` plays `n` tasks of `split` drawn from a `source_type(difficulties)`; the tasks and
    the teacher's choices are deterministic in `seed` (see `demonstrations`)."""
    if split not in ("train", "test"):
        raise ValueError(f"split: must be 'train' or 'test', got {split!r}")
    source = source_type(difficulties=difficulties)
    tasks = source.train(n, seed) if split == "train" else source.test(n, seed)
    rng = random.Random(seed * 7919 + 17)
    return [teacher.demonstrate(task, rng) for task in tasks]
