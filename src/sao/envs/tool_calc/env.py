"""The `tool_calc` environment: arithmetic with a client-side `calculator` function.

The layout is what `sao serve` renders for an OpenAI-style agent's messages in the tiny model's
plain layout (tags are single tokens of its tokenizer):

    Q: 347*29+18=?
    <tool>{"name": "calculator", "arguments": {"expression": "347*29+18"}}</tool><output>10081</output><answer>10081</answer>

The prompt is the user message; a call is written as `sao.formats.tool_calls` renders it (format `sao`);
the tool's result comes back as `<output>RESULT</output>`, as the server renders a `role: tool`
message, computed by `sao.envs.tool_calc.calculator.evaluate`. The final answer
`<answer>NUMBER</answer>` is rewarded 1 on an exact numeric match and 0 otherwise. A reply that is
neither one call nor an answer (no tag, bad JSON, an undeclared function, wrong arguments) gets a
short `<output>error: ...</output>` and costs a turn; a calculator refusal is a result like any
other (`<output>error: division by zero</output>`). Using `max_turns` replies without answering
ends the episode with reward 0 (`end_reason = "max_turns"`).
"""

from __future__ import annotations

from sao.envs.calc.env import NumericAnswerEnv, Reply
from sao.envs.text_protocol import wrap_output
from sao.envs.tool_calc.calculator import evaluate
from sao.envs.tool_calc.protocol import parse_reply
from sao.envs.tool_runner import ToolOutcome
from sao.formats.tags import ANSWER_CLOSE, TOOL_CLOSE


class ToolCalcEnv(NumericAnswerEnv):
    """Arithmetic with the `calculator` function.

    Args:
        max_turns: the most replies per episode (calls, malformed replies and the answer count).
        max_output_chars: longest text inside one `<output>` (longer text is cut, ending `...`).
    """

    name = "tool_calc"
    stop_tags: tuple[str, ...] = (TOOL_CLOSE, ANSWER_CLOSE)

    def __init__(self, max_turns: int = 4, max_output_chars: int = 120) -> None:
        super().__init__(max_turns, max_output_chars)

    def read_reply(self, action_text: str) -> Reply:
        """One calculator call, `<answer>NUMBER</answer>` or a format error."""
        action = parse_reply(action_text)
        if action.kind == "call":
            return Reply("tool", action.content)
        if action.kind == "answer":
            return Reply("answer", action.content)
        return Reply("error", action.message, action.format_error)

    def use_tool(self, tool_input: str) -> ToolOutcome:
        """Evaluate the expression `tool_input`; a refusal is a result, marked as a tool error."""
        result = evaluate(tool_input)
        tool_error = "calculator" if result.startswith("error:") else None
        return ToolOutcome(wrap_output(result, self.max_output_chars), tool_error)
