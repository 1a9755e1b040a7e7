"""`calc`: tool-integrated integer arithmetic (`env`), its tasks (`tasks`, `problems`) and a
scripted teacher for the warm start (`teacher`)."""

from sao.envs.calc.env import CalcEnv
from sao.envs.calc.tasks import CalcTaskSource
from sao.envs.calc.teacher import demonstrations
from sao.envs.registration import EnvRegistration

REGISTRATION = EnvRegistration(
    name="calc",
    make_env=CalcEnv,
    make_tasks=CalcTaskSource,
    demonstrations=demonstrations,
)

__all__ = ["REGISTRATION", "CalcEnv", "CalcTaskSource"]
