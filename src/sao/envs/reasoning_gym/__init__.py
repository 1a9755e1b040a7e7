"""`reasoning_gym:<dataset>`: any reasoning-gym dataset, single turn, scored by the library.
The environment (`env`), the short entries of a dataset (`tasks`) and a near-miss teacher
(`teacher`). The library itself is optional and imported on first use."""

from sao.envs.reasoning_gym.env import ReasoningGymEnv
from sao.envs.reasoning_gym.tasks import ReasoningGymTaskSource, check_dataset
from sao.envs.reasoning_gym.teacher import demonstrations
from sao.envs.registration import EnvRegistration

REGISTRATION = EnvRegistration(
    name="reasoning_gym",
    make_env=ReasoningGymEnv,
    make_tasks=ReasoningGymTaskSource,
    demonstrations=demonstrations,
    takes_variant=True,
    check_variant=check_dataset,
)

__all__ = ["REGISTRATION", "ReasoningGymEnv", "ReasoningGymTaskSource"]
