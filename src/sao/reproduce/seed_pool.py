"""Pooling paired held-out differences over seeds: one interval for a preset's gain.

Each run's summary keeps its paired eval as `difference`, `sd` and `n` (see
`sao.evaluation.stats.paired_difference`); the per-task differences themselves are not stored. Mean
and sample SD of the union of the runs' differences follow exactly from those three numbers, so
the pooled interval is the one `paired_difference` would print on all of them at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def pool_paired(gains: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`{"difference", "difference_ci95", "sd", "n", "runs"}` over the union of each run's paired
    per-task differences, from their `difference`, `sd` and `n`.

    Raises:
        ValueError: if `gains` is empty or holds fewer than two differences in all.
    """
    if not gains:
        raise ValueError("pool_paired: no runs to pool")
    n = sum(int(g["n"]) for g in gains)
    if n < 2:
        raise ValueError(f"pool_paired: need at least 2 paired differences, got {n}")
    mean = sum(float(g["difference"]) * int(g["n"]) for g in gains) / n
    # Within-run sums of squares plus each run's offset from the pooled mean.
    squares = sum(
        (int(g["n"]) - 1) * float(g["sd"]) ** 2 + int(g["n"]) * (float(g["difference"]) - mean) ** 2
        for g in gains
    )
    sd = math.sqrt(squares / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    return {
        "difference": mean,
        "difference_ci95": [mean - half, mean + half],
        "sd": sd,
        "n": n,
        "runs": len(gains),
    }
