"""What a run must remember to continue after a kill, besides the learner's tensors."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunRecord:
    """The bookkeeping saved with each checkpoint (`record.json`).

    Attributes:
        step: the learner version this record belongs to.
        trained_indices: trajectory indices the learner has trained on, in training order.
        dropped_indices: indices dropped as too stale (`rollout.max_staleness`), never trained.
        set_aside_indices: indices the learner set aside for an environment error, never trained
            (`sao.runtime.env_errors`).
        initial_eval: the held-out eval of the starting policy (None until it has run).
        last_eval: the most recent held-out eval.
        eval_accuracy_at_step: held-out accuracy measured at exactly `step` (None if no eval ran
            then); it ranks checkpoints for `train.keep_checkpoints`.
    """

    step: int = 0
    trained_indices: list[int] = field(default_factory=list)
    dropped_indices: list[int] = field(default_factory=list)
    set_aside_indices: list[int] = field(default_factory=list)
    initial_eval: dict[str, Any] | None = None
    last_eval: dict[str, Any] | None = None
    eval_accuracy_at_step: float | None = None

    def settled(self) -> set[int]:
        """Indices that must never be handed to the learner again."""
        return set(self.trained_indices) | set(self.dropped_indices) | set(self.set_aside_indices)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """Inverse of `to_dict`; unknown keys fail loudly rather than being dropped."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"RunRecord: unknown field(s) {sorted(unknown)}")
        return cls(**data)
