"""Registers the built-in environments beyond `calc`: `code_repair`, `style_stream` and
`reasoning_gym:<dataset>`, with their task sources and warm-start demonstrations.

Each factory imports its module on first use, so importing this module (and listing names) never
imports an environment's dependencies -- reasoning-gym in particular is optional.
"""

from __future__ import annotations

from typing import Any

from sao.envs.base import Environment, TaskSource
from sao.envs.registry import (
    RunHooks,
    register_demonstrations,
    register_env,
    register_run_hooks,
    register_task_source,
)

Segments = list[tuple[str, bool]]


def _code_repair_env(**kwargs: Any) -> Environment:
    from sao.envs.code_repair import CodeRepairEnv

    return CodeRepairEnv(**kwargs)


def _code_repair_tasks(**kwargs: Any) -> TaskSource:
    from sao.envs.code_repair_tasks import CodeRepairTaskSource

    return CodeRepairTaskSource(**kwargs)


def _code_repair_demonstrations(n: int, seed: int) -> list[Segments]:
    from sao.envs.code_repair_teacher import demonstrations

    return [demo.segments() for demo in demonstrations(n, seed)]


def _style_stream_env(**kwargs: Any) -> Environment:
    from sao.envs.style_stream import StyleStreamEnv

    return StyleStreamEnv(**kwargs)


def _style_stream_tasks(**kwargs: Any) -> TaskSource:
    from sao.envs.style_stream import StyleStreamTaskSource

    return StyleStreamTaskSource(**kwargs)


def _style_stream_demonstrations(n: int, seed: int) -> list[Segments]:
    from sao.envs.style_stream_teacher import demonstrations

    return [demo.segments() for demo in demonstrations(n, seed)]


def _reasoning_gym_env(dataset: str, **kwargs: Any) -> Environment:
    from sao.envs.reasoning_gym_env import ReasoningGymEnv

    return ReasoningGymEnv(dataset, **kwargs)


def _reasoning_gym_tasks(dataset: str, **kwargs: Any) -> TaskSource:
    from sao.envs.reasoning_gym_env import ReasoningGymTaskSource

    return ReasoningGymTaskSource(dataset, **kwargs)


def _reasoning_gym_demonstrations(dataset: str, n: int, seed: int) -> list[Segments]:
    from sao.envs.reasoning_gym_env import demonstrations

    return [segments for segments, _ in demonstrations(dataset, n, seed)]


register_env("code_repair", _code_repair_env)
register_task_source("code_repair", _code_repair_tasks)
register_demonstrations("code_repair", _code_repair_demonstrations)


def _code_repair_step_metrics(batch: list) -> dict[str, float]:
    from sao.envs.code_repair_metrics import step_metrics

    return step_metrics(batch)


def _code_repair_report(run_dir: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from sao.envs.code_repair_metrics import report

    return report(run_dir, rows)


register_run_hooks("code_repair", RunHooks(_code_repair_step_metrics, _code_repair_report))

register_env("style_stream", _style_stream_env)
register_task_source("style_stream", _style_stream_tasks)
register_demonstrations("style_stream", _style_stream_demonstrations)


def _style_stream_step_metrics(batch: list) -> dict[str, float]:
    from sao.envs.style_stream_report import step_metrics

    return step_metrics(batch)


def _style_stream_report(run_dir: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from sao.envs.style_stream_report import report

    return report(run_dir, rows)


register_run_hooks("style_stream", RunHooks(_style_stream_step_metrics, _style_stream_report))

register_env("reasoning_gym", _reasoning_gym_env, takes_variant=True)
register_task_source("reasoning_gym", _reasoning_gym_tasks, takes_variant=True)
register_demonstrations("reasoning_gym", _reasoning_gym_demonstrations, takes_variant=True)
