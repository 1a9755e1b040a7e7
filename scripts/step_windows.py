"""Print metrics averaged over windows of learner steps, pooled over runs (e.g. the seeds of one
preset): each run's mean over the window's steps, then the mean over runs. A markdown table, one
row per window:

python scripts/step_windows.py runs/reproduce_g5/style_stream_sao/seed{0,1,2,3,4} \
    --windows 41-50,51-60,61-80 --keys style/share_cute,critic/values_mean,critic/returns_mean
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def parse_windows(text: str) -> list[tuple[int, int]]:
    """`"41-50,51-60"` -> `[(41, 50), (51, 60)]` (inclusive step ranges)."""
    windows = []
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        if not sep or not first.isdigit() or not last.isdigit() or int(first) > int(last):
            raise ValueError(f"--windows: {part.strip()!r} is not FIRST-LAST with FIRST <= LAST")
        windows.append((int(first), int(last)))
    return windows


def window_mean(rows: Sequence[dict[str, Any]], key: str, window: tuple[int, int]) -> float:
    """Mean of `key` over the rows of steps in `window` that log it as a finite number (NaN if
    none do)."""
    values = [
        float(r[key])
        for r in rows
        if isinstance(r.get("step"), int)
        and window[0] <= r["step"] <= window[1]
        and isinstance(r.get(key), int | float)
        and math.isfinite(r[key])
    ]
    return sum(values) / len(values) if values else math.nan


def pooled(runs: Sequence[Sequence[dict[str, Any]]], key: str, window: tuple[int, int]) -> float:
    """The mean over runs of each run's `window_mean` (runs without the key are left out)."""
    means = [m for m in (window_mean(rows, key, window) for rows in runs) if not math.isnan(m)]
    return sum(means) / len(means) if means else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--windows", required=True, help="step ranges, e.g. 1-10,31-40")
    parser.add_argument("--keys", required=True, help="comma-separated metric names")
    args = parser.parse_args()
    try:
        windows = parse_windows(args.windows)
    except ValueError as err:
        parser.error(str(err))
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    runs = []
    for run in args.runs:
        path = run / "metrics.jsonl"
        if not path.is_file():
            parser.error(f"{path}: not found")
        runs.append([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    print(f"{len(runs)} run(s)\n")
    print("| steps | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for window in windows:
        cells = [f"{pooled(runs, key, window):.3f}" for key in keys]
        print(f"| {window[0]}-{window[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
