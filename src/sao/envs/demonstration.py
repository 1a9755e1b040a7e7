"""What every scripted teacher produces: a task played turn by turn, ready for SFT."""

from __future__ import annotations

from dataclasses import dataclass

from sao.envs.base import Task


@dataclass(frozen=True)
class Turn:
    """One action and the observation the environment returned for it (`""` at the end)."""

    action: str
    observation: str


@dataclass(frozen=True)
class TeacherTrajectory:
    """A full teacher trajectory for one task; teachers subclass it to record their choices.

    Attributes:
        task: the task.
        turns: the actions and observations, in order.
        reward: the environment's reward at the end.
    """

    task: Task
    turns: tuple[Turn, ...]
    reward: float

    @property
    def text(self) -> str:
        """The whole trajectory as one string: prompt, then actions and observations."""
        return self.task.prompt + "".join(t.action + t.observation for t in self.turns)

    def segments(self) -> list[tuple[str, bool]]:
        """`(text, is_action)` pieces in order, for masking the loss to action tokens."""
        pieces = [(self.task.prompt, False)]
        for turn in self.turns:
            pieces.append((turn.action, True))
            if turn.observation:
                pieces.append((turn.observation, False))
        return pieces


def probability(name: str, value: float) -> float:
    """`value` as a float in [0, 1], or a ValueError naming the knob."""
    if not isinstance(value, float | int) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: must be a probability in [0, 1], got {value!r}")
    return float(value)
