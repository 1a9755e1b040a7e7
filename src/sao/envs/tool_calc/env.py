"""The `tool_calc` environment: arithmetic with a client-side `calculator` function.

The layout is what `sao serve` renders for an OpenAI-style agent's messages in the tiny model's
plain layout (tags are single tokens of its tokenizer):

    Q: 347*29+18=?
    <tool>{"name": "calculator", "arguments": {"expression": "347*29+18"}}</tool><output>10081</output><answer>10081</answer>

The prompt is the user message; a call is written as `sao.tool_calls` renders it (format `sao`);
the tool's result comes back as `<output>RESULT</output>`, as the server renders a `role: tool`
message, computed by `sao.envs.tool_calc.calculator.evaluate`. The final answer
`<answer>NUMBER</answer>` is rewarded 1 on an exact numeric match and 0 otherwise. A reply that is
neither one call nor an answer (no tag, bad JSON, an undeclared function, wrong arguments) gets a
short `<output>error: ...</output>` and costs a turn; a calculator refusal is a result like any
other (`<output>error: division by zero</output>`). Using `max_turns` replies without answering
ends the episode with reward 0 (`end_reason = "max_turns"`).
"""

from __future__ import annotations

from typing import Any

from sao.envs.base import END_ANSWER, END_MAX_TURNS, StepResult, Task
from sao.envs.text_protocol import numbers_match, parse_number, wrap_output
from sao.envs.tool_calc.calculator import evaluate
from sao.envs.tool_calc.protocol import parse_reply
from sao.envs.turns import TurnLimitedEnvironment
from sao.tags import ANSWER_CLOSE, TOOL_CLOSE


class ToolCalcEnv(TurnLimitedEnvironment):
    """Arithmetic with the `calculator` function.

    Args:
        max_turns: the most replies per episode (calls, malformed replies and the answer count).
        max_output_chars: longest text inside one `<output>` (longer text is cut, ending `...`).
    """

    name = "tool_calc"
    stop_tags: tuple[str, ...] = (TOOL_CLOSE, ANSWER_CLOSE)

    def __init__(self, max_turns: int = 4, max_output_chars: int = 120) -> None:
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
        """Apply one reply; see the module docstring for the rules."""
        action = parse_reply(action_text)
        info: dict[str, Any] = {
            "turn": self.turn,
            "tool_called": False,
            "format_error": action.format_error,
            "tool_error": None,
            "end_reason": None,
        }
        if action.kind == "answer":
            correct = numbers_match(action.content, self.task.answer)
            if parse_number(action.content) is None:
                info["format_error"] = "answer_not_a_number"
            info.update(end_reason=END_ANSWER, correct=correct)
            return StepResult("", 1.0 if correct else 0.0, True, info)
        if self.last_turn:
            info.update(end_reason=END_MAX_TURNS, correct=False)
            return StepResult("", 0.0, True, info)
        if action.kind == "call":
            result = evaluate(action.content)
            info.update(
                tool_called=True, tool_error="calculator" if result.startswith("error:") else None
            )
            return StepResult(wrap_output(result, self.max_output_chars), 0.0, False, info)
        return StepResult(wrap_output(action.message, self.max_output_chars), 0.0, False, info)
