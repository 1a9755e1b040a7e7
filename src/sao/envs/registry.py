"""Environments and task sources by name, so configs can say `env: calc`.

A name is either a plain family (`"calc"`) or `family:variant` (`"reasoning_gym:chain_sum"`); a
family registered with `takes_variant=True` receives the variant as its first argument. Built-in
families are registered here with factories that import their module on first use, so listing
names never imports an environment's dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sao.envs.base import Environment, TaskSource


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Any]
    takes_variant: bool


_ENVS: dict[str, _Entry] = {}
_SOURCES: dict[str, _Entry] = {}


def _register(
    table: dict[str, _Entry], kind: str, name: str, factory: Callable[..., Any], takes_variant: bool
) -> None:
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(
            f"name: a {kind} family must be a non-empty string without ':', got {name!r}"
        )
    if not callable(factory):
        raise TypeError(f"factory: expected a callable for {kind} {name!r}, got {type(factory)}")
    if name in table:
        raise ValueError(f"name: {kind} {name!r} is already registered")
    table[name] = _Entry(factory, takes_variant)


def register_env(
    name: str, factory: Callable[..., Environment], *, takes_variant: bool = False
) -> None:
    """Register an environment family; `factory(**kwargs)` (or `factory(variant, **kwargs)`)."""
    _register(_ENVS, "environment", name, factory, takes_variant)


def register_task_source(
    name: str, factory: Callable[..., TaskSource], *, takes_variant: bool = False
) -> None:
    """Register a task-source family; called like the environment factory."""
    _register(_SOURCES, "task source", name, factory, takes_variant)


def known_env_names() -> list[str]:
    """Registered environment families, sorted."""
    return sorted(_ENVS)


def known_task_source_names() -> list[str]:
    """Registered task-source families, sorted."""
    return sorted(_SOURCES)


def _build(table: dict[str, _Entry], kind: str, name: str, kwargs: dict[str, Any]) -> Any:
    if not isinstance(name, str):
        raise TypeError(f"name: expected str, got {type(name)}")
    family, sep, variant = name.partition(":")
    entry = table.get(family)
    if entry is None:
        raise ValueError(f"name: unknown {kind} {name!r}; known: {', '.join(sorted(table))}")
    if entry.takes_variant:
        if not variant:
            raise ValueError(f"name: {kind} {family!r} needs a variant, as in '{family}:<variant>'")
        return entry.factory(variant, **kwargs)
    if sep:
        raise ValueError(f"name: {kind} {family!r} takes no variant, got {name!r}")
    return entry.factory(**kwargs)


def make_env(name: str, **kwargs: Any) -> Environment:
    """Build an environment by name; unknown names raise ValueError listing the known ones."""
    env = _build(_ENVS, "environment", name, kwargs)
    if not isinstance(env, Environment):
        raise TypeError(f"name: factory for {name!r} returned {type(env)}, not an Environment")
    return env


def make_task_source(name: str, **kwargs: Any) -> TaskSource:
    """Build a task source by name; unknown names raise ValueError listing the known ones."""
    source = _build(_SOURCES, "task source", name, kwargs)
    if not isinstance(source, TaskSource):
        raise TypeError(f"name: factory for {name!r} returned {type(source)}, not a TaskSource")
    return source


def _calc_env(**kwargs: Any) -> Environment:
    from sao.envs.calc import CalcEnv

    return CalcEnv(**kwargs)


def _calc_tasks(**kwargs: Any) -> TaskSource:
    from sao.envs.calc import CalcTaskSource

    return CalcTaskSource(**kwargs)


register_env("calc", _calc_env)
register_task_source("calc", _calc_tasks)


# ------------------------------------------------------------------ warm-start demonstrations
Segments = list[tuple[str, bool]]
_DEMOS: dict[str, _Entry] = {}


def register_demonstrations(
    name: str, factory: Callable[..., list[Segments]], *, takes_variant: bool = False
) -> None:
    """Register `factory(n, seed)` (or `factory(variant, n, seed)`) as `name`'s SFT data.

    The factory returns `[[(text, is_action), ...], ...]`, one list of segments per demonstration.
    """
    if name in _DEMOS:
        raise ValueError(f"name: demonstrations for {name!r} are already registered")
    _DEMOS[name] = _Entry(factory, takes_variant)


def make_demonstrations(name: str, n: int, seed: int) -> list[Segments]:
    """`n` warm-start demonstrations for environment `name`, as `(text, is_action)` segments."""
    family, _, variant = name.partition(":")
    entry = _DEMOS.get(family)
    if entry is None:
        raise ValueError(
            f"env: no warm-start demonstrations for {name!r}; available: {sorted(_DEMOS)}"
        )
    if entry.takes_variant:
        if not variant:
            raise ValueError(f"env: {family!r} needs a variant, as in '{family}:<variant>'")
        return entry.factory(variant, n, seed)
    return entry.factory(n, seed)


def _calc_demonstrations(n: int, seed: int) -> list[Segments]:
    from sao.envs.calc_teacher import demonstrations

    return [demo.segments() for demo in demonstrations(n, seed)]


register_demonstrations("calc", _calc_demonstrations)


# ------------------------------------------------------------------ run hooks
@dataclass(frozen=True)
class RunHooks:
    """Environment-specific additions to a training run.

    Attributes:
        step_metrics: trained batch -> extra metrics logged with the step.
        report: `(run_dir, metric rows)` -> extra summary fields (and any plots) at the end.
    """

    step_metrics: Callable[[list], dict[str, float]] | None = None
    report: Callable[[Any, list[dict[str, Any]]], dict[str, Any]] | None = None


_HOOKS: dict[str, RunHooks] = {}


def register_run_hooks(name: str, hooks: RunHooks) -> None:
    """Attach per-step metrics and an end-of-run report to environment family `name`."""
    _HOOKS[name] = hooks


def run_hooks(name: str) -> RunHooks:
    """The run hooks of `name`'s family (empty hooks when it has none)."""
    return _HOOKS.get(name.partition(":")[0], RunHooks())


# Imported last: it registers through the functions above.
from sao.envs import builtin  # noqa: E402, F401
