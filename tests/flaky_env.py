"""`flaky_calc`: `calc` whose environment raises on chosen steps, registered from outside the package.

`--import flaky_env` (with `tests/` on the path) registers it, as a user's own environment would
be. The tests of environment errors (`sao.runtime.env_errors`) use it:

    env.options={fail_every: 3}             step `fail_step` (default 1) raises on about a third
                                            of the tasks, chosen by a hash of the task id
    env.options={fail_every: 1}             it raises on every task
    env.options={fail_every: 0, fail_reset_every: 2}
                                            `reset` raises on about half of the tasks instead

Which tasks fail depends only on the task id, so a test can name them (`chosen`).
"""

from __future__ import annotations

import zlib
from typing import Any

from sao.envs import StepResult, Task, known_env_names, register
from sao.envs.calc import CalcEnv, CalcTaskSource
from sao.envs.registration import EnvRegistration

NAME = "flaky_calc"
MESSAGE = "flaky_calc: the environment failed on purpose"


def chosen(task_id: str, every: int) -> bool:
    """Whether the task with this id is one that fails when one task in `every` does."""
    return every > 0 and zlib.crc32(task_id.encode()) % every == 0


class FlakyCalc(CalcEnv):
    """`calc`, raising `RuntimeError` in the chosen tasks' step `fail_step` (or their reset)."""

    def __init__(
        self,
        max_turns: int = 4,
        fail_every: int = 3,
        fail_step: int = 1,
        fail_reset_every: int = 0,
        **options: Any,
    ) -> None:
        super().__init__(max_turns, **options)
        self.fail_every = fail_every
        self.fail_step = fail_step
        self.fail_reset_every = fail_reset_every
        self._steps = 0
        self._task_id = ""

    def reset(self, task: Task) -> str:
        if chosen(task.task_id, self.fail_reset_every):
            raise RuntimeError(f"{MESSAGE} in reset of {task.task_id}")
        self._steps = 0
        self._task_id = task.task_id
        return super().reset(task)

    def step(self, action_text: str) -> StepResult:
        self._steps += 1
        if self._steps == self.fail_step and chosen(self._task_id, self.fail_every):
            raise RuntimeError(f"{MESSAGE} at step {self._steps} of {self._task_id}")
        return super().step(action_text)


if NAME not in known_env_names():
    register(EnvRegistration(name=NAME, make_env=FlakyCalc, make_tasks=CalcTaskSource))
