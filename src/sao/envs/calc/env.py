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

import abc
import logging
from dataclasses import dataclass
from typing import Any, Literal

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
from sao.formats.tags import ANSWER_CLOSE, PYTHON_CLOSE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reply:
    """One reply, classified for `NumericAnswerEnv`.

    Attributes:
        kind: `"tool"` (use the tool on `text`), `"answer"` (final answer `text`) or `"error"`.
        text: the tool input, the answer, or for an error the message the policy reads.
        format_error: the error kind (`info["format_error"]`) when `kind == "error"`.
    """

    kind: Literal["tool", "answer", "error"]
    text: str
    format_error: str | None = None


class NumericAnswerEnv(TurnLimitedEnvironment):
    """The rules `calc` and `tool_calc` share: each reply is one tool use, a final
    `<answer>NUMBER</answer>` or a format error.

    The answer ends the episode, rewarded 1 on an exact numeric match and 0 otherwise; a tool use
    or a format error gets an `<output>` observation and costs a turn; the last turn allowed
    without an answer ends the episode with reward 0. Subclasses say how a reply is read
    (`read_reply`) and what the tool does (`use_tool`).

    Args:
        max_turns: the most replies per episode (tool uses, malformed replies and the answer).
        max_output_chars: longest text inside one `<output>` (longer text is cut, ending `...`).
    """

    def __init__(self, max_turns: int, max_output_chars: int) -> None:
        super().__init__(max_turns)
        if isinstance(max_output_chars, bool) or not isinstance(max_output_chars, int):
            raise ValueError(f"max_output_chars: must be an int >= 16, got {max_output_chars!r}")
        if max_output_chars < 16:
            raise ValueError(f"max_output_chars: must be an int >= 16, got {max_output_chars!r}")
        self.max_output_chars = max_output_chars

    def start(self, task: Task) -> str:
        """Check that `task` has a numeric answer; returns its prompt."""
        if parse_number(task.answer) is None:
            raise ValueError(f"task.answer: not a number: {task.answer!r}")
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        """Apply one reply; see the class docstring for the rules."""
        reply = self.read_reply(action_text)
        info: dict[str, Any] = {
            "turn": self.turn,
            "tool_called": False,
            "format_error": reply.format_error,
            "tool_error": None,
            "end_reason": None,
        }
        if reply.kind == "answer":
            correct = numbers_match(reply.text, self.task.answer)
            if parse_number(reply.text) is None:
                info["format_error"] = "answer_not_a_number"
            info.update(end_reason=END_ANSWER, correct=correct)
            return StepResult("", 1.0 if correct else 0.0, True, info)
        if self.last_turn:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return StepResult("", 0.0, True, info)
        if reply.kind == "tool":
            outcome = self.use_tool(reply.text)
            info.update(tool_called=True, tool_error=outcome.tool_error)
            return StepResult(outcome.observation, 0.0, False, info)
        return StepResult(wrap_output(reply.text, self.max_output_chars), 0.0, False, info)

    @abc.abstractmethod
    def read_reply(self, action_text: str) -> Reply:
        """Classify one reply."""

    @abc.abstractmethod
    def use_tool(self, tool_input: str) -> ToolOutcome:
        """Run the tool on `tool_input`; never raises."""


class CalcEnv(NumericAnswerEnv):
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
        super().__init__(max_turns, max_output_chars)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s!r}")
        if not isinstance(memory_mb, int) or memory_mb < 16:
            raise ValueError(f"memory_mb: must be an int >= 16, got {memory_mb!r}")
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.runner: PythonRunner = runner if runner is not None else sandbox_runner

    def read_reply(self, action_text: str) -> Reply:
        """`<python>CODE</python>`, `<answer>NUMBER</answer>` or a format error."""
        parsed = parse_action(action_text)
        if parsed.kind == "python":
            return Reply("tool", parsed.content)
        if parsed.kind == "answer":
            return Reply("answer", parsed.content)
        assert parsed.format_error is not None
        return Reply("error", FORMAT_ERROR_MESSAGES[parsed.format_error], parsed.format_error)

    def use_tool(self, tool_input: str) -> ToolOutcome:
        """Run the code `tool_input` through the runner."""
        try:
            result = self.runner(tool_input, timeout_s=self.timeout_s, memory_mb=self.memory_mb)
        except Exception:
            # A broken sandbox must not kill the rollout worker; it shows up as a tool error in
            # the step info (and the log), which the metrics count.
            logger.exception("calc: the Python runner raised")
            return ToolOutcome(
                wrap_output("error: sandbox failed", self.max_output_chars), "sandbox"
            )
        return describe_result(result, self.timeout_s, self.max_output_chars)
