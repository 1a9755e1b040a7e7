"""Windows of a run's steps and the means over them: the first and last `window` items, inclusive
step ranges, and the mean of the finite numbers among some values.

Shared by the runtime's drift check (`sao.runtime.drift`) and the analyses of `sao inspect`
(`sao.analysis`). It imports nothing from the package, so both can use it: `sao.analysis` reads
checkpoints through `sao.runtime`, and a helper of its own would make the two import each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def ends(items: Sequence[T], window: int) -> tuple[Sequence[T], Sequence[T]]:
    """The first `window` items and the last `window` (they overlap when there are fewer than
    `2 * window`; each is all the items when there are fewer than `window`).

    Raises:
        ValueError: if `window` is below 1 (`items[-0:]` would be every item, not none).
    """
    if window < 1:
        raise ValueError(f"window: must be >= 1, got {window}")
    return items[:window], items[-window:]


def finite_mean(values: Iterable[Any]) -> float:
    """Mean of the finite numbers among `values` (None, NaN, infinities and non-numbers are left
    out); NaN when none is left."""
    kept = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else math.nan


def in_steps(rows: Iterable[Mapping[str, Any]], first: int, last: int) -> list[Mapping[str, Any]]:
    """The rows whose integer `step` lies in `first..last` (both included)."""
    return [r for r in rows if isinstance(r.get("step"), int) and first <= r["step"] <= last]
