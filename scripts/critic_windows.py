"""Print, for training runs with a critic, how the critic and the episodes' endings looked over the
first and the last `--window` learner steps: the question "is the critic getting worse, or are
the returns it explains just spreading less?".

`critic/vf_explained_var` is `1 - Var(R - V) / Var(R)`; with a 0/1 outcome `Var(R)` (logged as
`critic/returns_var`) shrinks as the reward rate rises, so the explained variance can fall while
the critic's error variance `(1 - EV) * Var(R)` falls too. The table shows both, per step then
averaged, beside the reward, the mean value and return, the actor's mean advantage and, on
code_repair, the share of episodes that ran out of turns or submitted after a failing test:

python scripts/critic_windows.py runs/calc_sao runs/calc_sao_alpha15 --window 10
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

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


def _cell(row: dict[str, Any], column: str) -> float | None:
    if column == "error_var":
        ev, var = row.get(COLUMNS["ev"]), row.get(COLUMNS["returns_var"])
        return None if ev is None or var is None else (1.0 - ev) * var
    value = row.get(COLUMNS[column])
    return value if isinstance(value, int | float) else None


def window_means(rows: list[dict[str, Any]], window: int) -> dict[str, dict[str, float]]:
    """`{"first": {column: mean}, "last": {...}}` over the first and last `window` trained steps
    (rows with a reward); non-finite and missing cells are left out, NaN where none is left."""
    if window < 1:
        raise ValueError(f"window: must be >= 1, got {window}")
    steps = [r for r in rows if "rollout/reward_mean" in r]
    out: dict[str, dict[str, float]] = {}
    for end, part in (("first", steps[:window]), ("last", steps[-window:])):
        out[end] = {}
        for column in COLUMNS:
            cells = [c for c in (_cell(r, column) for r in part) if c is not None]
            cells = [c for c in cells if math.isfinite(c)]
            out[end][column] = sum(cells) / len(cells) if cells else math.nan
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--window", type=int, default=10, help="steps averaged at each end")
    args = parser.parse_args(argv)
    print(f"{'run':>28s} {'end':>5s} " + " ".join(f"{c:>12s}" for c in COLUMNS))
    for run in args.runs:
        path = Path(run) / "metrics.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for end, means in window_means(rows, args.window).items():
            cells = " ".join(f"{means[c]:12.4f}" for c in COLUMNS)
            print(f"{run[-28:]:>28s} {end:>5s} {cells}")


if __name__ == "__main__":
    main()
