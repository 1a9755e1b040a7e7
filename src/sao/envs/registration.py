"""What an environment tells the project about itself: one `EnvRegistration` per family.

A registration says what to build (`make_env`), where its tasks come from (`make_tasks`), what
the warm start learns from (`demonstrations`) and what a training run should add to its logs and
report (`step_metrics`, `run_report`). The runtime draws and saves what a report returns; an
environment never writes a run's files itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sao.envs.base import Environment, TaskSource
from sao.envs.demonstration import TeacherTrajectory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sao.trajectory import Trajectory

# `(label, metric keys)`: one plot of those keys of `metrics.jsonl` over learner steps.
Panel = tuple[str, list[str]]


@dataclass(frozen=True)
class RunReport:
    """What an environment adds at the end of a run.

    Attributes:
        summary: fields merged into `summary.json`.
        panels: PNG file name -> `(label, metric keys)`, plotted from the metric rows by the
            runtime like its own panels.
        figures: PNG file name -> a finished matplotlib figure, saved under `plots/` by the
            runtime.
    """

    summary: dict[str, Any] = field(default_factory=dict)
    panels: dict[str, Panel] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvRegistration:
    """Everything the project needs to know about one environment family.

    With `takes_variant`, names look like `family:<variant>` and the variant is the first
    argument of `make_env`, `make_tasks` and `demonstrations`.

    Attributes:
        name: the family name, as in `env.name` (without the variant).
        make_env: `make_env(**env.options)` -> an `Environment`.
        make_tasks: `make_tasks(**env.task_options)` -> a `TaskSource`.
        demonstrations: `demonstrations(n, seed)` -> teacher trajectories for the warm start;
            None when the environment has no teacher.
        step_metrics: a trained batch of trajectories -> extra metrics logged with the step.
        run_report: the run's metric rows -> a `RunReport`, once at the end.
        takes_variant: whether names carry a variant.
        check_variant: raises ValueError (or ImportError) naming what is wrong with a variant;
            called when a config is checked, before any work.
        reward_options: names of `make_env` options that change only rewards, never what the
            agent sees or the teacher writes, so a warm start does not depend on them.
    """

    name: str
    make_env: Callable[..., Environment]
    make_tasks: Callable[..., TaskSource]
    demonstrations: Callable[..., Sequence[TeacherTrajectory]] | None = None
    step_metrics: Callable[[Sequence[Trajectory]], dict[str, float]] | None = None
    run_report: Callable[[list[dict[str, Any]]], RunReport] | None = None
    takes_variant: bool = False
    check_variant: Callable[[str], object] | None = None
    reward_options: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or ":" in self.name:
            raise ValueError(
                f"name: an environment family must be a non-empty string without ':', "
                f"got {self.name!r}"
            )
        for label in ("make_env", "make_tasks"):
            if not callable(getattr(self, label)):
                raise TypeError(f"{label}: expected a callable for {self.name!r}")
        for label in ("demonstrations", "step_metrics", "run_report", "check_variant"):
            value = getattr(self, label)
            if value is not None and not callable(value):
                raise TypeError(f"{label}: expected a callable or None for {self.name!r}")
