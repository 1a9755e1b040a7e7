"""`style_stream`: the paper's drifting-preference simulation. The environment (`env`) and its
judge (`judge`, `styles`), prompts whose preferred style moves along the stream (`tasks`), a
teacher writing in random styles (`teacher`), and the run's style metrics (`metrics`, `report`)."""

from sao.envs.registration import EnvRegistration
from sao.envs.style_stream.env import StyleStreamEnv
from sao.envs.style_stream.report import run_report, step_metrics
from sao.envs.style_stream.tasks import StyleStreamTaskSource
from sao.envs.style_stream.teacher import demonstrations

REGISTRATION = EnvRegistration(
    name="style_stream",
    make_env=StyleStreamEnv,
    make_tasks=StyleStreamTaskSource,
    demonstrations=demonstrations,
    step_metrics=step_metrics,
    run_report=run_report,
)

__all__ = ["REGISTRATION", "StyleStreamEnv", "StyleStreamTaskSource"]
