"""Environments: the text protocol, task sources, the registry, and one package per built-in
environment (`calc`, `tool_calc`, `code_repair`, `style_stream`, `reasoning_gym`)."""

from sao.envs.base import (
    END_ANSWER,
    END_MAX_TOKENS,
    END_MAX_TURNS,
    Environment,
    HashSplitTaskSource,
    StepResult,
    Task,
    TaskSource,
)
from sao.envs.demonstration import TeacherTrajectory, Turn
from sao.envs.registration import EnvRegistration, RunReport
from sao.envs.registry import (
    check_env_name,
    known_env_names,
    make_demonstrations,
    make_env,
    make_task_source,
    register,
    registration_for,
)
from sao.envs.turns import TurnLimitedEnvironment

__all__ = [
    "END_ANSWER",
    "END_MAX_TOKENS",
    "END_MAX_TURNS",
    "EnvRegistration",
    "Environment",
    "HashSplitTaskSource",
    "RunReport",
    "StepResult",
    "Task",
    "TaskSource",
    "TeacherTrajectory",
    "Turn",
    "TurnLimitedEnvironment",
    "check_env_name",
    "known_env_names",
    "make_demonstrations",
    "make_env",
    "make_task_source",
    "register",
    "registration_for",
]
