"""`code_repair`: a tiny SWE-Bench. The environment (`env`) and its command protocol
(`protocol`), tasks from templates with seeded bugs (`tasks`, `templates`, `bugs`), a scripted
teacher (`teacher`) and the run's behaviour metrics (`report`)."""

from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.code_repair.report import run_report, step_metrics
from sao.envs.code_repair.tasks import CodeRepairTaskSource
from sao.envs.code_repair.teacher import demonstrations
from sao.envs.registration import EnvRegistration

REGISTRATION = EnvRegistration(
    name="code_repair",
    make_env=CodeRepairEnv,
    make_tasks=CodeRepairTaskSource,
    demonstrations=demonstrations,
    step_metrics=step_metrics,
    run_report=run_report,
    reward_options=frozenset({"grade_unsubmitted", "malformed_reward", "unsubmitted_reward"}),
)

__all__ = ["REGISTRATION", "CodeRepairEnv", "CodeRepairTaskSource"]
