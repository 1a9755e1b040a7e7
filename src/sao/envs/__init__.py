"""Environments: the text protocol, task sources, a registry, and the built-in `calc`."""

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
from sao.envs.registry import (
    known_env_names,
    known_task_source_names,
    make_env,
    make_task_source,
    register_env,
    register_task_source,
)

__all__ = [
    "END_ANSWER",
    "END_MAX_TOKENS",
    "END_MAX_TURNS",
    "Environment",
    "HashSplitTaskSource",
    "StepResult",
    "Task",
    "TaskSource",
    "known_env_names",
    "known_task_source_names",
    "make_env",
    "make_task_source",
    "register_env",
    "register_task_source",
]
