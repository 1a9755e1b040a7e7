"""`sao inspect windows`: metrics averaged over windows of learner steps, pooled over runs (e.g.
the seeds of one preset): each run's mean over the window's steps, then the mean over runs. A
markdown table, one row per window:

    sao inspect windows runs/reproduce_g5/style_stream_sao/seed{0,1,2,3,4} \\
        --windows 41-50,51-60,61-80 --keys style/share_cute,critic/values_mean,critic/returns_mean
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sao.analysis.runs import InspectError, metrics
from sao.core.windows import finite_mean, in_steps


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--windows", required=True, help="step ranges, e.g. 1-10,31-40")
    parser.add_argument("--keys", required=True, help="comma-separated metric names")


def parse_windows(text: str) -> list[tuple[int, int]]:
    """`"41-50,51-60"` -> `[(41, 50), (51, 60)]` (inclusive step ranges)."""
    windows = []
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        if not sep or not first.isdigit() or not last.isdigit() or int(first) > int(last):
            raise InspectError(f"--windows: {part.strip()!r} is not FIRST-LAST with FIRST <= LAST")
        windows.append((int(first), int(last)))
    return windows


def window_mean(rows: Sequence[Mapping[str, Any]], key: str, window: tuple[int, int]) -> float:
    """Mean of `key` over the rows of steps in `window` that log it as a finite number (NaN if
    none do)."""
    return finite_mean(r.get(key) for r in in_steps(rows, *window))


def pooled(runs: Sequence[Sequence[Mapping[str, Any]]], key: str, window: tuple[int, int]) -> float:
    """The mean over runs of each run's `window_mean` (runs without the key are left out)."""
    return finite_mean(window_mean(rows, key, window) for rows in runs)


def run(args: argparse.Namespace) -> int:
    windows = parse_windows(args.windows)
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    runs = [metrics(run) for run in args.runs]
    print(f"{len(runs)} run(s)\n")
    print("| steps | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for window in windows:
        cells = [f"{pooled(runs, key, window):.3f}" for key in keys]
        print(f"| {window[0]}-{window[1]} | " + " | ".join(cells) + " |")
    return 0
