"""`tool_calc`: arithmetic with an OpenAI-style client-side function `calculator`, laid out
exactly as `sao serve` renders such an agent's messages for the tiny model.

`env` (the environment), `tasks` (the `calc` problems), `calculator` (the tool, which clients run
on their side: `evaluate(expression) -> str`), `protocol` (reading replies; `score(task_or_answer,
reply_content)` for clients) and `teacher` (scripted demonstrations for the warm start)."""

from sao.envs.registration import EnvRegistration
from sao.envs.tool_calc.calculator import evaluate
from sao.envs.tool_calc.env import ToolCalcEnv
from sao.envs.tool_calc.protocol import TOOL_NAME, TOOL_SPEC, score
from sao.envs.tool_calc.tasks import ToolCalcTaskSource
from sao.envs.tool_calc.teacher import demonstrations

REGISTRATION = EnvRegistration(
    name="tool_calc",
    make_env=ToolCalcEnv,
    make_tasks=ToolCalcTaskSource,
    demonstrations=demonstrations,
)

__all__ = [
    "REGISTRATION",
    "TOOL_NAME",
    "TOOL_SPEC",
    "ToolCalcEnv",
    "ToolCalcTaskSource",
    "evaluate",
    "score",
]
