"""The turn bookkeeping every built-in environment shares.

`reset` checks the task and starts the count; `step` refuses to run before `reset` or after the
episode ended, counts the turn, and marks the episode ended when a result says `done`. Subclasses
write only what differs: `start` (check the task, set per-episode state) and `take_turn`.
"""

from __future__ import annotations

import abc

from sao.envs.base import Environment, StepResult, Task


class TurnLimitedEnvironment(Environment):
    """An environment of at most `max_turns` actions per episode.

    Args:
        max_turns: the most actions one episode may take (an int >= 1).
    """

    def __init__(self, max_turns: int) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: must be an int >= 1, got {max_turns!r}")
        self.max_turns = max_turns
        self._task: Task | None = None
        self._turn = 0
        self._done = False

    @property
    def task(self) -> Task:
        """The task of the current episode."""
        if self._task is None:
            raise RuntimeError(f"{type(self).__name__}: no episode yet; call reset(task)")
        return self._task

    @property
    def turn(self) -> int:
        """Actions taken in this episode so far, the one being taken included."""
        return self._turn

    @property
    def last_turn(self) -> bool:
        """Whether the action being taken is the last one the budget allows."""
        return self._turn >= self.max_turns

    def reset(self, task: Task) -> str:
        """Start an episode for `task`; returns its prompt."""
        if not isinstance(task, Task):
            raise TypeError(f"task: expected Task, got {type(task)}")
        prompt = self.start(task)
        self._task, self._turn, self._done = task, 0, False
        return prompt

    def step(self, action_text: str) -> StepResult:
        """Count the turn and apply `action_text` (see the subclass for the rules)."""
        name = type(self).__name__
        if self._task is None:
            raise RuntimeError(f"{name}.step: call reset(task) first")
        if self._done:
            raise RuntimeError(f"{name}.step: the episode has ended; call reset(task)")
        self._turn += 1
        result = self.take_turn(action_text)
        self._done = result.done
        return result

    @abc.abstractmethod
    def start(self, task: Task) -> str:
        """Check `task` (raise for one this environment cannot play), set per-episode state and
        return the prompt."""

    @abc.abstractmethod
    def take_turn(self, action_text: str) -> StepResult:
        """Apply one action of the current episode; `self.turn` already counts it."""
