"""The `calc` environment: tool-integrated integer arithmetic.

A trajectory reads like (tags are single tokens for the policy):

    Q: 347*29+18=?
    <python>print(347*29+18)</python><output>10081</output><answer>10081</answer>

The policy runs code with `<python>CODE</python>` and reads `<output>STDOUT</output>`; it ends with
`<answer>NUMBER</answer>`, rewarded 1 on an exact numeric match (`"42.0"` matches 42) and 0
otherwise. Malformed actions, exceptions and timeouts become short `<output>error: ...</output>`
observations and cost a turn; they never raise. Using `max_turns` actions without answering ends
the trajectory with reward 0 (`end_reason = "max_turns"`). The token budget is the agent loop's
job: it ends a trajectory with `end_reason = "max_tokens"` (see `sao.envs.base`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
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
from sao.envs.calc_problems import DIFFICULTIES, generate_problem
from sao.envs.text_protocol import (
    FORMAT_ERROR_MESSAGES,
    numbers_match,
    parse_action,
    parse_number,
    wrap_output,
)
from sao.envs.tool_runner import PythonRunner, ToolOutcome, describe_result, sandbox_runner
from sao.tags import ANSWER_CLOSE, PYTHON_CLOSE

logger = logging.getLogger(__name__)


class CalcEnv(Environment):
    """Tool-integrated arithmetic with a Python sandbox.

    Args:
        max_turns: the most actions per trajectory (tool calls, malformed actions and the answer
            all count).
        max_output_chars: longest text inside one `<output>` (longer text is cut, ending `...`).
        timeout_s: wall-clock limit for one tool call.
        memory_mb: memory limit for one tool call.
        runner: what runs the code; defaults to the project sandbox. Tests pass a fake.
    """

    name = "calc"
    stop_tags: tuple[str, ...] = (PYTHON_CLOSE, ANSWER_CLOSE)

    def __init__(
        self,
        max_turns: int = 4,
        max_output_chars: int = 120,
        timeout_s: float = 2.0,
        memory_mb: int = 256,
        runner: PythonRunner | None = None,
    ) -> None:
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        if not isinstance(max_output_chars, int) or max_output_chars < 16:
            raise ValueError(f"max_output_chars: must be an int >= 16, got {max_output_chars!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
        if not isinstance(memory_mb, int) or memory_mb < 16:
            raise ValueError(f"memory_mb: must be an int >= 16, got {memory_mb!r}")
        self.max_turns = max_turns
        self.max_output_chars = max_output_chars
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.runner: PythonRunner = runner if runner is not None else sandbox_runner
        self._task: Task | None = None
        self._turn = 0
        self._done = False

    def reset(self, task: Task) -> str:
        """Start a trajectory for `task`; returns its prompt."""
        if not isinstance(task, Task):
            raise TypeError(f"task: expected Task, got {type(task)}")
        if parse_number(task.answer) is None:
            raise ValueError(f"task.answer: not a number: {task.answer!r}")
        self._task, self._turn, self._done = task, 0, False
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        """Apply one action; see the module docstring for the rules."""
        if self._task is None:
            raise RuntimeError("CalcEnv.step: call reset(task) first")
        if self._done:
            raise RuntimeError("CalcEnv.step: the trajectory has ended; call reset(task)")
        self._turn += 1
        parsed = parse_action(action_text)
        info: dict[str, Any] = {
            "turn": self._turn,
            "tool_called": False,
            "format_error": parsed.format_error,
            "tool_error": None,
            "end_reason": None,
        }
        if parsed.kind == "answer":
            correct = numbers_match(parsed.content, self._task.answer)
            if parse_number(parsed.content) is None:
                info["format_error"] = "answer_not_a_number"
            info.update(end_reason=END_ANSWER, correct=correct)
            return self._finish(1.0 if correct else 0.0, info)
        if self._turn >= self.max_turns:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return self._finish(0.0, info)
        if parsed.kind == "python":
            outcome = self._run(parsed.content)
            info.update(tool_called=True, tool_error=outcome.tool_error)
            return StepResult(outcome.observation, 0.0, False, info)
        assert parsed.format_error is not None
        message = FORMAT_ERROR_MESSAGES[parsed.format_error]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)

    def _finish(self, reward: float, info: dict[str, Any]) -> StepResult:
        self._done = True
        return StepResult("", reward, True, info)

    def _run(self, code: str) -> ToolOutcome:
        try:
            result = self.runner(code, timeout_s=self.timeout_s, memory_mb=self.memory_mb)
        except Exception:
            # A broken sandbox must not kill the rollout worker; it shows up as a tool error in
            # the step info (and the log), which the metrics count.
            logger.exception("calc: the Python runner raised")
            return ToolOutcome(
                wrap_output("error: sandbox failed", self.max_output_chars), "sandbox"
            )
        return describe_result(result, self.timeout_s, self.max_output_chars)


class CalcTaskSource(HashSplitTaskSource):
    """`calc` tasks, mixed uniformly over the chosen difficulty levels.

    Args:
        difficulties: levels to draw from (see `sao.envs.calc_problems`); one int is one level.
        test_fraction: share of the prompt space held out for `test`.
    """

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
            task_id=stable_id("calc", prompt),
            prompt=prompt,
            answer=str(problem.answer),
            meta={
                "env": "calc",
                "difficulty": problem.difficulty,
                "kind": problem.kind,
                "expression": problem.expression,
            },
        )
