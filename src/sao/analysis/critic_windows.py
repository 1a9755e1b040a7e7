"""`sao inspect critic-windows`: for training runs with a critic, how the critic and the episodes'
endings looked over the first and the last `--window` learner steps: the question "is the critic
getting worse, or are the returns it explains just spreading less?".

`critic/vf_explained_var` is `1 - Var(R - V) / Var(R)`; with a 0/1 outcome `Var(R)` (logged as
`critic/returns_var`) shrinks as the reward rate rises, so the explained variance can fall while
the critic's error variance `(1 - EV) * Var(R)` falls too. The table shows both, per step then
averaged, beside the reward, the mean value and return, the actor's mean advantage and, on
code_repair, the share of episodes that ran out of turns or submitted after a failing test:

    sao inspect critic-windows runs/calc_sao runs/calc_sao_alpha15 --window 10
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from sao.analysis.runs import InspectError, metrics
from sao.core.windows import ends, finite_mean

COLUMNS = {
    "reward": "rollout/reward_mean",
    "ev": "critic/vf_explained_var",
    "returns_var": "critic/returns_var",
    "error_var": None,  # (1 - EV) * Var(R), per step
    "values": "critic/values_mean",
    "returns": "critic/returns_mean",
    "adv_mean": "actor/advantage_mean",
    "out_of_turns": "code_repair/out_of_turns",
    "submit_fail": "code_repair/submitted_failing",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--window", type=int, default=10, help="steps averaged at each end")


def _cell(row: Mapping[str, Any], column: str) -> float | None:
    if column == "error_var":
        ev, var = row.get(COLUMNS["ev"]), row.get(COLUMNS["returns_var"])
        return None if ev is None or var is None else (1.0 - ev) * var
    value = row.get(COLUMNS[column])
    return value if isinstance(value, int | float) else None


def window_means(rows: Sequence[Mapping[str, Any]], window: int) -> dict[str, dict[str, float]]:
    """`{"first": {column: mean}, "last": {...}}` over the first and last `window` trained steps
    (rows with a reward); non-finite and missing cells are left out, NaN where none is left."""
    steps = [r for r in rows if "rollout/reward_mean" in r]
    first, last = ends(steps, window)
    return {
        end: {column: finite_mean(_cell(r, column) for r in part) for column in COLUMNS}
        for end, part in (("first", first), ("last", last))
    }


def run(args: argparse.Namespace) -> int:
    if args.window < 1:
        raise InspectError(f"--window: must be >= 1, got {args.window}")
    print(f"{'run':>28s} {'end':>5s} " + " ".join(f"{c:>12s}" for c in COLUMNS))
    for run_dir in args.runs:
        for end, means in window_means(metrics(run_dir), args.window).items():
            cells = " ".join(f"{means[c]:12.4f}" for c in COLUMNS)
            print(f"{run_dir[-28:]:>28s} {end:>5s} {cells}")
    return 0
