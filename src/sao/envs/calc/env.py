"""The `calc` environment: tool-integrated integer arithmetic.

A trajectory reads like (tags are single tokens of the tiny default's tokenizer, several tokens
of a BPE one):

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
from typing import Any

from sao.envs.base import END_ANSWER, END_MAX_TURNS, StepResult, Task
from sao.envs.text_protocol import (
    FORMAT_ERROR_MESSAGES,
    numbers_match,
    parse_action,
    parse_number,
    wrap_output,
)
from sao.envs.tool_runner import PythonRunner, ToolOutcome, describe_result, sandbox_runner
from sao.envs.turns import TurnLimitedEnvironment
from sao.tags import ANSWER_CLOSE, PYTHON_CLOSE

logger = logging.getLogger(__name__)


class CalcEnv(TurnLimitedEnvironment):
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
        super().__init__(max_turns)
        if not isinstance(max_output_chars, int) or max_output_chars < 16:
            raise ValueError(f"max_output_chars: must be an int >= 16, got {max_output_chars!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
        if not isinstance(memory_mb, int) or memory_mb < 16:
            raise ValueError(f"memory_mb: must be an int >= 16, got {memory_mb!r}")
        self.max_output_chars = max_output_chars
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.runner: PythonRunner = runner if runner is not None else sandbox_runner

    def start(self, task: Task) -> str:
        """Check that `task` has a numeric answer; returns its prompt."""
        if parse_number(task.answer) is None:
            raise ValueError(f"task.answer: not a number: {task.answer!r}")
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Apply one action; see the module docstring for the rules."""
        parsed = parse_action(action_text)
        info: dict[str, Any] = {
            "turn": self.turn,
            "tool_called": False,
            "format_error": parsed.format_error,
            "tool_error": None,
            "end_reason": None,
        }
        if parsed.kind == "answer":
            correct = numbers_match(parsed.content, self.task.answer)
            if parse_number(parsed.content) is None:
                info["format_error"] = "answer_not_a_number"
            info.update(end_reason=END_ANSWER, correct=correct)
            return StepResult("", 1.0 if correct else 0.0, True, info)
        if self.last_turn:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return StepResult("", 0.0, True, info)
        if parsed.kind == "python":
            outcome = self._run(parsed.content)
            info.update(tool_called=True, tool_error=outcome.tool_error)
            return StepResult(outcome.observation, 0.0, False, info)
        assert parsed.format_error is not None
        message = FORMAT_ERROR_MESSAGES[parsed.format_error]
        return StepResult(wrap_output(message, self.max_output_chars), 0.0, False, info)

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
