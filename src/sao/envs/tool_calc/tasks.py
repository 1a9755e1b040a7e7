"""`tool_calc` tasks: the `calc` problems (`sao.envs.calc.problems`), asked the same way."""

from __future__ import annotations

from sao.envs.calc.tasks import CalcTaskSource


class ToolCalcTaskSource(CalcTaskSource):
    """`tool_calc` tasks, mixed uniformly over the chosen difficulty levels.

    The prompt is the user message of an agent's first request, `Q: QUESTION\\n`; `meta` holds the
    problem's reference `expression` (what the calculator should be asked) and its difficulty.

    Args (as `CalcTaskSource`):
        difficulties: levels to draw from (see `sao.envs.calc.problems`); one int is one level.
        test_fraction: share of the prompt space held out for `test`.
    """

    env_name = "tool_calc"
