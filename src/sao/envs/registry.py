"""Environments by name, so configs can say `env: calc` or `env: reasoning_gym:chain_sum`.

Every subpackage of `sao.envs` (`sao.envs.calc`, ...) is a built-in family of the same name whose
`__init__` holds one `REGISTRATION`. Subpackages are found on disk and imported on first use, so
listing names never imports an environment (or its optional dependencies). Your own family
registers with `register(EnvRegistration(...))` from a module that `--import MODULE` loads first.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from sao.config import ConfigError
from sao.envs.base import Environment, TaskSource
from sao.envs.demonstration import TeacherTrajectory
from sao.envs.registration import EnvRegistration

Segments = list[tuple[str, bool]]

_REGISTERED: dict[str, EnvRegistration] = {}


@functools.lru_cache(maxsize=1)
def _built_in_families() -> frozenset[str]:
    """The subpackages of `sao.envs`, found without importing them."""
    here = str(Path(__file__).resolve().parent)
    return frozenset(info.name for info in pkgutil.iter_modules([here]) if info.ispkg)


def register(registration: EnvRegistration) -> None:
    """Make `registration.name` usable as `env.name` in this process."""
    if not isinstance(registration, EnvRegistration):
        raise TypeError(f"registration: expected EnvRegistration, got {type(registration)}")
    name = registration.name
    if name in _REGISTERED or name in _built_in_families():
        raise ValueError(f"name: environment {name!r} is already registered")
    _REGISTERED[name] = registration


def known_env_names() -> list[str]:
    """Registered environment families, sorted."""
    return sorted({*_built_in_families(), *_REGISTERED})


def registration_for(name: str) -> EnvRegistration:
    """The registration of `name`'s family (`"calc"`, or `"reasoning_gym"` of
    `"reasoning_gym:lcm"`); ValueError listing the known names if there is none."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected str, got {type(name)}")
    family = name.partition(":")[0]
    if family in _built_in_families():
        registration = importlib.import_module(f"sao.envs.{family}").REGISTRATION
        if registration.name != family:
            raise ValueError(f"sao.envs.{family}: REGISTRATION is named {registration.name!r}")
        return registration
    if family in _REGISTERED:
        return _REGISTERED[family]
    raise ValueError(f"name: unknown environment {name!r}; known: {', '.join(known_env_names())}")


def _variant_args(registration: EnvRegistration, name: str) -> tuple[str, ...]:
    """`(variant,)` for a family that takes one, `()` otherwise; ValueError for a mismatch."""
    family, sep, variant = name.partition(":")
    if registration.takes_variant:
        if not variant:
            raise ValueError(f"name: {family!r} needs a variant, as in '{family}:<variant>'")
        return (variant,)
    if sep:
        raise ValueError(f"name: {family!r} takes no variant, got {name!r}")
    return ()


def make_env(name: str, **kwargs: Any) -> Environment:
    """Build an environment by name; unknown names raise ValueError listing the known ones."""
    registration = registration_for(name)
    env = registration.make_env(*_variant_args(registration, name), **kwargs)
    if not isinstance(env, Environment):
        raise TypeError(f"name: make_env of {name!r} returned {type(env)}, not an Environment")
    return env


def make_task_source(name: str, **kwargs: Any) -> TaskSource:
    """Build `name`'s task source; unknown names raise ValueError listing the known ones."""
    registration = registration_for(name)
    source = registration.make_tasks(*_variant_args(registration, name), **kwargs)
    if not isinstance(source, TaskSource):
        raise TypeError(f"name: make_tasks of {name!r} returned {type(source)}, not a TaskSource")
    return source


def make_demonstrations(name: str, n: int, seed: int) -> list[Segments]:
    """`n` warm-start demonstrations for `name`, each as `(text, is_action)` segments."""
    registration = registration_for(name)
    if registration.demonstrations is None:
        raise ValueError(f"env: {name!r} has no warm-start demonstrations")
    demos = registration.demonstrations(*_variant_args(registration, name), n, seed)
    for demo in demos:
        if not isinstance(demo, TeacherTrajectory):
            raise TypeError(
                f"demonstrations of {name!r}: expected TeacherTrajectory items, got {type(demo)}"
            )
    return [demo.segments() for demo in demos]


def check_env_name(name: str) -> None:
    """Raise a one-line `ConfigError` unless `name` names a known environment, with a variant
    exactly when its family takes one, and a variant that exists (e.g. a reasoning-gym dataset)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"env.name: expected a non-empty name, got {name!r}")
    if name.partition(":")[0] not in known_env_names():
        raise ConfigError(
            f"env.name: unknown environment {name!r}; known: {', '.join(known_env_names())} "
            "(register your own and pass --import MODULE)"
        )
    registration = registration_for(name)
    try:
        args = _variant_args(registration, name)
        if args and registration.check_variant is not None:
            registration.check_variant(args[0])
    except (ValueError, ImportError) as err:
        raise ConfigError(f"env.name: {str(err).removeprefix('name: ')}") from None
